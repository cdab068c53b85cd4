package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
)

// floe runs the CLI in-process and returns its exit code and output.
func floe(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// sinkStack starts a local stack with a topic of 3 partitions and 300 events.
func sinkStack(t *testing.T) (*localstack.Stack, []string) {
	t.Helper()
	st, _, _ := partitionedStack(t, "orders", 3)
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("orders", 3, 300, time.Now().Add(-time.Hour), 1)); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	return st, []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
}

func snapshotCount(t *testing.T, st *localstack.Stack, name string) int {
	t.Helper()
	return len(foreignTable(t, st.Catalog(), name).Metadata().Snapshots())
}

func TestSinkCommand(t *testing.T) {
	st, loc := sinkStack(t)
	args := append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)
	code, out, errs := floe(t, args...)
	if code != 0 || !strings.Contains(out, "300 rows") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	code, out, _ = floe(t, args...)
	if code != 0 || !strings.Contains(out, "0 rows in 0 commits") {
		t.Fatalf("second run: exit %d: %s", code, out)
	}
}

func TestSinkBadInput(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")

	// An existing table whose schema cannot hold floe rows.
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(t.Context(), []string{"other"}, nil); err != nil {
		t.Fatal(err)
	}
	foreign := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "kafka_offset", Type: iceberg.PrimitiveTypes.String, Required: true})
	if _, err := cat.CreateTable(t.Context(), []string{"other", "strings"}, foreign, icecat.WithLocation(filepath.Join(t.TempDir(), "strings"))); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unreachable broker", []string{"--brokers", "127.0.0.1:1", "--dial-timeout", "2s", "--topic", "orders", "--table", "lake.a"}, "cannot reach brokers 127.0.0.1:1"},
		{"unknown topic", []string{"--brokers", brokers, "--topic", "nope", "--table", "lake.b"}, `topic "nope" does not exist on brokers ` + brokers + `: unknown topic; the brokers have topics orders; check --topic`},
		{"malformed table", []string{"--brokers", brokers, "--topic", "orders", "--table", "orders"}, "want NAMESPACE.TABLE"},
		// It said to stop what listens on it (from a new-user run).
		{"metrics port without a colon", []string{"--brokers", brokers, "--topic", "orders", "--table", "lake.m", "--metrics-addr", "39464"},
			`--metrics-addr "39464": want HOST:PORT or :PORT (:39464 listens on every interface`},
		{"empty table part", []string{"--brokers", brokers, "--topic", "orders", "--table", "lake."}, "empty name part"},
		// A new table gets a plain name; a space was escaped into its S3
		// keys (my%20table) and lake.a.b created the nested namespace lake.a.
		{"space in a new table", []string{"--brokers", brokers, "--topic", "orders", "--table", "lake.my table"},
			`table "lake.my table": a new table's namespace and name take letters, digits, _ and - only ("my table" holds ' '`},
		{"nested namespace", []string{"--brokers", brokers, "--topic", "orders", "--table", "lake.a.b"},
			`table "lake.a.b": floe creates tables as NAMESPACE.TABLE, with one namespace level (this would create the nested namespace lake.a); for example lake.a_b`},
		{"incompatible schema", []string{"--brokers", brokers, "--topic", "orders", "--table", "other.strings"}, `cannot hold floe rows: it lacks floe's columns kafka_topic string, kafka_partition int, kafka_timestamp timestamptz`},
		{"bad start", []string{"--brokers", brokers, "--topic", "orders", "--table", "lake.c", "--start", "middle"}, "want earliest or latest; to begin at given offsets (taking over from another sink), create the table with floe replay --from PARTITION=OFFSET"},
		{"missing brokers", []string{"--topic", "orders", "--table", "lake.d"}, "missing --brokers"},
		{"unknown flag", []string{"--frobnicate"}, "unknown flag: --frobnicate (see --help)"},
		{"misspelt flag", []string{"--tabel", "lake.e"}, "unknown flag: --tabel; did you mean --table? (see --help)"},
		// From a new-user run: "unknown command \"orders\"".
		{"arguments", []string{"orders", "lake.f"}, `floe sink takes flags only, and was given the arguments "orders lake.f": give the topic with --topic and the table with --table`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"sink", "--stop-at-end"}, tc.args...), loc...)
			code, _, errs := floe(t, args...)
			// Brokers that take no connection are waited for up to
			// --dial-timeout, which is logged once before the error.
			if waited, rest, ok := strings.Cut(errs, "\n"); ok && tc.name == "unreachable broker" && strings.Contains(waited, "waiting for the brokers to take connections") {
				errs = rest
			}
			if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line containing %q", code, errs, tc.want)
			}
		})
	}
	if n := snapshotCount(t, st, "other.strings"); n != 0 {
		t.Fatalf("incompatible table got %d snapshots", n)
	}
	// Failing runs create no table.
	cat, err = catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		if ok, _ := cat.CheckTableExists(t.Context(), []string{"lake", name}); ok {
			t.Fatalf("failed run created lake.%s", name)
		}
	}
	if ok, _ := cat.CheckNamespaceExists(t.Context(), []string{"lake", "a"}); ok {
		t.Fatal("the refused lake.a.b created the nested namespace lake.a")
	}
}

