package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// TestTypedSinkCommand runs floe sink --value registry --key string on
// Avro records with a schema change and bad records, then floe audit at
// every level with the registry, as a user would; then the typed flags'
// errors.
func TestTypedSinkCommand(t *testing.T) {
	st, _, _ := partitionedStack(t, "shipments", 2)
	recs, err := localstack.DemoShipments(t.Context(), st.Registry, "shipments", 2, 100, time.Now().Add(-time.Hour), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	brokers := strings.Join(st.Brokers, ",")
	sink := append([]string{"sink", "-b", brokers, "-t", "shipments", "--table", "lake.shipments", "--stop-at-end", "--flush-records", "40"}, loc...)

	// Without the registry a registry table cannot be sunk: one line names the flag.
	code, _, errs := floe(t, append(sink, "--value", "registry")...)
	if code != 2 || !strings.Contains(errs, "--schema-registry") || strings.Count(strings.TrimSpace(errs), "\n") > 1 {
		t.Fatalf("without --schema-registry: exit %d, %q", code, errs)
	}
	code, _, errs = floe(t, append(sink, "--value", "avro")...)
	if code != 2 || !strings.Contains(errs, `--value "avro": want raw, json or registry`) {
		t.Fatalf("--value avro: exit %d, %q", code, errs)
	}

	// --dlq off stops at the first bad record, naming it, after committing
	// what came before.
	typed := append(sink, "--value", "registry", "--key", "string", "--schema-registry", st.Registry)
	code, out, errs := floe(t, append(typed, "--dlq", "off")...)
	if code != 2 || !strings.Contains(errs, "cannot become a row") || !strings.Contains(errs, "shipments/") {
		t.Fatalf("--dlq off: exit %d, %q", code, errs)
	}
	// What it committed is said, as such (from a new-user run).
	if !strings.Contains(out, "stopped by an error (below); committed before it, and kept:\nsink lake.shipments (new table): ") || !strings.Contains(out, "next offsets: ") {
		t.Errorf("--dlq off: stdout %q; want what it committed before the error", out)
	}
	code, out, _ = floe(t, append(typed, "--dlq", "off", "--table", "lake.shipments_json", "--json")...)
	if code != 2 || !strings.Contains(out, `"table":"lake.shipments_json"`) || !strings.Contains(out, `"error":"`) || !strings.Contains(out, "cannot become a row") {
		t.Errorf("--dlq off --json: exit %d, stdout %q; want the report of what it committed, with the error", code, out)
	}

	code, out, errs = floe(t, typed...)
	if code != 0 || !strings.Contains(out, " rows and 3 dead letters (into lake.shipments_dlq) in ") || !strings.Contains(out, " dead-letter file") {
		t.Fatalf("typed sink: exit %d\n%s\n%s; want the dead letters and their files counted", code, out, errs)
	}
	// where finds a dead letter without the broker: the last record of
	// partition 0 is one (DemoShipments ends with its bad records).
	last := int64(-1)
	for _, r := range recs {
		if r.Partition == 0 {
			last++
		}
	}
	code, out, errs = floe(t, append([]string{"where", "--table", "lake.shipments", "-t", "shipments", "--partition", "0", "--offset", fmt.Sprint(last), "--json"}, loc...)...)
	var w struct {
		Status, Kind, File, Reason string
		DeadLetterTable            string `json:"dead_letter_table"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &w) != nil || w.Status != "no_row" || w.Kind != "dead_letter" ||
		w.DeadLetterTable != "lake.shipments_dlq" || w.File == "" || w.Reason == "" {
		t.Fatalf("where a dead letter: exit %d\n%s\n%s", code, out, errs)
	}
	// status counts each partition's dead letters (two of the three bad
	// records are in partition 0).
	code, out, errs = floe(t, append([]string{"status", "--table", "lake.shipments"}, loc...)...)
	if code != 0 || !strings.Contains(out, "DEAD LETTERS") || !regexp.MustCompile(`(?m)^\s*shipments\s+0\s.*\s2\s+\d{4}-`).MatchString(out) {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errs)
	}
	// The dead-letter table has no ledger: as-of says so and where to ask.
	code, _, errs = floe(t, append([]string{"as-of", "--table", "lake.shipments_dlq", "--offsets", "shipments/0=10"}, loc...)...)
	if code != 2 || !strings.Contains(errs, "is the dead-letter table of lake.shipments") || !strings.Contains(errs, "floe where") {
		t.Fatalf("as-of on the dead-letter table: exit %d, %q", code, errs)
	}
	// A later run may leave out the typed flags: the table keeps its layout.
	code, out, errs = floe(t, append(sink, "--schema-registry", st.Registry)...)
	if code != 0 || !strings.Contains(out, "0 rows in 0 commits") {
		t.Fatalf("second run without --value: exit %d\n%s\n%s", code, out, errs)
	}
	// ... or give one of them: the other is the table's, not raw (from a
	// new-user run).
	for _, one := range [][]string{{"--key", "string"}, {"--value", "registry"}} {
		code, out, errs = floe(t, append(append(sink, "--schema-registry", st.Registry), one...)...)
		if code != 0 {
			t.Errorf("a run with %s alone: exit %d\n%s\n%s", one, code, out, errs)
		}
	}
	// Another layout for an existing table is refused.
	code, _, errs = floe(t, append(sink, "--value", "json")...)
	if code != 2 || !strings.Contains(errs, "keeps its values as registry") {
		t.Fatalf("--value json on a registry table: exit %d, %q", code, errs)
	}

	audit := append([]string{"audit", "--table", "lake.shipments", "--deep", "-b", brokers, "--verify-content", "--schema-registry", st.Registry, "--json"}, loc...)
	code, out, errs = floe(t, audit...)
	if code != 0 {
		t.Fatalf("audit: exit %d\n%s\n%s", code, out, errs)
	}
	var rep struct {
		Complete        bool  `json:"complete"`
		RowsRead        int64 `json:"rows_read"`
		DeadLettersRead int64 `json:"dead_letters_read"`
		Partitions      []struct {
			Records     int64 `json:"records"`
			DeadLetters int64 `json:"dead_letters"`
			Content     struct {
				Verified    int64 `json:"verified"`
				DeadLetters int64 `json:"dead_letters"`
			} `json:"content"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var rows, dead, verified, verifiedDead int64
	for _, p := range rep.Partitions {
		rows += p.Records
		dead += p.DeadLetters
		verified += p.Content.Verified
		verifiedDead += p.Content.DeadLetters
	}
	if !rep.Complete || rows != 100 || dead != 3 || verified != 100 || verifiedDead != 3 {
		t.Fatalf("audit: complete %v, %d rows (%d verified), %d dead letters (%d verified)", rep.Complete, rows, verified, dead, verifiedDead)
	}
	// The content level alone reads them too: its dead letters were
	// counted as rows read (from a new-user run).
	for _, deep := range []bool{true, false} {
		if !deep {
			code, out, errs = floe(t, slices.DeleteFunc(slices.Clone(audit), func(a string) bool { return a == "--deep" })...)
			if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
				t.Fatalf("audit --verify-content: exit %d\n%s\n%s", code, out, errs)
			}
		}
		if rep.RowsRead != 100 || rep.DeadLettersRead != 3 {
			t.Errorf("audit (--deep %v): %d rows and %d dead letters read, want 100 and 3", deep, rep.RowsRead, rep.DeadLettersRead)
		}
	}

	// The lookups answer on a typed table, and as-of --rows gives its
	// typed columns.
	js := mustFloe(t, append([]string{"where", "--table", "lake.shipments", "-t", "shipments", "--partition", "0", "--offset", "5", "--json"}, loc[:2]...)...)
	if !strings.Contains(js, `"file"`) {
		t.Fatalf("where: %s", js)
	}
	rowsOut := filepath.Join(t.TempDir(), "rows.jsonl")
	mustFloe(t, append([]string{"as-of", "--table", "lake.shipments", "--offsets", "shipments/0=20,shipments/1=20", "--rows", "-o", rowsOut}, loc[:2]...)...)
	b, err := os.ReadFile(rowsOut)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if _, ok := first["shipment_id"]; !ok || len(lines) == 0 || len(lines) > 40 {
		t.Fatalf("as-of --rows: %d rows, first %v", len(lines), first)
	}
	// maintain keeps the typed table and its dead letters auditable.
	mustFloe(t, append([]string{"maintain", "--table", "lake.shipments", "--expire-older-than", "0s", "--retain-last", "1"}, loc[:2]...)...)
	if code, out, errs = floe(t, audit...); code != 0 {
		t.Fatalf("audit after maintain: exit %d\n%s\n%s", code, out, errs)
	}
	// A typed state table, the latest row per key: a tombstone deletes its
	// key as the sink reads it (a null value), so the values' bytes need
	// not be kept to tell it from a record of null fields.
	fold := append([]string{"replay", "-b", brokers, "-t", "shipments", "--table", "lake.shipments_latest",
		"--fold", "latest", "--value", "registry", "--key", "string", "--schema-registry", st.Registry}, loc...)
	if code, out, errs = floe(t, fold...); code != 0 {
		t.Fatalf("typed --fold latest: exit %d\n%s\n%s", code, out, errs)
	}
	js = mustFloe(t, append([]string{"as-of", "--table", "lake.shipments_latest", "-b", brokers, "--time", time.Now().UTC().Format(time.RFC3339), "--json", "--rows"}, loc[:2]...)...)
	var state struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal([]byte(js), &state); err != nil {
		t.Fatal(err)
	}
	keys := map[any]bool{}
	for _, r := range state.Rows {
		if keys[r["kafka_key"]] {
			t.Fatalf("state table has key %v twice", r["kafka_key"])
		}
		keys[r["kafka_key"]] = true
	}
	if len(state.Rows) == 0 || len(state.Rows) > 100 {
		t.Fatalf("state table: %d rows", len(state.Rows))
	}
}

// TestSchemaConflictFailHint: a run with --on-schema-conflict fail that
// stops at a conflict ends with the hint of how such records are
// dead-lettered instead, not "a schema conflict stops the sink only with
// --on-schema-conflict fail", the flag it was run with.
func TestSchemaConflictFailHint(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "readings", 1, nil); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, v := range []string{`{"n":1}`, `{"n":2}`, `{"n":"three"}`} {
		recs = append(recs, &kgo.Record{Topic: "readings", Value: []byte(v)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	code, _, errs := floe(t, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "readings", "--table", "lake.readings", "--stop-at-end",
		"--value", "json", "--on-schema-conflict", "fail"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "readings/0 offset 2 cannot become a row") ||
		strings.Contains(errs, "only with --on-schema-conflict fail") ||
		!strings.Contains(errs, "with --on-schema-conflict dead-letter (the default) and --dlq on") {
		t.Fatalf("--on-schema-conflict fail at a conflict: exit %d, %q", code, errs)
	}
}

// TestJSONEmptyValuesReadTheSameWhenever: a JSON field that carries no
// type ("l":[], "s":{"x":null}) gets no column while the table has none,
// so its row reads null there once a later record creates the column. The
// same record sunk after the column existed gave an empty list and a
// struct of nulls, and the content audit, decoding with the table's
// current schema, called the first row a content-mismatch. Now such a
// value is null wherever it is sunk, and the audit agrees.
func TestJSONEmptyValuesReadTheSameWhenever(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev", 1, nil); err != nil {
		t.Fatal(err)
	}
	const empty = `{"id":1,"l":[],"s":{"x":null},"k":{"y":[]}}`
	sink := append([]string{"sink", "-b", st.Brokers[0], "-t", "ev", "--table", "lake.ev", "--value", "json", "--key", "json", "--stop-at-end"}, loc...)
	for _, v := range []string{empty, `{"id":2,"l":[3],"s":{"x":4},"k":{"y":[5]}}`, empty} {
		// The key too: kafka_key is a struct column of the keys' fields.
		k := strings.ReplaceAll(v, `"id"`, `"kid"`)
		if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "ev", Key: []byte(k), Value: []byte(v)}}); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := floe(t, sink...); code != exitOK {
			t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
		}
	}
	tbl := openTable(t, st.Catalog(), "lake.ev")
	rows := floetest.Rows(t, tbl)
	slices.SortFunc(rows, func(a, b floetest.Row) int { return cmp.Compare(a.Offset, b.Offset) })
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for _, col := range []string{"l", "s", "k", mapping.ColKey} {
		if rows[0].Columns[col] != rows[2].Columns[col] {
			t.Errorf("column %s: offset 0 (sunk before the column existed) reads %s, offset 2 (the same record sunk after) %s",
				col, rows[0].Columns[col], rows[2].Columns[col])
		}
	}
	code, out, errs := floe(t, append([]string{"audit", "--table", "lake.ev", "--deep", "--verify-content", "-b", st.Brokers[0]}, loc...)...)
	if code != exitOK || !strings.Contains(out, "verdict: COMPLETE") {
		t.Fatalf("audit: exit %d\n%s\n%s", code, out, errs)
	}
}

