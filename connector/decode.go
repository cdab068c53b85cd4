package connector

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
)

// SchemaConflict says what a sink does with a record whose type the table
// cannot take even by evolving its schema (*mapping.SchemaConflictError).
type SchemaConflict string

const (
	// ConflictDeadLetter sends the record to the dead-letter table with the
	// conflict as the reason.
	ConflictDeadLetter SchemaConflict = "dead-letter"
	// ConflictFail stops the sink before the record, after committing what
	// came before it.
	ConflictFail SchemaConflict = "fail"
)

// BadRecordError stops a sink at a record it cannot turn into a row and
// may not dead-letter: there is no dead-letter table (--dlq off), or a
// schema conflict with ConflictFail. Everything before the record is
// committed; the record and what follows it are not.
type BadRecordError struct {
	Partition mapping.TopicPartition
	Offset    int64
	// Reason is why the record cannot be a row (a *mapping.DecodeError,
	// *mapping.TypeError, *mapping.SchemaConflictError, *WireError,
	// *UnknownSchemaError, or a key that is not UTF-8).
	Reason error
}

func (e *BadRecordError) Error() string {
	return fmt.Sprintf("%s offset %d cannot become a row: %v", e.Partition, e.Offset, e.Reason)
}

func (e *BadRecordError) Unwrap() error { return e.Reason }

// errKeyNotUTF8 is why a record whose key is not UTF-8 text cannot be a row
// of a table whose key column is a string.
var errKeyNotUTF8 = errors.New("the key is not valid UTF-8 text, and the table keeps keys as strings (--key string)")

// decoder turns records into the values of rows of a table's layout: it
// decodes keys and values by the layout's modes, keeps the columns the rows
// are built for (the table's, evolved by what the records showed), and
// tells which records are dead letters and why. It is not safe for
// concurrent use; a sink has one, and a session resets it to the table's
// schema.
type decoder struct {
	layout   mapping.Layout
	registry *Registry
	codecs   map[codecKey]*codecEntry

	// key is the kafka_key column's type when keys are decoded (nil until
	// a key shows it); values the value columns.
	key    iceberg.Type
	values *iceberg.StructType
	// version counts changes of key and values: builders made for an older
	// one must be rebuilt, and a codec whose type fit an older one must be
	// merged again.
	version int
	// onSchema is Config.OnSchema.
	onSchema func(id int)
	// truncateAll: a Debezium truncate event deletes every row
	// (Config.OnTruncate TruncateDeleteAll) instead of being a dead letter.
	truncateAll bool
	// placeholder is what the Debezium connector writes for a value it
	// left out (Config.UnavailablePlaceholder).
	placeholder *mapping.Placeholder
	// table names the data table, for the commands reasons give.
	table string

	// canonical: decode values into the canonical representation even
	// where a codec has a fast path (mapping.TapeCodec), for a caller that
	// reads them (the content audit) rather than appending them to rows.
	canonical bool
	// tape holds the last value decoded by a fast path, until it is
	// appended (appendRow).
	tape mapping.Tape
	// keyFields is set for an upsert table keyed by the fields of a
	// decoded key: each becomes a value column of its name, holding the
	// key's value.
	keyFields bool
	// upsert is the key of an upsert table (nil: not one): its key
	// columns keep their types (keepKeyTypes).
	upsert *mapping.UpsertKey
}

// codecKey names one codec: a registry schema id and, for Protobuf, the
// message indexes.
type codecKey struct {
	id      int
	indexes string
}

// codecEntry is a codec and what is known of its type against the table's.
type codecEntry struct {
	codec mapping.Codec
	// err is why the schema cannot become columns (a *mapping.SchemaError):
	// every record written with it is a dead letter.
	err error
	// typ is the codec's type, a key column's type; valueType its type as
	// value columns: typ when it is a struct, else a struct of one column
	// named value (wrapped).
	typ, valueType iceberg.Type
	wrapped        bool
	// valueAt and keyAt are the decoder versions at which typ was merged
	// into the value columns or the key type (0: never); conflict is the
	// *mapping.SchemaConflictError of that merge, if any.
	valueAt, keyAt             int
	valueConflict, keyConflict error
	// appender appends the codec's values from a tape to rows built for
	// the Arrow schema appenderFor (nil: none compiled yet).
	appender    *mapping.ValueAppender
	appenderFor *arrow.Schema
	// format is the schema's language, for messages. changeColumns are the
	// value columns of the codec's values as Debezium change events
	// (mapping.DebeziumColumns), made at their first use, or changeErr why
	// they are not change events.
	format        string
	changeColumns *iceberg.StructType
	changeErr     error
}

func newDecoder(layout mapping.Layout, registry *Registry, placeholder *mapping.Placeholder) *decoder {
	return &decoder{layout: layout, registry: registry, placeholder: placeholder, codecs: map[codecKey]*codecEntry{}}
}

// reset makes the table's schema the decoder's starting point: its value
// columns and its key type.
func (d *decoder) reset(schema *iceberg.Schema) {
	d.values = d.layout.ValueColumns(schema)
	d.key = nil
	if d.layout.TypedKey() {
		d.key = mapping.KeyType(schema)
	}
	d.version++
}

// writerSchema is the schema rows are built for now.
func (d *decoder) writerSchema() *iceberg.Schema {
	return d.layout.WriterSchema(d.key, d.values)
}

