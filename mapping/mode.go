package mapping

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
)

// Mode is how a table holds the log: what a commit does with a flush's
// records. Code that behaves differently per mode switches on it and
// refuses a mode it does not handle, so that a new mode never takes a
// branch meant for another.
type Mode string

// The table modes.
const (
	// ModeAppend: every record is a row (an event table). A table that
	// records no mode is one.
	ModeAppend Mode = "append"
	// ModeFold: a copy-on-write state table of floe before upsert tables
	// (PropFold=FoldLatest): each commit rewrites the data files that hold
	// the keys it folds. Still read and written (replay --fold latest).
	ModeFold Mode = "fold"
	// ModeUpsert: one row per key, the latest record's, kept with
	// equality deletes committed in the same snapshot as the rows
	// (UpsertKey names the key).
	ModeUpsert Mode = "upsert"
)

// Table properties of the mode.
const (
	// PropMode records a table's Mode. Absent, the table is ModeAppend,
	// or ModeFold when PropFold says so.
	PropMode = "floe.mode"
	// PropFold is the property that made a table a state table before
	// PropMode existed; FoldLatest its only value.
	PropFold   = "floe.fold"
	FoldLatest = "latest"
	// PropUpsertKey records the key of an upsert table (UpsertKey.String).
	PropUpsertKey = "floe.upsert-key"
)

// ParseMode parses a mode as a user names it (--mode).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAppend, ModeUpsert, ModeFold:
		return m, nil
	}
	return "", &LayoutError{Setting: "table", Value: s, Want: "append or upsert"}
}

// ModeOf returns the mode a table's properties record. A PropMode this
// floe does not know is an error, never read as another mode.
func ModeOf(props iceberg.Properties) (Mode, error) {
	fold := props[PropFold]
	if fold != "" && fold != FoldLatest {
		return "", fmt.Errorf("table property %s=%q: this floe folds only %q (a newer floe wrote it)", PropFold, fold, FoldLatest)
	}
	m, ok := props[PropMode]
	switch {
	case !ok && fold != "":
		return ModeFold, nil
	case !ok:
		return ModeAppend, nil
	}
	mode := Mode(m)
	switch mode {
	case ModeAppend, ModeUpsert:
	case ModeFold:
		if fold == "" {
			return "", fmt.Errorf("table property %s=%s without %s=%s", PropMode, m, PropFold, FoldLatest)
		}
	default:
		return "", fmt.Errorf("table property %s=%q: this floe knows modes append, fold and upsert (a newer floe wrote it)", PropMode, m)
	}
	if fold != "" && mode != ModeFold {
		return "", fmt.Errorf("table properties %s=%s and %s=%s contradict each other", PropMode, m, PropFold, fold)
	}
	return mode, nil
}

// ModeError reports a write of one mode into a table of another.
type ModeError struct {
	Table string
	// Table is of mode Has; the writer asked for Want.
	Has, Want Mode
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("table %s is of mode %s, and this run writes mode %s: a table keeps the mode it was created with; write into a new table, or run with --mode %s",
		e.Table, e.Has, e.Want, e.Has)
}

// KeySource says where the values of an upsert table's key columns come
// from.
type KeySource string

// The key sources.
const (
	// KeyFromKafkaKey: the key column is kafka_key itself (--key string
	// or raw).
	KeyFromKafkaKey KeySource = "kafka-key"
	// KeyFromKeyFields: one column per field of the decoded key struct
	// (--key json or registry), named after the field.
	KeyFromKeyFields KeySource = "key"
	// KeyFromValue: value columns named by --id-columns.
	KeyFromValue KeySource = "columns"
	// KeyFromPartitionKey: the Kafka key within its partition, columns
	// kafka_topic, kafka_partition and kafka_key (replay --fold latest):
	// a KTable's semantics, which keeps its state per partition and drops
	// records without a key (ChangeSkip).
	KeyFromPartitionKey KeySource = "partition-kafka-key"
)