// sunkTopic starts a local stack, produces recs into topic (one
// partition) and sinks them into lake.TOPIC, decoding values through the
// stack's schema registry when registry is set; it returns the stack and
// the catalog flags.
func sunkTopic(t *testing.T, topic string, registry bool, recs func(st *localstack.Stack) []*kgo.Record) (*localstack.Stack, []string) {
	t.Helper()
	st := topicStack(t, topic)
	if err := localstack.Produce(t.Context(), st.Brokers, recs(st)); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	sink := []string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", topic, "--table", "lake." + topic, "--stop-at-end"}
	if registry {
		sink = append(sink, "--value", "registry", "--schema-registry", st.Registry)
	}
	mustFloe(t, append(sink, loc...)...)
	return st, loc
}

// avroRecords registers schema as topic's value schema and returns values
// as its records, Avro in the registry's framing, keyed 0, 1, ...
func avroRecords(t *testing.T, st *localstack.Stack, topic, schema string, values ...any) []*kgo.Record {
	t.Helper()
	id, err := localstack.RegisterSchema(t.Context(), st.Registry, topic+"-value", sr.Schema{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	s := avro.MustParse(schema)
	var recs []*kgo.Record
	for i, v := range values {
		body, err := avro.Marshal(s, v)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Append(nil, i), Value: localstack.WireFormat(id, nil, body)})
	}
	return recs
}