// decoded is one record's row values, or why it is a dead letter.
type decoded struct {
	key   any
	value map[string]any
	// fast, when set, is the codec whose fast path decoded the value onto
	// the decoder's tape, instead of into value.
	fast *codecEntry
	// dead, when set, is why the record is a dead letter; schemaID is the
	// registry schema the record named (0: none).
	dead     error
	schemaID int
	// change is what the record does to its key's row in an upsert table
	// (upsertChange); a decoder of change events (decodeChange) sets it
	// from the event: the row of an upsert is then in value.
	change mapping.Change
}

// decode decodes r. A record that cannot be a row is returned with dead
// set (a schema that cannot become columns makes every record written
// with it one). The error is for what stops the sink whatever the record:
// a registry that cannot be reached (transient: retried), rejected
// credentials. When r changes the columns, version moves on.
func (d *decoder) decode(ctx context.Context, r *kgo.Record) (decoded, error) {
	if d.layout.Envelope == mapping.EnvelopeDebezium {
		return d.decodeChange(ctx, r)
	}
	var out decoded
	key, keyType, keyChanged, id, dead, err := d.decodeKey(ctx, r.Key)
	if err == nil && dead == nil {
		dead = d.checkKeyFields(key, keyType, keyChanged)
	}
	if err != nil || dead != nil {
		out.dead, out.schemaID = dead, id
		return out, err
	}
	value, fast, values, valuesChanged, id, dead, err := d.decodeValue(ctx, r.Value)
	if err != nil || dead != nil {
		out.dead, out.schemaID = dead, id
		return out, err
	}
	if d.keyFields {
		if value, values, valuesChanged, dead = d.withKeyFields(key, keyType, keyChanged, value, values, valuesChanged); dead != nil {
			out.dead = dead
			return out, nil
		}
	}
	if key, keyType, keyChanged, value, values, valuesChanged, dead = d.keepKeyTypes(key, keyType, keyChanged, value, values, valuesChanged); dead != nil {
		out.dead = dead
		return out, nil
	}
	if out.change, dead = d.upsertChange(r, decoded{key: key, value: value}); dead != nil {
		out.dead = dead
		return out, nil
	}
	if dead = d.checkIDColumns(values, valuesChanged); dead != nil {
		out.dead = dead
		return out, nil
	}
	// Both decoded, and a row: only now may the columns change, so that a
	// dead letter never adds a column.
	d.adopt(keyType, keyChanged, values, valuesChanged)
	out.key, out.value, out.fast = key, value, fast
	return out, nil
}

// checkKeyFields refuses, in a table keyed by its key's fields
// (keyFields), a key without a value for one of its fields, a key with a
// field no key column can be of (a floating-point or nested one: as the
// first key it would name that column, and every commit would refuse
// it), and a key of type typ with fields the keys before it did not have: the table's key
// columns, or until a commit names them, the first key's fields
// (upsertKey). Taking them would change the key columns of the rows read
// before (the commit would find those rows' new key columns null); and a
// key that is a dead letter must not be the first key, which a restart
// would not read first.
func (d *decoder) checkKeyFields(key any, typ iceberg.Type, changed bool) error {
	if !d.keyFields {
		return nil
	}
	fields, _ := key.(map[string]any)
	st, _ := typ.(*iceberg.StructType)
	have, _ := d.key.(*iceberg.StructType)
	if changed && have != nil && st != nil {
		// Fields the keys before it did not have: named first, as the
		// table's key columns it lacks would be (a renamed primary key).
		names := fieldNames(have)
		for _, f := range st.FieldList {
			if !slices.Contains(names, f.Name) {
				return keyFieldsChanged(slices.Sorted(maps.Keys(fields)), names, d.layout.Envelope)
			}
		}
	}
	if st != nil {
		// A decoder leaves a null field out, or sets it nil.
		for _, f := range st.FieldList {
			if fields[f.Name] == nil {
				return fmt.Errorf("the key has no value for its field %s, a key column of the table", f.Name)
			}
			if err := mapping.CheckKeyColumn(f, mapping.KeyFromKeyFields); err != nil {
				return fmt.Errorf("the key's fields cannot be the table's key columns: %w", err)
			}
		}
	}
	return nil
}

// keyFieldsChanged is why a key with the fields got is a dead letter of a
// table keyed by the fields of its first key, table: the table keeps
// them. For Debezium change events the source table's primary key
// changed, most likely; the advice is docs/upsert.md's (Debezium).
func keyFieldsChanged(got, table []string, envelope mapping.Envelope) error {
	what := "field " + strings.Join(got, ",")
	if len(got) != 1 {
		what = "fields " + strings.Join(got, ",")
	}
	if envelope == mapping.EnvelopeDebezium {
		return fmt.Errorf("the key has the %s, and the table is keyed by %s: the source table's primary key may have changed; an upsert table keeps the key columns its first key named, so snapshot the source table again into a new topic and sink that into a new table (docs/upsert.md, Debezium)",
			what, strings.Join(table, ","))
	}
	return fmt.Errorf("the key has the %s, and the table is keyed by %s: an upsert table keeps the key columns its first key named; sink keys of other fields into a new table", what, strings.Join(table, ","))
}

