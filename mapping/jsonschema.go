package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// jsonSchemaCodec decodes JSON payloads by a JSON Schema. The schema gives
// the types; the payload is not validated against it beyond them
// (required, minimum, pattern, additionalProperties: false and the like are
// the producer's serializer's business), and properties the schema does not
// declare have no column and are dropped.
type jsonSchemaCodec struct {
	typ  iceberg.Type
	conv jsConv
}

// jsConv converts a parsed JSON value (parseJSON) into a canonical value.
// Every converter maps JSON null to null.
type jsConv func(v any) (any, error)

// jsNode is what a (sub)schema maps to.
type jsNode struct {
	typ  iceberg.Type // nil for null: no column
	conv jsConv
	// kind is the JSON kind of the values: object, array, string, integer,
	// number, boolean; "union" for a union of several of them; "any" for a
	// schema that does not constrain it (its values are kept as JSON text);
	// "" for null.
	kind string
}

// jsDoc is one schema document: the schema itself or a reference.
type jsDoc struct {
	name string // the reference name; "" for the schema itself
	id   string // its $id, the base its relative $refs resolve against
	root any
}

// NewJSONSchemaCodec returns the codec of a JSON Schema. refs holds the
// schemas the registry lists as its references, by reference name, which
// is what a $ref names (possibly relative to the schema's $id), followed by
// an optional JSON pointer fragment.
func NewJSONSchemaCodec(schema string, refs map[string]string) (Codec, error) {
	main, err := parseSchemaDoc("", schema)
	if err != nil {
		return nil, err
	}
	// the schema itself is a target too, for a $ref by its own $id
	b := &jsBuilder{docs: []*jsDoc{main}, inProgress: map[string]bool{}}
	names := make([]string, 0, len(refs))
	for name := range refs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d, err := parseSchemaDoc(name, refs[name])
		if err != nil {
			return nil, err
		}
		b.docs = append(b.docs, d)
	}
	n, err := b.build("", main, main.root)
	if _, isStruct := n.typ.(*iceberg.StructType); err == nil && !isStruct {
		// one column named value: build again so that errors name it
		n, err = b.build(ColValue, main, main.root)
	}
	if err != nil {
		return nil, err
	}
	if n.typ == nil {
		return nil, &SchemaError{Format: "json-schema", Err: errors.New("the schema admits only null, which no Iceberg column can hold")}
	}
	t, err := finishType("json-schema", n.typ)
	if err != nil {
		return nil, err
	}
	return &jsonSchemaCodec{typ: t, conv: n.conv}, nil
}

func parseSchemaDoc(name, text string) (*jsDoc, error) {
	root, err := parseJSON([]byte(text))
	if err != nil {
		if name != "" {
			err = fmt.Errorf("reference %s: %w", name, err)
		}
		return nil, &SchemaError{Format: "json-schema", Err: err}
	}
	d := &jsDoc{name: name, root: root}
	if o, ok := root.(*jsonObject); ok {
		d.id, _ = o.values["$id"].(string)
	}
	return d, nil
}

func (c *jsonSchemaCodec) Type() iceberg.Type { return c.typ }

func (c *jsonSchemaCodec) Decode(payload []byte) (any, error) {
	v, err := parseJSON(payload)
	if err != nil {
		return nil, &DecodeError{Format: "json-schema", Err: err}
	}
	out, err := c.conv(v)
	if err != nil {
		return nil, &DecodeError{Format: "json-schema", Err: err}
	}
	return out, nil
}

// jsBuilder turns a schema into a jsNode.
type jsBuilder struct {
	docs []*jsDoc // the schema and its references
	// inProgress holds the $ref targets being built, to refuse recursive
	// schemas: Iceberg types are finite trees.
	inProgress map[string]bool
	budget     typeBudget
}

func (b *jsBuilder) fail(path string, format string, args ...any) (jsNode, error) {
	return jsNode{}, &SchemaError{Format: "json-schema", Path: path, Err: fmt.Errorf(format, args...)}
}

