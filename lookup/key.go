package lookup

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Answers of WhereKey (KeyResult.Status).
const (
	// KeyStatusRow: a row holds the key.
	KeyStatusRow = "row"
	// KeyStatusDeleted: the key had a record, and its winning record
	// deleted it (a tombstone or a change event deleting it).
	KeyStatusDeleted = "deleted"
	// KeyStatusNeverSeen: neither the table nor what was searched of its
	// history holds the key.
	KeyStatusNeverSeen = "never_seen"
	// KeyStatusUnknown: no row and no live delete holds the key, but a
	// compaction applied the deletes of a table that deletes keys, and
	// dropped them, and the log was not searched (no broker, or a key of
	// decoded columns), or a truncate's commit may have removed it
	// (KeyResult.Uncertain): the key may have been deleted, or never seen.
	KeyStatusUnknown = "unknown"
)

// Where a deleted key's delete was found (KeyResult.FoundBy).
const (
	// FoundByDeleteFiles: the newest live equality-delete file holding the
	// key; the commit that added it deleted the key.
	FoundByDeleteFiles = "equality-delete files"
	// FoundByLog: the ledger's ranges re-read from the broker; the key's
	// last record there deletes it.
	FoundByLog = "log"
	// FoundByTruncate: a floe commit after the newest equality delete of
	// the key removed every data file (a Debezium truncate with
	// --on-truncate delete-all), the key's row among them.
	FoundByTruncate = "truncate"
)