// checkIDColumns refuses, in a table keyed by value columns
// (--id-columns), values whose columns would give a key column a type no
// key column can have (a floating-point or nested one): the commit that
// adds the column would refuse it, and stop the sink at that record on
// every run; the record is a dead letter instead.
func (d *decoder) checkIDColumns(values *iceberg.StructType, changed bool) error {
	if !changed || values == nil || d.upsert == nil || d.upsert.Source != mapping.KeyFromValue {
		return nil
	}
	for _, f := range values.FieldList {
		if slices.Contains(d.upsert.Columns, f.Name) {
			if err := mapping.CheckKeyColumn(f, mapping.KeyFromValue); err != nil {
				return fmt.Errorf("the value's columns cannot key the table: %w", err)
			}
		}
	}
	return nil
}

// upsertKey is key, an upsert table's, with the key columns a key of
// fields not named yet will have: the decoder's key's fields, the first
// key's (checkKeyFields), which the commit of its first rows names.
func (d *decoder) upsertKey(key mapping.UpsertKey) mapping.UpsertKey {
	if st, ok := d.key.(*iceberg.StructType); ok && key.Source == mapping.KeyFromKeyFields && len(key.Columns) == 0 {
		key.Columns = fieldNames(st)
	}
	return key
}

// untypedMember returns the first member, by name, of the JSON object key
// that the decoded key's type st lacks: one whose value has no type
// (null, {}, []); "" when there is none.
func untypedMember(key []byte, st *iceberg.StructType) string {
	var members map[string]json.RawMessage
	if json.Unmarshal(key, &members) != nil {
		return ""
	}
	for _, name := range slices.Sorted(maps.Keys(members)) {
		if st == nil || !slices.ContainsFunc(st.FieldList, func(f iceberg.NestedField) bool { return f.Name == name }) {
			return name
		}
	}
	return ""
}

func fieldNames(st *iceberg.StructType) []string {
	names := make([]string, len(st.FieldList))
	for i, f := range st.FieldList {
		names[i] = f.Name
	}
	return names
}

// keepKeyTypes keeps, in an upsert table, the types its key columns have
// (mapping.KeepKeyType): a record whose key, or key column in its value,
// comes with a wider type (a long where the column is an int) has its
// values converted to the column's type and the types restored, so that
// the columns do not change; a value that does not fit makes the record a
// dead letter. A key column the decoder does not have yet takes the type
// the record gives it.
func (d *decoder) keepKeyTypes(key any, keyType iceberg.Type, keyChanged bool, row map[string]any, values *iceberg.StructType, valuesChanged bool) (any, iceberg.Type, bool, map[string]any, *iceberg.StructType, bool, error) {
	if d.upsert == nil {
		return key, keyType, keyChanged, row, values, valuesChanged, nil
	}
	upsert := d.upsertKey(*d.upsert)
	if keyChanged && d.key != nil {
		switch have := d.key.(type) {
		case *iceberg.StructType:
			// A key of fields, the table keyed by them.
			if upsert.Source != mapping.KeyFromKeyFields {
				break
			}
			got, _ := keyType.(*iceberg.StructType)
			fields, _ := key.(map[string]any)
			if got != nil && fields != nil {
				var err error
				if keyType, fields, err = keepFieldTypes(have, got, fields, upsert.Columns, joinKeyPath); err != nil {
					return nil, nil, false, nil, nil, false, err
				}
				key = fields
			}
		default:
			// kafka_key a key column (keyed by the Kafka key, or by it
			// within its partition).
			if slices.Contains(upsert.Columns, mapping.ColKey) {
				v, err := mapping.KeepKeyType(mapping.ColKey, have, keyType, key)
				if err != nil {
					return nil, nil, false, nil, nil, false, err
				}
				key, keyType = v, have
			}
		}
		keyChanged = !keyType.Equals(d.key)
	}
	if valuesChanged && d.values != nil && row != nil {
		var err error
		var kept iceberg.Type
		if kept, row, err = keepFieldTypes(d.values, values, row, upsert.Columns, func(name string) string { return name }); err != nil {
			return nil, nil, false, nil, nil, false, err
		}
		values = kept.(*iceberg.StructType)
		valuesChanged = !values.Equals(d.values)
	}
	return key, keyType, keyChanged, row, values, valuesChanged, nil
}

// keepFieldTypes returns got with the types have gives the fields named
// cols, and vals (a record's values of got's fields, copied before it is
// changed) converted to them (mapping.KeepKeyType); path names a field in
// errors.
func keepFieldTypes(have, got *iceberg.StructType, vals map[string]any, cols []string, path func(string) string) (iceberg.Type, map[string]any, error) {
	var out *iceberg.StructType
	for i, g := range got.FieldList {
		j := slices.IndexFunc(have.FieldList, func(f iceberg.NestedField) bool { return f.Name == g.Name })
		if j < 0 || !slices.Contains(cols, g.Name) || have.FieldList[j].Type.Equals(g.Type) {
			continue
		}
		h := have.FieldList[j]
		v, err := mapping.KeepKeyType(path(g.Name), h.Type, g.Type, vals[g.Name])
		if err != nil {
			return nil, nil, err
		}
		if out == nil {
			out = &iceberg.StructType{FieldList: slices.Clone(got.FieldList)}
			vals = maps.Clone(vals)
		}
		out.FieldList[i].Type = h.Type
		vals[g.Name] = v
	}
	if out == nil {
		return got, vals, nil
	}
	return out, vals, nil
}