// build maps the schema s of document doc. Keywords are taken in this
// order: $ref (with properties beside it in a 2019-09 or later schema,
// merged with them as allOf where they can be);
// allOf, whose object branches
// merge into one struct; anyOf or oneOf, a union; then type and the
// keywords of the type.
func (b *jsBuilder) build(path string, doc *jsDoc, s any) (jsNode, error) {
	if err := b.budget.spend("json-schema", path); err != nil {
		return jsNode{}, err
	}
	o, ok := s.(*jsonObject)
	if !ok {
		switch s {
		case true:
			return anyNode(), nil
		case false: // admits no value
			return jsNode{conv: func(any) (any, error) { return nil, nil }}, nil
		}
		return b.fail(path, "a schema must be an object or a boolean, not %s", jsonKind(s))
	}
	if ref, ok := o.values["$ref"]; ok {
		r, ok := ref.(string)
		if !ok {
			return b.fail(path, "$ref is %s, not a string", jsonKind(ref))
		}
		if own := without(o, "$ref"); own.values["properties"] != nil && siblingsApply(doc) {
			// Properties beside $ref extend its target from JSON Schema
			// 2019-09 on, and their values were dropped without a dead
			// letter (from a review). They merge as allOf branches do;
			// where they cannot (an annotation of an inherited property,
			// a target that is no object), they are left out, as before.
			list := []any{&jsonObject{keys: []string{"$ref"}, values: map[string]any{"$ref": r}}}
			if all, ok := own.values["allOf"].([]any); ok {
				list = append(list, all...)
			}
			if n, err := b.allOf(path, doc, own, list); err == nil {
				return n, nil
			}
		}
		return b.ref(path, doc, r)
	}
	if all, ok := o.values["allOf"]; ok {
		return b.allOf(path, doc, o, all)
	}
	_, hasAny := o.values["anyOf"]
	_, hasOne := o.values["oneOf"]
	switch {
	case hasAny && hasOne:
		return b.fail(path, "both anyOf and oneOf: floe maps one union per schema")
	case hasAny || hasOne:
		key := "anyOf"
		if hasOne {
			key = "oneOf"
		}
		n, err := b.union(path, doc, key, o.values[key])
		if err != nil || n.kind != "any" || !shapes(o) {
			return n, err
		}
		// branches that only add constraints (required, ...) to the
		// schema's own type
	}
	return b.typed(path, doc, o)
}

// siblingsApply reports whether doc declares a draft of JSON Schema in which
// keywords beside $ref apply (2019-09 on). Earlier drafts, and a schema
// that declares none (draft-07 is the registry's default), ignore them, so
// a value may not fit them.
func siblingsApply(doc *jsDoc) bool {
	root, ok := doc.root.(*jsonObject)
	if !ok {
		return false
	}
	s, _ := root.values["$schema"].(string)
	return strings.Contains(s, "/draft/2019-09/") || strings.Contains(s, "/draft/2020-12/")
}

// shapes reports whether a schema object has keywords of its own that give
// its values a type.
func shapes(o *jsonObject) bool {
	for _, k := range []string{"type", "properties", "additionalProperties", "items", "enum", "const"} {
		if _, ok := o.values[k]; ok {
			return true
		}
	}
	return false
}

// without returns a copy of o without the keyword key.
func without(o *jsonObject, key string) *jsonObject {
	out := &jsonObject{values: map[string]any{}}
	for _, k := range o.keys {
		if k != key {
			out.keys = append(out.keys, k)
			out.values[k] = o.values[k]
		}
	}
	return out
}

// ref follows a $ref: a JSON pointer into the same document ("#/$defs/X"),
// or a reference's name (resolved against the document's $id when
// relative) with an optional pointer ("address.json#/$defs/Street").
func (b *jsBuilder) ref(path string, doc *jsDoc, ref string) (jsNode, error) {
	base, frag, _ := strings.Cut(ref, "#")
	target := doc
	if base != "" {
		if target = b.findDoc(doc, base); target == nil {
			return b.fail(path, "$ref %q: no reference of that name", ref)
		}
	}
	key := target.name + "#" + frag
	if b.inProgress[key] {
		return b.fail(path, "$ref %q refers to a schema that contains it; Iceberg has no recursive types", ref)
	}
	s, err := jsonPointer(target.root, frag)
	if err != nil {
		return b.fail(path, "$ref %q: %v", ref, err)
	}
	b.inProgress[key] = true
	defer delete(b.inProgress, key)
	return b.build(path, target, s)
}

