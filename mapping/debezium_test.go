package mapping_test

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// debeziumStory is a capture of a customers table with every kind of
// event: a snapshot, inserts, updates, deletes with their tombstones.
func debeziumStory() *floetest.Customers {
	c := floetest.NewCustomers("dbserver1.inventory.customers", 1)
	c.Story(12, 40, 7)
	return c
}

// foldChanges applies the changes of recs (decoded by decode) key by key,
// as an upsert table does, and checks every column against the decoder's
// columns as they stood after the record (CheckValue).
func foldChanges(t *testing.T, recs []*kgo.Record, decode func(value []byte, have *iceberg.StructType) (*iceberg.StructType, bool, mapping.ChangeEvent, error)) (map[int64]map[string]any, *iceberg.StructType, map[mapping.Change]int) {
	t.Helper()
	have := &iceberg.StructType{}
	rows := map[int64]map[string]any{}
	kinds := map[mapping.Change]int{}
	for i, r := range recs {
		if r.Value == nil {
			kinds[mapping.ChangeSkip]++
			continue
		}
		cols, changed, ch, err := decode(r.Value, have)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if changed {
			have = cols
		} else if cols != have {
			t.Fatalf("record %d: columns returned without a change", i)
		}
		kinds[ch.Kind]++
		switch ch.Kind {
		case mapping.ChangeUpsert:
			if err := mapping.CheckValue("", have, true, ch.Row); err != nil {
				t.Fatalf("record %d: row does not fit the columns: %v", i, err)
			}
			rows[idOf(t, ch.Row["id"])] = ch.Row
		case mapping.ChangeDelete:
			if ch.Before == nil {
				t.Fatalf("record %d: a delete without its before image", i)
			}
			delete(rows, idOf(t, ch.Before["id"]))
		case mapping.ChangeTruncate:
			clear(rows)
		}
	}
	return rows, have, kinds
}

// decodeDebeziumJSON is mapping.DecodeDebeziumJSON with Debezium's
// default placeholder.
func decodeDebeziumJSON(data []byte, have *iceberg.StructType) (*iceberg.StructType, bool, mapping.ChangeEvent, error) {
	p, err := mapping.ParsePlaceholder("")
	if err != nil {
		panic(err)
	}
	return mapping.DecodeDebeziumJSON(data, have, p)
}