// adopt makes the key type and value columns a record needs the
// decoder's, where they changed, once nothing about the record can make
// it a dead letter any more.
func (d *decoder) adopt(key iceberg.Type, keyChanged bool, values *iceberg.StructType, valuesChanged bool) {
	if keyChanged {
		d.key = key
	}
	if valuesChanged {
		d.values = values
	}
	if keyChanged || valuesChanged {
		d.version++
	}
}

// truncateDead is why a Debezium truncate event of topic is a dead letter
// unless the sink deletes every row for it. A sink restarted with the flag
// applies it to later truncates only: this one is committed, as a dead
// letter, and only a rebuild of the table from the log applies it.
func (d *decoder) truncateDead(topic string) error {
	return fmt.Errorf("a Debezium truncate event (op t): floe does not empty the table for it unless the sink runs with --on-truncate delete-all, "+
		"which applies to the truncates read after it, not to this one, committed as a dead letter; to apply this one too, rebuild the table from the log: "+
		"floe replay --topic %s --table %s --envelope debezium --key %s --value %s --on-truncate delete-all --branch rebuild --publish --publish-different (docs/upsert.md, Replay and state tables)",
		topic, cmp.Or(d.table, "TABLE"), d.layout.Key, d.layout.Value)
}

// decodeChange decodes r, a Debezium change event (--envelope debezium):
// the key, the change, and for an upsert the row. A delete without a record
// key takes it from the key columns' fields of its before image. The
// tombstone after a delete deletes its key too (a tombstone without a key
// is a skip), a truncate is a dead letter unless truncateAll.
func (d *decoder) decodeChange(ctx context.Context, r *kgo.Record) (decoded, error) {
	var out decoded
	key, keyType, keyChanged, id, dead, err := d.decodeKey(ctx, r.Key)
	if err == nil && dead == nil {
		dead = d.checkKeyFields(key, keyType, keyChanged)
	}
	if err != nil || dead != nil {
		out.dead, out.schemaID = dead, id
		return out, err
	}
	var ch mapping.ChangeEvent
	var values *iceberg.StructType
	var valuesChanged bool
	switch {
	case r.Value == nil && key == nil:
		out.change = mapping.ChangeSkip
		return out, nil
	case r.Value == nil:
		// Log compaction keeps a delete's tombstone and removes the key's
		// earlier events, the delete among them, possibly before a sink
		// read it: the tombstone deletes the key as well (again, most
		// often, which is harmless).
		ch.Kind = mapping.ChangeDelete
	case d.layout.Value == mapping.ValueJSON:
		values, valuesChanged, ch, dead = mapping.DecodeDebeziumJSON(r.Value, d.values, d.placeholder)
	case d.layout.Value == mapping.ValueRegistry:
		var e *codecEntry
		var data []byte
		e, data, values, valuesChanged, id, dead, err = d.registryValue(ctx, r.Value)
		if err == nil && dead == nil {
			var event any
			if event, dead = e.codec.Decode(data); dead == nil {
				ch, dead = mapping.DebeziumChange(e.codec, event, d.placeholder)
			}
		}
	}
	if err != nil || dead != nil {
		out.dead, out.schemaID = dead, id
		return out, err
	}
	switch {
	case ch.Kind == mapping.ChangeTruncate && !d.truncateAll:
		out.dead, out.schemaID = d.truncateDead(r.Topic), id
		return out, nil
	case ch.Kind == mapping.ChangeDelete && key == nil && ch.BeforeErr != nil:
		out.dead, out.schemaID = ch.BeforeErr, id
		return out, nil
	case ch.Kind == mapping.ChangeDelete && key == nil:
		if key, dead = d.keyOfBefore(ch.Before); dead != nil {
			out.dead, out.schemaID = dead, id
			return out, nil
		}
	}
	if ch.Kind != mapping.ChangeUpsert {
		// A delete or truncate never changes the value columns.
		values, valuesChanged = d.values, false
	}
	row := ch.Row
	if d.keyFields {
		// The key's fields are columns, in a delete's row too.
		if row, values, valuesChanged, dead = d.withKeyFields(key, keyType, keyChanged, row, values, valuesChanged); dead != nil {
			out.dead, out.schemaID = dead, id
			return out, nil
		}
	}
	if key, keyType, keyChanged, row, values, valuesChanged, dead = d.keepKeyTypes(key, keyType, keyChanged, row, values, valuesChanged); dead != nil {
		out.dead, out.schemaID = dead, id
		return out, nil
	}
	change, dead := d.upsertChange(r, decoded{key: key, value: row, change: ch.Kind})
	if dead != nil {
		out.dead, out.schemaID = dead, id
		return out, nil
	}
	d.adopt(keyType, keyChanged, values, valuesChanged)
	out.key, out.value, out.change, out.schemaID = key, row, change, id
	return out, nil
}

// upsertChange is, in an upsert table, what the decoded record out of r
// does to its key's row, or why it is a dead letter (a record without a
// usable key: upsertChange), decided before the record's columns are
// adopted; out.change elsewhere.
func (d *decoder) upsertChange(r *kgo.Record, out decoded) (mapping.Change, error) {
	if d.upsert == nil {
		return out.change, nil
	}
	return upsertChange(d.upsertKey(*d.upsert), r, out, d.layout.Envelope)
}