// findDoc returns the reference a $ref's URI part names: by its name or
// $id, as written or resolved against the referring document's $id.
func (b *jsBuilder) findDoc(from *jsDoc, base string) *jsDoc {
	candidates := []string{base}
	if from.id != "" {
		if u, err := url.Parse(from.id); err == nil {
			if r, err := u.Parse(base); err == nil {
				candidates = append(candidates, r.String())
			}
		}
	}
	for _, c := range candidates {
		for _, d := range b.docs {
			if d.name == c || (d.id != "" && d.id == c) {
				return d
			}
		}
	}
	return nil
}

// jsonPointer walks an RFC 6901 pointer (as in a URI fragment) from root.
func jsonPointer(root any, frag string) (any, error) {
	if frag == "" {
		return root, nil
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, fmt.Errorf("fragment %q is not a JSON pointer (anchors are not supported)", frag)
	}
	v := root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case *jsonObject:
			next, ok := c.values[tok]
			if !ok {
				return nil, fmt.Errorf("no %q", tok)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("no item %q", tok)
			}
			v = c[i]
		default:
			return nil, fmt.Errorf("%q inside %s", tok, jsonKind(v))
		}
	}
	return v, nil
}

// allOf merges the branches (and the schema's own keywords) into one
// struct: branches that give no type (only constraints) are skipped, the
// others must all be objects with properties; a property in several
// branches must have one type.
func (b *jsBuilder) allOf(path string, doc *jsDoc, o *jsonObject, all any) (jsNode, error) {
	list, ok := all.([]any)
	if !ok {
		return b.fail(path, "allOf is %s, not an array", jsonKind(all))
	}
	if own := without(o, "allOf"); shapes(own) {
		list = append(slices.Clone(list), own)
	}
	var typed []jsNode
	for _, s := range list {
		n, err := b.build(path, doc, s)
		if err != nil {
			return jsNode{}, err
		}
		if n.kind != "any" {
			typed = append(typed, n)
		}
	}
	switch len(typed) {
	case 0:
		return anyNode(), nil
	case 1:
		return typed[0], nil
	}
	st := &iceberg.StructType{}
	var convs []jsConv
	for _, n := range typed {
		bst, ok := n.typ.(*iceberg.StructType)
		if !ok {
			return b.fail(path, "allOf combines %s with other schemas; floe merges only objects with properties", n.typ)
		}
		for _, f := range bst.FieldList {
			if g, ok := FindField(st, f.Name); ok {
				if !sameType(f.Type, g.Type) {
					return b.fail(joinPath(path, f.Name), "allOf branches give it types %s and %s", g.Type, f.Type)
				}
				continue
			}
			st.FieldList = append(st.FieldList, f)
		}
		convs = append(convs, n.conv)
	}
	return jsNode{typ: st, kind: "object", conv: func(v any) (any, error) {
		out := map[string]any{}
		for _, c := range convs {
			m, err := c(v)
			if err != nil || m == nil {
				return nil, err
			}
			for k, x := range m.(map[string]any) {
				out[k] = x
			}
		}
		return out, nil
	}}, nil
}

// union maps anyOf, oneOf or a type array. Null branches make the value
// null; one other branch gives its type (anyOf [T, null] is an optional
// T); a branch that constrains nothing makes the union untyped (JSON
// text). Several typed branches give a struct with one optional field per
// branch, named after the branch's JSON kind (boolean, integer, number,
// string, array, object), which is how a value finds its branch; two
// branches of one kind cannot be told apart without validating the value
// against each, which floe does not do, and are an error.
func (b *jsBuilder) union(path string, doc *jsDoc, key string, branches any) (jsNode, error) {
	list, ok := branches.([]any)
	if !ok {
		return b.fail(path, "%s is %s, not an array", key, jsonKind(branches))
	}
	build := make([]func(string) (jsNode, error), len(list))
	for i, s := range list {
		build[i] = func(path string) (jsNode, error) { return b.build(path, doc, s) }
	}
	return b.unionOf(path, key, build)
}

