package snapshot

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// SchemaChangedError reports a flush whose columns no longer fit the
// table: another writer changed the table's schema in a way this flush's
// rows cannot follow (a column of the same name with another type). The
// flush's files were dropped and nothing was committed; the writer reads
// the table again and decodes the records anew, which sends those that
// cannot be held to the dead-letter table.
type SchemaChangedError struct {
	Table string
	Err   error
}

func (e *SchemaChangedError) Error() string {
	return fmt.Sprintf("table %s: another writer changed the schema under this flush: %v", e.Table, e.Err)
}

func (e *SchemaChangedError) Unwrap() error { return e.Err }

// evolveSchema stages, in upd, the schema changes that make the table's
// schema have take rows of schema want (the columns a flush was built
// with): the columns and nested fields want adds, optional but for the
// key columns of an upsert table (required: upd must allow it), and the
// promotions Iceberg allows (mapping.MergeType). Columns of have that want
// lacks stay. It reports whether anything changed; a type want holds that
// have cannot be promoted to is a *mapping.SchemaConflictError.
func evolveSchema(upd *table.UpdateSchema, have, want *iceberg.Schema, required []string) (bool, error) {
	changed := false
	for _, f := range want.Fields() {
		g, ok := have.FindFieldByName(f.Name)
		if !ok {
			upd.AddColumn([]string{f.Name}, f.Type, f.Doc, slices.Contains(required, f.Name), nil)
			changed = true
			continue
		}
		c, err := evolveType(upd, []string{f.Name}, g.Type, f.Type)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

// evolveType stages the changes that make a field of type have, at path,
// take values of type want.
func evolveType(upd *table.UpdateSchema, path []string, have, want iceberg.Type) (bool, error) {
	merged, changed, err := mapping.MergeType(strings.Join(path, "."), have, want)
	if err != nil || !changed {
		return false, err
	}
	switch h := have.(type) {
	case *iceberg.StructType:
		w := want.(*iceberg.StructType)
		for _, f := range w.FieldList {
			sub := append(path[:len(path):len(path)], f.Name)
			g, ok := mapping.FindField(h, f.Name)
			if !ok {
				upd.AddColumn(sub, f.Type, f.Doc, false, nil)
				continue
			}
			if _, err := evolveType(upd, sub, g.Type, f.Type); err != nil {
				return false, err
			}
		}
	case *iceberg.ListType:
		// Iceberg names a list's element "list.element", a map's value
		// "map.value".
		if _, err := evolveType(upd, append(path[:len(path):len(path)], "element"), h.Element, want.(*iceberg.ListType).Element); err != nil {
			return false, err
		}
	case *iceberg.MapType:
		if _, err := evolveType(upd, append(path[:len(path):len(path)], "value"), h.ValueType, want.(*iceberg.MapType).ValueType); err != nil {
			return false, err
		}
	default:
		upd.UpdateColumn(path, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Valid: true, Val: merged}})
	}
	return true, nil
}