// keyOfBefore returns the key of a delete without a record key: the fields
// of its before image that the key columns name.
func (d *decoder) keyOfBefore(before map[string]any) (any, error) {
	kt, ok := d.key.(*iceberg.StructType)
	switch {
	case before == nil:
		return nil, errors.New("a Debezium delete (op d) with neither a record key nor a before image: floe cannot tell which row it deletes")
	case !ok:
		return nil, errors.New("a Debezium delete (op d) without a record key, before any record showed the key's fields: floe cannot tell which of its before image's fields are the key")
	}
	key := make(map[string]any, len(kt.FieldList))
	for _, f := range kt.FieldList {
		v := before[f.Name]
		// A key column keeps its type (keepKeyTypes): the image of a
		// widened source column holds a wider value that may fit it.
		if kept, err := mapping.KeepKeyType(joinKeyPath(f.Name), f.Type, f.Type, v); err == nil {
			v = kept
		}
		if err := mapping.CheckValue(joinKeyPath(f.Name), f.Type, false, v); err != nil || v == nil {
			return nil, fmt.Errorf("a Debezium delete (op d) without a record key, and its before image has no key field %s of the key's type (%v)", f.Name, err)
		}
		key[f.Name] = v
	}
	return key, nil
}

func joinKeyPath(name string) string { return mapping.ColKey + "." + name }

// withKeyFields adds the fields of a decoded key (key, of type keyType
// when keyChanged, else the decoder's) to the value's columns and to the
// value, where they replace a same-named field: an upsert table keyed by
// them holds the key's values in columns of their names. A key field whose
// type no value column of its name can take, or whose value a non-null
// value field of its name disagrees with (the row would hold the key's and
// lose the value's unsaid), is why the record is a dead letter.
func (d *decoder) withKeyFields(key any, keyType iceberg.Type, keyChanged bool, value map[string]any, values *iceberg.StructType, changed bool) (map[string]any, *iceberg.StructType, bool, error) {
	if !keyChanged {
		keyType = d.key
	}
	kt, ok := keyType.(*iceberg.StructType)
	fields, isMap := key.(map[string]any)
	if !ok || !isMap {
		return value, values, changed, nil
	}
	for _, f := range kt.FieldList {
		name := f.Name
		if v := value[name]; v != nil && !sameValue(fields[name], v) {
			fix := "write the same " + name + " in the key and the value, or key the table by the value's fields instead (--id-columns)"
			if d.layout.Envelope == mapping.EnvelopeDebezium {
				// --envelope debezium keys by the record key only.
				fix = "check that the connector's record key is the source table's key (message.key.columns, a key transform) and its after image that key's row"
			}
			return nil, nil, false, fmt.Errorf("the key's field %s is %v and the value's field %s is %v: the table is keyed by the key's fields, and its column %s would hold the key's %v and lose the value's; %s",
				name, describeValue(fields[name]), name, describeValue(v), name, describeValue(fields[name]), fix)
		}
	}
	if d.layout.Value == mapping.ValueJSON && d.layout.Envelope != mapping.EnvelopeDebezium {
		values = keyFieldTypes(d.values, values, kt)
	}
	merged, more, err := mapping.MergeType("", values, kt)
	if err == nil && more {
		// The key's fields become columns as a value's do: one named
		// like a kafka_* column would clash with floe's own, and they
		// count toward the schema's size.
		err = mapping.CheckColumnNames("key", merged)
		if err == nil {
			err = mapping.CheckSchemaSize("key", merged.(*iceberg.StructType))
		}
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("key fields as columns: %w", err)
	}
	row := make(map[string]any, len(value)+len(fields))
	for k, v := range value {
		row[k] = v
	}
	for k, v := range fields {
		row[k] = v
	}
	return row, merged.(*iceberg.StructType), changed || more, nil
}

// keyFieldTypes returns values, the columns of a schemaless JSON value,
// with the key's types (kt) for the fields of the key's names that the
// table's columns (have) lack yet: the row holds the key's values there,
// and a type inferred from how the value wrote the same number (1.0 for
// the key's 1) would conflict with the key's.
func keyFieldTypes(have, values, kt *iceberg.StructType) *iceberg.StructType {
	out := values
	for _, k := range kt.FieldList {
		i := slices.IndexFunc(values.FieldList, func(f iceberg.NestedField) bool { return f.Name == k.Name })
		if i < 0 || values.FieldList[i].Type.Equals(k.Type) || (have != nil && slices.ContainsFunc(have.FieldList, func(f iceberg.NestedField) bool { return f.Name == k.Name })) {
			continue
		}
		if out == values {
			out = &iceberg.StructType{FieldList: slices.Clone(values.FieldList)}
		}
		out.FieldList[i].Type = k.Type
	}
	return out
}

// sameValue reports whether a and b, decoded values of a key field and a
// value field, are the same value: numbers by their value whatever their
// type (10, 10.0 and a decimal 10.00 agree), bytes by their bytes, others
// by equality.
func sameValue(a, b any) bool {
	// The usual key fields first, without allocating.
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		if y, ok := b.(int64); ok {
			return x == y
		}
	case int32:
		if y, ok := b.(int32); ok {
			return x == y
		}
	case time.Time:
		// The same instant in another location is the same value.
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	}
	if x, ok := ratOf(a); ok {
		y, ok := ratOf(b)
		return ok && x.Cmp(y) == 0
	}
	if x, ok := a.([]byte); ok {
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	return reflect.DeepEqual(a, b)
}