// asOfRowsHave runs as-of --rows with args as --json and into rows.csv
// and rows.jsonl, and fails where an output lacks any of want.
func asOfRowsHave(t *testing.T, args []string, want ...string) {
	t.Helper()
	asOf := append([]string{"as-of", "--rows"}, args...)
	outs := map[string]string{"--json": mustFloe(t, append(asOf, "--json")...)}
	for _, name := range []string{"rows.csv", "rows.jsonl"} {
		path := filepath.Join(t.TempDir(), name)
		mustFloe(t, append(asOf, "-o", path)...)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		outs[name] = string(b)
	}
	for name, out := range outs {
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s lacks %s:\n%s", name, w, out)
			}
		}
	}
}

// TestAsOfRowsKeepDecimalScale: as-of --rows writes a decimal with every
// digit of its scale, in JSON and CSV alike: 12.50, not 12.5, and
// 0.00001, not 1e-05 (Arrow's text form goes through a float).
func TestAsOfRowsKeepDecimalScale(t *testing.T) {
	type price struct {
		ID    int64    `avro:"id"`
		Price *big.Rat `avro:"price"`
		Rate  *big.Rat `avro:"rate"`
	}
	const schema = `{"type":"record","name":"Price","fields":[{"name":"id","type":"long"},
		{"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
		{"name":"rate","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":5}}]}`
	_, loc := sunkTopic(t, "prices", true, func(st *localstack.Stack) []*kgo.Record {
		return avroRecords(t, st, "prices", schema, price{1, big.NewRat(1250, 100), big.NewRat(1, 100000)}, price{2, big.NewRat(-310, 100), big.NewRat(0, 1)})
	})
	asOfRowsHave(t, append([]string{"--table", "lake.prices", "--offsets", "prices/0=2"}, loc...), "12.50", "0.00001", "-3.10", "0.00000")
}