func defaultPlaceholder(t *testing.T) *mapping.Placeholder {
	t.Helper()
	p, err := mapping.ParsePlaceholder("")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func idOf(t *testing.T, v any) int64 {
	switch v := v.(type) {
	case int32:
		return int64(v)
	case int64:
		return v
	}
	t.Fatalf("id %T %v", v, v)
	return 0
}

func TestDebeziumJSONWithSchema(t *testing.T) {
	c := debeziumStory()
	c.Truncate()
	c.Insert(floetest.Customer{ID: 500, FirstName: "Ann", LastName: "Lee", Email: "ann@example.com"})
	recs := c.Records(t, floetest.CDCConnectJSON, "")
	rows, cols, kinds := foldChanges(t, recs, decodeDebeziumJSON)
	if kinds[mapping.ChangeUpsert] != c.Upserts || kinds[mapping.ChangeDelete] != c.Deletes || kinds[mapping.ChangeSkip] != c.Tombstones || kinds[mapping.ChangeTruncate] != 1 {
		t.Fatalf("changes %v, generator wrote %d upserts, %d deletes, %d tombstones, 1 truncate", kinds, c.Upserts, c.Deletes, c.Tombstones)
	}
	// The schema's types, logical types included.
	want := map[string]iceberg.Type{
		"id": iceberg.PrimitiveTypes.Int32, "first_name": iceberg.PrimitiveTypes.String, "email": iceberg.PrimitiveTypes.String,
		"balance": iceberg.DecimalTypeOf(10, 2), "created_at": iceberg.PrimitiveTypes.Timestamp, "active": iceberg.PrimitiveTypes.Bool,
		mapping.ColOp: iceberg.PrimitiveTypes.String, mapping.ColSourceTsMs: iceberg.PrimitiveTypes.Int64,
	}
	for name, typ := range want {
		if i := indexOf(cols, name); i < 0 || !cols.FieldList[i].Type.Equals(typ) {
			t.Errorf("column %s: want %s in %s", name, typ, cols)
		}
	}
	if got, want := names(cols), "id first_name last_name email balance created_at active __op __source_ts_ms"; got != want {
		t.Errorf("columns %q, want %q", got, want)
	}
	state := c.State()
	if len(rows) != len(state) || len(rows) != 1 {
		t.Fatalf("%d rows after the truncate and one insert, want %d", len(rows), len(state))
	}
	// The same story without the truncate, compared value by value.
	c = debeziumStory()
	rows, _, _ = foldChanges(t, c.Records(t, floetest.CDCConnectJSON, ""), decodeDebeziumJSON)
	checkState(t, c, rows, func(cu floetest.Customer) map[string]any {
		row := map[string]any{"id": cu.ID, "first_name": cu.FirstName, "last_name": cu.LastName, "email": cu.Email,
			"created_at": iceberg.Timestamp(cu.CreatedAt.UnixMicro()), "balance": nil, "active": nil}
		if cu.Balance != nil {
			row["balance"] = iceberg.Decimal{Val: decimal128.FromI64(*cu.Balance), Scale: 2}
		}
		if cu.Active != nil {
			row["active"] = *cu.Active
		}
		return row
	})
}

func TestDebeziumJSONWithoutSchema(t *testing.T) {
	c := debeziumStory()
	rows, cols, kinds := foldChanges(t, c.Records(t, floetest.CDCPlainJSON, ""), decodeDebeziumJSON)
	if kinds[mapping.ChangeUpsert] != c.Upserts || kinds[mapping.ChangeDelete] != c.Deletes {
		t.Fatalf("changes %v, generator wrote %d upserts, %d deletes", kinds, c.Upserts, c.Deletes)
	}
	// Without a schema, types are inferred: integers long, the decimal's
	// base64 a string, the timestamp's microseconds a long.
	for name, typ := range map[string]iceberg.Type{"id": iceberg.PrimitiveTypes.Int64, "balance": iceberg.PrimitiveTypes.String,
		"created_at": iceberg.PrimitiveTypes.Int64, mapping.ColSourceTsMs: iceberg.PrimitiveTypes.Int64} {
		if i := indexOf(cols, name); i < 0 || !cols.FieldList[i].Type.Equals(typ) {
			t.Errorf("column %s: want %s in %s", name, typ, cols)
		}
	}
	for id, row := range rows {
		// The base64 of the unscaled value's two's complement, as written.
		if b64, ok := row["balance"].(string); ok {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatalf("customer %d balance %q: %v", id, b64, err)
			}
			n := new(big.Int).SetBytes(b)
			if b[0]&0x80 != 0 {
				n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
			}
			row["balance"] = n.Int64()
		}
	}
	checkState(t, c, rows, func(cu floetest.Customer) map[string]any {
		row := map[string]any{"id": int64(cu.ID), "first_name": cu.FirstName, "last_name": cu.LastName, "email": cu.Email,
			"created_at": cu.CreatedAt.UnixMicro(), "balance": nil, "active": nil}
		if cu.Balance != nil {
			row["balance"] = *cu.Balance // compared below, after base64
		}
		if cu.Active != nil {
			row["active"] = *cu.Active
		}
		return row
	})
}