// ratOf is v as an exact number, when it is one (a NaN or an infinity is
// none).
func ratOf(v any) (*big.Rat, bool) {
	switch v := v.(type) {
	case int32:
		return new(big.Rat).SetInt64(int64(v)), true
	case int64:
		return new(big.Rat).SetInt64(v), true
	case float32:
		r := new(big.Rat).SetFloat64(float64(v))
		return r, r != nil
	case float64:
		r := new(big.Rat).SetFloat64(v)
		return r, r != nil
	case iceberg.Decimal:
		return new(big.Rat).SetFrac(v.Val.BigInt(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(v.Scale)), nil)), true
	}
	return nil, false
}

// describeValue is v as a dead-letter reason shows it: strings quoted.
func describeValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// appendRow appends out, the row decode made of r, to rb, a builder for
// the decoder's current writer schema.
func (d *decoder) appendRow(rb *mapping.RowBuilder, r *kgo.Record, out decoded) error {
	e := out.fast
	if e == nil {
		return rb.AppendDecoded(r, out.key, out.value)
	}
	if e.appenderFor != rb.Schema() {
		// The writer schema holds the codec's type (decode merged it), so
		// this fails only if the fast path lacks a case MergeType allows.
		va, err := rb.NewValueAppender(e.typ)
		if err != nil {
			return fmt.Errorf("rows of schema %d: %w", out.schemaID, err)
		}
		e.appender, e.appenderFor = va, rb.Schema()
	}
	return rb.AppendTape(r, out.key, e.appender, &d.tape)
}

// decodeKey decodes a key by the layout's key mode, returning the key type
// it needs when that differs from the decoder's.
func (d *decoder) decodeKey(ctx context.Context, key []byte) (v any, typ iceberg.Type, changed bool, schemaID int, dead, err error) {
	if key == nil {
		return nil, nil, false, 0, nil, nil
	}
	switch d.layout.Key {
	case mapping.KeyString:
		if !utf8.Valid(key) {
			return nil, nil, false, 0, errKeyNotUTF8, nil
		}
		return string(key), nil, false, 0, nil, nil
	case mapping.KeyJSON:
		if d.layout.Envelope == mapping.EnvelopeDebezium {
			if typ, v, ok, err := mapping.UnwrapConnectJSON(key); ok {
				return d.typedKey(typ, v, err)
			}
		}
		have, _ := d.key.(*iceberg.StructType)
		if have == nil {
			have = &iceberg.StructType{}
		}
		st, changed, obj, err := mapping.DecodeJSON(key, have)
		if errors.Is(err, mapping.ErrEmptyJSON) {
			// kcat without -Z, among others, sends an empty key where a
			// null one (a Debezium truncate's) was meant.
			err = fmt.Errorf("%w: a record without a key has a null key, not an empty one (kcat -Z sends an empty key as null)", err)
		}
		if err != nil {
			return nil, nil, false, 0, fmt.Errorf("key: %w", err), nil
		}
		if d.keyFields && d.key == nil {
			if name := untypedMember(key, st); name != "" {
				// The decoded key leaves it out: as the first key, it
				// would name the key columns without it. Once they are
				// named, a member that is none of them may be null.
				return nil, nil, false, 0, fmt.Errorf("the key has no value for its field %s, a key column of the table", name), nil
			}
		}
		if obj == nil {
			// {} or an object of nulls: it carries no type, and reads as
			// null whether a key column exists or not.
			return nil, d.key, false, 0, nil, nil
		}
		if d.key == nil {
			changed = true
		}
		return obj, st, changed, 0, nil, nil
	case mapping.KeyRegistry:
		e, data, id, dead, err := d.resolve(ctx, key)
		if err != nil || dead != nil {
			return nil, nil, false, id, wrapKey(dead), err
		}
		typ, changed := d.key, false
		if e.keyAt != d.version {
			e.keyConflict = nil
			if d.key == nil {
				typ, changed = e.typ, true
			} else if typ, changed, e.keyConflict = mapping.MergeType(mapping.ColKey, d.key, e.typ); e.keyConflict != nil {
				typ, changed = d.key, false
			}
			if !changed {
				e.keyAt = d.version
			}
		}
		if e.keyConflict != nil {
			return nil, nil, false, id, fmt.Errorf("key: %w", e.keyConflict), nil
		}
		v, err := e.codec.Decode(data)
		if err != nil {
			return nil, nil, false, id, fmt.Errorf("key: %w", err), nil
		}
		return v, typ, changed, id, nil, nil
	}
	return key, nil, false, 0, nil, nil
}

// typedKey returns a key that came with its type (a Debezium key in the
// JSON converter's schema wrapper), the key type merged into the
// decoder's; decodeErr is why the key could not be decoded.
func (d *decoder) typedKey(typ iceberg.Type, v any, decodeErr error) (any, iceberg.Type, bool, int, error, error) {
	if decodeErr != nil {
		return nil, nil, false, 0, fmt.Errorf("key: %w", decodeErr), nil
	}
	if v == nil {
		return nil, d.key, false, 0, nil, nil
	}
	if d.key == nil {
		return v, typ, true, 0, nil, nil
	}
	merged, changed, err := mapping.MergeType(mapping.ColKey, d.key, typ)
	if err != nil {
		return nil, nil, false, 0, fmt.Errorf("key: %w", err), nil
	}
	return v, merged, changed, 0, nil, nil
}

