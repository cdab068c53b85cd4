package mapping

// Change is what one record does to its key's row in an upsert table.
type Change int8

// The changes.
const (
	// ChangeUpsert makes the record its key's row (Range.Records).
	ChangeUpsert Change = iota
	// ChangeDelete deletes the key's row (Range.Deletes): a tombstone,
	// or a change event of a delete. Its row carries the key columns.
	ChangeDelete
	// ChangeSkip ignores the record on purpose, without a row
	// (Range.Skipped): the tombstone that follows a change event of a
	// delete.
	ChangeSkip
)
