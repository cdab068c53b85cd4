package mapping

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
)

// SchemaChange is one difference between two schemas of a table, as a sink
// logs it when the table's schema changes: a field added (with the fields
// it holds) or a type promoted.
type SchemaChange struct {
	// Path is the field's dotted name, as iceberg-go gives it.
	Path string
	// From is nil for a field added; To is the field's type in the new
	// schema.
	From, To iceberg.Type
}

func (c SchemaChange) String() string {
	if c.From == nil {
		return fmt.Sprintf("added %s %s", c.Path, c.To)
	}
	return fmt.Sprintf("widened %s from %s to %s", c.Path, c.From, c.To)
}

// SchemaChanges returns what schema after adds to, or promotes in, schema
// before, by field ID, sorted by path: a field added holds its nested
// fields, which are not listed apart.
func SchemaChanges(before, after *iceberg.Schema) ([]SchemaChange, error) {
	had, err := iceberg.IndexByID(before)
	if err != nil {
		return nil, fmt.Errorf("index schema %d: %w", before.ID, err)
	}
	has, err := iceberg.IndexByID(after)
	if err != nil {
		return nil, fmt.Errorf("index schema %d: %w", after.ID, err)
	}
	names, err := iceberg.IndexNameByID(after)
	if err != nil {
		return nil, fmt.Errorf("name the fields of schema %d: %w", after.ID, err)
	}
	var out []SchemaChange
	for id, f := range has {
		old, ok := had[id]
		switch {
		case !ok:
			out = append(out, SchemaChange{Path: names[id], To: f.Type})
		case !old.Type.Equals(f.Type) && isPrimitive(old.Type) && isPrimitive(f.Type):
			out = append(out, SchemaChange{Path: names[id], From: old.Type, To: f.Type})
		}
	}
	slices.SortFunc(out, func(a, b SchemaChange) int { return cmp.Compare(a.Path, b.Path) })
	// A field added inside one added too is part of it.
	return slices.DeleteFunc(out, func(c SchemaChange) bool {
		return slices.ContainsFunc(out, func(p SchemaChange) bool {
			return p.From == nil && c.From == nil && strings.HasPrefix(c.Path, p.Path+".")
		})
	}), nil
}

func isPrimitive(t iceberg.Type) bool {
	_, ok := t.(iceberg.PrimitiveType)
	return ok
}

// CaseClashes returns the pairs of fields of s, at any depth, whose names
// differ only in case among the fields of one struct, as dotted paths
// (list elements and map values named as iceberg-go names them), in
// schema order. Iceberg names are case-sensitive and floe writes both, but
// Spark, Trino and DuckDB resolve names without case: their queries refuse
// the table, or cannot tell the two apart.
func CaseClashes(s *iceberg.Schema) [][2]string {
	var out [][2]string
	var walk func(prefix string, t iceberg.Type)
	walk = func(prefix string, t iceberg.Type) {
		switch t := t.(type) {
		case *iceberg.StructType:
			seen := map[string]string{}
			for _, f := range t.FieldList {
				path := joinPath(prefix, f.Name)
				if first, dup := seen[strings.ToLower(f.Name)]; dup {
					out = append(out, [2]string{first, path})
				} else {
					seen[strings.ToLower(f.Name)] = path
				}
				walk(path, f.Type)
			}
		case *iceberg.ListType:
			walk(joinPath(prefix, "element"), t.Element)
		case *iceberg.MapType:
			walk(joinPath(prefix, "value"), t.ValueType)
		}
	}
	st := s.AsStruct()
	walk("", &st)
	return out
}