// TestSinkRefusesMalformedLedger: a snapshot whose floe property does not
// decode stops the sink before it writes anything.
func TestSinkRefusesMalformedLedger(t *testing.T) {
	st, loc := sinkStack(t)
	args := append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)
	if code, _, errs := floe(t, args...); code != 0 {
		t.Fatal(errs)
	}
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(t.Context(), []string{"lake", "orders"})
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.AddFiles(t.Context(), nil, iceberg.Properties{"floe.version": "1", "floe.commit-id": "x", "floe.ranges.orders": "0:10-5:1"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := snapshotCount(t, st, "lake.orders")
	code, _, errs := floe(t, args...)
	if code != 2 || !strings.Contains(errs, "malformed ledger property") || !strings.Contains(errs, "floe.ranges.orders") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if after := snapshotCount(t, st, "lake.orders"); after != before {
		t.Fatalf("snapshots %d -> %d: the sink wrote past a malformed ledger", before, after)
	}
}

// TestSinkChecksBeforeCreating: every check that can fail runs before a
// namespace or table is created: a partition the topic does not have, a
// metrics address another process holds, a bad flag. Each failure is exit 2
// with one line on stderr, and no summary on stdout.
func TestSinkChecksBeforeCreating(t *testing.T) {
	st, _, _ := partitionedStack(t, "pairs", 2)
	cfg := st.Catalog()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	base := []string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "pairs", "--table", "fresh.t", "--stop-at-end",
		"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"partition the topic lacks", []string{"--partitions", "9"}, `--partitions "9": want partitions of topic pairs, which has 2`},
		{"some partitions the topic lacks", []string{"--partitions", "1,5,9"}, `--partitions "5,9"`},
		{"busy metrics address", []string{"--metrics-addr", busy.Addr().String()}, "metrics: listen on " + busy.Addr().String()},
		{"bad flag value", []string{"--on-data-loss", "sometimes"}, `--on-data-loss "sometimes": want fail or record`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := floe(t, append(base, c.args...)...)
			if code != exitError || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line containing %q", code, errs, c.want)
			}
			if out != "" {
				t.Fatalf("a failed run printed a summary:\n%s", out)
			}
			cat, err := catalog.Open(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if ok, _ := cat.CheckTableExists(t.Context(), []string{"fresh", "t"}); ok {
				t.Fatal("the failed run created its table")
			}
			if ok, _ := cat.CheckNamespaceExists(t.Context(), []string{"fresh"}); ok {
				t.Fatal("the failed run created its namespace")
			}
		})
	}
}

// TestFailedSinkPrintsNoSummary: a run that fails after its table exists
// (retention deleted offsets it had not sunk) reports the failure and no
// "N rows in M commits" line that would read as a success.
func TestFailedSinkPrintsNoSummary(t *testing.T) {
	st, loc := sinkStack(t)
	ctx := t.Context()
	if err := localstack.CreateTopic(ctx, st.Brokers, "events", 1, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	if err := localstack.Produce(ctx, st.Brokers, localstack.DemoEvents("events", 1, 100, start, 1)); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "events", "--table", "lake.events", "--stop-at-end"}, loc...)
	mustFloe(t, args...)
	if err := localstack.Produce(ctx, st.Brokers, localstack.DemoEvents("events", 1, 50, start, 2)); err != nil {
		t.Fatal(err)
	}
	if err := st.Cluster.DeleteRecords("events", 0, 120); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, args...)
	if code != exitError || !strings.Contains(errs, "data loss") || !strings.Contains(errs, "--on-data-loss record") {
		t.Fatalf("exit %d, stderr %q; want the data loss and its fix", code, errs)
	}
	if strings.Contains(out, "rows in") {
		t.Fatalf("a failed run printed a summary:\n%s", out)
	}
}

