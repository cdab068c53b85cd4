package connector_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
)

// TestDebeziumPlaceholderIntArraySigned: Debezium's PostgreSQL connector
// writes an unchanged TOASTed int[] / bigint[] column as the placeholder's
// bytes, each as Java's (int) b: a signed byte
// (UnchangedToastedPlaceholder: toastedIntArrayPlaceholder.add((int) b)).
// A placeholder with a non-ASCII character ("∅", bytes E2 88 85) is then
// [-30, -120, -123]. floe compares the list with the unsigned bytes
// [226, 136, 133], so the event is not a dead letter: the row takes the
// placeholder as the column's value, and the content audit, decoding as
// the sink does, calls the table complete.
//
// Found by a review of the exactly-once path; fixed since.
func TestDebeziumPlaceholderIntArraySigned(t *testing.T) {
	e := newEnv(t)
	const topic, placeholder = "dbserver1.inventory.phtoast", "∅"
	e.Topic(topic, 1, nil)
	signed := func(s string) []int64 {
		var out []int64
		for _, b := range []byte(s) {
			out = append(out, int64(int8(b))) // Java: (int) b
		}
		return out
	}
	event := func(op string, after map[string]any) *kgo.Record { return plainChangeEvent(t, topic, op, after) }
	e.Produce([]*kgo.Record{
		event("c", map[string]any{"id": 1, "scores": []int64{5, 6}, "bio": "long text"}),
		event("c", map[string]any{"id": 2, "scores": []int64{7, 8}, "bio": "long text"}),
		// unchanged TOASTed bio: the text placeholder (recognised)
		event("u", map[string]any{"id": 1, "scores": []int64{5, 6}, "bio": placeholder}),
		// unchanged TOASTed scores: the int[] placeholder as Debezium writes it
		event("u", map[string]any{"id": 2, "scores": signed(placeholder), "bio": "long text"}),
	})
	tbl, dlq := e.debeziumTable("lake.phtoast", floetest.CDCPlainJSON)
	st, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, UnavailablePlaceholder: placeholder})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records, %d dead letters", st.Records, st.DeadLetters)
	for _, r := range rows(t, tbl) {
		t.Logf("row %s@%d: scores %s bio %s", r.TP, r.Offset, r.Columns["scores"], r.Columns["bio"])
		if r.Offset == 3 {
			t.Errorf("row of offset 3 (id 2) holds scores %s: the int[] column's placeholder %v was written as its value, want a dead letter and the row of offset 1", r.Columns["scores"], signed(placeholder))
		}
	}
	if st.DeadLetters != 2 {
		t.Errorf("%d dead letters, want 2 (both events holding the placeholder)", st.DeadLetters)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("content audit complete: %v, %d findings", rep.Complete(), len(rep.Findings))
	_ = mapping.ColKey
}

// TestDebeziumPlaceholderHexInvalidUTF8Text: a hex: placeholder whose
// bytes are not UTF-8 ("hex:ffff") reaches text columns as Java's
// new String(bytes) makes it (UnchangedToastedPlaceholder): each
// malformed byte becomes one U+FFFD, "\uFFFD\uFFFD". floe makes the text
// with strings.ToValidUTF8, which replaces a run of invalid bytes with
// one U+FFFD, "\uFFFD": the event is not recognised and the row holds the
// placeholder; the content audit agrees with the sink.
//
// Found by a review of the exactly-once path; fixed since.
func TestDebeziumPlaceholderHexInvalidUTF8Text(t *testing.T) {
	e := newEnv(t)
	const topic, placeholder = "dbserver1.inventory.phhex", "hex:ffff"
	const javaText = "\uFFFD\uFFFD" // new String(new byte[]{-1, -1}, UTF_8)
	e.Topic(topic, 1, nil)
	event := func(op string, after map[string]any) *kgo.Record { return plainChangeEvent(t, topic, op, after) }
	e.Produce([]*kgo.Record{
		event("c", map[string]any{"id": 1, "bio": "long text", "n": 1}),
		event("u", map[string]any{"id": 1, "bio": javaText, "n": 2}),
	})
	tbl, dlq := e.debeziumTable("lake.phhex", floetest.CDCPlainJSON)
	st, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, UnavailablePlaceholder: placeholder})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows(t, tbl) {
		t.Logf("row %s@%d: bio %q", r.TP, r.Offset, r.Columns["bio"])
		if r.Offset == 1 {
			t.Errorf("row of offset 1 holds bio %q, the text Debezium writes for placeholder %s: want a dead letter and the row of offset 0", r.Columns["bio"], placeholder)
		}
	}
	if st.DeadLetters != 1 {
		t.Errorf("%d dead letters, want 1", st.DeadLetters)
	}
}

