package lookup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Answers of Where (WhereResult.Status).
const (
	// StatusRow: a row holds the offset.
	StatusRow = "row"
	// StatusNoRow: a range covers the offset, but it produced no row.
	StatusNoRow = "no_row"
	// StatusLost: the ledger records the offset as lost to retention.
	StatusLost = "lost"
	// StatusUnsunk: no range covers the offset.
	StatusUnsunk = "unsunk"
)

// Kinds of an offset without a row (WhereResult.Kind).
const (
	// KindMarker: a transaction marker (read from the broker).
	KindMarker = "marker"
	// KindAborted: a record of an aborted transaction (read from the broker).
	KindAborted = "aborted"
	// KindAbsent: the broker has no record there (compacted or deleted).
	KindAbsent = "absent"
	// KindMissing: a committed record (read from the broker) of an event
	// table without its row: the table lost it.
	KindMissing = "missing"
	// KindDeadLetterNotFound: no row, in a range with dead letters, and
	// the dead-letter table holds none at the offset: its dead letters are
	// pending, were recorded as lost (floe maintain
	// --drop-missing-dead-letter-files), or were removed.
	KindDeadLetterNotFound = "dead_letter_not_found"
	// KindSuperseded: a record a state table folded away.
	KindSuperseded = "superseded"
	// KindDeadLetter: a record that could not become a row and went to
	// the dead-letter table (WhereResult.DeadLetterTable).
	KindDeadLetter = "dead_letter"
)