// unionOf maps a union whose branches build builds, at the path given
// (see union).
func (b *jsBuilder) unionOf(path, key string, build []func(string) (jsNode, error)) (jsNode, error) {
	var typed []jsNode
	kinds := map[string]int{}
	for i, br := range build {
		n, err := br(path)
		if err != nil {
			return jsNode{}, err
		}
		switch n.kind {
		case "":
			continue
		case "any":
			return anyNode(), nil
		case "union":
			return b.fail(path, "%s branch %d is a union itself; write its branches into this one", key, i)
		}
		if j, dup := kinds[n.kind]; dup {
			return b.fail(path, "%s branches %d and %d are both JSON %s; floe tells branches apart only by the JSON kind of the value", key, j, i, n.kind)
		}
		kinds[n.kind] = i
		typed = append(typed, n)
	}
	switch len(typed) {
	case 0:
		return jsNode{conv: func(any) (any, error) { return nil, nil }}, nil
	case 1:
		return typed[0], nil
	}
	// several: build each again, under the name of its field
	st := &iceberg.StructType{}
	convs := map[string]jsConv{}
	for _, kind := range jsonKinds {
		i, ok := kinds[kind]
		if !ok {
			continue
		}
		n, err := build[i](joinPath(path, kind))
		if err != nil {
			return jsNode{}, err
		}
		st.FieldList = append(st.FieldList, optional(kind, n.typ))
		convs[kind] = n.conv
	}
	return jsNode{typ: st, kind: "union", conv: func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		kind := jsonValueKind(v)
		if kind == "integer" && convs["integer"] == nil {
			kind = "number"
		}
		c := convs[kind]
		if c == nil && kind == "number" && convs["integer"] != nil {
			kind, c = "integer", convs["integer"] // 3.0 is an integer to JSON Schema
		}
		if c == nil {
			return nil, fieldErr(path, fmt.Errorf("%s matches no branch of the union", jsonKind(v)))
		}
		x, err := c(v)
		if err != nil {
			return nil, err
		}
		return map[string]any{kind: x}, nil
	}}, nil
}

// jsonKinds are the JSON kinds a union's branches are told apart by, in
// the order a union's struct lists them.
var jsonKinds = []string{"boolean", "integer", "number", "string", "array", "object"}

// jsonValueKind returns the JSON kind of a parsed value, integer for a
// number written without fraction or exponent.
func jsonValueKind(v any) string {
	switch v := v.(type) {
	case bool:
		return "boolean"
	case json.Number:
		if isInteger(v) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case *jsonObject:
		return "object"
	}
	return ""
}

// typed maps a schema by its own keywords: type (one, or an array of
// types, which is a union), or, without type, the keywords that imply one
// (properties, items, enum, const); a schema with none of them is untyped.
func (b *jsBuilder) typed(path string, doc *jsDoc, o *jsonObject) (jsNode, error) {
	switch t := o.values["type"].(type) {
	case string:
		return b.ofType(path, doc, o, t)
	case []any:
		var build []func(string) (jsNode, error)
		for _, e := range t {
			name, ok := e.(string)
			if !ok {
				return b.fail(path, "type array holds %s, not a type name", jsonKind(e))
			}
			build = append(build, func(path string) (jsNode, error) { return b.ofType(path, doc, o, name) })
		}
		return b.unionOf(path, "type", build)
	case nil:
		if _, ok := o.values["type"]; ok {
			return b.fail(path, "type is null, not a type name")
		}
	default:
		return b.fail(path, "type is %s, not a type name", jsonKind(t))
	}
	_, props := o.values["properties"]
	_, addl := o.values["additionalProperties"]
	if props || addl {
		return b.ofType(path, doc, o, "object")
	}
	if _, ok := o.values["items"]; ok {
		return b.ofType(path, doc, o, "array")
	}
	var values []any
	if e, ok := o.values["enum"].([]any); ok {
		values = e
	}
	if c, ok := o.values["const"]; ok {
		values = append(values, c)
	}
	kind := ""
	for _, v := range values {
		k := jsonValueKind(v)
		switch {
		case k == "": // null
		case kind == "" || kind == k:
			kind = k
		case (kind == "integer" && k == "number") || (kind == "number" && k == "integer"):
			kind = "number"
		default:
			return anyNode(), nil
		}
	}
	switch kind {
	case "":
		if len(values) > 0 { // only null
			return jsNode{conv: func(any) (any, error) { return nil, nil }}, nil
		}
		return anyNode(), nil
	case "array", "object":
		return anyNode(), nil
	}
	return b.ofType(path, doc, o, kind)
}

