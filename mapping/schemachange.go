package mapping

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
)

// SchemaChange is one difference between two schemas of a table, as a sink
// logs it when the table's schema changes: a field added (with the fields
// it holds), dropped, renamed, made optional, or its type promoted. A
// field renamed and widened at once is two changes.
type SchemaChange struct {
	Kind ChangeKind
	// Path is the field's dotted name, as iceberg-go gives it: in the new
	// schema, but for a field dropped.
	Path string
	// Was is a renamed field's earlier dotted name.
	Was string
	// From and To are a widened field's types; To is an added one's.
	From, To iceberg.Type
}

// ChangeKind says what a SchemaChange did to its field.
type ChangeKind string

// The kinds of SchemaChange.
const (
	FieldAdded    ChangeKind = "added"
	FieldDropped  ChangeKind = "dropped"
	FieldRenamed  ChangeKind = "renamed"
	FieldWidened  ChangeKind = "widened"
	FieldOptional ChangeKind = "made optional"
)

// rank orders the changes of one field: its new name first.
func (k ChangeKind) rank() int {
	return slices.Index([]ChangeKind{FieldAdded, FieldRenamed, FieldWidened, FieldOptional, FieldDropped}, k)
}

func (c SchemaChange) String() string {
	switch c.Kind {
	case FieldAdded:
		return fmt.Sprintf("added %s %s", c.Path, c.To)
	case FieldRenamed:
		return fmt.Sprintf("renamed %s to %s", c.Was, c.Path)
	case FieldWidened:
		return fmt.Sprintf("widened %s from %s to %s", c.Path, c.From, c.To)
	}
	return fmt.Sprintf("%s %s", c.Kind, c.Path)
}

// SchemaChanges returns how schema after differs from schema before, by
// field ID, sorted by path: a field added or dropped holds its nested
// fields, which are not listed apart, and a field renamed is listed, not
// the fields it holds, whose paths change with it.
func SchemaChanges(before, after *iceberg.Schema) ([]SchemaChange, error) {
	had, err := iceberg.IndexByID(before)
	if err != nil {
		return nil, fmt.Errorf("index schema %d: %w", before.ID, err)
	}
	has, err := iceberg.IndexByID(after)
	if err != nil {
		return nil, fmt.Errorf("index schema %d: %w", after.ID, err)
	}
	wasNamed, err := iceberg.IndexNameByID(before)
	if err != nil {
		return nil, fmt.Errorf("name the fields of schema %d: %w", before.ID, err)
	}
	names, err := iceberg.IndexNameByID(after)
	if err != nil {
		return nil, fmt.Errorf("name the fields of schema %d: %w", after.ID, err)
	}
	var out []SchemaChange
	for id, f := range has {
		old, ok := had[id]
		if !ok {
			out = append(out, SchemaChange{Kind: FieldAdded, Path: names[id], To: f.Type})
			continue
		}
		if old.Name != f.Name {
			out = append(out, SchemaChange{Kind: FieldRenamed, Path: names[id], Was: wasNamed[id]})
		}
		if !old.Type.Equals(f.Type) && isPrimitive(old.Type) && isPrimitive(f.Type) {
			out = append(out, SchemaChange{Kind: FieldWidened, Path: names[id], From: old.Type, To: f.Type})
		}
		if old.Required && !f.Required {
			out = append(out, SchemaChange{Kind: FieldOptional, Path: names[id]})
		}
	}
	for id := range had {
		if _, ok := has[id]; !ok {
			out = append(out, SchemaChange{Kind: FieldDropped, Path: wasNamed[id]})
		}
	}
	slices.SortFunc(out, func(a, b SchemaChange) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Kind.rank(), b.Kind.rank()))
	})
	// A field added or dropped inside one added or dropped too is part of
	// it.
	return slices.DeleteFunc(out, func(c SchemaChange) bool {
		return slices.ContainsFunc(out, func(p SchemaChange) bool {
			return p.Kind == c.Kind && (c.Kind == FieldAdded || c.Kind == FieldDropped) && strings.HasPrefix(c.Path, p.Path+".")
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

// DebeziumEventColumns reports whether s, a typed table's schema, holds
// Debezium change events as they are, not the rows they carry: a string
// op, a struct after and a struct source at the top level (Avro,
// Protobuf, JSON without schemas) or within payload (Kafka Connect's JSON
// with schemas), and returns that struct's path ("" or "payload"). Such
// a table was sunk without --envelope debezium: every event is an
// appended row, deletes delete nothing, and the events' schemas
// dead-letter many of them.
func DebeziumEventColumns(s *iceberg.Schema) (string, bool) {
	isEvent := func(st *iceberg.StructType) bool {
		op, ok := FindField(st, "op")
		if !ok || !op.Type.Equals(iceberg.PrimitiveTypes.String) {
			return false
		}
		for _, name := range []string{"after", "source"} {
			if f, ok := FindField(st, name); !ok {
				return false
			} else if _, isStruct := f.Type.(*iceberg.StructType); !isStruct {
				return false
			}
		}
		return true
	}
	root := s.AsStruct()
	if isEvent(&root) {
		return "", true
	}
	if p, ok := FindField(&root, "payload"); ok {
		if st, ok := p.Type.(*iceberg.StructType); ok && isEvent(st) {
			return "payload", true
		}
	}
	return "", false
}

// DebeziumEventJSON reports whether value is a Debezium change event in
// JSON: an op of one letter (c, r, u, d, t, m), an object or null after
// and an object source at the top level, or within payload (Kafka
// Connect's JSON with schemas), and returns that path ("" or
// "payload"). Records that merely have such fields (an audit event's
// "op": "login") are not.
func DebeziumEventJSON(value []byte) (string, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(value, &top) != nil {
		return "", false
	}
	isEvent := func(m map[string]json.RawMessage) bool {
		var op string
		var after, source map[string]json.RawMessage
		return json.Unmarshal(m["op"], &op) == nil && len(op) == 1 && strings.Contains("crudtm", op) &&
			m["after"] != nil && json.Unmarshal(m["after"], &after) == nil &&
			json.Unmarshal(m["source"], &source) == nil && source != nil
	}
	if isEvent(top) {
		return "", true
	}
	var payload map[string]json.RawMessage
	if json.Unmarshal(top["payload"], &payload) == nil && isEvent(payload) {
		return "payload", true
	}
	return "", false
}