// WhereResult is the answer for one position. Its JSON field names are
// stable (floe where --json); fields that do not apply are nil or empty.
type WhereResult struct {
	Table     string `json:"table"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Status is row (a row holds the offset), no_row (a range covers the
	// offset but it produced no row), lost (recorded as lost to retention)
	// or unsunk (no range covers it).
	Status string `json:"status"`
	// Kind refines no_row when it can be told: dead_letter (the record is
	// in the dead-letter table, File its data file, Reason why), marker,
	// aborted (read from the broker), absent (the broker has no record
	// there: compacted or deleted), superseded (a state table's older
	// value), missing (a committed record the table lost) or
	// dead_letter_not_found (a range with dead letters, none of them at
	// the offset). It is empty for no_row when no broker was given and the
	// record is no dead letter: the log would tell which.
	Kind            string `json:"kind,omitempty"`
	DeadLetterTable string `json:"dead_letter_table,omitempty"`
	Reason          string `json:"reason,omitempty"`
	SnapshotID      *int64 `json:"snapshot_id,omitempty"`
	// Expired is set when SnapshotID has expired (snapshot expiry): the
	// ledger still names it, the table no longer has it, as as-of says.
	Expired bool   `json:"expired,omitempty"`
	Low     *int64 `json:"low,omitempty"`
	High    *int64 `json:"high,omitempty"`
	// Records is the number of rows the range made (an upsert table's:
	// its upserts, which later records may have replaced; Deletes and
	// Skipped its deletes and records without a key); DeadLetters the
	// number of its records that went to the dead-letter table instead.
	Records     *int64     `json:"records,omitempty"`
	Deletes     *int64     `json:"deletes,omitempty"`
	Skipped     *int64     `json:"skipped,omitempty"`
	DeadLetters int64      `json:"dead_letters,omitempty"`
	CommittedAt *time.Time `json:"committed_at,omitempty"`
	File        string     `json:"file,omitempty"`
	// TableFirst and TableNext bound the partition's coverage in the ledger.
	TableFirst *int64 `json:"table_first,omitempty"`
	TableNext  *int64 `json:"table_next,omitempty"`
	// LogStart and EndOffset are the broker's, when a broker is given.
	LogStart  *int64 `json:"log_start,omitempty"`
	EndOffset *int64 `json:"end_offset,omitempty"`
	// Explanation says the same in a sentence.
	Explanation string `json:"explanation"`
}

// Where answers which range, snapshot and data file of tbl's branch hold
// offset of tp. broker may be nil; given, it tells what an offset without a
// row is and whether the broker still has an unsunk one.
//
// An empty tp.Topic stands for the table's one topic. A question about
// something that does not exist is refused, as a *QueryError naming it,
// like a position no record can have (ValidatePosition): a topic the table
// never held, or a partition neither the table nor the broker has. A
// position the table could hold but does not is an answer: unsunk.
func Where(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, tp mapping.TopicPartition, offset int64) (WhereResult, error) {
	res := WhereResult{Table: tbl.Name(), Topic: tp.Topic, Partition: tp.Partition, Offset: offset}
	if err := ValidatePosition(tp, offset); err != nil {
		return res, err
	}
	ledger, err := tbl.Summary(ctx, 0)
	if err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	topics := ledger.Topics()
	switch {
	case len(topics) == 0:
		if err := CheckDataTable(tbl, "no offset to look up"); err != nil {
			return res, err
		}
		return res, fmt.Errorf("%s has no floe commits yet: nothing was sunk into it, so it holds no offset", tbl.Name())
	case tp.Topic == "" && len(topics) == 1:
		tp.Topic, res.Topic = topics[0], topics[0]
	case tp.Topic == "":
		return res, &QueryError{Setting: SettingTopic, Want: fmt.Sprintf("one of the topics %s holds: %s", tbl.Name(), strings.Join(topics, ", "))}
	case !slices.Contains(topics, tp.Topic):
		return res, &QueryError{Setting: SettingTopic, Value: tp.Topic, Want: fmt.Sprintf("a topic %s holds: %s", tbl.Name(), strings.Join(topics, ", "))}
	}
	loc, err := tbl.Locate(ctx, 0, tp, offset)
	if err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	if loc.Known {
		res.TableFirst, res.TableNext = &loc.First, &loc.Next
	}
	var wm *connector.Watermarks
	if broker != nil {
		if err := sameTopic(ctx, tbl.Name(), ledger, broker, tp.Topic); err != nil {
			return res, err
		}
		all, err := broker.Watermarks(ctx, tp.Topic)
		if err != nil && !errors.Is(err, connector.ErrUnknownTopic) {
			return res, err
		}
		if w, ok := all[tp.Partition]; ok {
			wm = &w
			res.LogStart, res.EndOffset = &w.LogStart, &w.LastStable
		} else if !loc.Known {
			return res, &QueryError{Setting: SettingPartition, Value: fmt.Sprint(tp.Partition),
				Want: fmt.Sprintf("a partition of %s: neither %s nor the broker has %s", tp.Topic, tbl.Name(), tp)}
		}
	}
	if loc.Status != mapping.StatusUnsunk {
		c, r := loc.Commit, loc.Range
		res.SnapshotID, res.Low, res.High, res.CommittedAt = &c.SnapshotID, &r.Low, &r.High, &c.CommittedAt
		res.Expired = tbl.Iceberg().Metadata().SnapshotByID(c.SnapshotID) == nil
		if !r.Deleted() {
			res.Records, res.DeadLetters = &r.Records, r.DeadLetters
			if tbl.Mode() != mapping.ModeAppend {
				res.Deletes, res.Skipped = &r.Deletes, &r.Skipped
			}
		}
	}
	at := fmt.Sprintf("%s offset %d", tp, offset)
	switch loc.Status {
	case mapping.StatusLost:
		res.Status = StatusLost
		res.Explanation = fmt.Sprintf("%s was deleted by retention before it was sunk; snapshot %d records [%d, %d) as lost",
			at, loc.Commit.SnapshotID, loc.Range.Low, loc.Range.High)
		if branch := publishedOnto(tbl); branch != "" {
			// Main's ledger is a published replay's, which recorded as lost
			// what retention had deleted before it read it: main may have
			// sunk it before the publish (review s67: "before it was sunk"
			// of a row main held).
			res.Explanation = fmt.Sprintf("%s was deleted by retention before the replay published onto main (branch %s) read it; snapshot %d records [%d, %d) as lost. main's commits before the publish, which may have held it, are not in its history",
				at, branch, loc.Commit.SnapshotID, loc.Range.Low, loc.Range.High)
		}
	case mapping.StatusAborted:
		res.Status = StatusNoRow
		res.Kind = KindAborted
		res.Explanation = fmt.Sprintf("%s was deleted by retention before it was sunk; snapshot %d records [%d, %d) as having held only aborted records",
			at, loc.Commit.SnapshotID, loc.Range.Low, loc.Range.High)
	case mapping.StatusCovered:
		file, ok, err := tbl.RowAt(ctx, 0, tp, offset, loc.Commit)
		if err != nil {
			return res, err
		}
		if ok {
			res.Status, res.File = StatusRow, file
			res.Explanation = fmt.Sprintf("%s is a row, committed by snapshot %d in range [%d, %d), in data file %s",
				at, loc.Commit.SnapshotID, loc.Range.Low, loc.Range.High, file)
			break
		}
		res.Status = StatusNoRow
		// The dead-letter table of a range with dead letters, opened once
		// for the dead letter at the offset and for whether it holds the
		// commit's. Without a head, its first dead letters are pending.
		name := loc.Commit.DeadLetterTable
		var dlq *snapshot.Table
		dropped := false
		if loc.Range.DeadLetters > 0 && name != "" {
			dlq, err = openDeadLetters(ctx, tbl, name)
			switch {
			case errors.Is(err, snapshot.ErrTableNotFound):
				// Dropped (by another engine): it holds none of the
				// range's dead letters, which the answer says.
				dropped = true
			case err != nil:
				return res, err
			}
		}
		if dlq != nil && dlq.Head() != nil {
			file, reason, found, err := dlq.DeadLetterAt(ctx, tp, offset, loc.Commit.ID)
			if err != nil {
				return res, err
			}
			if found {
				res.Kind, res.DeadLetterTable, res.File, res.Reason = KindDeadLetter, name, file, reason
				res.Explanation = fmt.Sprintf("%s is accounted for by snapshot %d in range [%d, %d) as a dead letter: the record could not become a row (%s) and is in dead-letter table %s, data file %s",
					at, loc.Commit.SnapshotID, loc.Range.Low, loc.Range.High, reason, name, file)
				break
			}
		}
		res.Kind, res.Explanation, err = explainNoRow(ctx, tbl, broker, tp, offset)
		if err != nil {
			return res, err
		}
		// When the dead-letter table holds the commit's dead letters, a
		// record without a row or a dead letter is not one of them.
		// Dead letters of the commit that floe maintain recorded as lost
		// (the audit's dead-letters-lost) are not pending, though the
		// table may hold some of the commit's.
		held := true
		var lost *snapshot.DeadLetterState
		var lostCommit mapping.Commit
		given := false
		if (dlq != nil || dropped) && (res.Kind == "" || res.Kind == KindMissing || res.Kind == KindSuperseded) {
			held = false
			if dlq != nil && loc.Commit.ID != "" {
				if lost, err = lostState(ctx, tbl, dlq); err != nil {
					return res, err
				}
				lostCommit, given = givenUp(lost, loc.Commit.ID)
			}
			if !given && dlq != nil && dlq.Head() != nil && loc.Commit.ID != "" {
				if held, err = dlq.HoldsCommit(ctx, loc.Commit.ID); err != nil {
					return res, err
				}
			}
		}
		if !held {
			// A committed record without a row in a range whose dead
			// letters the dead-letter table does not hold may be one of
			// them.
			sent := fmt.Sprintf("%d records", loc.Range.DeadLetters)
			if loc.Range.DeadLetters == 1 {
				sent = "1 record"
			}
			why := fmt.Sprintf("the range sent %s to dead-letter table %s, which has none at this offset: its dead letters are pending (a sink committed the rows but could not add them; the next sink run adds them) or were removed since; floe audit tells which (dead-letters-pending, or a missing file)",
				sent, name)
			if given {
				counted := DeadLetterQuery{}.deadLettersOf(lostCommit)
				why = fmt.Sprintf("the range sent %s to dead-letter table %s, which has none at this offset: the dead letters of commit %s were recorded as lost by floe maintain --drop-missing-dead-letter-files, their files being gone from the storage (%d of its %s in no table); only a replay of the table brings them back (floe audit reports them: dead-letters-lost)",
					sent, name, lostCommit.ID, counted-lost.Rows[lostCommit.ID], deadLetterCount(counted))
			}
			if dropped {
				why = fmt.Sprintf("the range sent %s to dead-letter table %s, which no longer exists (dropped): what they were only the log still tells (floe replay writes them again)",
					sent, name)
			}
			if res.Kind == KindMissing {
				res.Kind, res.Explanation = KindDeadLetterNotFound, why
			} else {
				// Without the log, the offset may as well be any of the
				// others; with it, a committed record of a state table may
				// be folded into its key's row or have failed to become
				// one, which the log does not say: the kind is unknown.
				res.Kind = ""
				res.Explanation += "; or " + why
			}
		}
		res.Explanation = fmt.Sprintf("%s is accounted for by snapshot %d in range [%d, %d) but has no row: %s",
			at, loc.Commit.SnapshotID, loc.Range.Low, loc.Range.High, res.Explanation)
	default:
		res.Status = StatusUnsunk
		switch {
		case !loc.Known:
			res.Explanation = fmt.Sprintf("%s was never sunk: the table has nothing of %s", at, tp)
		case offset < loc.First:
			res.Explanation = fmt.Sprintf("%s was never sunk: the table holds %s from offset %d on", at, tp, loc.First)
			if branch := publishedOnto(tbl); branch != "" {
				// Main's ledger is a published replay's, which began
				// there: main may have held it before (a new user's
				// report).
				res.Explanation = fmt.Sprintf("%s is not in main's history: main holds %s from offset %d on since a replay was published onto it (branch %s), and its commits before the publish, which may have held the offset, are not in its history", at, tp, loc.First, branch)
			}
		case offset < loc.Next:
			res.Explanation = fmt.Sprintf("%s is in a gap of the ledger, which covers %s from %d to %d: run floe audit", at, tp, loc.First, loc.Next)
		default:
			res.Explanation = fmt.Sprintf("%s is not sunk yet: the table has reached offset %d of %s", at, loc.Next, tp)
		}
		switch {
		case broker == nil:
		case wm == nil:
			res.Explanation += fmt.Sprintf("; the broker has no partition %s", tp)
		case offset < wm.LogStart:
			res.Explanation += fmt.Sprintf("; the broker no longer has it (its log starts at %d)", wm.LogStart)
		case offset >= wm.HighWatermark:
			res.Explanation += fmt.Sprintf("; the broker has no such offset yet (its log ends at %d)", wm.HighWatermark)
		default:
			res.Explanation += fmt.Sprintf("; the broker still retains it (log [%d, %d))", wm.LogStart, wm.HighWatermark)
		}
	}
	return res, nil
}

// ValidatePosition reports, as a *QueryError, a position no record can
// have: a negative partition or offset. Where calls it first; a caller may
// call it before it opens anything.
func ValidatePosition(tp mapping.TopicPartition, offset int64) error {
	switch {
	case tp.Partition < 0:
		return &QueryError{Setting: SettingPartition, Value: fmt.Sprint(tp.Partition), Want: "a partition number, 0 or more"}
	case offset < 0:
		return &QueryError{Setting: SettingOffset, Value: fmt.Sprint(offset), Want: "an offset, 0 or more"}
	}
	return nil
}

// explainNoRow says why a covered offset has no row: from the log when a
// broker is given, otherwise by listing what it can be.
func explainNoRow(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, tp mapping.TopicPartition, offset int64) (kind, why string, err error) {
	var state bool
	switch m := tbl.Mode(); m {
	case mapping.ModeAppend:
	case mapping.ModeFold, mapping.ModeUpsert:
		state = true
	default:
		return "", "", fmt.Errorf("table %s is of mode %s, which this floe cannot explain rows of", tbl.Name(), m)
	}
	if broker == nil {
		why = "a transaction marker, an aborted transactional record or an offset removed by compaction"
		if state {
			why = "the table holds the latest value per key, so a value superseded by a later one for its key, deleted by a tombstone or without a key; or " + why
		}
		return "", why, nil
	}
	// The record, and for a transactional one the marker that decides it
	// (read on to it: ReadLog reads uncommitted).
	var rec *kgo.Record
	decided, committed := false, false
	err = broker.ReadLog(ctx, tp.Topic, tp.Partition, offset, math.MaxInt64, func(r *kgo.Record, _ int64) bool {
		switch {
		case rec == nil:
			if r.Offset != offset {
				return false
			}
			rec = r
		case r.Attrs.IsControl() && r.ProducerID == rec.ProducerID:
			committed, decided = connector.MarkerType(r.Key)
			return false
		}
		return rec.Attrs.IsTransactional() && !rec.Attrs.IsControl()
	})
	switch {
	case err != nil:
		return "", "", fmt.Errorf("read %s offset %d from the broker: %w", tp, offset, err)
	case rec == nil:
		return KindAbsent, "the broker has no record there: removed by compaction, or deleted by retention since", nil
	case rec.Attrs.IsControl():
		return KindMarker, "it is a transaction marker (read from the broker)", nil
	case rec.Attrs.IsTransactional() && decided && !committed:
		return KindAborted, "it is a record of an aborted transaction (read from the broker), which read_committed never delivers", nil
	// Otherwise the record is committed: not transactional, its
	// transaction committed, or its marker gone (compaction removes a
	// transaction's marker only after its aborted records).
	case state:
		return foldedAway(ctx, tbl, broker, tp, rec)
	default:
		return KindMissing, "it is a committed record (read from the broker) that should be a row, and the table has none: the table lost it (floe audit --deep --verify-content --brokers finds every such offset)", nil
	}
}

// foldedAway explains rec, a committed record at tp of a state or upsert
// table that has no row of it. In an upsert table keyed by the Kafka key,
// the key's row, or the delete of it, says whether a later record
// superseded it; with neither, the table lost it (found by review: a row
// another engine deleted was called superseded). Elsewhere, and where a
// compaction or a truncate may have dropped the key's delete, the answer
// names the possibilities.
func foldedAway(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, tp mapping.TopicPartition, rec *kgo.Record) (kind, why string, err error) {
	const folded = "it is a record the table folded into its latest row per key: superseded by a later value for its key, deleted by a tombstone or without a key"
	if tbl.Mode() == mapping.ModeUpsert && tbl.UpsertKey().Source == mapping.KeyFromKeyFields {
		why, err := foldedKeyFields(ctx, tbl, rec)
		return KindSuperseded, cmp.Or(why, folded), err
	}
	if tbl.Mode() != mapping.ModeUpsert || tbl.UpsertKey().Source != mapping.KeyFromKafkaKey || rec.Key == nil {
		return KindSuperseded, folded, nil
	}
	if rec.Value == nil {
		return KindSuperseded, "it is a tombstone (read from the broker): it deleted its key, and makes no row", nil
	}
	k, err := parseKey(tbl, string(rec.Key))
	if err != nil {
		return "", "", err
	}
	row, err := keyRow(ctx, tbl, 0, k)
	if err != nil {
		return "", "", err
	}
	if row != nil {
		return KindSuperseded, fmt.Sprintf("it is a value of its key superseded since (read from the broker): the key's row is the record at %s offset %d", row.tp, row.offset), nil
	}
	loc, err := tbl.Locate(ctx, 0, tp, rec.Offset)
	if err != nil {
		return "", "", err
	}
	del, err := keyDelete(ctx, tbl, k)
	if err != nil {
		return "", "", err
	}
	if del != nil && del.commit.SnapshotID != loc.Commit.SnapshotID {
		return KindSuperseded, fmt.Sprintf("its key was deleted since (read from the broker), by snapshot %d", del.commit.SnapshotID), nil
	}
	if del != nil {
		// Every commit deletes the keys it touches (their older rows): the
		// record's own commit may also have taken a later record deleting
		// the key, which only the commit's records tell.
		last, err := newKeyLog(tbl, broker, keyOptions{}, k, string(rec.Key)).lastRecord(ctx, slices.Values([]mapping.Commit{loc.Commit}))
		if err != nil {
			return "", "", err
		}
		if last != nil && last.deletes {
			return KindSuperseded, fmt.Sprintf("its key was deleted since (read from the broker), by the record at %s offset %d of the same commit", last.Partition, last.Offset), nil
		}
	}
	sum, err := tbl.Summary(ctx, 0)
	if err != nil {
		return "", "", fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	if deletesCompacted(tbl, sum) || tbl.Iceberg().Properties()[mapping.PropTruncated] != "" {
		return KindSuperseded, folded + "; a compaction or a truncate may have dropped the delete of its key", nil
	}
	return KindMissing, "it is a committed record (read from the broker) whose key has no row and no later delete in the table: the table lost it (floe audit --deep --verify-content --brokers finds every such offset)", nil
}

// foldedKeyFields explains rec, a committed record without a row of
// an upsert table keyed by its record key's fields (Debezium's), by its
// key decoded as the sink decodes it, with the floe where --key that says
// where the key stands: the table, holding no row of the record, cannot
// name its key (a new user got the three possibilities and no key). ""
// when rec makes no change of a key (a truncate, a record without a key),
// or its key needs a schema registry, which Where has none of.
func foldedKeyFields(ctx context.Context, tbl *snapshot.Table, rec *kgo.Record) (string, error) {
	dec, err := newKeyDecoder(tbl, nil)
	if ce, ok := errors.AsType[*connector.ConfigError](err); ok && ce.Setting == connector.SettingRegistry {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	key := tbl.UpsertKey()
	k, value, change, dead, err := dec.dec.DecodeChange(ctx, rec, key)
	if err != nil || dead != nil || change != mapping.ChangeUpsert && change != mapping.ChangeDelete {
		return "", err
	}
	// The change's own key: a delete without a record key takes it from
	// its before image.
	b, err := dec.batch(rec, k, value)
	if err != nil {
		return "", err
	}
	defer b.Release()
	text, ok, err := keyText(b, key.Columns)
	if err != nil || !ok {
		return "", err
	}
	cmd := fmt.Sprintf("floe where --table %s --key '%s'", tbl.Name(), strings.ReplaceAll(text, "'", `'\''`))
	if change == mapping.ChangeDelete {
		// The record in hand says which (a new user was told "a delete
		// event or a tombstone").
		what := "a delete event"
		if rec.Value == nil {
			what = "a tombstone, a record without a value"
		}
		return fmt.Sprintf("it deletes key %s (read from the broker: %s), and makes no row; %s says where the key stands", text, what, cmd), nil
	}
	return fmt.Sprintf("it is a value of key %s (read from the broker) that the table folded into its latest row per key: superseded by a later value of the key, or deleted since; %s tells which", text, cmd), nil
}

// openDeadLetters opens the dead-letter table named name, which a commit
// of tbl's ledger names.
func openDeadLetters(ctx context.Context, tbl *snapshot.Table, name string) (*snapshot.Table, error) {
	ident, err := catalog.ParseIdent(name)
	if err != nil {
		return nil, fmt.Errorf("the ledger of %s names dead-letter table %q: %w", tbl.Name(), name, err)
	}
	dlq, err := snapshot.OpenDeadLetters(ctx, tbl.Catalog(), ident, tbl.Name(), false)
	if err != nil {
		return nil, fmt.Errorf("open dead-letter table %s, which the ledger of %s names: %w", name, tbl.Name(), err)
	}
	return dlq, nil
}