// KeyResult is the answer for one key of an upsert table. Its JSON field
// names are stable (floe where --key --json); fields that do not apply are
// nil or empty.
type KeyResult struct {
	Table string `json:"table"`
	// Key is the key as given; Columns its value per key column.
	Key     string            `json:"key"`
	Columns map[string]string `json:"columns"`
	// Status is row, deleted or never_seen.
	Status string `json:"status"`
	// Topic, Partition and Offset are the record that gave the key its
	// row, or that deleted it (Offset nil when only the commit is known).
	Topic     string `json:"topic,omitempty"`
	Partition *int32 `json:"partition,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
	// SnapshotID is the floe commit whose range holds that record (for a
	// delete found in the delete files: the commit that added the delete
	// file), Low and High that range when known.
	SnapshotID  *int64     `json:"snapshot_id,omitempty"`
	CommittedAt *time.Time `json:"committed_at,omitempty"`
	Low         *int64     `json:"low,omitempty"`
	High        *int64     `json:"high,omitempty"`
	// File is the data file holding the row, or the equality-delete file
	// holding the delete; FileSnapshotID the snapshot that added it (a
	// compaction's when a compaction rewrote the row).
	File           string `json:"file,omitempty"`
	FileSnapshotID *int64 `json:"file_snapshot_id,omitempty"`
	// FoundBy says where a delete was found: equality-delete files or log.
	FoundBy string `json:"found_by,omitempty"`
	// DeadLetterOffset and DeadLetterReason are, for a row of a Kafka
	// key or of a key of the record key's fields (Debezium's), the key's
	// latest record in the row's partition when it is a dead letter (the
	// dead-letter table holds it): a dead letter changes no row, so the
	// row is the key's record before it.
	DeadLetterOffset *int64 `json:"dead_letter_offset,omitempty"`
	DeadLetterReason string `json:"dead_letter_reason,omitempty"`
	// Explanation says the same in a sentence.
	Explanation string `json:"explanation"`
	// Uncertain, when set, is another answer the table's expired history
	// leaves open (a truncate that may have removed the key's row): the
	// explanation ends with it.
	Uncertain string `json:"uncertain,omitempty"`
}

// NotUpsertError reports a key lookup in a table that has no key: it is
// not an upsert table.
type NotUpsertError struct {
	Table string
	Mode  mapping.Mode
}

func (e *NotUpsertError) Error() string {
	return fmt.Sprintf("%s is a table of mode %s, which has no key: --key looks up upsert tables only; look a record up by its position (--partition P --offset X)", e.Table, e.Mode)
}

// tableKey is a key given as text, against an upsert table's key columns.
type tableKey struct {
	key  mapping.UpsertKey
	text string            // the key as given, for errors (want is a Go map)
	raw  []byte            // the Kafka key's bytes, for a key of kafka_key
	want map[string]string // per key column, the value as Arrow prints it
	// within is, for a key of a fold table (the Kafka key within its
	// partition), that partition: the log is searched there only.
	within *mapping.TopicPartition
	// filter selects the rows of the key.
	filter iceberg.BooleanExpression
}

// byKafkaKey reports whether the key is the Kafka key's bytes (a table
// keyed by kafka_key, or a fold table's key within its partition): its
// records are found in the log without decoding them.
func (k tableKey) byKafkaKey() bool {
	return k.raw != nil && (k.key.Source == mapping.KeyFromKafkaKey || k.key.Source == mapping.KeyFromPartitionKey)
}

// parseKey reads text as a key of tbl: the Kafka key's text for a table
// keyed by kafka_key, else a JSON object with one member per key column.
func parseKey(tbl *snapshot.Table, text string) (tableKey, error) {
	if mode := tbl.Mode(); mode != mapping.ModeUpsert {
		return tableKey{}, &NotUpsertError{Table: tbl.Name(), Mode: mode}
	}
	k := tbl.UpsertKey()
	tk := tableKey{key: k, text: text, want: map[string]string{}}
	schema := tbl.Iceberg().Schema()
	if k.Source == mapping.KeyFromKafkaKey {
		f, ok := schema.FindFieldByName(mapping.ColKey)
		if !ok {
			return tableKey{}, fmt.Errorf("upsert table %s has no %s column", tbl.Name(), mapping.ColKey)
		}
		tk.raw, tk.want[mapping.ColKey] = []byte(text), text
		if _, binary := f.Type.(iceberg.BinaryType); binary {
			tk.filter = iceberg.EqualTo(iceberg.Reference(mapping.ColKey), []byte(text))
		} else {
			tk.filter = iceberg.EqualTo(iceberg.Reference(mapping.ColKey), text)
		}
		return tk, nil
	}
	if len(k.Columns) == 0 {
		// The key's fields are named by the first commit that has a row.
		return tableKey{}, fmt.Errorf("upsert table %s has no key columns yet: no record has become a row of it (floe dead-letters --table %s lists the records that went to its dead-letter table)", tbl.Name(), tbl.Name())
	}
	want := fmt.Sprintf(`a JSON object of the key columns %s, e.g. %s`, strings.Join(k.Columns, ", "), keyExample(schema, k.Columns, text))
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() {
		return tableKey{}, &QueryError{Setting: SettingKey, Value: text, Want: want}
	}
	if extra := slices.DeleteFunc(slices.Sorted(maps.Keys(obj)), func(n string) bool { return slices.Contains(k.Columns, n) }); len(extra) > 0 {
		return tableKey{}, &QueryError{Setting: SettingKey, Value: text, Want: fmt.Sprintf("%s; %s is not a key column", want, strings.Join(extra, ", "))}
	}
	var terms []iceberg.BooleanExpression
	for _, col := range k.Columns {
		v, ok := obj[col]
		if !ok || v == nil {
			return tableKey{}, &QueryError{Setting: SettingKey, Value: text, Want: fmt.Sprintf("%s; key column %s is missing", want, col)}
		}
		f, ok := schema.FindFieldByName(col)
		if !ok {
			return tableKey{}, fmt.Errorf("upsert table %s has no key column %s yet: no record has given it a value", tbl.Name(), col)
		}
		term, printed, err := keyTerm(col, f.Type, v)
		if err != nil {
			return tableKey{}, &QueryError{Setting: SettingKey, Value: text, Want: fmt.Sprintf("%s; %v", want, err)}
		}
		tk.want[col] = printed
		if _, binary := f.Type.(iceberg.BinaryType); binary || col == mapping.ColKey && tbl.Layout().Key == mapping.KeyString {
			// matches compares binary columns with it, and the log is
			// searched for it: a string kafka_key (--key string) holds
			// the Kafka key's bytes too.
			tk.raw = []byte(printed)
		}
		terms = append(terms, term)
	}
	if k.Source == mapping.KeyFromPartitionKey {
		p, err := strconv.ParseInt(tk.want[mapping.ColPartition], 10, 32)
		if err != nil {
			return tableKey{}, &QueryError{Setting: SettingKey, Value: text, Want: want}
		}
		tk.within = &mapping.TopicPartition{Topic: tk.want[mapping.ColTopic], Partition: int32(p)}
	}
	tk.filter = terms[0]
	if len(terms) > 1 {
		tk.filter = iceberg.NewAnd(terms[0], terms[1], terms[2:]...)
	}
	return tk, nil
}

// keyExample is an example of a key of the columns cols as --key takes it,
// a JSON object: a placeholder of each column's type, and text as the
// Kafka key's (a key column of a fold table, --fold latest) when it is no
// JSON object, as a user who gave the key alone meant.
func keyExample(schema *iceberg.Schema, cols []string, text string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, col := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		v := "..."
		f, ok := schema.FindFieldByName(col)
		switch {
		case col == mapping.ColKey && !strings.HasPrefix(strings.TrimSpace(text), "{"):
			q, _ := json.Marshal(text)
			v = string(q)
		case !ok:
		case col == mapping.ColTopic:
			v = `"TOPIC"`
		default:
			switch ft := f.Type.(type) {
			case iceberg.StringType:
				v = `"..."`
			case iceberg.Int32Type, iceberg.Int64Type:
				v = "0"
			case iceberg.BooleanType:
				v = "true"
			case iceberg.DateType:
				v = `"2006-01-02"`
			case iceberg.TimeType:
				v = `"15:04:05"`
			case iceberg.TimestampType:
				v = `"2006-01-02T15:04:05"`
			case iceberg.TimestampTzType:
				v = `"2006-01-02T15:04:05Z"`
			case iceberg.UUIDType:
				v = `"123e4567-e89b-12d3-a456-426614174000"`
			case iceberg.DecimalType:
				v = `"0"`
				if ft.Scale() > 0 {
					v = `"0.` + strings.Repeat("0", ft.Scale()) + `"`
				}
			}
		}
		q, _ := json.Marshal(col)
		fmt.Fprintf(&b, "%s:%s", q, v)
	}
	b.WriteByte('}')
	return b.String()
}

// keyTerm returns the filter matching column col of type t to the JSON
// value v, and v as Arrow prints the column's values.
func keyTerm(col string, t iceberg.Type, v any) (iceberg.BooleanExpression, string, error) {
	ref := iceberg.Reference(col)
	switch t.(type) {
	case iceberg.StringType:
		s, ok := v.(string)
		if !ok {
			return nil, "", fmt.Errorf("key column %s is a string: give it as a JSON string", col)
		}
		return iceberg.EqualTo(ref, s), s, nil
	case iceberg.Int32Type, iceberg.Int64Type:
		n, ok := v.(json.Number)
		if !ok {
			return nil, "", fmt.Errorf("key column %s is an integer: give it as a JSON number", col)
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("key column %s is an integer, and %s is not one", col, n)
		}
		if _, is32 := t.(iceberg.Int32Type); is32 {
			if int64(int32(i)) != i {
				return nil, "", fmt.Errorf("key column %s is a 32-bit integer, and %d is out of its range", col, i)
			}
			return iceberg.EqualTo(ref, int32(i)), strconv.FormatInt(i, 10), nil
		}
		return iceberg.EqualTo(ref, i), strconv.FormatInt(i, 10), nil
	case iceberg.BooleanType:
		b, ok := v.(bool)
		if !ok {
			return nil, "", fmt.Errorf("key column %s is a boolean: give it as true or false", col)
		}
		return iceberg.EqualTo(ref, b), strconv.FormatBool(b), nil
	}
	if lit, err := typedKey(col, t, v); lit != nil || err != nil {
		if err != nil {
			return nil, "", err
		}
		return iceberg.LiteralPredicate(iceberg.OpEQ, ref, lit), lit.String(), nil
	}
	if _, binary := t.(iceberg.BinaryType); binary && col == mapping.ColKey {
		// The raw Kafka keys: a key given as text is its bytes, as for a
		// table keyed by kafka_key alone.
		s, ok := v.(string)
		if !ok {
			return nil, "", fmt.Errorf("key column %s holds the raw Kafka keys: give the key's text as a JSON string", col)
		}
		return iceberg.EqualTo(ref, []byte(s)), s, nil
	}
	return nil, "", fmt.Errorf("key column %s is of type %s, which --key cannot give yet: look its records up by position (--partition and --offset)", col, t)
}

// typedKey reads v, a JSON value, as the literal of column col of type
// t for the key types given as text: date (also days since 1970, as
// Debezium and Kafka Connect write it), time, timestamp, timestamptz,
// uuid and decimal (also a JSON number). It is nil, without an error, for
// other types. iceberg-go's cast of a string does the reading, so a key
// is read as a filter on the column would be.
func typedKey(col string, t iceberg.Type, v any) (iceberg.Literal, error) {
	var form string
	switch t := t.(type) {
	case iceberg.DateType:
		form = `a JSON string "2006-01-02", or a JSON number of days since 1970-01-01`
		if n, ok := v.(json.Number); ok {
			d, err := strconv.ParseInt(n.String(), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("key column %s is a date: give it as %s", col, form)
			}
			return iceberg.NewLiteral(iceberg.Date(d)), nil
		}
	case iceberg.TimeType:
		form = `a JSON string "15:04:05.999999" (at most microseconds)`
	case iceberg.TimestampType:
		form = `a JSON string "2006-01-02T15:04:05.999999", without a zone (at most microseconds)`
	case iceberg.TimestampTzType:
		form = `a JSON string "2006-01-02T15:04:05.999999Z" (or with an offset, +02:00; at most microseconds)`
	case iceberg.UUIDType:
		form = `a JSON string "123e4567-e89b-12d3-a456-426614174000"`
	case iceberg.DecimalType:
		form = fmt.Sprintf(`a JSON number or string of at most %d digits, %d after the point`, t.Precision(), t.Scale())
		if n, ok := v.(json.Number); ok {
			v = n.String()
		}
	default:
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("key column %s is a %s: give it as %s", col, t, form)
	}
	lit, err := iceberg.NewLiteral(s).To(t)
	if err == nil && (!exactDecimal(s, lit) || belowMicros(s)) {
		// The cast rounds a decimal to its scale (12.345 would look up
		// 12.35) and cuts times below the microsecond (from a review).
		err = errors.New("rounded")
	}
	if err != nil {
		return nil, fmt.Errorf("key column %s is a %s, and %q is not one: give it as %s", col, t, s, form)
	}
	return lit, nil
}

// belowMicros reports whether s, a time or a timestamp as text, has more
// than six digits after its seconds' point: Iceberg keeps microseconds.
func belowMicros(s string) bool {
	_, frac, ok := strings.Cut(s, ".")
	if !ok {
		return false
	}
	digits := 0
	for _, c := range frac {
		if c < '0' || c > '9' {
			break
		}
		digits++
	}
	return digits > 6
}

// exactDecimal reports whether lit, the cast of text s, is s's value:
// true for a literal that is no decimal.
func exactDecimal(s string, lit iceberg.Literal) bool {
	d, ok := lit.(iceberg.DecimalLiteral)
	if !ok {
		return true
	}
	want, ok := new(big.Rat).SetString(s)
	if !ok {
		return false
	}
	got := new(big.Rat).SetFrac(d.Val.BigInt(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale)), nil))
	return got.Cmp(want) == 0
}

// cellText is the value of row i of c as matches compares it with a key
// given as text: as typedKey's literal prints it for the columns it reads
// (Arrow prints timestamps and decimals otherwise), as Arrow prints it
// for the others.
func cellText(c arrow.Array, i int) string {
	var lit iceberg.Literal
	switch c := c.(type) {
	case *array.String:
		return c.Value(i)
	case *array.Date32:
		lit = iceberg.NewLiteral(iceberg.Date(c.Value(i)))
	case *array.Time64:
		lit = iceberg.NewLiteral(iceberg.Time(c.Value(i).ToTime(c.DataType().(*arrow.Time64Type).Unit).UnixMicro()))
	case *array.Timestamp:
		lit = iceberg.NewLiteral(iceberg.Timestamp(c.Value(i).ToTime(c.DataType().(*arrow.TimestampType).Unit).UnixMicro()))
	case *array.Decimal128:
		lit = iceberg.DecimalLiteral{Val: c.Value(i), Scale: int(c.DataType().(*arrow.Decimal128Type).Scale)}
	case *extensions.UUIDArray:
		lit = iceberg.NewLiteral(c.Value(i))
	case *array.FixedSizeBinary:
		if id, err := uuid.FromBytes(c.Value(i)); err == nil {
			lit = iceberg.NewLiteral(id)
		}
	}
	if lit == nil {
		return c.ValueStr(i)
	}
	return lit.String()
}

// inPartition is ranges, of the key's partition only when it has one
// (within).
func (k tableKey) inPartition(ranges iter.Seq[mapping.Range]) iter.Seq[mapping.Range] {
	if k.within == nil {
		return ranges
	}
	return func(yield func(mapping.Range) bool) {
		for r := range ranges {
			if r.TopicPartition == *k.within && !yield(r) {
				return
			}
		}
	}
}

// matches reports whether row i of b (which holds the key columns) holds
// the key.
func (k tableKey) matches(b arrow.RecordBatch, i int) (bool, error) {
	for col, want := range k.want {
		idx := b.Schema().FieldIndices(col)
		if len(idx) != 1 {
			return false, fmt.Errorf("no key column %s in %s", col, b.Schema())
		}
		c := b.Column(idx[0])
		if c.IsNull(i) {
			return false, nil
		}
		if c, ok := c.(*array.Binary); ok {
			if !bytes.Equal(c.Value(i), k.raw) {
				return false, nil
			}
			continue
		}
		if cellText(c, i) != want {
			return false, nil
		}
	}
	return true, nil
}

// WhereKey answers where key (as floe where --key takes it: the Kafka
// key's text, or a JSON object of the key columns) of the upsert table
// tbl stands at its branch head: the row that holds it (the record's
// position, the commit whose range holds it, the data file); or the
// delete that removed it, found in the table's live equality-delete files
// (newest first: the newest holding the key is the commit that deleted
// it, since every commit writes a delete for each key it touches), or,
// when compaction dropped those and broker is given, in the log over the
// ledger's ranges; or that it was never seen. With broker, a delete's
// offset is read from the log (its commit's ranges).
//
// A malformed key is a *QueryError; a table that is not an upsert table a
// *NotUpsertError.
//
// A table keyed by decoded columns (JSON or a registry's format, a
// Debezium table's primary key) is searched in the log by decoding its
// records as its sink does: one decoded with a schema registry needs
// WithRegistry.
func WhereKey(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, text string, opts ...KeyOption) (KeyResult, error) {
	res := KeyResult{Table: tbl.Name(), Key: text}
	var o keyOptions
	for _, opt := range opts {
		opt(&o)
	}
	// The key as it sits in Kafka is answered as the key it decodes into
	// (found by a new user: the wrapper's members were refused as no key
	// columns, though the sink takes it).
	if plain, ok, err := connectKey(ctx, tbl, o.registry, text); err != nil {
		return res, err
	} else if ok {
		text = plain
	}
	k, err := parseKey(tbl, text)
	if err != nil {
		return res, err
	}
	log := newKeyLog(tbl, broker, o, k, text)
	res.Columns = k.want
	sum, err := tbl.Summary(ctx, 0)
	if err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	if sum.Commits == 0 {
		return res, fmt.Errorf("%s has no floe commits yet: nothing was sunk into it, so it holds no key", tbl.Name())
	}
	found, err := keyRow(ctx, tbl, 0, k)
	if err != nil {
		return res, err
	}
	files, err := tbl.Files(ctx, 0)
	if err != nil {
		return res, err
	}
	if found != nil {
		res.Status = KeyStatusRow
		if err := res.place(ctx, tbl, found.tp, found.offset); err != nil {
			return res, err
		}
		res.File = found.file
		for _, f := range files {
			if f.Path == found.file {
				res.FileSnapshotID = &f.AddedBy
			}
		}
		res.Explanation = fmt.Sprintf("key %s is a row: the record at %s offset %d, committed by snapshot %d, in data file %s",
			text, found.tp, found.offset, derefOr(res.SnapshotID), found.file)
		dead, err := laterDeadLetter(ctx, tbl, sum, k, *found, o.registry)
		if ce, ok := errors.AsType[*connector.ConfigError](err); ok && ce.Setting == connector.SettingRegistry {
			// The row answers; the registry only tells whether a later
			// dead letter is the key's.
			res.Explanation += fmt.Sprintf("; dead letters follow it in %s, whose keys this table decodes with a schema registry: pass --schema-registry too to tell whether the key's latest record is one of them", found.tp)
			return res, nil
		}
		if err != nil {
			return res, err
		}
		if dead != nil {
			res.DeadLetterOffset, res.DeadLetterReason = &dead.offset, dead.reason
			res.Explanation += fmt.Sprintf("; but the key's latest record, at %s offset %d, is a dead letter in %s (%s): a dead letter changes no row, so the row is the key's record before it",
				found.tp, dead.offset, dead.table, dead.reason)
		}
		return res, nil
	}
	del, err := keyDelete(ctx, tbl, k)
	if err != nil {
		return res, err
	}
	tr, ok, unseen, unseenTruncates, other, err := truncatedAfter(ctx, tbl, del, k)
	if err != nil {
		return res, err
	}
	res.Uncertain = truncateUnseen(tbl, unseen, unseenTruncates)
	// Without a delete file left, a compaction may have dropped the
	// equality delete of a record that removed the key after it came
	// back from the truncate (found by review: the old truncate was named).
	// The log, which applies truncates as the sink did, decides then.
	redeleted := ok && del == nil && deletesCompacted(tbl, sum)
	// The key's records may all have come in a truncate's commit: a row
	// its records made before the truncate, and a key they added and
	// deleted after it, leave no row and no delete in any snapshot (found
	// by review). A truncate in a commit that removed no file (the
	// table's first) is known by the table's property only.
	truncates := other != 0 || redeleted || !ok && tbl.Iceberg().Properties()[mapping.PropTruncated] != ""
	switch {
	case redeleted:
		// Said with the log's answer where the log cannot tell.
	case other != 0:
		res.Uncertain += fmt.Sprintf("; or snapshot %d, a truncate (--on-truncate delete-all), removed it: the keys a truncate's commit adds before the truncate, or adds and deletes after it, are in no snapshot", other)
	case truncates:
		res.Uncertain += "; or a truncate (--on-truncate delete-all), which this table took, removed it: the keys a truncate's commit adds before the truncate, or adds and deletes after it, are in no snapshot"
	}
	// byTruncate answers from the table: truncate tr removed the key's
	// row; uncertain is what else may have, or "".
	byTruncate := func(uncertain string) (KeyResult, error) {
		res.Status, res.FoundBy, res.Uncertain = KeyStatusDeleted, FoundByTruncate, uncertain
		res.SnapshotID, res.CommittedAt = &tr.SnapshotID, &tr.CommittedAt
		res.Explanation = fmt.Sprintf("key %s has no row: snapshot %d truncated the table (a truncate event, --on-truncate delete-all), removing every data file%s", text, tr.SnapshotID, uncertain)
		return res, nil
	}
	switch {
	case ok && !redeleted:
		return byTruncate("")
	case redeleted && log == nil:
		return byTruncate("; or, if the key had a row again after that truncate, a later record deleted it, whose equality delete a compaction dropped: pass --brokers to read the log")
	}
	// noDelete says what the delete files tell of a key without a row
	// whose deleting record the log is searched for.
	noDelete := "no live equality-delete file holds it"
	if del != nil {
		res.Status, res.FoundBy, res.File = KeyStatusDeleted, FoundByDeleteFiles, del.file.Path
		res.FileSnapshotID = &del.file.AddedBy
		res.SnapshotID, res.CommittedAt = &del.commit.SnapshotID, &del.commit.CommittedAt
		at := "pass --brokers to read its offset from the log"
		if log != nil {
			rec, err := log.lastRecord(ctx, slices.Values([]mapping.Commit{del.commit}))
			ce, _ := errors.AsType[*connector.ConfigError](err)
			switch {
			case ce != nil && ce.Setting == connector.SettingRegistry:
				// The delete files answered; the registry only names the
				// record (found by review: the lookup failed).
				at = "pass --schema-registry too to read its offset from the log, whose records this table decodes with it"
			case err != nil:
				return res, err
			case rec == nil:
				at = "the log no longer holds the commit's record of the key"
			case rec.truncate:
				// The commit truncated the table after the key's record.
				if err := res.place(ctx, tbl, rec.Partition, rec.Offset); err != nil {
					return res, err
				}
				res.FoundBy = FoundByTruncate
				at = fmt.Sprintf("the truncate at %s offset %d (--on-truncate delete-all), later in that commit, removed the row its record made", rec.Partition, rec.Offset)
			case rec.deletes:
				if err := res.place(ctx, tbl, rec.Partition, rec.Offset); err != nil {
					return res, err
				}
				at = fmt.Sprintf("the record at %s offset %d deletes it", rec.Partition, rec.Offset)
			default:
				// The commit's delete is of the key's older rows: its
				// record gave the key the row something removed since
				// without a delete of the key (found by review: it was
				// named the key's delete). The whole log tells what.
				res.Status, res.FoundBy, res.File, res.FileSnapshotID, res.SnapshotID, res.CommittedAt = "", "", "", nil, nil, nil
				noDelete = fmt.Sprintf("the newest equality-delete file holding it, %s of snapshot %d, is that commit's delete of the key's older rows (its record of the key, at %s offset %d, gave it a row)",
					del.file.Path, del.commit.SnapshotID, rec.Partition, rec.Offset)
			}
		}
		if res.Status != "" {
			res.Explanation = fmt.Sprintf("key %s was deleted by snapshot %d (found in its equality-delete file %s): %s%s",
				text, del.commit.SnapshotID, del.file.Path, at, res.Uncertain)
			return res, nil
		}
	}
	// unsearched answers from the table alone, the log not searched
	// (how is what would search it).
	unsearched := func(how string) (KeyResult, error) {
		res.Status = KeyStatusNeverSeen
		if deletesCompacted(tbl, sum) || truncates {
			res.Status = KeyStatusUnknown
		}
		res.Explanation = fmt.Sprintf("key %s has no row and %s: no record ever had it, or compaction dropped the delete that removed it (%s)%s", text, noDelete, how, res.Uncertain)
		return res, nil
	}
	if log == nil {
		return unsearched("pass --brokers to search the log")
	}
	var readErr error
	all := func(yield func(mapping.Commit) bool) {
		for c, err := range tbl.Commits(ctx, 0) {
			if err != nil {
				readErr = fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
				return
			}
			if !yield(c) {
				return
			}
		}
	}
	rec, err := log.lastRecord(ctx, all)
	if err == nil {
		err = readErr
	}
	if ce, ok := errors.AsType[*connector.ConfigError](err); ok && ce.Setting == connector.SettingRegistry {
		return unsearched("pass --schema-registry too to search the log, whose records this table decodes with it")
	}
	if err != nil {
		return res, err
	}
	if redeleted && rec == nil {
		// The log holds no record of the key: the table's truncate
		// stands. A record that gave it a row after the truncate is
		// answered below (from a review).
		return byTruncate("; or a later record of the key that the log no longer holds deleted it, whose equality delete a compaction dropped")
	}
	switch {
	case rec == nil && log.missing > 0:
		// The log lost offsets of the ranges: the key's records may have
		// been there (found by review: a deleted key whose records log
		// compaction or retention removed was called never seen).
		res.Status = KeyStatusUnknown
		res.Explanation = fmt.Sprintf("key %s has no row, %s, and no record of the ledger's ranges that the log retains has it, but the log no longer holds %d offsets of those ranges (retention or log compaction removed them): its records, a delete among them, may have been there%s",
			text, noDelete, log.missing, res.Uncertain)
	case rec == nil:
		res.Status = KeyStatusNeverSeen
		if truncates {
			res.Status = KeyStatusUnknown
		}
		res.Explanation = fmt.Sprintf("key %s has no row, %s, and no record of the ledger's ranges that the log retains has it%s", text, noDelete, res.Uncertain)
	case !rec.deletes:
		// The row its last record gave is gone without a delete.
		res.Status = KeyStatusUnknown
		// A truncate that may have removed it is res.Uncertain.
		why := "log compaction removed the key's later records, or the table lost the row (floe audit --deep --verify-content --brokers finds such offsets)"
		res.Explanation = fmt.Sprintf("key %s has no row and %s, but its last record of the ledger's ranges that the log retains, at %s offset %d, gave it a row: %s%s",
			text, noDelete, rec.Partition, rec.Offset, why, res.Uncertain)
	case rec.truncate:
		// The log tells which truncate: none is left open.
		res.Status, res.FoundBy, res.Uncertain = KeyStatusDeleted, FoundByTruncate, ""
		if err := res.place(ctx, tbl, rec.Partition, rec.Offset); err != nil {
			return res, err
		}
		res.Explanation = fmt.Sprintf("key %s has no row: the truncate at %s offset %d (snapshot %d, --on-truncate delete-all), read from the log, came after its last record and removed its row",
			text, rec.Partition, rec.Offset, derefOr(res.SnapshotID))
	default:
		res.Status, res.FoundBy = KeyStatusDeleted, FoundByLog
		if err := res.place(ctx, tbl, rec.Partition, rec.Offset); err != nil {
			return res, err
		}
		res.Explanation = fmt.Sprintf("key %s has no row: its last record in the log, at %s offset %d (snapshot %d), deletes it (its equality delete was dropped by compaction)%s",
			text, rec.Partition, rec.Offset, derefOr(res.SnapshotID), res.Uncertain)
	}
	return res, nil
}

// KeyOption configures WhereKey.
type KeyOption func(*keyOptions)

type keyOptions struct {
	registry *connector.Registry
}

// WithRegistry gives WhereKey the schema registry that decodes the
// records of a table keyed by decoded columns in the registry's wire
// format, for its search of the log.
func WithRegistry(r *connector.Registry) KeyOption {
	return func(o *keyOptions) { o.registry = r }
}

// deletesCompacted reports whether the ledger counts deletes and floe
// compacted tbl, which applies the deletes before the compaction and drops
// them: a key without a row or a live delete may then have been deleted.
func deletesCompacted(tbl *snapshot.Table, sum mapping.Summary) bool {
	for _, p := range sum.Parts {
		if p.Deletes > 0 {
			return tbl.Compacted()
		}
	}
	return false
}

func derefOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// place sets the record's position and the commit and range holding it.
func (r *KeyResult) place(ctx context.Context, tbl *snapshot.Table, tp mapping.TopicPartition, offset int64) error {
	r.Topic, r.Partition, r.Offset = tp.Topic, &tp.Partition, &offset
	loc, err := tbl.Locate(ctx, 0, tp, offset)
	if err != nil {
		return fmt.Errorf("locate %s offset %d in the ledger of %s: %w", tp, offset, tbl.Name(), err)
	}
	if loc.Status != mapping.StatusUnsunk {
		c, rg := loc.Commit, loc.Range
		r.SnapshotID, r.CommittedAt, r.Low, r.High = &c.SnapshotID, &c.CommittedAt, &rg.Low, &rg.High
	}
	return nil
}

// deadLetter is a key's record that went to dead-letter table table.
type deadLetter struct {
	table  string
	offset int64
	reason string
	key    []byte // the record key, when it is decoded to tell the key
}

// laterDeadLetter returns the latest dead letter of k in row's partition
// past row's offset, as the dead-letter tables that the ledger (sum, its
// summary) names for ranges there hold it among the ledger's own dead
// letters (not another branch's or tag's): the key's latest record there,
// which left row as it was. Cheap: the ledger is not walked unless the
// partition has dead letters, and then only its blocks that may hold a
// range past the row that sent some, nor a dead-letter table read unless
// such a range did. A dead letter keeps its record's key bytes: a Kafka
// key is matched on them; a key of the record key's fields (Debezium's)
// on their decoding as the sink decodes them (keyDecoder), latest dead
// letter first, where a key that does not decode (a malformed one) is no
// key's. nil for a key of value columns, which a dead letter's value, why
// it is one, may not tell, and for a dead-letter table dropped or without
// a snapshot, which tells none. A table decoded with a schema registry,
// given none, is a *connector.ConfigError.
func laterDeadLetter(ctx context.Context, tbl *snapshot.Table, sum mapping.Summary, k tableKey, row keyedRow, registry *connector.Registry) (*deadLetter, error) {
	if !k.byKafkaKey() && k.key.Source != mapping.KeyFromKeyFields {
		return nil, nil
	}
	if ps, _ := sum.Partition(row.tp); ps.DeadLetters == 0 {
		return nil, nil
	}
	// The dead-letter tables of the ledger's ranges past the row, and the
	// ledger's own dead letters in each (ledgerRows: a tag's beside main's,
	// main's past a tag's head, are not).
	var names []string
	accounted := map[string]*ledgerRows{}
	for c, err := range tbl.CommitsWithDeadLetters(ctx, 0, row.tp, row.offset) {
		if err != nil {
			return nil, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
		}
		for _, r := range c.Ranges {
			if r.TopicPartition != row.tp || r.DeadLetters == 0 || r.High <= row.offset || c.DeadLetterTable == "" {
				continue
			}
			if !slices.Contains(names, c.DeadLetterTable) {
				names = append(names, c.DeadLetterTable)
				accounted[c.DeadLetterTable] = newLedgerRows(tbl, nil)
			}
			accounted[c.DeadLetterTable].add(c.ID)
		}
	}
	filter := iceberg.NewAnd(
		iceberg.EqualTo(iceberg.Reference(mapping.ColTopic), row.tp.Topic),
		iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), row.tp.Partition),
		iceberg.GreaterThan(iceberg.Reference(mapping.ColOffset), row.offset))
	decodes := !k.byKafkaKey()
	cols := []string{mapping.ColOffset, mapping.ColError}
	if decodes {
		cols = append(cols, mapping.ColKey)
	} else {
		filter = iceberg.NewAnd(filter, iceberg.EqualTo(iceberg.Reference(mapping.ColKey), k.raw))
	}
	// found are the dead letters the filter selects, with their keys when
	// those are decoded.
	var found []deadLetter
	for _, name := range names {
		dlq, err := openDeadLetters(ctx, tbl, name)
		if errors.Is(err, snapshot.ErrTableNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if dlq.Head() == nil {
			continue
		}
		accounted[name].dlq = dlq
		dcols := cols
		_, hasIDs := dlq.Iceberg().Schema().FindFieldByName(mapping.ColCommitID)
		if hasIDs {
			dcols = append(slices.Clip(cols), mapping.ColCommitID)
		}
		err = dlq.ScanFiles(ctx, 0, snapshot.ScanOptions{Columns: dcols, Filter: filter},
			func(fb snapshot.FileBatch) error {
				if fb.Done {
					return nil
				}
				col := func(name string) arrow.Array { return fb.Batch.Column(fb.Batch.Schema().FieldIndices(name)[0]) }
				off, ok1 := col(mapping.ColOffset).(*array.Int64)
				why, ok2 := col(mapping.ColError).(*array.String)
				var key *array.Binary
				ok3 := true
				if decodes {
					key, ok3 = col(mapping.ColKey).(*array.Binary)
				}
				var id *array.String
				ok4 := true
				if hasIDs {
					id, ok4 = col(mapping.ColCommitID).(*array.String)
				}
				if !ok1 || !ok2 || !ok3 || !ok4 {
					return fmt.Errorf("data file %s: unexpected column types %s", fb.Path, fb.Batch.Schema())
				}
				for i := range off.Len() {
					ours, err := accounted[name].holds(ctx, id, i, row.tp, off.Value(i))
					if err != nil {
						return err
					}
					if !ours {
						continue // another branch's or tag's
					}
					d := deadLetter{table: name, offset: off.Value(i), reason: why.Value(i)}
					if decodes {
						if key.IsNull(i) {
							continue // a record without a key is no key's
						}
						d.key = bytes.Clone(key.Value(i))
					}
					found = append(found, d)
				}
				return nil
			})
		if err != nil {
			return nil, fmt.Errorf("look key %s up in dead-letter table %s: %w", k.text, name, err)
		}
	}
	slices.SortFunc(found, func(x, y deadLetter) int { return cmp.Compare(y.offset, x.offset) })
	switch {
	case len(found) == 0:
		return nil, nil
	case !decodes:
		return &found[0], nil
	}
	dec, err := newKeyDecoder(tbl, registry)
	if err != nil {
		return nil, err
	}
	for _, d := range found {
		rec := &kgo.Record{Topic: row.tp.Topic, Partition: row.tp.Partition, Offset: d.offset, Key: d.key}
		is, err := dec.holds(ctx, rec, k)
		if err != nil {
			return nil, fmt.Errorf("decode the key of the dead letter at %s offset %d in %s as the sink does: %w", row.tp, d.offset, d.table, err)
		}
		if is {
			return &d, nil
		}
	}
	return nil, nil
}

// keyDecoder decodes record keys into the key columns of a table keyed by
// its record key's fields, as its sink does (connector.RowDecoder.DecodeKey),
// to match them with a key given as text.
type keyDecoder struct {
	dec  *connector.RowDecoder
	rows *mapping.RowBuilder
}

// newKeyDecoder returns the key decoder of tbl: a table decoded with a
// schema registry is refused without one (*connector.ConfigError).
func newKeyDecoder(tbl *snapshot.Table, registry *connector.Registry) (*keyDecoder, error) {
	dec, rows, err := newRowDecoding(tbl, registry)
	if err != nil {
		return nil, err
	}
	return &keyDecoder{dec: dec, rows: rows}, nil
}

// row returns the row of the key columns that rec's key decodes into, for
// the caller to release; nil when it decodes into none (null, malformed).
func (d *keyDecoder) row(ctx context.Context, rec *kgo.Record, key mapping.UpsertKey) (arrow.RecordBatch, error) {
	k, row, ok, err := d.dec.DecodeKey(ctx, rec, key)
	if err != nil || !ok {
		return nil, err
	}
	return d.batch(rec, k, row)
}

// batch returns the row of rec decoded into key k and value, for the
// caller to release.
func (d *keyDecoder) batch(rec *kgo.Record, k any, value map[string]any) (arrow.RecordBatch, error) {
	if err := d.rows.AppendDecoded(rec, k, value); err != nil {
		return nil, err
	}
	return d.rows.NewBatch(), nil
}

// holds reports whether rec's key decodes into k; a key that decodes into
// none does not.
func (d *keyDecoder) holds(ctx context.Context, rec *kgo.Record, k tableKey) (bool, error) {
	b, err := d.row(ctx, rec, k.key)
	if err != nil || b == nil {
		return false, err
	}
	defer b.Release()
	return k.matches(b, 0)
}

// text returns rec's key decoded as the sink decodes it, as the JSON
// object of the key columns that --key takes (keyText); false when it
// decodes into no key, or one with a null key column.
func (d *keyDecoder) text(ctx context.Context, rec *kgo.Record, key mapping.UpsertKey) (string, bool, error) {
	b, err := d.row(ctx, rec, key)
	if err != nil || b == nil {
		return "", false, err
	}
	defer b.Release()
	return keyText(b, key.Columns)
}

// keyText returns the key columns cols of b's first row as the JSON
// object --key takes; false when one is null.
func keyText(b arrow.RecordBatch, cols []string) (string, bool, error) {
	obj := map[string]any{}
	for _, col := range cols {
		idx := b.Schema().FieldIndices(col)
		if len(idx) != 1 {
			return "", false, fmt.Errorf("no key column %s in %s", col, b.Schema())
		}
		c := b.Column(idx[0])
		if c.IsNull(0) {
			return "", false, nil
		}
		switch c := c.(type) {
		case *array.String:
			obj[col] = c.Value(0)
		case *array.Int32:
			obj[col] = c.Value(0)
		case *array.Int64:
			obj[col] = c.Value(0)
		case *array.Boolean:
			obj[col] = c.Value(0)
		case *array.Timestamp:
			// As typedKey reads them: cellText's literal has a space
			// where --key takes a T.
			typ := c.DataType().(*arrow.TimestampType)
			t := c.Value(0).ToTime(typ.Unit)
			if typ.TimeZone != "" {
				obj[col] = t.Format(time.RFC3339Nano)
			} else {
				obj[col] = t.Format("2006-01-02T15:04:05.999999999")
			}
		default:
			// The other types --key takes, as text (typedKey).
			obj[col] = cellText(c, 0)
		}
	}
	out, err := json.Marshal(obj)
	return string(out), err == nil, err
}

// connectKey returns text, a key in the Kafka Connect JSON converter's
// {"schema": …, "payload": …} wrapper as it sits in Kafka (Debezium's
// keys with schemas.enable=true), as the JSON object of the key columns
// that the sink decodes it into; false when text is no such wrapper, or
// the table is not keyed by its record key's fields, or its sink does not
// unwrap it (keyDecoder: the sink's own decoding decides).
func connectKey(ctx context.Context, tbl *snapshot.Table, registry *connector.Registry, text string) (string, bool, error) {
	if tbl.Mode() != mapping.ModeUpsert || tbl.UpsertKey().Source != mapping.KeyFromKeyFields {
		return "", false, nil
	}
	if _, _, wrapped, _ := mapping.UnwrapConnectJSON([]byte(text)); !wrapped {
		return "", false, nil
	}
	dec, err := newKeyDecoder(tbl, registry)
	if err != nil {
		return "", false, fmt.Errorf("decode key %s as the sink of %s does: %w", text, tbl.Name(), err)
	}
	return dec.text(ctx, &kgo.Record{Key: []byte(text)}, tbl.UpsertKey())
}

// keyedRow is where a key's row is.
type keyedRow struct {
	tp     mapping.TopicPartition
	offset int64
	file   string
}

// keyRow finds the row of k at the head, with deletes applied.
func keyRow(ctx context.Context, tbl *snapshot.Table, snapshotID int64, k tableKey) (*keyedRow, error) {
	var found *keyedRow
	// A table keyed by decoded columns is read whole: iceberg-go v0.7.0
	// cannot apply equality deletes to its projected scans.
	var cols []string
	if k.key.Source == mapping.KeyFromKafkaKey {
		cols = []string{mapping.ColTopic, mapping.ColPartition, mapping.ColOffset}
	}
	err := tbl.ScanFiles(ctx, snapshotID, snapshot.ScanOptions{Columns: cols, Filter: k.filter},
		func(fb snapshot.FileBatch) error {
			if fb.Done || fb.Batch.NumRows() == 0 || found != nil {
				return nil
			}
			col := func(name string) arrow.Array { return fb.Batch.Column(fb.Batch.Schema().FieldIndices(name)[0]) }
			topic, ok1 := col(mapping.ColTopic).(*array.String)
			part, ok2 := col(mapping.ColPartition).(*array.Int32)
			off, ok3 := col(mapping.ColOffset).(*array.Int64)
			if !ok1 || !ok2 || !ok3 {
				return fmt.Errorf("data file %s: unexpected column types %s", fb.Path, fb.Batch.Schema())
			}
			found = &keyedRow{tp: mapping.TopicPartition{Topic: topic.Value(0), Partition: part.Value(0)}, offset: off.Value(0), file: fb.Path}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("look key %s up in %s: %w", k.text, tbl.Name(), err)
	}
	return found, nil
}

// truncatedAfter returns the newest floe commit of the branch, after the
// one that added del, that removed data files (a truncate, which deletes
// every row without an equality delete) and found a row of k in the
// snapshot before it: the key went with the truncate, not with del (the
// key's upsert commit's delete of its older rows, or an earlier delete of
// it). Only live snapshots whose parent is live can be looked at: unseen
// is the live snapshot whose parent expired before the walk reached del's
// commit (0 when nothing was left unseen), and unseenTruncates reports
// whether that snapshot itself removed data files; truncates there, if
// the table took any, floe can no longer tell from del. other is the
// newest truncate looked at whose parent held no row of k (0: none): its
// commit may still have removed the key, from rows of its own records
// before the truncate, which no snapshot ever held.
func truncatedAfter(ctx context.Context, tbl *snapshot.Table, del *keyDeletion, k tableKey) (c mapping.Commit, ok bool, unseen int64, unseenTruncates bool, other int64, err error) {
	// Without a delete (a compaction dropped the delete files once no
	// older data file survived), every truncate is looked at: the newest
	// whose parent held a row of the key removed it.
	meta := tbl.Iceberg().Metadata()
	for s := tbl.Head(); s != nil && s.ParentSnapshotID != nil; {
		if del != nil && s.SnapshotID == del.commit.SnapshotID {
			break
		}
		truncates := s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties) && removedFiles(s.Summary.Properties)
		parent := meta.SnapshotByID(*s.ParentSnapshotID)
		if parent == nil {
			return mapping.Commit{}, false, s.SnapshotID, truncates, other, nil
		}
		if truncates {
			row, err := keyRow(ctx, tbl, parent.SnapshotID, k)
			if err != nil || row != nil {
				return mapping.Commit{SnapshotID: s.SnapshotID, CommittedAt: time.UnixMilli(s.TimestampMs).UTC()}, row != nil, 0, false, 0, err
			}
			if other == 0 {
				other = s.SnapshotID
			}
		}
		s = parent
	}
	return mapping.Commit{}, false, 0, false, other, nil
}

// removedFiles reports whether a snapshot's summary counts deleted data
// files.
func removedFiles(props iceberg.Properties) bool {
	n := props["deleted-data-files"]
	return n != "" && n != "0"
}

// truncateUnseen is what a key's answer adds when the history below
// snapshot unseen expired before the walk could rule a truncate out
// (truncatedAfter) and the table took truncates (mapping.PropTruncated;
// a table of a floe before it, by its --on-truncate setting): "" otherwise.
func truncateUnseen(tbl *snapshot.Table, unseen int64, unseenTruncates bool) string {
	props := tbl.Iceberg().Properties()
	if unseen == 0 || props[mapping.PropTruncated] == "" && props[mapping.PropOnTruncate] != string(connector.TruncateDeleteAll) {
		return ""
	}
	if unseenTruncates {
		return fmt.Sprintf("; or snapshot %d, a truncate (--on-truncate delete-all), removed its row: the table before it expired, so floe can no longer tell", unseen)
	}
	return fmt.Sprintf("; or a truncate (--on-truncate delete-all) before snapshot %d, in history that expired, removed its row: floe can no longer tell", unseen)
}

// keyDeletion is the newest equality delete of a key.
type keyDeletion struct {
	commit mapping.Commit
	file   snapshot.DeleteFile
}

// keyDelete finds the newest live equality-delete file that holds k, and
// the floe commit that added it: files are read newest commit first, and
// the search stops at the first that holds the key.
func keyDelete(ctx context.Context, tbl *snapshot.Table, k tableKey) (*keyDeletion, error) {
	dels, err := tbl.DeleteFiles(ctx, 0)
	if err != nil {
		return nil, err
	}
	adders := map[int64]bool{}
	for _, d := range dels {
		adders[d.AddedBy] = true
	}
	// The floe commits that added them, in ledger order.
	order := map[int64]int{}
	commits := map[int64]mapping.Commit{}
	for c, err := range tbl.CommitsOf(ctx, 0, adders) {
		if err != nil {
			return nil, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
		}
		order[c.SnapshotID], commits[c.SnapshotID] = len(order), c
	}
	dels = slices.DeleteFunc(dels, func(d snapshot.DeleteFile) bool {
		_, floe := order[d.AddedBy]
		return !floe || !d.Equality
	})
	slices.SortStableFunc(dels, func(x, y snapshot.DeleteFile) int { return cmp.Compare(order[y.AddedBy], order[x.AddedBy]) })
	for _, d := range dels {
		hit := false
		err := tbl.ReadDeleteFile(ctx, d, func(b arrow.RecordBatch) error {
			for i := range int(b.NumRows()) {
				ok, err := k.matches(b, i)
				if err != nil {
					return fmt.Errorf("delete file %s: %w", d.Path, err)
				}
				if ok {
					hit = true
					return nil
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if hit {
			return &keyDeletion{commit: commits[d.AddedBy], file: d}, nil
		}
	}
	return nil, nil
}

// keyLog reads a key's committed records from the log: by the Kafka key's
// bytes for a table keyed by it, else by decoding each record as the
// table's sink does (a key of decoded columns: JSON or a registry's
// format, a Debezium table's primary key), which needs the schema
// registry for a table decoded with one.
type keyLog struct {
	broker   *connector.Broker
	registry *connector.Registry
	tbl      *snapshot.Table
	k        tableKey
	text     string // the key as given
	// dec and rows decode records into rows of tbl, made on first use;
	// pending are the records appended to rows, matched a batch at a time.
	dec     *connector.RowDecoder
	rows    *mapping.RowBuilder
	pending []pendingMatch
	// missing counts the offsets of the ranges read that the log no
	// longer holds (retention, compaction): a key's records may have been
	// among them.
	missing int64
}

// pendingMatch is a decoded record waiting for its batch to be matched.
type pendingMatch struct {
	span *keySpan
	rec  keyRecord
}

// keySpan is a range of the ledger read from the log, with the key's
// committed records in it.
type keySpan struct {
	dlq string
	// commit is the id of the commit of r, files its dead-letter files
	// (mapping.Commit.DeadLetterFiles).
	commit string
	files  []string
	r      mapping.Range
	recs   []keyRecord
	// truncates are the offsets of the range's truncates (a Debezium
	// table's), applied or dead letters.
	truncates []int64
}

// keySpanBatch is how many commits lastRecord reads the log for at once:
// each partition's ranges among them are one read of its log, and memory
// stays bounded however long the ledger is.
const keySpanBatch = 10_000

// matchBatch is how many decoded records are matched against the key at
// once (one Arrow batch).
const matchBatch = 512

// newKeyLog returns the reader of k (given as text) in tbl's ranges on
// broker (nil: the log is not searched).
func newKeyLog(tbl *snapshot.Table, broker *connector.Broker, o keyOptions, k tableKey, text string) *keyLog {
	if broker == nil {
		return nil
	}
	return &keyLog{broker: broker, registry: o.registry, tbl: tbl, k: k, text: text}
}

// decodes reports whether records are decoded to find the key's: it is
// not the Kafka key itself.
func (l *keyLog) decodes() bool { return !l.k.byKafkaKey() }

// lastRecord reads the commits' ranges (those of the key's partition)
// from the log and returns the record that last gave the key its row or
// removed it (keyRecord.deletes tells which); nil when the key has no
// record there (keyLog.missing says whether the log lost some of them).
// It applies the sink's rules: within a commit each partition's latest
// record of the key that is not a dead letter (a dead letter changes no
// row), then, across partitions, mapping.Winner (the later timestamp);
// across commits the later commit. It took the last record by the order
// the ranges are listed and counted dead letters, so that a tombstone
// another partition's older record followed, or a dead letter after a
// delete, read as "the log no longer holds it" (found by review). Each
// partition's ranges of up to keySpanBatch commits are one read of its
// log: a read per range fetched up to 8 MiB each (found by review).
func (l *keyLog) lastRecord(ctx context.Context, commits iter.Seq[mapping.Commit]) (*keyRecord, error) {
	var (
		last  *keyRecord
		batch [][]*keySpan // per commit of the batch, its spans
		err   error
	)
	dlqs := &deadLetterIndex{tables: map[string]*snapshot.Table{}, listed: map[string]map[keyPosition]bool{}, live: map[string]map[string]bool{}}
	fold := func() {
		if err = l.read(ctx, batch); err != nil {
			return
		}
		for _, spans := range batch {
			var (
				latest []keyRecord // each partition's latest live record of the key
				// cut is the commit's truncate that removed the key's
				// row (an earlier commit's, or its own partition's record
				// before it): the sink's rule (snapshot.Flush.Truncated).
				cut     *keyRecord
				removed bool
			)
			for _, s := range spans {
				recs := s.recs
				if len(recs) > 0 && s.r.DeadLetters > 0 && s.dlq != "" {
					if recs, err = dlqs.without(ctx, l.tbl, s, recs); err != nil {
						return
					}
				}
				var t int64
				var applied bool
				if t, applied, err = l.appliedTruncate(ctx, dlqs, s); err != nil {
					return
				}
				if applied {
					// recs are by offset: those before the truncate went.
					gone, _ := slices.BinarySearchFunc(recs, t, func(r keyRecord, t int64) int { return cmp.Compare(r.Offset, t) })
					if cut == nil || gone > 0 && !removed {
						cut = &keyRecord{KeyRecord: mapping.KeyRecord{Partition: s.r.TopicPartition, Offset: t}, deletes: true, truncate: true}
					}
					removed = removed || gone > 0
					recs = recs[gone:]
				}
				if len(recs) > 0 {
					latest = append(latest, recs[len(recs)-1])
				}
			}
			switch {
			case len(latest) > 0:
				vs := make([]mapping.KeyRecord, len(latest))
				for i, r := range latest {
					vs[i] = r.KeyRecord
				}
				last = &latest[mapping.Winner(vs)]
			case cut != nil && (removed || last != nil && !last.deletes):
				last = cut
			}
		}
		batch = batch[:0]
	}
	for c := range commits {
		var spans []*keySpan
		for r := range l.k.inPartition(slices.Values(c.Ranges)) {
			if !r.Deleted() && r.Len() > 0 {
				spans = append(spans, &keySpan{dlq: c.DeadLetterTable, commit: c.ID, files: c.DeadLetterFiles, r: r})
			}
		}
		batch = append(batch, spans)
		if len(batch) == keySpanBatch {
			if fold(); err != nil {
				return nil, err
			}
		}
	}
	if fold(); err != nil {
		return nil, err
	}
	return last, nil
}

// appliedTruncate returns the offset of span s's last truncate the sink
// applied (--on-truncate delete-all), and false when it applied none: a
// truncate the dead-letter table holds (--on-truncate dead-letter) changed
// no row.
func (l *keyLog) appliedTruncate(ctx context.Context, dlqs *deadLetterIndex, s *keySpan) (int64, bool, error) {
	for i := len(s.truncates) - 1; i >= 0; i-- {
		t := s.truncates[i]
		if s.r.DeadLetters == 0 || s.dlq == "" {
			return t, true, nil
		}
		kept, err := dlqs.without(ctx, l.tbl, s, []keyRecord{{KeyRecord: mapping.KeyRecord{Partition: s.r.TopicPartition, Offset: t}}})
		if err != nil {
			return 0, false, err
		}
		if len(kept) > 0 {
			return t, true, nil
		}
	}
	return 0, false, nil
}

// keyRecord is a committed record of a key, read from the log.
type keyRecord struct {
	mapping.KeyRecord
	deletes bool // a null value, or a change event deleting the key
	// truncate: the record is a truncate (--on-truncate delete-all) that
	// removed the key's row.
	truncate bool
}

// read fills the spans of batch (per commit, its ranges) with the key's
// committed records, by offset: one read of each partition's log from its
// first range to its last.
func (l *keyLog) read(ctx context.Context, batch [][]*keySpan) error {
	byTP := map[mapping.TopicPartition][]*keySpan{}
	for _, spans := range batch {
		for _, s := range spans {
			byTP[s.r.TopicPartition] = append(byTP[s.r.TopicPartition], s)
		}
	}
	if len(byTP) == 0 {
		return nil
	}
	if err := l.prepare(); err != nil {
		return err
	}
	for _, tp := range slices.SortedFunc(maps.Keys(byTP), mapping.TopicPartition.Compare) {
		spans := byTP[tp]
		slices.SortFunc(spans, func(a, b *keySpan) int { return cmp.Compare(a.r.Low, b.r.Low) })
		if err := l.readPartition(ctx, tp, spans); err != nil {
			return err
		}
		for _, s := range spans {
			slices.SortFunc(s.recs, func(a, b keyRecord) int { return cmp.Compare(a.Offset, b.Offset) })
		}
	}
	return nil
}

// readPartition reads tp's log over spans (its ranges, by offset) and
// adds the key's committed records to the span holding each.
func (l *keyLog) readPartition(ctx context.Context, tp mapping.TopicPartition, spans []*keySpan) error {
	// Transactional records count once their commit marker is read
	// (ReadLog reads uncommitted); aborted ones never. A marker may lie
	// past the range (in the next commit's), so the read goes on while a
	// transaction begun inside it is open. Records are decided in marker
	// order but the sink took them in offset order.
	var applyErr error
	seen := make([]int64, len(spans)) // offsets the log holds, per span
	// pending are the open transactions' records, with their spans.
	type spanned struct {
		span int
		rec  *kgo.Record
	}
	pending := map[int64][]spanned{}
	spanOf := func(offset int64) int {
		i, found := slices.BinarySearchFunc(spans, offset, func(s *keySpan, o int64) int {
			if s.r.High <= o {
				return -1
			}
			if s.r.Low > o {
				return 1
			}
			return 0
		})
		if !found {
			return -1
		}
		return i
	}
	apply := func(i int, rec *kgo.Record) {
		if i < 0 || applyErr != nil {
			return
		}
		if err := l.offer(ctx, spans[i], rec); err != nil {
			applyErr = fmt.Errorf("decode %s offset %d as the sink does: %w", tp, rec.Offset, err)
		}
	}
	end := spans[len(spans)-1].r.High
	err := l.broker.ReadLog(ctx, tp.Topic, tp.Partition, spans[0].r.Low, math.MaxInt64, func(rec *kgo.Record, _ int64) bool {
		i := spanOf(rec.Offset)
		if i >= 0 {
			seen[i]++
		}
		switch {
		case rec.Attrs.IsControl():
			if commit, known := connector.MarkerType(rec.Key); known && commit {
				for _, p := range pending[rec.ProducerID] {
					apply(p.span, p.rec)
				}
			}
			delete(pending, rec.ProducerID)
		case rec.Offset >= end:
			// Past the ranges only markers matter.
		case rec.Attrs.IsTransactional():
			pending[rec.ProducerID] = append(pending[rec.ProducerID], spanned{i, rec})
		default:
			apply(i, rec)
		}
		return applyErr == nil && (rec.Offset+1 < end || len(pending) > 0)
	})
	if err != nil {
		return fmt.Errorf("read %s [%d, %d) from the broker: %w", tp, spans[0].r.Low, end, err)
	}
	if applyErr == nil {
		applyErr = l.match()
	}
	if applyErr != nil {
		return fmt.Errorf("search the log of %s for key %s: %w", l.tbl.Name(), l.text, applyErr)
	}
	for i, s := range spans {
		l.missing += s.r.Len() - seen[i]
	}
	return nil
}

// prepare makes the decoder of a search by decoded columns: a table
// decoded with a schema registry is refused without one
// (*connector.ConfigError), before anything is read.
func (l *keyLog) prepare() error {
	if !l.decodes() || l.dec != nil {
		return nil
	}
	dec, rows, err := newRowDecoding(l.tbl, l.registry)
	if err != nil {
		return fmt.Errorf("search the log of %s for key %s, decoding its records: %w", l.tbl.Name(), l.text, err)
	}
	l.dec, l.rows = dec, rows
	return nil
}

// newRowDecoding returns the decoder of tbl's records as its sink decodes
// them, and a builder of its rows to match them in: a table decoded with a
// schema registry is refused without one (*connector.ConfigError).
func newRowDecoding(tbl *snapshot.Table, registry *connector.Registry) (*connector.RowDecoder, *mapping.RowBuilder, error) {
	placeholder, err := mapping.PlaceholderOf(tbl.Iceberg().Properties())
	if err != nil {
		return nil, nil, err
	}
	layout := tbl.Layout()
	dec, err := connector.NewRowDecoder(layout, registry, tbl.Iceberg().Schema(), placeholder)
	if err != nil {
		return nil, nil, err
	}
	rows, err := layout.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		return nil, nil, err
	}
	return dec, rows, nil
}

// offer adds rec, a committed record of span s, to s when it is a record
// of the key. A record of decoded columns that the sink makes a dead
// letter, or that changes no row (a skipped tombstone, a truncate), is
// none; the others are decoded into rows and matched a batch at a time.
func (l *keyLog) offer(ctx context.Context, s *keySpan, rec *kgo.Record) error {
	at := keyRecord{KeyRecord: mapping.KeyRecord{Partition: s.r.TopicPartition, Offset: rec.Offset, Timestamp: rec.Timestamp}}
	if !l.decodes() {
		if rec.Key != nil && bytes.Equal(rec.Key, l.k.raw) {
			at.deletes = rec.Value == nil
			s.recs = append(s.recs, at)
		}
		return nil
	}
	key, value, change, dead, err := l.dec.DecodeChange(ctx, rec, l.k.key)
	if err == nil && dead == nil && change == mapping.ChangeTruncate {
		s.truncates = append(s.truncates, rec.Offset)
	}
	if err != nil || dead != nil || change != mapping.ChangeUpsert && change != mapping.ChangeDelete {
		return err
	}
	if err := l.rows.AppendDecoded(rec, key, value); err != nil {
		return err
	}
	at.deletes = change == mapping.ChangeDelete
	l.pending = append(l.pending, pendingMatch{span: s, rec: at})
	if len(l.pending) == matchBatch {
		return l.match()
	}
	return nil
}

// match matches the pending decoded records against the key.
func (l *keyLog) match() error {
	if len(l.pending) == 0 {
		return nil
	}
	b := l.rows.NewBatch()
	defer b.Release()
	for i, p := range l.pending {
		is, err := l.k.matches(b, i)
		if err != nil {
			return err
		}
		if is {
			p.span.recs = append(p.span.recs, p.rec)
		}
	}
	l.pending = l.pending[:0]
	return nil
}

// deadLetterIndex tells lastRecord which records of the ledger's ranges
// are dead letters.
type deadLetterIndex struct {
	// tables are the dead-letter tables by name, opened once; nil for
	// one that does not exist.
	tables map[string]*snapshot.Table
	// listed are, by commit id, the positions of the dead letters in the
	// files the commit lists when they are pending, read once (none when
	// the dead-letter table holds them).
	listed map[string]map[keyPosition]bool
	// live are, by dead-letter table, the paths of its head's data files,
	// read from its manifests once.
	live map[string]map[string]bool
}

// keyPosition is a record's place in the log.
type keyPosition struct {
	tp     mapping.TopicPartition
	offset int64
}

// without drops from recs (the records of a key in span s's range, by
// offset) its latest ones that are dead letters, up to the latest that
// is not: the one that gave the key its row or removed it. A dead letter
// is a row of the dead-letter table the commit names, or of the files the
// commit lists (its dead letters, which a writer that stopped between the
// data commit and the dead-letter commit left pending: the ledger counts
// them all the same, and a lookup that asked the table alone named a
// dead-lettered truncate as the delete of a key, found by review). A
// dead-letter table that is gone, whose files are gone too, tells none:
// recs are kept, as where --key did before it asked (the lookup failed on
// it: found by review).
func (x *deadLetterIndex) without(ctx context.Context, tbl *snapshot.Table, s *keySpan, recs []keyRecord) ([]keyRecord, error) {
	name := s.dlq
	dlq, opened := x.tables[name]
	if !opened {
		var err error
		dlq, err = openDeadLetters(ctx, tbl, name)
		if err != nil && !errors.Is(err, snapshot.ErrTableNotFound) {
			return nil, err
		}
		x.tables[name] = dlq
	}
	for dlq != nil && len(recs) > 0 {
		last := recs[len(recs)-1]
		dead := false
		if dlq.Head() != nil {
			var err error
			if _, _, dead, err = dlq.DeadLetterAt(ctx, last.Partition, last.Offset, s.commit); err != nil {
				return nil, fmt.Errorf("look %s@%d up in dead-letter table %s: %w", last.Partition, last.Offset, name, err)
			}
		}
		if !dead {
			listed, err := x.listedBy(ctx, dlq, s)
			if err != nil {
				return nil, err
			}
			dead = listed[keyPosition{last.Partition, last.Offset}]
		}
		if !dead {
			break
		}
		recs = recs[:len(recs)-1]
	}
	return recs, nil
}

// listedBy returns the positions of the dead letters in the files span
// s's commit lists, read from dead-letter table dlq's storage once per
// commit (snapshot.Table.ReadFiles) when they are pending; a file that is
// gone holds none. When dlq holds the commit's dead letters, DeadLetterAt
// found them there, and the files are not read: none (where --key read
// them for every key whose records shared a commit with a dead letter).
func (x *deadLetterIndex) listedBy(ctx context.Context, dlq *snapshot.Table, s *keySpan) (map[keyPosition]bool, error) {
	if at, ok := x.listed[s.commit]; ok {
		return at, nil
	}
	at := map[keyPosition]bool{}
	pending, err := x.pending(ctx, dlq, s)
	if err != nil || !pending {
		x.listed[s.commit] = at
		return at, err
	}
	err = dlq.ReadFiles(ctx, s.files, func(fb snapshot.FileBatch) error {
		if fb.Done {
			return nil
		}
		topic, ok1 := column[*array.String](fb.Batch, mapping.ColTopic)
		part, ok2 := column[*array.Int32](fb.Batch, mapping.ColPartition)
		off, ok3 := column[*array.Int64](fb.Batch, mapping.ColOffset)
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("dead-letter file %s: unexpected position columns %s", fb.Path, fb.Batch.Schema())
		}
		for i := range int(fb.Batch.NumRows()) {
			at[keyPosition{mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)}, off.Value(i)}] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the dead letters of commit %s in %s: %w", s.commit, dlq.Name(), err)
	}
	x.listed[s.commit] = at
	return at, nil
}

// pending reports whether dead-letter table dlq lacks the dead letters of
// span s's commit, which the files the commit lists hold (a writer that
// stopped between the data commit and the dead-letter commit left them
// out): not when every one of those files is a data file of dlq's head,
// read from its manifests, nor, when some are not (a compaction of dlq
// rewrote them), when dlq has rows of the commit
// (snapshot.Table.HoldsCommit).
func (x *deadLetterIndex) pending(ctx context.Context, dlq *snapshot.Table, s *keySpan) (bool, error) {
	if len(s.files) == 0 {
		return false, nil // nothing to read
	}
	if dlq.Head() == nil {
		return true, nil
	}
	live, ok := x.live[dlq.Name()]
	if !ok {
		files, err := dlq.Files(ctx, 0)
		if err != nil {
			return false, fmt.Errorf("list the data files of dead-letter table %s: %w", dlq.Name(), err)
		}
		live = map[string]bool{}
		for _, f := range files {
			live[f.Path] = true
		}
		x.live[dlq.Name()] = live
	}
	if !slices.ContainsFunc(s.files, func(p string) bool { return !live[p] }) {
		return false, nil
	}
	if _, hasIDs := dlq.Iceberg().Schema().FindFieldByName(mapping.ColCommitID); !hasIDs {
		return true, nil // its rows name no commit: the files tell
	}
	held, err := dlq.HoldsCommit(ctx, s.commit)
	return !held, err
}
