package snapshot

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// KeyChangeError reports an upsert table opened with a key other than the
// one it was created with: its rows, identifier fields and equality
// deletes are all of its own key.
type KeyChangeError struct {
	Table     string
	Has, Want mapping.UpsertKey
	// Empty is set when the table holds no rows: a run with a misspelt
	// --id-columns made it, and its dead letters, and dropping it is the
	// way to key it as meant.
	Empty bool
}

func (e *KeyChangeError) Error() string {
	drop := ""
	if e.Empty {
		drop = "; " + mapping.DropEmptyTable(e.Table)
	}
	return fmt.Sprintf("table %s is keyed by %s, and this run keys by %s: an upsert table keeps the key it was created with; run with the table's key, or sink into a new table to key it otherwise%s",
		e.Table, describeKey(e.Has), describeKey(e.Want), drop)
}

// LegacyStateError reports a write into a state table of an earlier floe
// (mapping.ModeFold: floe.fold=latest, written copy-on-write). floe reads
// such a table (audit, where, as-of, files) but no longer writes into it:
// replay --fold latest writes an upsert table instead.
type LegacyStateError struct{ Table string }

func (e *LegacyStateError) Error() string {
	return fmt.Sprintf("table %s is a state table of an earlier floe (%s=%s, written copy-on-write): floe still reads it (audit, where, as-of, files) but no longer writes into it; replay the topic into a new table with floe replay --fold latest, which writes an upsert table",
		e.Table, mapping.PropFold, mapping.FoldLatest)
}

// Writable returns a *LegacyStateError for a legacy state table
// (mapping.ModeFold), which floe no longer writes, a
// *mapping.PartitionByError for an upsert table another engine
// partitioned by a column that is not a key column (checkKeySpec), and
// nil otherwise; for a Table open on a tag (OnTag), an error saying floe
// only reads tags.
func (t *Table) Writable() error {
	if err := t.writable("write"); err != nil {
		return err
	}
	if t.mode == mapping.ModeFold {
		return &LegacyStateError{Table: t.Name()}
	}
	if t.mode == mapping.ModeUpsert {
		return t.checkKeySpec(t.tbl)
	}
	return nil
}

// describeKey names a key as the flags that give it.
func describeKey(k mapping.UpsertKey) string {
	switch k.Source {
	case mapping.KeyFromPartitionKey:
		return "the Kafka key within its partition (replay --fold latest)"
	case mapping.KeyFromKafkaKey:
		return "the Kafka key (--key string or raw)"
	case mapping.KeyFromKeyFields:
		return "the key's fields " + strings.Join(k.Columns, ",") + " (--key json or registry)"
	}
	return "--id-columns " + strings.Join(k.Columns, ",")
}

// withMode sets the properties and identifier fields of a new table of
// opts.Mode on props and schema, returning the schema to create.
func withMode(props iceberg.Properties, schema *iceberg.Schema, opts OpenOptions) (*iceberg.Schema, error) {
	mode := opts.Mode
	switch {
	case mode == "" && props[mapping.PropFold] != "":
		mode = mapping.ModeFold
	case mode == "":
		mode = mapping.ModeAppend
	}
	props[mapping.PropMode] = string(mode)
	if mode == mapping.ModeFold {
		props[mapping.PropFold] = mapping.FoldLatest
	}
	switch mode {
	case mapping.ModeAppend, mapping.ModeFold:
		if opts.Key != nil {
			return nil, fmt.Errorf("a key (%s) is for an upsert table, and this table's mode is %s", describeKey(*opts.Key), mode)
		}
		return schema, nil
	case mapping.ModeUpsert:
	default:
		return nil, fmt.Errorf("create a table of mode %q: this floe creates append and upsert tables", mode)
	}
	key, err := opts.newKey()
	if err != nil {
		return nil, err
	}
	props[mapping.PropUpsertKey] = key.String()
	return withIdentifiers(schema, key)
}

// newKey is the key of a new upsert table: Key, or the record key of the
// layout.
func (o OpenOptions) newKey() (mapping.UpsertKey, error) {
	if o.Key != nil {
		return *o.Key, nil
	}
	l := o.Layout
	if err := l.Normalize(); err != nil {
		return mapping.UpsertKey{}, err
	}
	return mapping.KeyFor(l, nil)
}

// withIdentifiers returns schema with the key's columns required and its
// identifier fields. Key columns the schema does not have yet (typed
// columns come with the first record that has them) become identifier
// fields when a commit adds them (evolveSchema).
func withIdentifiers(schema *iceberg.Schema, key mapping.UpsertKey) (*iceberg.Schema, error) {
	fields := slices.Clone(schema.Fields())
	var ids []int
	for _, col := range key.Columns {
		i := slices.IndexFunc(fields, func(f iceberg.NestedField) bool { return f.Name == col })
		if i < 0 {
			continue
		}
		if err := mapping.CheckKeyColumn(fields[i], key.Source); err != nil {
			return nil, err
		}
		fields[i].Required = true
		ids = append(ids, fields[i].ID)
	}
	return iceberg.NewSchemaWithIdentifiers(schema.ID, ids, fields...), nil
}