// ofType maps a schema whose type is the one named.
func (b *jsBuilder) ofType(path string, doc *jsDoc, o *jsonObject, typ string) (jsNode, error) {
	switch typ {
	case "null":
		return jsNode{conv: func(any) (any, error) { return nil, nil }}, nil
	case "boolean":
		return jsNode{typ: iceberg.PrimitiveTypes.Bool, kind: typ, conv: func(v any) (any, error) {
			if v == nil {
				return nil, nil
			}
			x, ok := v.(bool)
			if !ok {
				return nil, kindErr(path, typ, v)
			}
			return x, nil
		}}, nil
	case "integer":
		return jsNode{typ: iceberg.PrimitiveTypes.Int64, kind: typ, conv: func(v any) (any, error) {
			if v == nil {
				return nil, nil
			}
			n, ok := v.(json.Number)
			if !ok {
				return nil, kindErr(path, typ, v)
			}
			i, err := jsonInteger(n)
			if err != nil {
				return nil, fieldErr(path, err)
			}
			return i, nil
		}}, nil
	case "number":
		params, _ := o.values["connect.parameters"].(*jsonObject)
		if o.values["title"] == connectDecimalName && !wideDecimal(params) {
			// Confluent's JsonSchemaConverter writes a Kafka Connect
			// Decimal (Debezium's NUMERIC) as a number titled so, with
			// every digit: a double would round it. One of more digits
			// than Iceberg's decimals hold stays a double, as before.
			n, err := connectDecimal("jsonschema", path, params)
			if err != nil {
				return jsNode{}, err
			}
			return jsNode{typ: n.typ, kind: typ, conv: n.conv}, nil
		}
		return jsNode{typ: iceberg.PrimitiveTypes.Float64, kind: typ, conv: func(v any) (any, error) {
			if v == nil {
				return nil, nil
			}
			n, ok := v.(json.Number)
			if !ok {
				return nil, kindErr(path, typ, v)
			}
			f, err := strconv.ParseFloat(string(n), 64)
			if err != nil {
				return nil, fieldErr(path, fmt.Errorf("number %s does not fit a double", n))
			}
			return f, nil
		}}, nil
	case "string":
		return b.ofString(path, o), nil
	case "array":
		return b.ofArray(path, doc, o)
	case "object":
		return b.ofObject(path, doc, o)
	}
	return b.fail(path, "unknown type %q", typ)
}

// kindErr reports a JSON value of another kind than the schema's type.
func kindErr(path, want string, v any) error {
	return fieldErr(path, fmt.Errorf("%s where the schema says %s", jsonKind(v), want))
}

// jsonInteger converts a JSON number the schema says is an integer. JSON
// Schema counts 3.0 and 1e3 as integers too.
func jsonInteger(n json.Number) (int64, error) {
	if i, err := strconv.ParseInt(string(integral(n)), 10, 64); err == nil {
		return i, nil
	}
	return 0, fmt.Errorf("number %s is not an integer that fits a long", n)
}

