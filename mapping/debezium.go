package mapping

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// Envelope says how a record's value carries the row: the zero value,
// EnvelopeNone, or EnvelopeDebezium.
type Envelope string

// The envelopes.
const (
	// EnvelopeNone: the value is the row; a tombstone deletes the key.
	EnvelopeNone Envelope = ""
	// EnvelopeDebezium: the value is a Debezium change event (DebeziumChange).
	EnvelopeDebezium Envelope = "debezium"
)

// String returns the envelope's --envelope setting.
func (e Envelope) String() string {
	if e == EnvelopeNone {
		return "none"
	}
	return string(e)
}

// ParseEnvelope checks an --envelope setting: none (or empty) or debezium.
func ParseEnvelope(s string) (Envelope, error) {
	switch s {
	case "", "none":
		return EnvelopeNone, nil
	case string(EnvelopeDebezium):
		return EnvelopeDebezium, nil
	}
	return "", &LayoutError{Setting: "envelope", Value: s, Want: "none or debezium"}
}

// The columns a Debezium table has besides the after image's fields: the
// event's op and its source's ts_ms, named as Debezium's
// ExtractNewRecordState transform names them (add.fields=op,source.ts_ms),
// so that queries written for tables it fed keep working.
const (
	ColOp         = "__op"
	ColSourceTsMs = "__source_ts_ms"
)

// EnvelopeError reports a value that is not a Debezium change event, or
// one floe cannot apply: the record goes to the dead-letter table with it
// as the reason.
type EnvelopeError struct {
	// Problem says what is wrong, and how to fix it where there is a fix.
	Problem string
}

func (e *EnvelopeError) Error() string {
	return "not a Debezium change event (--envelope debezium): " + e.Problem
}

// UnavailableValue is the placeholder Debezium's PostgreSQL connector
// writes for a TOASTed column (a large text, bytea, array, jsonb, hstore
// value) that an update left unchanged, where the table's REPLICA
// IDENTITY does not send it: its unavailable.value.placeholder default.
const UnavailableValue = "__debezium_unavailable_value"

// PropPlaceholder records in a Debezium table the connector's
// unavailable.value.placeholder when it is not UnavailableValue, as
// Config.UnavailablePlaceholder gave it, so that a sink given none and
// the content audit recognise it too.
const PropPlaceholder = "floe.debezium.unavailable-placeholder"

// Placeholder is the value a Debezium connector writes for an unchanged
// TOASTed column, in each form it gives it by column type. The zero value
// is not usable: ParsePlaceholder makes one.
type Placeholder struct {
	// setting is as unavailable.value.placeholder spells it.
	setting string
	// text is what text, text[] and hstore columns hold; bytes what bytea
	// columns hold.
	text  string
	bytes []byte
	// base64 and hex are the bytes as the JSON converters spell a bytea
	// column's; hstore is an hstore column's in its JSON mode; uuid a
	// uuid[] column's: Java's UUID.nameUUIDFromBytes of the bytes (an MD5,
	// version 3 UUID).
	base64, hex, hstore, uuid string
}

// ParsePlaceholder reads a placeholder as the connector's
// unavailable.value.placeholder takes it: text, or "hex:" and its bytes
// in hex. "" is Debezium's default, UnavailableValue.
func ParsePlaceholder(setting string) (*Placeholder, error) {
	if setting == "" {
		setting = UnavailableValue
	}
	p := &Placeholder{setting: setting, bytes: []byte(setting)}
	if h, ok := strings.CutPrefix(setting, "hex:"); ok {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("Debezium placeholder %q: want text, or hex: and its bytes in hex (as unavailable.value.placeholder takes it)", setting)
		}
		p.bytes = b
	}
	p.text = javaString(p.bytes)
	p.base64, p.hex = base64.StdEncoding.EncodeToString(p.bytes), hex.EncodeToString(p.bytes)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{p.text: p.text}) // a map of strings always encodes
	p.hstore = strings.TrimSuffix(b.String(), "\n")
	h := md5.Sum(p.bytes)
	h[6] = h[6]&0x0f | 0x30 // version 3
	h[8] = h[8]&0x3f | 0x80 // IETF variant
	p.uuid = uuid.UUID(h).String()
	return p, nil
}