// FoldLatestKey is the key of the upsert table replay --fold latest
// writes (KeyFromPartitionKey).
func FoldLatestKey() UpsertKey {
	return UpsertKey{Source: KeyFromPartitionKey, Columns: []string{ColTopic, ColPartition, ColKey}}
}

// UpsertKey is the key of an upsert table: the columns that identify a
// row (the Iceberg schema's identifier fields) and where their values come
// from. Its text form, the value of PropUpsertKey, is "kafka-key",
// "partition-kafka-key", "key:a,b" or "columns:a,b"; "key" alone for a
// key of struct fields whose first record has not named them yet.
type UpsertKey struct {
	Source KeySource
	// Columns are the top-level key columns, in order; none for a key of
	// struct fields not named yet (the first commit names them).
	Columns []string
}

func (k UpsertKey) String() string {
	if k.Source == KeyFromKafkaKey || k.Source == KeyFromPartitionKey || len(k.Columns) == 0 {
		return string(k.Source)
	}
	return string(k.Source) + ":" + strings.Join(k.Columns, ",")
}

// Equal reports whether k and o are the same key. A key of struct fields
// not named yet equals any key of struct fields: the key names them.
func (k UpsertKey) Equal(o UpsertKey) bool {
	if k.Source == KeyFromKeyFields && o.Source == KeyFromKeyFields && (len(k.Columns) == 0 || len(o.Columns) == 0) {
		return true
	}
	return k.Source == o.Source && slices.Equal(k.Columns, o.Columns)
}

// ParseUpsertKey parses the value of PropUpsertKey.
func ParseUpsertKey(s string) (UpsertKey, error) {
	switch s {
	case string(KeyFromKafkaKey):
		return UpsertKey{Source: KeyFromKafkaKey, Columns: []string{ColKey}}, nil
	case string(KeyFromPartitionKey):
		return FoldLatestKey(), nil
	case string(KeyFromKeyFields):
		return UpsertKey{Source: KeyFromKeyFields}, nil
	}
	src, cols, ok := strings.Cut(s, ":")
	k := UpsertKey{Source: KeySource(src)}
	if !ok || (k.Source != KeyFromKeyFields && k.Source != KeyFromValue) || cols == "" {
		return UpsertKey{}, fmt.Errorf("table property %s=%q: want kafka-key, partition-kafka-key, key:COLUMNS or columns:COLUMNS", PropUpsertKey, s)
	}
	k.Columns = strings.Split(cols, ",")
	if slices.Contains(k.Columns, "") {
		return UpsertKey{}, fmt.Errorf("table property %s=%q: an empty column name", PropUpsertKey, s)
	}
	return k, nil
}

// UpsertKeyOf returns the key an upsert table's properties record.
func UpsertKeyOf(props iceberg.Properties) (UpsertKey, error) {
	v, ok := props[PropUpsertKey]
	if !ok {
		return UpsertKey{}, fmt.Errorf("an upsert table without table property %s", PropUpsertKey)
	}
	return ParseUpsertKey(v)
}

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
	// ChangeTruncate deletes every row of the table (Range.Deletes): a
	// change event of a truncate, with --on-truncate delete-all. It has no
	// row; the rows of its partition's earlier records in the same flush
	// go too.
	ChangeTruncate
)

// KeyFor returns the key of an upsert table of layout l: the named value
// columns (--id-columns) when idColumns is not empty, else the record key
// (kafka_key for a raw or string key, the decoded struct's fields for a
// json or registry key, whose columns are named when its first record
// shows them). A layout without a key to take is a *KeyError.
func KeyFor(l Layout, idColumns []string) (UpsertKey, error) {
	if len(idColumns) > 0 {
		if !l.Typed() {
			return UpsertKey{}, &KeyError{Problem: "--id-columns names value columns, and --value raw has none: decode the values (--value json or registry), or key by the record key (--key string)"}
		}
		for i, c := range idColumns {
			switch {
			case c == "":
				return UpsertKey{}, &KeyError{Problem: "--id-columns has an empty column name"}
			case l.IsMetadataColumn(c):
				return UpsertKey{}, &KeyError{Problem: fmt.Sprintf("--id-columns names %s, one of floe's own columns: name value columns (or key by the record key with --key)", c)}
			case slices.Contains(idColumns[:i], c):
				return UpsertKey{}, &KeyError{Problem: fmt.Sprintf("--id-columns names %s twice", c)}
			}
		}
		return UpsertKey{Source: KeyFromValue, Columns: slices.Clone(idColumns)}, nil
	}
	if l.TypedKey() {
		if !l.Typed() {
			return UpsertKey{}, &KeyError{Problem: fmt.Sprintf("a --key %s key's fields become columns beside the decoded value's: use --value json or registry with it, or key by the key's text (--key string)", l.Key)}
		}
		return UpsertKey{Source: KeyFromKeyFields}, nil
	}
	return UpsertKey{Source: KeyFromKafkaKey, Columns: []string{ColKey}}, nil
}