// TestJSONKeepsMarkup: a value's <, > and & come out of --json as they
// are, not as json.Marshal's \u003c, \u003e and \u0026.
func TestJSONKeepsMarkup(t *testing.T) {
	_, loc := sunkTopic(t, "tags", false, func(*localstack.Stack) []*kgo.Record {
		return []*kgo.Record{{Topic: "tags", Key: []byte("<k>"), Value: []byte(`<b>a & b</b>`),
			Headers: []kgo.RecordHeader{{Key: "x<y", Value: []byte("1 > 0")}}}}
	})
	out := mustFloe(t, append([]string{"as-of", "--table", "lake.tags", "--offsets", "tags/0=1", "--rows", "--json"}, loc...)...)
	for _, want := range []string{`"<k>"`, `"<b>a & b</b>"`, `"x<y"`, `"1 > 0"`} {
		if !strings.Contains(out, want) {
			t.Errorf("as-of --json lacks %s:\n%s", want, out)
		}
	}
}

// TestAsOfRowsMapValuesKeepScaleAndMarkup: a typed table's map column
// (Avro map, protobuf map) keeps its decimals' scale and its strings' <,
// > and & in --json, JSON lines and CSV alike: it went through Arrow's
// own JSON (json.Marshal, decimals as floats). From a review.
func TestAsOfRowsMapValuesKeepScaleAndMarkup(t *testing.T) {
	type mprice struct {
		ID     int64               `avro:"id"`
		Prices map[string]*big.Rat `avro:"prices"`
		Notes  map[string]string   `avro:"notes"`
	}
	const schema = `{"type":"record","name":"MPrice","fields":[{"name":"id","type":"long"},
		{"name":"prices","type":{"type":"map","values":{"type":"bytes","logicalType":"decimal","precision":10,"scale":5}}},
		{"name":"notes","type":{"type":"map","values":"string"}}]}`
	_, loc := sunkTopic(t, "mprices", true, func(st *localstack.Stack) []*kgo.Record {
		return avroRecords(t, st, "mprices", schema,
			mprice{1, map[string]*big.Rat{"eur": big.NewRat(1250, 100), "rate": big.NewRat(1, 100000)}, map[string]string{"n": "a<b & c>d"}})
	})
	asOfRowsHave(t, append([]string{"--table", "lake.mprices", "--offsets", "mprices/0=1"}, loc...), "12.50000", "0.00001", "a<b & c>d")
}