func wrapKey(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("key: %w", err)
}

// decodeValue decodes a value by the layout's value mode into the fields
// of a row, or, with a codec's fast path, onto the decoder's tape (fast is
// then the codec), returning the value columns it needs when they differ
// from the decoder's. A tombstone (nil) is a row whose value columns are
// all null.
func (d *decoder) decodeValue(ctx context.Context, value []byte) (v map[string]any, fast *codecEntry, values *iceberg.StructType, changed bool, schemaID int, dead, err error) {
	if value == nil || !d.layout.Typed() {
		return nil, nil, d.values, false, 0, nil, nil
	}
	switch d.layout.Value {
	case mapping.ValueJSON:
		st, changed, obj, err := mapping.DecodeJSON(value, d.values)
		if errors.Is(err, mapping.ErrEmptyJSON) {
			// kcat without -Z, among others, sends an empty value where
			// a tombstone was meant.
			err = fmt.Errorf("%w: a tombstone, which deletes its key in an upsert table, is a null value, not an empty one (kcat -Z sends an empty value as null)", err)
		}
		if err == nil && changed {
			err = mapping.CheckColumnNames("json", st)
		}
		if err != nil {
			return nil, nil, nil, false, 0, err, nil
		}
		return obj, nil, st, changed, 0, nil, nil
	case mapping.ValueRegistry:
		e, data, values, changed, id, dead, err := d.registryValue(ctx, value)
		if err != nil || dead != nil {
			return nil, nil, nil, false, id, dead, err
		}
		if tc, ok := e.codec.(mapping.TapeCodec); ok && !d.canonical {
			if err := tc.DecodeTape(data, &d.tape); err != nil {
				return nil, nil, nil, false, id, err, nil
			}
			return nil, e, values, changed, id, nil, nil
		}
		got, err := e.codec.Decode(data)
		if err != nil {
			return nil, nil, nil, false, id, err, nil
		}
		if e.wrapped {
			return map[string]any{mapping.ColValue: got}, nil, values, changed, id, nil, nil
		}
		row, _ := got.(map[string]any)
		return row, nil, values, changed, id, nil, nil
	}
	return nil, nil, d.values, false, 0, nil, nil
}

// registryValue resolves a value in the registry's wire format (resolve)
// and returns its codec, the encoded value and the value columns the
// codec's type needs, merged with the decoder's.
func (d *decoder) registryValue(ctx context.Context, value []byte) (e *codecEntry, data []byte, values *iceberg.StructType, changed bool, schemaID int, dead, err error) {
	e, data, id, dead, err := d.resolve(ctx, value)
	if err != nil || dead != nil {
		return nil, nil, nil, false, id, dead, err
	}
	valueType := e.valueType
	if d.layout.Envelope == mapping.EnvelopeDebezium {
		if e.changeColumns == nil && e.changeErr == nil {
			if e.changeColumns, e.changeErr = mapping.DebeziumColumns(e.format, e.typ); e.changeErr != nil {
				e.changeErr = fmt.Errorf("schema %d from the registry: %w", id, e.changeErr)
			}
		}
		if e.changeErr != nil {
			return nil, nil, nil, false, id, e.changeErr, nil
		}
		valueType = e.changeColumns
	}
	values = d.values
	if e.valueAt != d.version {
		if e.format == "json-schema" {
			valueType = mapping.DecimalsAsDoubles(d.values, valueType)
		}
		var merged iceberg.Type
		merged, changed, e.valueConflict = mapping.MergeType("", d.values, valueType)
		if e.valueConflict == nil && changed {
			e.valueConflict = mapping.CheckSchemaSize(e.format, merged.(*iceberg.StructType))
		}
		if e.valueConflict == nil {
			values = merged.(*iceberg.StructType)
		}
		if !changed {
			e.valueAt = d.version
		}
	}
	if e.valueConflict != nil {
		return nil, nil, nil, false, id, e.valueConflict, nil
	}
	return e, data, values, changed, id, nil, nil
}

// resolve splits a wire-format payload and returns the codec of its schema
// (made once per schema and message), the encoded value and the schema id.
// A payload not in the wire format, naming a schema the registry does not
// have or one that cannot become columns is dead; a registry that cannot
// answer is an error.
func (d *decoder) resolve(ctx context.Context, payload []byte) (*codecEntry, []byte, int, error, error) {
	rv, err := d.registry.Resolve(ctx, payload)
	if err != nil {
		// Inside the test for an error: errors.As's targets would cost an
		// allocation per record.
		if _, ok := errors.AsType[*WireError](err); ok {
			return nil, nil, 0, err, nil
		}
		if unknown, ok := errors.AsType[*UnknownSchemaError](err); ok {
			return nil, nil, unknown.ID, err, nil
		}
		return nil, nil, 0, nil, err
	}
	k := codecKey{id: rv.Schema.ID}
	if len(rv.Indexes) > 0 {
		var b []byte
		for _, i := range rv.Indexes {
			b = strconv.AppendInt(append(b, ','), int64(i), 10)
		}
		k.indexes = string(b)
	}
	e, ok := d.codecs[k]
	if !ok {
		e = &codecEntry{}
		codec, err := newCodec(rv)
		if err != nil {
			// A schema that cannot become columns concerns its records
			// only: they are dead letters, and records of other schemas
			// go on.
			e.err = fmt.Errorf("schema %d from the registry: %w", rv.Schema.ID, err)
		} else {
			e.codec, e.typ, e.valueType = codec, codec.Type(), codec.Type()
			e.format = map[SchemaType]string{SchemaAvro: "avro", SchemaProtobuf: "protobuf", SchemaJSON: "json-schema"}[rv.Schema.Type]
			if _, ok := e.typ.(*iceberg.StructType); !ok {
				e.wrapped = true
				e.valueType = &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: mapping.ColValue, Type: e.typ}}}
			}
		}
		d.codecs[k] = e
		if d.onSchema != nil {
			d.onSchema(rv.Schema.ID)
		}
	}
	if e.err != nil {
		return nil, nil, rv.Schema.ID, e.err, nil
	}
	return e, rv.Data, rv.Schema.ID, nil, nil
}