// CheckKeyColumn reports why f, a key column of an upsert table keyed
// from source, cannot be one: equality deletes match keys by value, which
// floating-point types and nested types do not have a usable equality
// for. The advice is for how the key columns were chosen.
func CheckKeyColumn(f iceberg.NestedField, source KeySource) error {
	switch f.Type.(type) {
	case iceberg.Float32Type, iceberg.Float64Type:
		fix := "key by other columns with --id-columns"
		if source == KeyFromKeyFields {
			// The Kafka key's fields are the key columns: no other
			// field of it can be chosen.
			fix = "key by the key's text with --key string, or by value columns with --id-columns"
		}
		return fmt.Errorf("key column %q is a %s: floating-point values cannot identify rows (equality deletes compare them exactly); %s", f.Name, f.Type, fix)
	case iceberg.NestedType:
		if f.Name == "payload" || f.Name == "schema" {
			// Kafka Connect's JsonConverter with schemas.enable=true wraps
			// keys so: most likely Debezium's.
			return fmt.Errorf("key column %q is a %s: the keys are Kafka Connect JSON with schemas ({\"schema\": ..., \"payload\": ...}); for Debezium change events sink with --envelope debezium (it reads the payload)", f.Name, f.Type)
		}
		if f.Name == ColKey {
			// A struct Kafka key (--key json|registry) of a table keyed
			// by the Kafka key (replay --fold latest).
			return fmt.Errorf("key column %q is a %s: key columns must be of a primitive type; key by the key's fields with --mode upsert --key json|registry instead of --fold latest, or by its text with --key string", f.Name, f.Type)
		}
		return fmt.Errorf("key column %q is a %s: key columns must be of a primitive type; name its fields with --id-columns", f.Name, f.Type)
	}
	return nil
}

// PropOnTruncate records what a sink of a Debezium table was last told to
// do with a truncate event (dead-letter or delete-all; none: dead-letter),
// which a sink told nothing does too.
const PropOnTruncate = "floe.on-truncate"

// PropTruncated is set ("true"), in the same commit, on a table that took
// a truncate (mapping.ChangeTruncate): a lookup whose answer an expired
// truncate could change says so. It is never removed.
const PropTruncated = "floe.truncated"

// KeyError reports an upsert key that cannot be.
type KeyError struct{ Problem string }

func (e *KeyError) Error() string { return "upsert key: " + e.Problem }

// CheckPartitionBy reports a partition spec an upsert table keyed by k
// cannot take: equality deletes are matched within a partition, so a row
// and the delete of its key must land in the same one, which only a spec
// of key columns guarantees.
func (k UpsertKey) CheckPartitionBy(p PartitionBy) error {
	for _, f := range p.Fields {
		if k.Source == KeyFromKeyFields && len(k.Columns) == 0 {
			// Key fields are named by the first key: a spec on one of
			// them is checked when its column is added.
			continue
		}
		if !slices.Contains(k.Columns, f.Column) {
			return &PartitionByError{Spec: p.String(), Part: f.Column,
				Problem: fmt.Sprintf("an upsert table is partitioned by key columns only (%s), so that a key's row and the deletes of it share a partition; partition by a key column, or leave --partition-by out", strings.Join(k.Columns, ", "))}
		}
	}
	return nil
}