// javaString is b as the connector makes text of it, Java's
// new String(b, UTF_8): each maximal subpart of an ill-formed sequence
// becomes one U+FFFD (Unicode's recommended practice, which Java
// follows), where strings.ToValidUTF8 makes one of a whole run (from a
// review).
func javaString(b []byte) string {
	var s strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			n = maximalSubpart(b)
			s.WriteRune(utf8.RuneError)
		} else {
			s.Write(b[:n])
		}
		b = b[n:]
	}
	return s.String()
}

// maximalSubpart is the length of the longest prefix of b, which does not
// start with a valid UTF-8 sequence, that starts one (at least 1).
func maximalSubpart(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	var need int
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for n <= need && n < len(b) && b[n] >= lo && b[n] <= hi {
		n, lo, hi = n+1, 0x80, 0xBF
	}
	return n
}

// PlaceholderOf returns the placeholder a table's properties record
// (PropPlaceholder), Debezium's default when they record none.
func PlaceholderOf(props map[string]string) (*Placeholder, error) {
	p, err := ParsePlaceholder(props[PropPlaceholder])
	if err != nil {
		return nil, fmt.Errorf("table property %s: %w", PropPlaceholder, err)
	}
	return p, nil
}

// Setting is the placeholder as unavailable.value.placeholder spells it.
func (p *Placeholder) Setting() string { return p.setting }

// UnavailableValueError reports an upsert event whose after image holds
// the placeholder in a column: the event does not carry that column's
// value, and a row made of it would hold the placeholder where the source
// holds the value. The record goes to the dead-letter table with it as the
// reason, and the key keeps its previous row.
type UnavailableValueError struct {
	// Column is the after image's field; Placeholder the placeholder's
	// setting.
	Column, Placeholder string
}

func (e *UnavailableValueError) Error() string {
	return fmt.Sprintf("after.%s holds %q, Debezium's placeholder for a TOASTed value the update left unchanged: the event does not carry the column's value, so it makes no row and the key keeps its previous one; give the source table REPLICA IDENTITY FULL (or use Debezium's reselect post-processor) so that updates carry every column, then an incremental snapshot (Debezium's execute-snapshot signal) rewrites the rows",
		e.Column, e.Placeholder)
}

// check returns an *UnavailableValueError for the column of an upsert's
// row (in the canonical representation; the first by name, where several)
// that holds p in one of the forms Debezium gives it by column type.
// spelled says whether a bytea column's placeholder came as text, as the
// JSON converter without a schema and the JSON Schema converter spell
// bytes (base64, or hex); a schema that types the column as bytes decodes
// it to bytes instead.
func (p *Placeholder) check(row map[string]any, spelled bool) error {
	var first string
	found := false
	for col, v := range row {
		if p.is(v, spelled) && (!found || col < first) {
			first, found = col, true
		}
	}
	if !found {
		return nil
	}
	return &UnavailableValueError{Column: first, Placeholder: p.setting}
}

// is reports whether v is p as Debezium writes it for a column of some
// type: the text (and hstore's JSON), its bytes (with spelled, also as
// their base64 or hex text), a list of the text, of its bytes or of the
// UUID made of its bytes, a list of its bytes as integers (integer
// arrays, and date arrays, whose days are integers), a map of the text to
// itself (hstore), and the fixed point Debezium writes for PostGIS
// geometry and geography columns whatever the placeholder.
func (p *Placeholder) is(v any, spelled bool) bool {
	switch v := v.(type) {
	case string:
		return v == p.text || v == p.hstore || spelled && (v == p.base64 || v == p.hex)
	case []byte:
		return bytes.Equal(v, p.bytes)
	case []any:
		if len(v) == 1 {
			if s, _ := v[0].(string); s == p.uuid || p.is(v[0], spelled) {
				return true
			}
		}
		return p.ints(v)
	case []MapEntry:
		return len(v) == 1 && v[0].Key == p.text && v[0].Value == p.text
	case map[string]any:
		return len(v) == 1 && v[p.text] == p.text || unavailableGeometry(v, spelled)
	}
	return false
}

// ints reports whether v is p's bytes as Debezium writes them into an
// integer (or date) array: each as Java's (int) b, a signed byte (from a
// review: a placeholder of bytes from 0x80 on was missed).
func (p *Placeholder) ints(v []any) bool {
	if len(v) != len(p.bytes) {
		return false
	}
	for i, e := range v {
		var n int64
		switch e := e.(type) {
		case int32:
			n = int64(e)
		case int64:
			n = e
		case iceberg.Date:
			n = int64(e)
		default:
			return false
		}
		if n != int64(int8(p.bytes[i])) {
			return false
		}
	}
	return true
}