// TestAppendFormatV3: an append table of Iceberg format 3 takes its rows
// (beside a dead letter) and stays auditable and compactable: every commit of one was refused ("missing first_row_id
// which is required for v3 tables"), since floe's files do not set it
// and iceberg-go's AddDataFiles wants it. From a new-user run.
func TestAppendFormatV3(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "orders", Partition: 0, Value: []byte("not json")}}); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(st.Brokers, ",")
	out := mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.v3", "--stop-at-end",
		"--flush-records", "40", "--value", "json", "--format-version", "3"}, loc)...)
	if !strings.Contains(out, "1 dead letter (into lake.v3_dlq)") {
		t.Fatalf("sink: %s", out)
	}
	if v := openTable(t, st.Catalog(), "lake.v3").Iceberg().Metadata().Version(); v != 3 {
		t.Fatalf("format version %d, want 3", v)
	}
	// An existing table keeps its own, which was ignored without a word
	// (from a review); left out, nothing is said.
	for _, c := range []struct {
		args []string
		warn bool
	}{{[]string{"--format-version", "2"}, true}, {nil, false}} {
		code, _, errs := floe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.v3", "--stop-at-end", "--value", "json"}, c.args, loc)...)
		if code != exitOK || strings.Contains(errs, "--format-version applies to new tables only") != c.warn {
			t.Errorf("a run of the v3 table with %v: exit %d, stderr %q", c.args, code, errs)
		}
	}
	audit := slices.Concat([]string{"audit", "--table", "lake.v3", "--deep", "--brokers", brokers}, loc)
	mustFloe(t, audit...)
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.v3", "--compact"}, loc)...)
	mustFloe(t, audit...)
	if out := mustFloe(t, slices.Concat([]string{"where", "--table", "lake.v3", "--partition", "1", "--offset", "5"}, loc)...); !strings.Contains(out, "row") {
		t.Fatalf("where: %s", out)
	}
}