// TestDebeziumPlaceholderOneByteIntArray: a one-byte placeholder ("?")
// reaches an int[] column as a list of one integer, [63]. Placeholder.is
// takes every one-element list for the text, bytes or UUID forms and never
// compares it with the bytes as integers: the event is a row.
//
// Found by a review of the exactly-once path; fixed since.
func TestDebeziumPlaceholderOneByteIntArray(t *testing.T) {
	e := newEnv(t)
	const topic, placeholder = "dbserver1.inventory.phone", "?"
	e.Topic(topic, 1, nil)
	event := func(op string, after map[string]any) *kgo.Record { return plainChangeEvent(t, topic, op, after) }
	e.Produce([]*kgo.Record{
		event("c", map[string]any{"id": 1, "scores": []int64{5, 6}}),
		event("u", map[string]any{"id": 1, "scores": []int64{'?'}}),
	})
	tbl, dlq := e.debeziumTable("lake.phone", floetest.CDCPlainJSON)
	st, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, UnavailablePlaceholder: placeholder})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows(t, tbl) {
		if r.Offset == 1 {
			t.Errorf("row of offset 1 holds scores %s, the int[] placeholder of %q: want a dead letter and the row of offset 0", r.Columns["scores"], placeholder)
		}
	}
	if st.DeadLetters != 1 {
		t.Errorf("%d dead letters, want 1", st.DeadLetters)
	}
}

// TestDebeziumPlaceholderGeometry: recent Debezium PostgreSQL
// connectors write an unchanged TOASTed PostGIS geometry column as a fixed
// point, 'SRID=4326;POINT(-99999999 -99999999)' (UnchangedToastedPlaceholder
// geometryPlaceholderWkb; geography: POINT(179.999999 89.999999)), whatever
// unavailable.value.placeholder says. floe knows only the configured
// placeholder's forms: the event is a row holding the fake point.
//
// Found by a review of the exactly-once path; fixed since.
func TestDebeziumPlaceholderGeometry(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.phgeom"
	e.Topic(topic, 1, nil)
	wkb, err := hex.DecodeString("0101000020E6100000000000FC83D797C1000000FC83D797C1")
	if err != nil {
		t.Fatal(err)
	}
	event := func(op string, after map[string]any) *kgo.Record { return plainChangeEvent(t, topic, op, after) }
	real := map[string]any{"wkb": base64.StdEncoding.EncodeToString([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), "srid": 4326}
	e.Produce([]*kgo.Record{
		event("c", map[string]any{"id": 1, "name": "a", "geom": real}),
		event("u", map[string]any{"id": 1, "name": "b", "geom": map[string]any{"wkb": base64.StdEncoding.EncodeToString(wkb), "srid": 4326}}),
	})
	tbl, dlq := e.debeziumTable("lake.phgeom", floetest.CDCPlainJSON)
	st, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows(t, tbl) {
		if r.Offset == 1 {
			t.Errorf("row of offset 1 holds geom %s, Debezium's unchanged-TOAST geometry placeholder: want a dead letter and the row of offset 0", r.Columns["geom"])
		}
	}
	if st.DeadLetters != 1 {
		t.Errorf("%d dead letters, want 1", st.DeadLetters)
	}
}

// plainChangeEvent is a Debezium change event of topic as the JSON
// converter without schemas writes it: op on a row whose after image is
// after, keyed by its id.
func plainChangeEvent(t *testing.T, topic, op string, after map[string]any) *kgo.Record {
	t.Helper()
	v, err := json.Marshal(map[string]any{"before": nil, "after": after, "op": op, "ts_ms": 1_700_000_000_000,
		"source": map[string]any{"ts_ms": 1_700_000_000_000, "connector": "postgresql", "db": "inventory", "table": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: topic, Partition: 0, Key: []byte(fmt.Sprintf(`{"id":%v}`, after["id"])), Value: v}
}