// The EWKB of the points Debezium's PostgreSQL connector writes for an
// unchanged TOASTed PostGIS column, whatever unavailable.value.placeholder
// says: SRID=4326;POINT(-99999999 -99999999) for geometry,
// SRID=4326;POINT(179.999999 89.999999) for geography (its
// UnchangedToastedPlaceholder; from a review).
const (
	unavailableGeometryWKB  = "\x01\x01\x00\x00\x20\xe6\x10\x00\x00\x00\x00\x00\xfc\x83\xd7\x97\xc1\x00\x00\x00\xfc\x83\xd7\x97\xc1"
	unavailableGeographyWKB = "\x01\x01\x00\x00\x20\xe6\x10\x00\x00\x0c\x21\xe7\xfd\xff\x7f\x66\x40\x18\x42\xce\xfb\xff\x7f\x56\x40"
)

// unavailableGeometry reports whether v, a geometry or geography struct
// (srid, wkb), holds one of Debezium's placeholder points; with spelled,
// its wkb may be base64 text.
func unavailableGeometry(v map[string]any, spelled bool) bool {
	var wkb []byte
	switch w := v["wkb"].(type) {
	case []byte:
		wkb = w
	case string:
		if !spelled {
			return false
		}
		b, err := base64.StdEncoding.DecodeString(w)
		if err != nil {
			return false
		}
		wkb = b
	default:
		return false
	}
	return string(wkb) == unavailableGeometryWKB || string(wkb) == unavailableGeographyWKB
}

// ChangeEvent is one Debezium change event, decoded.
type ChangeEvent struct {
	Kind Change
	// Op is the event's op as written: c (create), r (read, a snapshot),
	// u (update), d (delete), t (truncate).
	Op string
	// Row is the row of an upsert: the after image's fields, with the op
	// in ColOp and the source's ts_ms in ColSourceTsMs.
	Row map[string]any
	// Before is the before image of a delete (nil when the event has
	// none): where the key of a delete without a record key comes from.
	// BeforeErr says why the image could not be typed as the columns type
	// it (Before is then nil): a delete with a record key needs no image.
	Before    map[string]any
	BeforeErr error
}

// DebeziumColumns returns the value columns of a table fed with change
// events of envelope, the type a registry codec decodes them into: the
// fields of the after image, then ColOp (string) and ColSourceTsMs
// (long). A type that is not a Debezium envelope (no op, no after struct)
// is a *SchemaError: every record written with it is a dead letter.
func DebeziumColumns(format string, envelope iceberg.Type) (*iceberg.StructType, error) {
	bad := func(problem string) error {
		return &SchemaError{Format: format, Err: fmt.Errorf("not a Debezium change event envelope: %s (--envelope debezium reads the values Debezium writes)", problem)}
	}
	st, ok := envelope.(*iceberg.StructType)
	if !ok {
		return nil, bad("not a record")
	}
	if f, ok := FindField(st, "op"); !ok || !f.Type.Equals(iceberg.PrimitiveTypes.String) {
		return nil, bad("no op field of type string")
	}
	f, ok := FindField(st, "after")
	if !ok {
		return nil, bad("no after field")
	}
	after, ok := f.Type.(*iceberg.StructType)
	if !ok {
		return nil, bad(fmt.Sprintf("the after field is %s, not a record", f.Type))
	}
	cols, err := debeziumRow(format, after)
	if err != nil {
		return nil, err
	}
	next := 1
	return renumber(cols, &next).(*iceberg.StructType), nil
}

// debeziumRow returns the row type of an after image's type: its fields,
// ColOp and ColSourceTsMs.
func debeziumRow(format string, after *iceberg.StructType) (*iceberg.StructType, error) {
	for _, f := range after.FieldList {
		if f.Name == ColOp || f.Name == ColSourceTsMs {
			return nil, &SchemaError{Format: format, Path: "after." + f.Name,
				Err: fmt.Errorf("named like the column floe adds for the event's %s; rename the column in the source table", debeziumColumnOf(f.Name))}
		}
	}
	cols := &iceberg.StructType{FieldList: slices.Clone(after.FieldList)}
	for i := range cols.FieldList {
		cols.FieldList[i].Required = false
	}
	cols.FieldList = append(cols.FieldList,
		iceberg.NestedField{Name: ColOp, Type: iceberg.PrimitiveTypes.String, Doc: "Debezium op of the event that wrote the row: c (insert), r (snapshot read), u (update)"},
		iceberg.NestedField{Name: ColSourceTsMs, Type: iceberg.PrimitiveTypes.Int64, Doc: "source.ts_ms of the event that wrote the row: when the change happened in the source database (ms since the epoch)"})
	if err := checkColumnNames(format, cols); err != nil {
		return nil, err
	}
	return cols, nil
}