// TestSchemaChangesLoggedAndCaseClashWarned: a sink logs at INFO how its
// records changed the table's schema, and warns when a producer renamed a
// field in case only (userId to userID), which makes a second column that
// engines resolving names without case cannot tell from the first.
func TestSchemaChangesLoggedAndCaseClashWarned(t *testing.T) {
	st, loc := replayStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev", 1, nil); err != nil {
		t.Fatal(err)
	}
	produce := func(value string) {
		t.Helper()
		if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "ev", Value: []byte(value)}}); err != nil {
			t.Fatal(err)
		}
	}
	sink := append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "ev", "--table", "lake.ev", "--value", "json", "--stop-at-end"}, loc...)
	produce(`{"userId":1,"n":1}`)
	code, _, errs := floe(t, sink...)
	if code != exitOK || !strings.Contains(errs, `msg="the table's schema changed"`) || !strings.Contains(errs, "added n long") || !strings.Contains(errs, "added userId long") ||
		strings.Contains(errs, "level=WARN") {
		t.Errorf("first run: exit %d\n%s\nwant the columns added logged at INFO, and no warning", code, errs)
	}
	produce(`{"userID":2,"n":2}`)
	code, _, errs = floe(t, sink...)
	if code != exitOK || !strings.Contains(errs, "added userID long") ||
		!strings.Contains(errs, "level=WARN") || !strings.Contains(errs, "columns userId and userID, whose names differ only in case") {
		t.Errorf("after the rename: exit %d\n%s\nwant the change logged and a warning naming userId and userID", code, errs)
	}
	// Each run warns again, once, while the table has both.
	code, _, errs = floe(t, sink...)
	if code != exitOK || strings.Count(errs, "whose names differ only in case") != 1 || strings.Contains(errs, "schema changed") {
		t.Errorf("a run with nothing new: exit %d\n%s\nwant one warning and no schema change", code, errs)
	}
}