// TestAsOfRowsAfterExpiry: as-of --rows of an append table at a position
// whose snapshot expired reads the current snapshot below it (the same
// rows), where it was refused: with a sink's own maintenance that was
// every position older than an hour. From a new-user run.
func TestAsOfRowsAfterExpiry(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "40"}, loc)...)
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.orders", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	asOf := slices.Concat([]string{"as-of", "--table", "lake.orders", "--offsets", "orders/0=10,orders/1=10,orders/2=10", "--rows"}, loc)
	var res struct {
		Expired      bool  `json:"expired"`
		RowsFromHead bool  `json:"rows_from_head"`
		RowCount     int64 `json:"row_count"`
		Rows         []struct {
			Offset int64 `json:"offset"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(mustFloe(t, append(asOf, "--json")...)), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Expired || !res.RowsFromHead || res.RowCount == 0 || int64(len(res.Rows)) != res.RowCount {
		t.Fatalf("as-of --rows at an expired snapshot: %+v", res)
	}
	for _, r := range res.Rows {
		if r.Offset >= 10 {
			t.Fatalf("row at offset %d, above the position", r.Offset)
		}
	}
	// A position leaving out a partition is still refused, naming it.
	code, _, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--offsets", "orders/0=10", "--rows"}, loc)...)
	if code != exitError || !strings.Contains(errs, "has expired") || !strings.Contains(errs, "leaves out orders/1") {
		t.Fatalf("as-of --rows of one partition at an expired snapshot: exit %d, %s", code, errs)
	}
}

// TestAsOfRowsAfterExpirySchemaEvolved (from a review): a typed table whose
// schema changed after the position (a field appeared: a column) is not
// read from the head once the position's snapshot expired, where its rows
// gained the column (null): the same question gave another table. The
// refusal says why.
func TestAsOfRowsAfterExpirySchemaEvolved(t *testing.T) {
	st, loc := sinkStack(t)
	produce := func(from, to int, extra string) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: "ev", Key: fmt.Append(nil, i), Value: fmt.Appendf(nil, `{"id":%d%s}`, i, extra)})
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev", 1, nil); err != nil {
		t.Fatal(err)
	}
	sink := slices.Concat([]string{"sink", "-b", st.Brokers[0], "-t", "ev", "--table", "lake.ev", "--stop-at-end", "--value", "json"}, loc)
	produce(0, 3, "")
	mustFloe(t, sink...)
	produce(3, 6, `,"note":"later"`)
	mustFloe(t, sink...)
	asOf := slices.Concat([]string{"as-of", "--table", "lake.ev", "--offsets", "ev/0=3", "--rows", "--json"}, loc)
	before := mustFloe(t, asOf...)
	if strings.Contains(before, `"note"`) {
		t.Fatalf("as of ev/0=3 the table has no note column:\n%s", before)
	}
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.ev", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	code, out, errs := floe(t, asOf...)
	if code != exitError || strings.Contains(out, `"note"`) || !strings.Contains(errs, "has expired") || !strings.Contains(errs, "schema changed") {
		t.Fatalf("as-of --rows after expiry of a table whose schema changed since: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestAsOfRowsAfterExpiryTypedTable (from a new-user run): a typed table
// has two schemas from its first rows on (the one it was created with, and
// the one its first rows' columns make), so as-of --rows at any position
// whose snapshot expired was refused, saying the schema had changed. The
// archive records each snapshot's schema: a position whose schema is the
// current one reads from the head.
func TestAsOfRowsAfterExpiryTypedTable(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev", 1, nil); err != nil {
		t.Fatal(err)
	}
	sink := slices.Concat([]string{"sink", "-b", st.Brokers[0], "-t", "ev", "--table", "lake.ev", "--stop-at-end", "--value", "json"}, loc)
	for round := range 2 {
		var recs []*kgo.Record
		for i := round * 3; i < round*3+3; i++ {
			recs = append(recs, &kgo.Record{Topic: "ev", Key: fmt.Append(nil, i), Value: fmt.Appendf(nil, `{"id":%d}`, i)})
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
		mustFloe(t, sink...)
	}
	asOf := slices.Concat([]string{"as-of", "--table", "lake.ev", "--offsets", "ev/0=2", "--rows", "--json"}, loc)
	before := mustFloe(t, asOf...)
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.ev", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	code, after, errs := floe(t, asOf...)
	var b, a struct {
		Expired      bool             `json:"expired"`
		RowsFromHead bool             `json:"rows_from_head"`
		Rows         []map[string]any `json:"rows"`
	}
	if code != 0 || json.Unmarshal([]byte(before), &b) != nil || json.Unmarshal([]byte(after), &a) != nil {
		t.Fatalf("as-of --rows after expiry: exit %d\n%s\n%s", code, after, errs)
	}
	if !a.Expired || !a.RowsFromHead || fmt.Sprint(a.Rows) != fmt.Sprint(b.Rows) || len(a.Rows) != 2 {
		t.Fatalf("as-of --rows after expiry: %s\nbefore: %s", after, before)
	}
}

// TestKeepRawValueAloneOnExistingTable: --keep-raw-value without --value
// on a table that does not keep the values' bytes is refused, as it is
// with --value; it was ignored, the run sinking without them.
func TestKeepRawValueAloneOnExistingTable(t *testing.T) {
	st, loc := sinkStack(t)
	base := append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)
	if code, out, errs := floe(t, append(base, "--value", "json")...); code != 0 {
		t.Fatalf("json sink: exit %d\n%s%s", code, out, errs)
	}
	for _, extra := range [][]string{{"--keep-raw-value"}, {"--keep-raw-value", "--value", "json"}} {
		code, _, errs := floe(t, append(base, extra...)...)
		if code != 2 || !strings.Contains(errs, "does not keep the values' bytes (kafka_value)") {
			t.Fatalf("%v: exit %d, stderr %q; want the refusal", extra, code, errs)
		}
	}
}

// TestAsOfTimeNow (from a new-user run): printing a table's rows as they
// are took every partition's offsets or a time typed out; --time now is
// the table as it is.
func TestAsOfTimeNow(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc)...)
	var res struct {
		Rows      []json.RawMessage `json:"rows"`
		Now       bool              `json:"now"`
		Positions []struct {
			Source string `json:"source"`
		} `json:"positions"`
	}
	out := mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--time", "now", "--rows", "--json"}, loc)...)
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Rows) != 300 {
		t.Fatalf("as-of --time now: %v, %d rows; want the table's 300\n%s", err, len(res.Rows), out)
	}
	// The cut is the table's own, not "given" (from a new-user run).
	if !res.Now || len(res.Positions) != 3 || res.Positions[0].Source != "now" {
		t.Errorf("as-of --time now --json: now %v, positions %+v; want now and source now", res.Now, res.Positions)
	}
	text := mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--time", "now"}, loc)...)
	if !strings.Contains(text, "lake.orders as of now (each partition at the next offset its ledger records)") || strings.Contains(text, "given") {
		t.Errorf("as-of --time now:\n%s", text)
	}
}
