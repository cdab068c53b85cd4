package snapshot

import (
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
}

func (e *KeyChangeError) Error() string {
	return fmt.Sprintf("table %s is keyed by %s, and this run keys by %s: an upsert table keeps the key it was created with; sink into a new table to key it otherwise",
		e.Table, describeKey(e.Has), describeKey(e.Want))
}

// LegacyStateError reports a write into a state table of an earlier floe
// (mapping.ModeFold: floe.fold=latest, written copy-on-write). floe reads
// such a table (audit, where, as-of, export) but no longer writes into it:
// replay --fold latest writes an upsert table instead.
type LegacyStateError struct{ Table string }

func (e *LegacyStateError) Error() string {
	return fmt.Sprintf("table %s is a state table of an earlier floe (%s=%s, written copy-on-write): floe still reads it (audit, where, as-of, export) but no longer writes into it; replay the topic into a new table with floe replay --fold latest, which writes an upsert table",
		e.Table, mapping.PropFold, mapping.FoldLatest)
}

// Writable returns a *LegacyStateError for a legacy state table
// (mapping.ModeFold), which floe no longer writes, and nil for a table of
// any other mode.
func (t *Table) Writable() error {
	if t.mode == mapping.ModeFold {
		return &LegacyStateError{Table: t.Name()}
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
	if opts.Key == nil {
		return nil, fmt.Errorf("an upsert table needs a key (--key string, json or registry, or --id-columns)")
	}
	props[mapping.PropUpsertKey] = opts.Key.String()
	return identify(schema, *opts.Key)
}

// identify returns schema with the key's columns required and its
// identifier fields. Key columns the schema does not have yet (typed
// columns come with the first record that has them) become identifier
// fields when a commit adds them (evolveSchema).
func identify(schema *iceberg.Schema, key mapping.UpsertKey) (*iceberg.Schema, error) {
	fields := slices.Clone(schema.Fields())
	var ids []int
	for _, col := range key.Columns {
		i := slices.IndexFunc(fields, func(f iceberg.NestedField) bool { return f.Name == col })
		if i < 0 {
			continue
		}
		if err := checkKeyColumn(fields[i]); err != nil {
			return nil, err
		}
		fields[i].Required = true
		ids = append(ids, fields[i].ID)
	}
	return iceberg.NewSchemaWithIdentifiers(schema.ID, ids, fields...), nil
}

// checkKeyColumn reports why f cannot be a key column of an upsert table:
// equality deletes match keys by value, which floating-point types and
// nested types do not have a usable equality for.
func checkKeyColumn(f iceberg.NestedField) error {
	switch f.Type.(type) {
	case iceberg.Float32Type, iceberg.Float64Type:
		return fmt.Errorf("key column %q is a %s: floating-point values cannot identify rows (equality deletes compare them exactly); key by another column", f.Name, f.Type)
	case iceberg.NestedType:
		return fmt.Errorf("key column %q is a %s: key columns must be of a primitive type; name its fields with --id-columns", f.Name, f.Type)
	}
	return nil
}

// checkMode returns the mode and key tbl records, checked against those
// opts asks for.
func checkMode(name string, tbl *table.Table, opts OpenOptions) (mapping.Mode, mapping.UpsertKey, error) {
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
		return "", mapping.UpsertKey{}, &KeyChangeError{Table: name, Has: key, Want: *opts.Key}
	}
	return mode, key, nil
}