// ofString maps a string by its format: date-time to timestamptz, date,
// time and uuid to their types, any other format to string.
func (b *jsBuilder) ofString(path string, o *jsonObject) jsNode {
	format, _ := o.values["format"].(string)
	parse := func(t iceberg.Type, p func(string) (any, error)) jsNode {
		return jsNode{typ: t, kind: "string", conv: func(v any) (any, error) {
			if v == nil {
				return nil, nil
			}
			s, ok := v.(string)
			if !ok {
				return nil, kindErr(path, "string", v)
			}
			x, err := p(s)
			if err != nil {
				return nil, fieldErr(path, err)
			}
			return x, nil
		}}
	}
	switch format {
	case "date-time":
		return parse(iceberg.PrimitiveTypes.TimestampTz, func(s string) (any, error) {
			t, err := ParseRFC3339(s)
			if err != nil {
				return nil, fmt.Errorf("date-time %q is not RFC 3339: %w", s, err)
			}
			return TimestampOf(t), nil
		})
	case "date":
		return parse(iceberg.PrimitiveTypes.Date, func(s string) (any, error) {
			t, err := time.Parse(time.DateOnly, s)
			if err != nil {
				return nil, fmt.Errorf("date %q is not YYYY-MM-DD: %w", s, err)
			}
			return iceberg.Date(t.Unix() / 86400), nil
		})
	case "time":
		return parse(iceberg.PrimitiveTypes.Time, parseTimeOfDay)
	case "uuid":
		return parse(iceberg.PrimitiveTypes.UUID, func(s string) (any, error) {
			id, err := uuid.Parse(s)
			if err != nil {
				return nil, fmt.Errorf("uuid %q: %w", s, err)
			}
			return id, nil
		})
	}
	return parse(iceberg.PrimitiveTypes.String, func(s string) (any, error) { return s, nil })
}

// parseTimeOfDay parses an RFC 3339 full-time ("15:04:05.123+02:00"), or a
// partial time without offset. A time with an offset is converted to UTC,
// as a date-time is: two producers in different zones then agree on the
// values. As ParseRFC3339 reads a date-time, it takes a lower-case z and a
// leap second (the second after it): both are RFC 3339, and were dead
// letters (from a review).
func parseTimeOfDay(s string) (any, error) {
	t, err := ParseRFC3339("1970-01-01T" + s)
	if err != nil {
		var err2 error
		if t, err2 = time.Parse(time.TimeOnly, s); err2 != nil {
			return nil, fmt.Errorf("time %q is not an RFC 3339 time: %w", s, err)
		}
	}
	t = t.UTC()
	h, m, sec := t.Clock()
	return iceberg.Time((int64(h)*3600+int64(m)*60+int64(sec))*1_000_000 + int64(t.Nanosecond()/1000)), nil
}

// ofArray maps an array to a list of its items' type. Without items, or
// with tuple items (an array of schemas, or prefixItems), the elements are
// untyped: JSON text.
func (b *jsBuilder) ofArray(path string, doc *jsDoc, o *jsonObject) (jsNode, error) {
	elem := anyNode()
	if items, ok := o.values["items"]; ok {
		if _, tuple := items.([]any); !tuple {
			if _, prefix := o.values["prefixItems"]; !prefix {
				var err error
				if elem, err = b.build(joinPath(path, "element"), doc, items); err != nil {
					return jsNode{}, err
				}
				if elem.typ == nil {
					return b.fail(path, "an array of null has no Iceberg type")
				}
			}
		}
	}
	return jsNode{typ: listOf(elem.typ), kind: "array", conv: convList(path, elem.conv)}, nil
}