// debeziumColumnOf names the event field a Debezium column holds.
func debeziumColumnOf(col string) string {
	if col == ColOp {
		return "op"
	}
	return "source.ts_ms"
}

// DebeziumChange reads a change event that codec c decoded into the
// canonical representation of its envelope type (a struct with before,
// after, source, op, ts_ms): the change it makes, and for an upsert the
// row, of the type DebeziumColumns gives. An event floe cannot apply (an
// op it does not know, an upsert without an after image, a value Debezium
// left out as p: UnavailableValueError) is an error.
func DebeziumChange(c Codec, event any, p *Placeholder) (ChangeEvent, error) {
	// The JSON Schema converter writes bytes as base64 text, which the
	// codec keeps as a string column (found by review).
	_, spelled := c.(*jsonSchemaCodec)
	return debeziumChange(event, p, spelled)
}

// debeziumChange is DebeziumChange; spelled says whether the event's bytes
// came as their text.
func debeziumChange(event any, p *Placeholder, spelled bool) (ChangeEvent, error) {
	env, ok := event.(map[string]any)
	if !ok {
		return ChangeEvent{}, &EnvelopeError{Problem: "the value is " + describe(event) + ", not a record with before, after, source and op"}
	}
	op, _ := env["op"].(string)
	after, afterOK := env["after"].(map[string]any)
	before, _ := env["before"].(map[string]any)
	ch, err := debeziumKind(op, env["op"] != nil, afterOK)
	if err != nil {
		return ch, err
	}
	switch ch.Kind {
	case ChangeUpsert:
		ch.Row = make(map[string]any, len(after)+2)
		for k, v := range after {
			ch.Row[k] = v
		}
		ch.Row[ColOp] = op
		if src, ok := env["source"].(map[string]any); ok {
			switch ts := src["ts_ms"].(type) {
			case int64:
				ch.Row[ColSourceTsMs] = ts
			case int32:
				ch.Row[ColSourceTsMs] = int64(ts)
			}
		}
		if err := p.check(ch.Row, spelled); err != nil {
			return ch, err
		}
	case ChangeDelete:
		ch.Before = before
	}
	return ch, nil
}

// debeziumKind returns the change of an event's op: hasOp says whether the
// event has one, hasAfter whether it has an after image.
func debeziumKind(op string, hasOp, hasAfter bool) (ChangeEvent, error) {
	ch := ChangeEvent{Op: op}
	switch op {
	case "c", "r", "u":
		if !hasAfter {
			return ch, &EnvelopeError{Problem: fmt.Sprintf("op %q without an after image (the row it writes)", op)}
		}
		ch.Kind = ChangeUpsert
	case "d":
		ch.Kind = ChangeDelete
	case "t":
		ch.Kind = ChangeTruncate
	case "":
		if hasOp {
			return ch, &EnvelopeError{Problem: "op is not a string"}
		}
		return ch, &EnvelopeError{Problem: "no op field; is the topic written by Debezium, and is the value converter (--value json or registry) the one it uses?"}
	default:
		return ch, &EnvelopeError{Problem: fmt.Sprintf("op %q is not one of c, r, u, d, t", op)}
	}
	return ch, nil
}