func TestDebeziumAvro(t *testing.T) {
	c := debeziumStory()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	recs := c.Records(t, floetest.CDCAvro, reg.URL())
	codec, err := mapping.NewAvroCodec(floetest.CustomersEnvelopeAvro, nil)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := mapping.DebeziumColumns("avro", codec.Type())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(cols), "id first_name last_name email balance created_at active __op __source_ts_ms"; got != want {
		t.Errorf("columns %q, want %q", got, want)
	}
	rows, _, _ := foldChanges(t, recs, func(value []byte, have *iceberg.StructType) (*iceberg.StructType, bool, mapping.ChangeEvent, error) {
		var h sr.ConfluentHeader
		_, payload, err := h.DecodeID(value)
		if err != nil {
			return nil, false, mapping.ChangeEvent{}, err
		}
		v, err := codec.Decode(payload)
		if err != nil {
			return nil, false, mapping.ChangeEvent{}, err
		}
		ch, err := mapping.DebeziumChange(codec, v, defaultPlaceholder(t))
		merged, changed, _ := mapping.MergeType("", have, cols)
		return merged.(*iceberg.StructType), changed, ch, err
	})
	checkState(t, c, rows, func(cu floetest.Customer) map[string]any {
		// io.debezium.time.MicroTimestamp is a connect.name, not an Avro
		// logical type: it stays a long.
		row := map[string]any{"id": cu.ID, "first_name": cu.FirstName, "last_name": cu.LastName, "email": cu.Email,
			"created_at": cu.CreatedAt.UnixMicro(), "balance": nil, "active": nil}
		if cu.Balance != nil {
			row["balance"] = iceberg.Decimal{Val: decimal128.FromI64(*cu.Balance), Scale: 2}
		}
		if cu.Active != nil {
			row["active"] = *cu.Active
		}
		return row
	})
}

// checkState compares the folded rows with the generator's table, the
// expected row of each customer given by want (plus __op and
// __source_ts_ms, which are only checked for presence).
func checkState(t *testing.T, c *floetest.Customers, rows map[int64]map[string]any, want func(floetest.Customer) map[string]any) {
	t.Helper()
	state := c.State()
	if len(rows) != len(state) {
		t.Fatalf("%d rows, the table has %d", len(rows), len(state))
	}
	for id, cu := range state {
		got, ok := rows[int64(id)]
		if !ok {
			t.Fatalf("customer %d missing", id)
		}
		if op, _ := got[mapping.ColOp].(string); op != "r" && op != "c" && op != "u" {
			t.Errorf("customer %d: __op %v", id, got[mapping.ColOp])
		}
		if ts, _ := got[mapping.ColSourceTsMs].(int64); ts < 1_700_000_000_000 {
			t.Errorf("customer %d: __source_ts_ms %v", id, got[mapping.ColSourceTsMs])
		}
		for k, w := range want(cu) {
			g := got[k]
			if d, ok := w.(iceberg.Decimal); ok {
				gd, ok := g.(iceberg.Decimal)
				if !ok || gd.Val != d.Val || gd.Scale != d.Scale {
					t.Errorf("customer %d %s: %v, want %v", id, k, g, w)
				}
				continue
			}
			if g != w {
				t.Errorf("customer %d %s: %T %v, want %T %v", id, k, g, g, w, w)
			}
		}
	}
}