// convList converts a parsed JSON array, path naming it, element by
// element with conv; null stays null.
func convList(path string, conv func(any) (any, error)) func(any) (any, error) {
	return func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		l, ok := v.([]any)
		if !ok {
			return nil, kindErr(path, "array", v)
		}
		out := make([]any, len(l))
		for i, e := range l {
			c, err := conv(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
}

// ofObject maps an object with properties to a struct of them, in the
// schema's order; one without properties but with an additionalProperties
// schema to a map from string; any other (free-form) object to JSON text.
func (b *jsBuilder) ofObject(path string, doc *jsDoc, o *jsonObject) (jsNode, error) {
	props, _ := o.values["properties"].(*jsonObject)
	if props == nil || len(props.keys) == 0 {
		addl, ok := o.values["additionalProperties"].(*jsonObject)
		if !ok {
			return anyNode(), nil
		}
		vn, err := b.build(joinPath(path, "value"), doc, addl)
		if err != nil {
			return jsNode{}, err
		}
		if vn.typ == nil {
			return b.fail(path, "a map of null has no Iceberg type")
		}
		return jsNode{typ: mapOf(iceberg.PrimitiveTypes.String, vn.typ), kind: "object", conv: func(v any) (any, error) {
			if v == nil {
				return nil, nil
			}
			obj, ok := v.(*jsonObject)
			if !ok {
				return nil, kindErr(path, "object", v)
			}
			out := make([]MapEntry, len(obj.keys))
			for i, k := range obj.keys {
				c, err := vn.conv(obj.values[k])
				if err != nil {
					return nil, err
				}
				out[i] = MapEntry{Key: k, Value: c}
			}
			return out, nil
		}}, nil
	}
	type field struct {
		name string
		conv jsConv
	}
	st := &iceberg.StructType{}
	var fields []field
	for _, name := range props.keys {
		if name == "" {
			return b.fail(path, "a property with an empty name cannot be a column")
		}
		n, err := b.build(joinPath(path, name), doc, props.values[name])
		if err != nil {
			return jsNode{}, err
		}
		if n.typ == nil {
			continue
		}
		st.FieldList = append(st.FieldList, optional(name, n.typ))
		fields = append(fields, field{name, n.conv})
	}
	if len(fields) == 0 && path != "" {
		return b.fail(path, "no property has a type Iceberg can hold (Parquet has no empty groups)")
	}
	return jsNode{typ: st, kind: "object", conv: func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		obj, ok := v.(*jsonObject)
		if !ok {
			return nil, kindErr(path, "object", v)
		}
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			c, err := f.conv(obj.values[f.name])
			if err != nil {
				return nil, err
			}
			if c != nil {
				out[f.name] = c
			}
		}
		return out, nil
	}}, nil
}

// anyNode maps a schema that does not constrain its values' type: they
// keep their JSON text, re-encoded compactly (members in document order),
// so that nothing is lost and SQL's JSON functions can read it.
func anyNode() jsNode {
	return jsNode{typ: iceberg.PrimitiveTypes.String, kind: "any", conv: func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		return string(appendJSON(nil, v)), nil
	}}
}

// appendJSON encodes a parsed JSON value.
func appendJSON(buf []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		return strconv.AppendBool(buf, v)
	case json.Number:
		return append(buf, v...)
	case string:
		b, _ := json.Marshal(v) // a string always encodes
		return append(buf, b...)
	case []any:
		buf = append(buf, '[')
		for i, e := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSON(buf, e)
		}
		return append(buf, ']')
	case *jsonObject:
		buf = append(buf, '{')
		for i, k := range v.keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSON(buf, k)
			buf = append(buf, ':')
			buf = appendJSON(buf, v.values[k])
		}
		return append(buf, '}')
	}
	panic(fmt.Sprintf("appendJSON: %T is not a parsed JSON value", v))
}

// ParseRFC3339 parses an RFC 3339 date-time, which Go's time.RFC3339
// layout does not take whole: "T" and "Z" may be lower case (RFC 3339
// §5.6), and a leap second (23:59:60) is the next second, as POSIX time
// counts it.
func ParseRFC3339(s string) (time.Time, error) {
	b := []byte(s)
	if len(b) > 10 && b[10] == 't' {
		b[10] = 'T'
	}
	if n := len(b); n > 0 && b[n-1] == 'z' {
		b[n-1] = 'Z'
	}
	leap := len(b) > 19 && b[10] == 'T' && b[13] == ':' && b[16] == ':' && b[17] == '6' && b[18] == '0'
	if leap {
		b[17], b[18] = '5', '9'
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}, err
	}
	if leap {
		t = t.Add(time.Second)
	}
	return t, nil
}

// wideDecimal reports whether Kafka Connect Decimal parameters name a
// precision above 38, which no Iceberg decimal holds.
func wideDecimal(params *jsonObject) bool {
	if params == nil {
		return false
	}
	p, _ := params.values["connect.decimal.precision"].(string)
	n, err := strconv.Atoi(p)
	return err == nil && n > 38
}