// newCodec makes the codec of a registry schema.
func newCodec(rv RegistryValue) (mapping.Codec, error) {
	s := rv.Schema
	refs := make(map[string]string, len(s.References))
	for _, r := range s.References {
		refs[r.Name] = r.Text
	}
	switch s.Type {
	case SchemaAvro:
		return mapping.NewAvroCodec(s.Text, refs)
	case SchemaJSON:
		return mapping.NewJSONSchemaCodec(s.Text, refs)
	case SchemaProtobuf:
		file := fmt.Sprintf("schema-%d.proto", s.ID)
		refs[file] = s.Text
		c, err := mapping.NewProtobufCodec(refs, file, rv.Indexes)
		if _, ok := errors.AsType[*mapping.MessageIndexError](err); ok {
			return nil, fmt.Errorf("%w; %s", err, missingIndexes)
		}
		return c, err
	}
	return nil, fmt.Errorf("schema type %q: floe decodes AVRO, PROTOBUF and JSON", s.Type)
}

// RowDecoder decodes records into the values of rows of a table's layout,
// exactly as a sink does. The content audit uses it to compare the log
// with a typed table. It is not safe for concurrent use.
type RowDecoder struct{ d *decoder }

// NewRowDecoder returns the decoder of a table of layout l (not raw) whose
// schema is schema. registry is needed for the registry modes; placeholder
// is the Debezium placeholder the table records (mapping.PlaceholderOf),
// nil for Debezium's default.
func NewRowDecoder(l mapping.Layout, registry *Registry, schema *iceberg.Schema, placeholder *mapping.Placeholder) (*RowDecoder, error) {
	if l.UsesRegistry() && registry == nil {
		return nil, &ConfigError{Setting: SettingRegistry, Want: fmt.Sprintf("a schema registry: the table decodes %s in the registry's wire format", registryParts(l))}
	}
	if placeholder == nil {
		var err error
		if placeholder, err = mapping.ParsePlaceholder(""); err != nil {
			return nil, err
		}
	}
	d := newDecoder(l, registry, placeholder)
	d.canonical = true   // the audit compares the values
	d.truncateAll = true // Change reports truncates; the ledger says whether the sink applied them
	d.reset(schema)
	return &RowDecoder{d: d}, nil
}

// Decode returns the key and value of r's row, or dead: why r cannot be a
// row (a sink dead-letters it). The error is for what stops a sink (the
// registry cannot be reached, a schema cannot become columns).
func (rd *RowDecoder) Decode(ctx context.Context, r *kgo.Record) (key any, value map[string]any, dead, err error) {
	out, err := rd.d.decode(ctx, r)
	return out.key, out.value, out.dead, err
}

// DecodeChange is Decode for an upsert table keyed by key: it also returns
// what r does to its key's row, as the sink decides it (upsertChange):
// upsert, delete, skip or truncate; dead is set, as the sink sets it, for
// a record without a usable key too.
func (rd *RowDecoder) DecodeChange(ctx context.Context, r *kgo.Record, key mapping.UpsertKey) (k any, value map[string]any, change mapping.Change, dead, err error) {
	// As the sink's decoder of such a table (NewSink).
	rd.d.keyFields = key.Source == mapping.KeyFromKeyFields
	rd.d.upsert = &key
	out, err := rd.d.decode(ctx, r)
	if err != nil || out.dead != nil {
		return out.key, out.value, 0, out.dead, err
	}
	return out.key, out.value, out.change, nil, nil
}

// DecodeKey returns the key of r as the sink of an upsert table keyed by
// its record key's fields (mapping.KeyFromKeyFields: --key json|registry,
// Debezium's) decodes it, and the row of that key alone (the key columns'
// values): r decoded as the tombstone of its key, whatever its value. A
// dead letter's key is so the key whose row it left as it was, where its
// value is why it is one. ok is false for a table keyed otherwise, whose
// key a record key alone does not tell, and for a key that decodes into
// no key (null, or malformed).
func (rd *RowDecoder) DecodeKey(ctx context.Context, r *kgo.Record, key mapping.UpsertKey) (k any, row map[string]any, ok bool, err error) {
	if key.Source != mapping.KeyFromKeyFields || r.Key == nil {
		return nil, nil, false, nil
	}
	tomb := *r
	tomb.Value = nil
	k, row, change, dead, err := rd.DecodeChange(ctx, &tomb, key)
	return k, row, err == nil && dead == nil && change == mapping.ChangeDelete, err
}