func TestDebeziumNotAnEnvelope(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"no op", `{"before":null,"after":{"id":1}}`, "no op field"},
		{"unknown op", `{"before":null,"after":{"id":1},"op":"m"}`, `op "m" is not one of c, r, u, d, t`},
		{"op not a string", `{"after":{"id":1},"op":1}`, "op is not a string"},
		{"create without after", `{"before":null,"after":null,"op":"c"}`, `op "c" without an after image`},
		{"update without after", `{"before":{"id":1},"op":"u"}`, `op "u" without an after image`},
		{"not an object", `[1,2]`, "not a JSON object"},
		{"wrapped without op", `{"schema":{"type":"struct","fields":[{"type":"int32","field":"id"}]},"payload":{"id":1}}`, "no op field"},
		{"after column named __op", `{"after":{"id":1,"__op":"x"},"op":"c"}`, "named like the column floe adds for the event's op"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := decodeDebeziumJSON([]byte(c.value), &iceberg.StructType{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if strings.Contains(c.name, "op") && !strings.Contains(c.name, "__op") {
				if _, ok := errors.AsType[*mapping.EnvelopeError](err); !ok {
					t.Errorf("%T, want *mapping.EnvelopeError", err)
				}
			}
		})
	}
	// A registry schema that is not an envelope: every record of it is a
	// dead letter.
	codec, err := mapping.NewAvroCodec(`{"type":"record","name":"Customer","fields":[{"name":"id","type":"int"}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mapping.DebeziumColumns("avro", codec.Type()); err == nil || !strings.Contains(err.Error(), "not a Debezium change event envelope: no op field") {
		t.Fatalf("DebeziumColumns of a plain record: %v", err)
	}
}

func TestConnectLogicalTypes(t *testing.T) {
	schema := `{"type":"struct","fields":[
	{"type":"int32","name":"org.apache.kafka.connect.data.Date","field":"d"},
	{"type":"int32","name":"io.debezium.time.Time","field":"t"},
	{"type":"int64","name":"io.debezium.time.NanoTimestamp","field":"nts"},
	{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp","field":"cts"},
	{"type":"string","name":"io.debezium.time.ZonedTimestamp","field":"zts"},
	{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"3"},"field":"dec"},
	{"type":"string","name":"io.debezium.data.Uuid","field":"u"},
	{"type":"array","items":{"type":"int16"},"field":"l"},
	{"type":"map","keys":{"type":"string"},"values":{"type":"float64"},"field":"m"}]}`
	value := `{"schema":` + schema + `,"payload":{"d":20000,"t":3723004,"nts":1700000000123456789,"cts":1700000000123,
	"zts":"2026-11-02T10:00:00.5+01:00","dec":"AeI=","u":"5f0d…","l":[1,2],"m":{"b":2.5,"a":1}}}`
	typ, v, ok, err := mapping.UnwrapConnectJSON([]byte(value))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	st := typ.(*iceberg.StructType)
	got := map[string]string{}
	for _, f := range st.FieldList {
		got[f.Name] = f.Type.String()
	}
	wantTypes := map[string]string{"d": "date", "t": "time", "nts": "timestamp", "cts": "timestamptz", "zts": "timestamptz",
		"dec": "decimal(38, 3)", "u": "string", "l": "list<int>", "m": "map<string, double>"}
	for k, w := range wantTypes {
		if got[k] != w {
			t.Errorf("%s: type %s, want %s", k, got[k], w)
		}
	}
	m := v.(map[string]any)
	if m["d"] != iceberg.Date(20000) || m["t"] != iceberg.Time(3723004000) || m["nts"] != iceberg.Timestamp(1700000000123456) ||
		m["cts"] != iceberg.Timestamp(1700000000123000) || m["zts"] != iceberg.Timestamp(1793610000500000) {
		t.Errorf("temporal values %v", m)
	}
	if d := m["dec"].(iceberg.Decimal); d.Val != decimal128.FromI64(482) || d.Scale != 3 {
		t.Errorf("decimal %v", d)
	}
	if e := m["m"].([]mapping.MapEntry); len(e) != 2 || e[0].Key != "a" || e[1].Value != 2.5 {
		t.Errorf("map %v", e)
	}
	if err := mapping.CheckValue("", st, false, m); err != nil {
		t.Error(err)
	}
	if _, _, ok, _ := mapping.UnwrapConnectJSON([]byte(`{"id":1}`)); ok {
		t.Error("an object without the wrapper read as wrapped")
	}
}

func indexOf(st *iceberg.StructType, name string) int {
	for i, f := range st.FieldList {
		if f.Name == name {
			return i
		}
	}
	return -1
}

func names(st *iceberg.StructType) string {
	var out []string
	for _, f := range st.FieldList {
		out = append(out, f.Name)
	}
	return strings.Join(out, " ")
}

// TestDebeziumUnavailableValue: an update of PostgreSQL's under its default
// REPLICA IDENTITY does not carry a TOASTed column it left unchanged, and
// Debezium writes its placeholder there, in a form by the column's type.
// A row made of it would hold the placeholder where the source holds the
// value: the event is an *UnavailableValueError naming the column, with
// and without the JSON converter's schema. Values that merely look like
// it decode. The same holds for a placeholder the connector was given
// (unavailable.value.placeholder, as text or hex: bytes), under which
// Debezium's default is a value like any other; a custom placeholder was
// not recognised, and its rows held it.
func TestDebeziumUnavailableValue(t *testing.T) {
	for _, setting := range []string{"", "<unchanged>", "hex:3c3e"} {
		t.Run("placeholder "+setting, func(t *testing.T) { unavailableValue(t, setting) })
	}
}

func unavailableValue(t *testing.T, setting string) {
	p, err := mapping.ParsePlaceholder(setting)
	if err != nil {
		t.Fatal(err)
	}
	raw := []byte(setting)
	if h, ok := strings.CutPrefix(setting, "hex:"); ok {
		raw, _ = hex.DecodeString(h)
	} else if setting == "" {
		raw = []byte(mapping.UnavailableValue)
	}
	ph := string(raw)
	b64 := base64.StdEncoding.EncodeToString(raw)
	var ints []string
	for _, b := range raw {
		ints = append(ints, fmt.Sprint(b))
	}
	intList := "[" + strings.Join(ints, ",") + "]"
	// connect wraps an after image of one column, of Connect type typ, in
	// the JSON converter's schema and payload.
	connect := func(typ, value string) string {
		return `{"schema":{"type":"struct","name":"t.Envelope","fields":[` +
			`{"field":"after","type":"struct","optional":true,"fields":[{"field":"id","type":"int32"},{"field":"doc",` + typ + `,"optional":true}]},` +
			`{"field":"op","type":"string"}]},` +
			`"payload":{"after":{"id":1,"doc":` + value + `},"op":"u"}}`
	}
	cases := []struct {
		name, event string
		unavailable bool
	}{
		{"text", `{"op":"u","after":{"id":1,"doc":"` + ph + `"}}`, true},
		{"bytea as base64", `{"op":"u","after":{"id":1,"doc":"` + b64 + `"}}`, true},
		{"text[]", `{"op":"u","after":{"id":1,"doc":["` + ph + `"]}}`, true},
		{"int[]", `{"op":"u","after":{"id":1,"doc":` + intList + `}}`, true},
		{"hstore", `{"op":"u","after":{"id":1,"doc":{"` + ph + `":"` + ph + `"}}}`, true},
		{"connect string", connect(`"type":"string"`, `"`+ph+`"`), true},
		{"connect bytes", connect(`"type":"bytes"`, `"`+b64+`"`), true},
		{"connect int32 array", connect(`"type":"array","items":{"type":"int32"}`, intList), true},
		{"connect map", connect(`"type":"map","keys":{"type":"string"},"values":{"type":"string"}`, `{"`+ph+`":"`+ph+`"}`), true},
		// date[] takes int[]'s placeholder, typed as days (from a review).
		{"connect date array", connect(`"type":"array","items":{"type":"int32","name":"io.debezium.time.Date","version":1}`, intList), true},
		// A text column whose value spells the bytes' placeholder is a
		// value: only bytes are spelled so (from a review).
		{"connect text holding base64", connect(`"type":"string"`, `"`+b64+`"`), false},
		{"connect text holding hex", connect(`"type":"string"`, `"`+hex.EncodeToString(raw)+`"`), false},
		{"a snapshot read", `{"op":"r","after":{"id":1,"doc":"` + ph + `"}}`, true},
		{"text that contains it", `{"op":"u","after":{"id":1,"doc":"see ` + ph + `"}}`, false},
		{"another list", `{"op":"u","after":{"id":1,"doc":["` + ph + `","x"]}}`, false},
		{"a short int list", `{"op":"u","after":{"id":1,"doc":[95]}}`, false},
		{"a delete", `{"op":"d","before":{"id":1,"doc":"` + ph + `"}}`, false},
	}
	if setting != "" {
		cases = append(cases, struct {
			name, event string
			unavailable bool
		}{"Debezium's default, under another", `{"op":"u","after":{"id":1,"doc":"` + mapping.UnavailableValue + `"}}`, false})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := mapping.DecodeDebeziumJSON([]byte(tc.event), &iceberg.StructType{}, p)
			var u *mapping.UnavailableValueError
			switch {
			case tc.unavailable && !errors.As(err, &u):
				t.Fatalf("err %v, want an *UnavailableValueError", err)
			case tc.unavailable && (u.Column != "doc" || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") || !strings.Contains(err.Error(), p.Setting())):
				t.Fatalf("%v: want it to name after.doc, the placeholder and REPLICA IDENTITY FULL", err)
			case !tc.unavailable && err != nil:
				t.Fatalf("err %v, want the event decoded", err)
			}
		})
	}
}