// DecodeDebeziumJSON decodes a change event written by Kafka Connect's
// JSON converter, with its schema ({"schema": …, "payload": …},
// schemas.enable=true) or without (the envelope alone), against the value
// columns the table holds (have). It returns the columns the table needs
// for the event's row (have evolved by MergeType), whether they differ
// from have, and the change.
//
// With the schema, columns take the types it gives (ConnectType); without
// it they are inferred as DecodeJSON infers them, from the after image
// with ColOp and ColSourceTsMs added. A delete or truncate never changes
// the columns. A payload that is not a change event is an *EnvelopeError
// or *DecodeError; a field whose type the table cannot take a
// *SchemaConflictError; one that holds p where a column's value should be
// an *UnavailableValueError.
func DecodeDebeziumJSON(data []byte, have *iceberg.StructType, p *Placeholder) (*iceberg.StructType, bool, ChangeEvent, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, false, ChangeEvent{}, &DecodeError{Format: "json", Err: err}
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return nil, false, ChangeEvent{}, &EnvelopeError{Problem: fmt.Sprintf("the value is %s, not a JSON object", jsonKind(v))}
	}
	if isConnectWrapper(obj) {
		return decodeConnectEvent(obj, have, p)
	}
	op, _ := obj.values["op"].(string)
	after, afterOK := obj.values["after"].(*jsonObject)
	ch, err := debeziumKind(op, obj.values["op"] != nil, afterOK)
	if err != nil {
		return nil, false, ch, err
	}
	switch ch.Kind {
	case ChangeUpsert:
		row := &jsonObject{keys: slices.Clone(after.keys), values: make(map[string]any, len(after.keys)+2)}
		for k, v := range after.values {
			if k == ColOp || k == ColSourceTsMs {
				return nil, false, ch, &SchemaError{Format: "json", Path: "after." + k,
					Err: fmt.Errorf("named like the column floe adds for the event's %s; rename the column in the source table", debeziumColumnOf(k))}
			}
			row.values[k] = v
		}
		row.keys = append(row.keys, ColOp, ColSourceTsMs)
		row.values[ColOp] = op
		if src, ok := obj.values["source"].(*jsonObject); ok {
			row.values[ColSourceTsMs] = src.values["ts_ms"]
		}
		if n, ok := row.values[ColSourceTsMs].(json.Number); ok {
			row.values[ColSourceTsMs] = integral(n)
		}
		st, changed, out, err := decodeJSONObject(row, have)
		if err == nil && changed {
			err = checkColumnNames("json", st)
		}
		if err == nil {
			err = p.check(out, true)
		}
		if err != nil {
			return nil, false, ch, err
		}
		ch.Row = out
		return st, changed, ch, nil
	case ChangeDelete:
		if before, ok := obj.values["before"].(*jsonObject); ok {
			// Typed as the columns type them; only the key's fields are
			// read, so the columns do not change for them.
			_, _, out, err := decodeJSONObject(before, have)
			if err != nil {
				ch.BeforeErr = fmt.Errorf("before: %w", err)
			} else {
				ch.Before = out
			}
		}
	}
	return have, false, ch, nil
}

// isConnectWrapper reports whether a JSON value is the JSON converter's
// {"schema": …, "payload": …} wrapper (schemas.enable=true).
func isConnectWrapper(obj *jsonObject) bool {
	if len(obj.keys) != 2 {
		return false
	}
	_, s := obj.values["schema"].(*jsonObject)
	_, p := obj.values["payload"]
	return s && p
}

// decodeConnectEvent decodes a change event in the JSON converter's
// wrapper: the schema types the payload.
func decodeConnectEvent(obj *jsonObject, have *iceberg.StructType, p *Placeholder) (*iceberg.StructType, bool, ChangeEvent, error) {
	node, err := connectNode("", obj.values["schema"].(*jsonObject))
	if err != nil {
		return nil, false, ChangeEvent{}, err
	}
	event, err := node.conv(obj.values["payload"])
	if err != nil {
		return nil, false, ChangeEvent{}, &DecodeError{Format: "json", Err: err}
	}
	ch, err := debeziumChange(event, p, false)
	if err != nil || ch.Kind != ChangeUpsert {
		return have, false, ch, err
	}
	cols, err := DebeziumColumns("json", node.typ)
	if err != nil {
		return nil, false, ch, err
	}
	merged, changed, err := MergeType("", have, cols)
	if err != nil {
		return nil, false, ch, err
	}
	return merged.(*iceberg.StructType), changed, ch, nil
}

// UnwrapConnectJSON returns the payload of a value in the JSON converter's
// {"schema": …, "payload": …} wrapper, typed by its schema (ConnectType),
// and the type; ok is false when data is not in the wrapper. Debezium's
// record keys are written so with schemas.enable=true.
func UnwrapConnectJSON(data []byte) (typ iceberg.Type, value any, ok bool, err error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, nil, false, nil
	}
	obj, isObj := v.(*jsonObject)
	if !isObj || !isConnectWrapper(obj) {
		return nil, nil, false, nil
	}
	node, err := connectNode("", obj.values["schema"].(*jsonObject))
	if err != nil {
		return nil, nil, true, err
	}
	value, err = node.conv(obj.values["payload"])
	if err != nil {
		return nil, nil, true, &DecodeError{Format: "json", Err: err}
	}
	if value == nil {
		return node.typ, nil, true, nil
	}
	next := 1
	return renumber(node.typ, &next), value, true, nil
}