// checkMode returns the mode and key tbl records, checked against those
// opts asks for; empty says tbl holds no rows (KeyChangeError.Empty).
func checkMode(name string, tbl *table.Table, opts OpenOptions, empty bool) (mapping.Mode, mapping.UpsertKey, error) {
	mode, err := mapping.ModeOf(tbl.Properties())
	if err != nil {
		return "", mapping.UpsertKey{}, fmt.Errorf("table %s: %w", name, err)
	}
	if opts.Mode != "" && opts.Mode != mode {
		return "", mapping.UpsertKey{}, &mapping.ModeError{Table: name, Has: mode, Want: opts.Mode}
	}
	if mode != mapping.ModeUpsert {
		return mode, mapping.UpsertKey{}, nil
	}
	key, err := mapping.UpsertKeyOf(tbl.Properties())
	if err != nil {
		return "", mapping.UpsertKey{}, fmt.Errorf("table %s: %w", name, err)
	}
	if opts.Key != nil && !opts.Key.Equal(key) {
		return "", mapping.UpsertKey{}, &KeyChangeError{Table: name, Has: key, Want: *opts.Key, Empty: empty}
	}
	return mode, key, nil
}

// keyColumns returns the key columns of an upsert table that a commit of
// writer schema want must have as identifier fields: its key's columns,
// or, for a key of a decoded struct's fields not named yet, the fields of
// want's kafka_key struct (name is then set: the commit names them). Nil
// for other modes.
func (t *Table) keyColumns(want *iceberg.Schema) (cols []string, name bool) {
	if t.mode != mapping.ModeUpsert {
		return nil, false
	}
	if len(t.key.Columns) > 0 || t.key.Source != mapping.KeyFromKeyFields || want == nil {
		return t.key.Columns, false
	}
	f, ok := want.FindFieldByName(mapping.ColKey)
	st, isStruct := f.Type.(*iceberg.StructType)
	if !ok || !isStruct {
		return nil, false
	}
	for _, kf := range st.FieldList {
		cols = append(cols, kf.Name)
	}
	return cols, true
}

// keyNamedOtherwise reports whether another writer named the key columns
// of a table keyed by its key's fields with other fields than those of
// want's kafka_key struct: the first key this writer read, which decided
// which of its records are rows (connector's decoder).
func (t *Table) keyNamedOtherwise(want *iceberg.Schema) bool {
	if t.mode != mapping.ModeUpsert || t.key.Source != mapping.KeyFromKeyFields || len(t.key.Columns) == 0 {
		return false
	}
	names, ok := keyFieldNames(want)
	return ok && !slices.Equal(names, slices.Sorted(slices.Values(t.key.Columns)))
}

// sameKeyFields reports whether a's and b's key columns are structs of
// the same fields.
func sameKeyFields(a, b *iceberg.Schema) bool {
	an, aok := keyFieldNames(a)
	bn, bok := keyFieldNames(b)
	return aok && bok && slices.Equal(an, bn)
}

// keyFieldNames is the sorted names of the fields of sc's key column, when
// it is a struct.
func keyFieldNames(sc *iceberg.Schema) (names []string, ok bool) {
	if sc == nil {
		return nil, false
	}
	f, ok := sc.FindFieldByName(mapping.ColKey)
	st, isStruct := f.Type.(*iceberg.StructType)
	if !ok || !isStruct {
		return nil, false
	}
	for _, kf := range st.FieldList {
		names = append(names, kf.Name)
	}
	slices.Sort(names)
	return names, true
}

// identify stages in upd (and txn) the identifier fields of an upsert
// table once its key columns key exist in base or want: the first commit
// of a table whose key columns come with its records. When name is set it
// also records the key's columns (mapping.PropUpsertKey), which must then
// determine the table's partition spec. It reports whether it staged
// anything; a key column of a type that cannot identify rows is an error.
func (t *Table) identify(base *table.Table, txn *table.Transaction, upd *table.UpdateSchema, want *iceberg.Schema, key []string, name bool) (bool, error) {
	if len(key) == 0 {
		return false, nil
	}
	have := base.Schema()
	var ids []int
	for _, c := range key {
		f, ok := have.FindFieldByName(c)
		if !ok && want != nil {
			f, ok = want.FindFieldByName(c)
			f.ID = 0
		}
		if !ok {
			return false, nil
		}
		if err := mapping.CheckKeyColumn(f, t.key.Source); err != nil {
			return false, fmt.Errorf("upsert table %s: %w", t.Name(), err)
		}
		ids = append(ids, f.ID)
	}
	if !slices.Contains(ids, 0) && len(have.IdentifierFieldIDs) == len(ids) && !slices.ContainsFunc(ids, func(id int) bool { return !slices.Contains(have.IdentifierFieldIDs, id) }) {
		return false, nil
	}
	paths := make([][]string, len(key))
	for i, c := range key {
		paths[i] = []string{c}
	}
	upd.SetIdentifierField(paths)
	if name {
		k := mapping.UpsertKey{Source: t.key.Source, Columns: key}
		if pb, err := t.partitionByOf(base); err != nil {
			return false, err
		} else if pb != nil {
			if err := k.CheckPartitionBy(*pb); err != nil {
				// The spec is the table's, recorded when it was created:
				// leaving --partition-by out keeps it.
				if pe, ok := errors.AsType[*mapping.PartitionByError](err); ok {
					pe.Table = t.Name()
					pe.Problem = fmt.Sprintf("the first key named the key columns %s, and an upsert table is partitioned by key columns only, so that a key's row and the deletes of it share a partition; the table records this spec (%s) from the run that created it: run with a --partition-by of key columns, which replaces it while the table holds no rows, or sink into a new table",
						strings.Join(key, ", "), mapping.PropPartitionBy)
				}
				return false, err
			}
		}
		if err := txn.SetProperties(iceberg.Properties{mapping.PropUpsertKey: k.String()}); err != nil {
			return false, fmt.Errorf("record the key of %s: %w", t.Name(), err)
		}
	}
	return true, nil
}
