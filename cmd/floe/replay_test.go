package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// replayStack starts a local stack and returns it with the catalog flags.
func replayStack(t *testing.T) (*localstack.Stack, []string) {
	t.Helper()
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	cfg := st.Catalog()
	return st, []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
}

func openFloeTable(t *testing.T, st *localstack.Stack, name string) *snapshot.Table {
	t.Helper()
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(name)
	tbl, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func replayTableExists(t *testing.T, st *localstack.Stack, name string) bool {
	t.Helper()
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(name)
	ok, err := cat.CheckTableExists(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// ordersWithTransactions produces demo events to a 3-partition topic with a
// committed and an aborted transaction between two halves.
func ordersWithTransactions(t *testing.T, st *localstack.Stack) {
	t.Helper()
	ctx := t.Context()
	if err := localstack.CreateTopic(ctx, st.Brokers, "orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	evs := localstack.DemoEvents("orders", 3, 400, start, 3)
	if err := localstack.Produce(ctx, st.Brokers, evs[:200]); err != nil {
		t.Fatal(err)
	}
	if err := localstack.ProduceTxn(ctx, st.Brokers, "t1", localstack.DemoEvents("orders", 3, 12, start, 4), true); err != nil {
		t.Fatal(err)
	}
	if err := localstack.ProduceTxn(ctx, st.Brokers, "t2", localstack.DemoEvents("orders", 3, 9, start, 5), false); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(ctx, st.Brokers, evs[200:]); err != nil {
		t.Fatal(err)
	}
}

func TestReplayCommandRebuildsTheSinkTable(t *testing.T) {
	st, loc := replayStack(t)
	ordersWithTransactions(t, st)
	brokers := strings.Join(st.Brokers, ",")
	// --json: the sink's summary as one line of JSON.
	var sunk runReport
	out := mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--json"}, loc...)...)
	if err := json.Unmarshal([]byte(out), &sunk); err != nil || sunk.Schema != "floe.sink/v1" || sunk.Table != "lake.orders" || sunk.Rows != 412 ||
		sunk.Commits == 0 || len(sunk.Next) != 3 || sunk.Upserts != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("sink --json: %v %+v\n%s", err, sunk, out)
	}

	args := append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.rebuilt", "--flush-records", "150"}, loc...)
	out = mustFloe(t, args...)
	if !strings.Contains(out, "replayed 412 rows") || !strings.Contains(out, "orders/0: [0, ") {
		t.Fatalf("replay output:\n%s", out)
	}
	a, err := rowMultiset(t.Context(), openFloeTable(t, st, "lake.orders"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rowMultiset(t.Context(), openFloeTable(t, st, "lake.rebuilt"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if countRows(a) != 412 || !maps.Equal(a, b) {
		t.Fatalf("rebuilt table (%d rows) differs from the sunk one (%d rows)", countRows(b), countRows(a))
	}
	// The rebuilt table has its own ledger, and the audit passes on it.
	if code, out, errs := floe(t, append([]string{"audit", "--table", "lake.rebuilt", "--deep", "--brokers", brokers}, loc...)...); code != exitOK {
		t.Fatalf("audit of the rebuilt table: exit %d\n%s\n%s", code, out, errs)
	}
	// The same command again resumes: nothing left to do.
	if out := mustFloe(t, args...); !strings.Contains(out, "resuming") || !strings.Contains(out, "replayed 0 rows") {
		t.Fatalf("second run:\n%s", out)
	}
	// --json: the plan and the result as one JSON document.
	var again replayReport
	out = mustFloe(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), &again); err != nil || again.Schema != "floe.replay/v1" || !again.Complete || again.Rows != 0 ||
		len(again.Start) != 3 || again.End["orders/0"] != sunk.Next["orders/0"] || again.Next["orders/0"] != sunk.Next["orders/0"] || again.Compared {
		t.Fatalf("replay --json: %v %+v\n%s", err, again, out)
	}
	// The sunk table is not a replay target without --branch, and the
	// refusal names the flags to add, not "another --branch" when none
	// was given (from a new-user run).
	code, _, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "add --branch rebuild --publish") || strings.Contains(errs, "another --branch") {
		t.Fatalf("replay into the sunk table: exit %d: %s", code, errs)
	}
}

func TestReplayCommandHeadLoss(t *testing.T) {
	st, loc := replayStack(t)
	ctx := t.Context()
	if err := localstack.CreateTopic(ctx, st.Brokers, "old", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(ctx, st.Brokers, localstack.DemoEvents("old", 1, 40, time.Now().Add(-time.Hour), 9)); err != nil {
		t.Fatal(err)
	}
	if err := st.Cluster.DeleteRecords("old", 0, 15); err != nil {
		t.Fatal(err)
	}
	out := mustFloe(t, append([]string{"replay", "--brokers", strings.Join(st.Brokers, ","), "--topic", "old", "--table", "lake.old"}, loc...)...)
	if !strings.Contains(out, "old/0 starts at offset 15, not 0: retention deleted [0, 15)") || !strings.Contains(out, "replayed 25 rows") {
		t.Fatalf("replay output does not say the head was lost:\n%s", out)
	}
	var r lookup.WhereResult
	if err := json.Unmarshal([]byte(mustFloe(t, append([]string{"where", "--table", "lake.old", "--topic", "old", "--partition", "0", "--offset", "3", "--json"}, loc...)...)), &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "lost" || *r.Low != 0 || *r.High != 15 {
		t.Fatalf("the lost head is not visible in the ledger: %+v", r)
	}
}

func TestReplayCommandBadInput(t *testing.T) {
	st, loc := replayStack(t)
	ordersWithTransactions(t, st)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	future := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		name    string
		args    []string
		mention string
	}{
		{"from in the future", []string{"--from", future}, "in the future"},
		{"until before from", []string{"--from", "0=50,1=50", "--until", "0=10"}, "is before --from"},
		{"unknown snapshot", []string{"--from", "snapshot:123456789"}, "no table of the catalog has snapshot 123456789"},
		{"malformed from", []string{"--from", "yesterday"}, "want earliest, an RFC 3339 time"},
		{"unknown topic", []string{"--topic", "nope"}, `topic "nope" does not exist`},
		{"publish without branch", []string{"--publish"}, "--publish needs --branch"},
		{"unknown fold", []string{"--fold", "sum"}, `--fold "sum"`},
	} {
		args := append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.bad"}, loc...)
		code, _, errs := floe(t, append(args, c.args...)...)
		if code != exitError || !strings.Contains(errs, c.mention) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, code, errs, exitError, c.mention)
		}
		if replayTableExists(t, st, "lake.bad") {
			t.Fatalf("%s: the failed replay created its table", c.name)
		}
	}
	// On a branch of an existing table: the branch is not created either.
	code, _, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders",
		"--branch", "rebuild", "--from", future}, loc...)...)
	if code != exitError || !strings.Contains(errs, "in the future") || openFloeTable(t, st, "lake.orders").HasBranch("rebuild") {
		t.Fatalf("bad replay onto a branch: exit %d %s", code, errs)
	}
}

func TestReplayCommandBranchPublishAndFold(t *testing.T) {
	st, loc := replayStack(t)
	ordersWithTransactions(t, st)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	before := openFloeTable(t, st, "lake.orders").Head().SnapshotID

	// A branch that starts later would drop main's older rows: refused,
	// then published with --publish-different.
	rebuild := append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders",
		"--branch", "rebuild", "--publish", "--from", "0=100,1=100,2=100"}, loc...)
	code, out, errs := floe(t, rebuild...)
	if code != exitError || !strings.Contains(errs, "orders/0 [0, 100)") || !strings.Contains(errs, "publishing would drop them from main") ||
		openFloeTable(t, st, "lake.orders").Head().SnapshotID != before {
		t.Fatalf("publish of a later start: exit %d\n%s", code, errs)
	}
	// What the branch holds is said, and the hint is not about keys (from
	// a new-user run).
	if !strings.Contains(out, "replayed ") || !strings.Contains(out, "into lake.orders branch rebuild") ||
		strings.Contains(errs, "a key in several partitions") || !strings.Contains(errs, "--from") {
		t.Errorf("refused publish: stdout %q, stderr %q; want the replay's result and a hint about coverage", out, errs)
	}
	out = mustFloe(t, append(rebuild, "--publish-different")...)
	if !strings.Contains(out, fmt.Sprintf("main moved from snapshot %d to", before)) {
		t.Fatalf("publish output:\n%s", out)
	}
	main := openFloeTable(t, st, "lake.orders")
	l, err := main.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range l.Partitions() {
		if c := l.Ranges(tp); c[0].Low != 100 {
			t.Fatalf("main's ledger after publish starts %s at %d, want the rebuild's 100", tp, c[0].Low)
		}
	}

	out = mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.state", "--fold", "latest"}, loc...)...)
	state := openFloeTable(t, st, "lake.state")
	rows, err := rowMultiset(t.Context(), state, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for r := range rows {
		var row struct {
			Partition int32
			Key       string
		}
		if err := json.Unmarshal([]byte(r), &row); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint(row.Partition, row.Key)
		if keys[id] {
			t.Fatalf("state table holds key %s twice", id)
		}
		keys[id] = true
	}
	if state.Mode() != mapping.ModeUpsert || len(keys) == 0 || len(keys) >= 412 || !strings.Contains(out, "replayed") {
		t.Fatalf("state table: mode %q, %d keys\n%s", state.Mode(), len(keys), out)
	}
}

// whereStack: topic w, one partition: rows 0-9, sunk; rows 10-19 of which
// retention deletes 10-14 before the next sink, which records the loss; a
// committed transaction (20-22, marker 23), an aborted one (24-25, marker
// 26) and rows 27-31, sunk; then 32-34 produced and not sunk.
func whereStack(t *testing.T) (*localstack.Stack, []string) {
	st, loc := replayStack(t)
	ctx := t.Context()
	if err := localstack.CreateTopic(ctx, st.Brokers, "w", 1, nil); err != nil {
		t.Fatal(err)
	}
	recs := func(n int, tag string) []*kgo.Record {
		var out []*kgo.Record
		for i := range n {
			out = append(out, &kgo.Record{Topic: "w", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s%d", tag, i),
				Timestamp: time.UnixMilli(1_700_000_000_000).Add(time.Duration(i) * time.Minute)})
		}
		return out
	}
	produce := func(rs []*kgo.Record) {
		if err := localstack.Produce(ctx, st.Brokers, rs); err != nil {
			t.Fatal(err)
		}
	}
	sink := append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "w", "--table", "lake.w", "--stop-at-end"}, loc...)
	produce(recs(10, "a"))
	mustFloe(t, sink...)
	produce(recs(10, "b"))
	if err := st.Cluster.DeleteRecords("w", 0, 15); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, append(sink, "--on-data-loss", "record")...)
	if err := localstack.ProduceTxn(ctx, st.Brokers, "wc", recs(3, "c"), true); err != nil {
		t.Fatal(err)
	}
	if err := localstack.ProduceTxn(ctx, st.Brokers, "wa", recs(2, "x"), false); err != nil {
		t.Fatal(err)
	}
	produce(recs(5, "d"))
	mustFloe(t, sink...)
	produce(recs(3, "e"))
	return st, loc
}

func TestWhereCommand(t *testing.T) {
	st, loc := whereStack(t)
	brokers := strings.Join(st.Brokers, ",")
	whereJSON := func(offset int, withBrokers bool) lookup.WhereResult {
		t.Helper()
		args := append([]string{"where", "--table", "lake.w", "--topic", "w", "--partition", "0", "--offset", fmt.Sprint(offset), "--json"}, loc...)
		if withBrokers {
			args = append(args, "--brokers", brokers)
		}
		var r lookup.WhereResult
		if err := json.Unmarshal([]byte(mustFloe(t, args...)), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		offset      int
		brokers     bool
		status      string
		kind        string
		low, high   int64
		explanation string
	}{
		{5, false, "row", "", 0, 10, "is a row"},
		{12, false, "lost", "", 10, 15, "deleted by retention"},
		{17, false, "row", "", 15, 20, "is a row"},
		{21, false, "row", "", 20, 32, "is a row"},
		{23, false, "no_row", "", 20, 32, "pass --brokers"},
		{23, true, "no_row", "marker", 20, 32, "transaction marker"},
		{24, true, "no_row", "aborted", 20, 32, "aborted transaction"},
		{26, true, "no_row", "marker", 20, 32, "transaction marker"},
		{30, false, "row", "", 20, 32, "is a row"},
		{33, true, "unsunk", "", 0, 0, "still retains it"},
		{99, false, "unsunk", "", 0, 0, "not sunk yet"},
	} {
		r := whereJSON(c.offset, c.brokers)
		if r.Status != c.status || r.Kind != c.kind || !strings.Contains(r.Explanation, c.explanation) {
			t.Errorf("where %d: %s/%s %q; want %s/%s mentioning %q", c.offset, r.Status, r.Kind, r.Explanation, c.status, c.kind, c.explanation)
			continue
		}
		if c.status == "unsunk" {
			if r.SnapshotID != nil || r.TableNext == nil || *r.TableNext != 32 {
				t.Errorf("where %d: unsunk answer %+v", c.offset, r)
			}
			continue
		}
		if r.SnapshotID == nil || r.CommittedAt == nil || *r.Low != c.low || *r.High != c.high {
			t.Errorf("where %d: range %v-%v snapshot %v; want [%d, %d)", c.offset, r.Low, r.High, r.SnapshotID, c.low, c.high)
		}
		if (r.File != "") != (c.status == "row") {
			t.Errorf("where %d: file %q", c.offset, r.File)
		}
	}
	// Text output names the snapshot and the file.
	out := mustFloe(t, append([]string{"where", "--table", "lake.w", "--topic", "w", "--partition", "0", "--offset", "5"}, loc...)...)
	if !strings.Contains(out, "snapshot") || !strings.Contains(out, ".parquet") {
		t.Fatalf("where text:\n%s", out)
	}
	code, _, errs := floe(t, append([]string{"where", "--table", "lake.w", "--topic", "w", "--offset", "5"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "--partition") {
		t.Fatalf("where without --partition: exit %d %s", code, errs)
	}
	// --topic is the table's one topic when left out.
	out = mustFloe(t, append([]string{"where", "--table", "lake.w", "--partition", "0", "--offset", "5"}, loc...)...)
	if !strings.HasPrefix(out, "w/0 offset 5 in lake.w: row") {
		t.Errorf("where without --topic on a one-topic table:\n%s", out)
	}
	// A question about something that does not exist exits 2 naming it,
	// as as-of does: a topic the table never held, a partition neither the
	// table nor the broker has.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"where", "--topic", "nope", "--partition", "0", "--offset", "5"}, `--topic "nope": want a topic lake.w holds: w`},
		{[]string{"where", "--topic", "w", "--partition", "7", "--offset", "5", "--brokers", brokers}, `--partition "7": want a partition of w: neither lake.w nor the broker has w/7`},
		{[]string{"as-of", "--offsets", "nope/0=5"}, "nope/0"},
	} {
		code, out, errs := floe(t, append(append(c.args, "--table", "lake.w"), loc...)...)
		if code != exitError || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("floe %v: exit %d, stderr %q, stdout %q; want exit 2 naming %q", c.args, code, errs, out, c.want)
		}
	}
	// A table that does not exist is named once (iceberg-go's error said
	// it again), in its namespace or not (the SQL catalog tells no
	// namespace apart).
	for table, want := range map[string]string{
		"lake.nope":  "table lake.nope does not exist in the catalog; check --table and --catalog",
		"other.nope": "table other.nope does not exist in the catalog",
	} {
		code, out, errs := floe(t, append([]string{"audit", "--table", table}, loc...)...)
		if code != exitError || !strings.Contains(errs, want) || strings.Contains(errs, "[") || out != "" {
			t.Errorf("floe audit --table %s: exit %d, stderr %q, stdout %q; want exit 2 and %q", table, code, errs, out, want)
		}
	}
}

// readJSONLines reads a JSON lines file of rows.
func readJSONLines(t *testing.T, path string) []jsonRowIn {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []jsonRowIn
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r jsonRowIn
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

type jsonRowIn struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Timestamp time.Time       `json:"timestamp"`
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
}

func TestAsOfCommand(t *testing.T) {
	st, loc := replayStack(t)
	ctx := t.Context()
	if err := localstack.CreateTopic(ctx, st.Brokers, "a", 2, nil); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range 60 {
			recs = append(recs, &kgo.Record{Topic: "a", Partition: p, Key: fmt.Appendf(nil, "k%d", i%7),
				Value: []byte{0xff, byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
	}
	if err := localstack.Produce(ctx, st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(st.Brokers, ",")
	// One commit: every cut below is in the middle of its range.
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "a", "--table", "lake.a", "--stop-at-end"}, loc...)...)
	head := openFloeTable(t, st, "lake.a").Head().SnapshotID
	dir := t.TempDir()

	out := filepath.Join(dir, "rows.jsonl")
	var res asOfResult
	if err := json.Unmarshal([]byte(mustFloe(t, append([]string{"as-of", "--table", "lake.a", "--offsets", "a/0=37", "--rows", "--output", out, "--json"}, loc...)...)), &res); err != nil {
		t.Fatal(err)
	}
	if res.SnapshotID != head || res.RowCount == nil || *res.RowCount != 37+60 {
		t.Fatalf("as-of a/0=37: %+v", res)
	}
	got := readJSONLines(t, out)
	var offs0 []int64
	for _, r := range got {
		if r.Partition == 0 {
			offs0 = append(offs0, r.Offset)
		}
	}
	slices.Sort(offs0)
	if len(got) != 97 || len(offs0) != 37 || offs0[0] != 0 || offs0[36] != 36 {
		t.Fatalf("rows below a/0=37: %d rows, partition 0 offsets %v", len(got), offs0)
	}
	if !strings.HasPrefix(string(got[0].Value), `{"base64":"/w`) {
		t.Fatalf("binary value not base64 in JSON: %s", got[0].Value)
	}

	// Both partitions cut; bare P=OFFSET works for a one-topic table; other formats.
	for _, f := range []string{"rows.parquet", "rows.csv"} {
		var r asOfResult
		if err := json.Unmarshal([]byte(mustFloe(t, append([]string{"as-of", "--table", "lake.a", "--offsets", "0=10,1=20", "--rows", "-o", filepath.Join(dir, f), "--json"}, loc...)...)), &r); err != nil {
			t.Fatal(err)
		}
		if *r.RowCount != 30 {
			t.Fatalf("%s: %d rows, want 30", f, *r.RowCount)
		}
	}
	csv, err := os.ReadFile(filepath.Join(dir, "rows.csv"))
	if err != nil || strings.Count(string(csv), "\n") != 31 || !strings.Contains(string(csv), "base64:") {
		t.Fatalf("csv: %v\n%s", err, csv)
	}

	// By record time: from the table's timestamps, then from the broker.
	at := base.Add(25 * time.Second).Format(time.RFC3339)
	for _, extra := range [][]string{nil, {"--brokers", brokers}} {
		var r asOfResult
		args := append(append([]string{"as-of", "--table", "lake.a", "--time", at, "--json"}, loc...), extra...)
		if err := json.Unmarshal([]byte(mustFloe(t, args...)), &r); err != nil {
			t.Fatal(err)
		}
		want := "table"
		if extra != nil {
			want = "broker"
		}
		if len(r.Positions) != 2 || r.Positions[0].Offset != 25 || r.Positions[1].Offset != 25 || r.Positions[0].Source != want {
			t.Fatalf("as-of --time %s %v: %+v", at, extra, r.Positions)
		}
	}

	// A time before the first record: the table held nothing then, and
	// says so (it answered a snapshot and "below offset 0" alone).
	early := append([]string{"as-of", "--table", "lake.a", "--time", base.Add(-time.Hour).Format(time.RFC3339)}, loc...)
	if text := mustFloe(t, early...); !strings.Contains(text, "the table held nothing then") {
		t.Errorf("as-of before the first record:\n%s", text)
	}
	var r asOfResult
	if err := json.Unmarshal([]byte(mustFloe(t, append(early, "--json")...)), &r); err != nil || !r.Empty {
		t.Errorf("as-of --json before the first record: %v, empty %v", err, r.Empty)
	}
	if text := mustFloe(t, append([]string{"as-of", "--table", "lake.a", "--time", at}, loc...)...); strings.Contains(text, "held nothing") {
		t.Errorf("as-of at a time with rows says the table held nothing:\n%s", text)
	}

	// Text rows, and errors.
	text := mustFloe(t, append([]string{"as-of", "--table", "lake.a", "--offsets", "a/1=3", "--rows"}, loc...)...)
	if !strings.Contains(text, fmt.Sprint(head)) || !strings.Contains(text, "63 rows") {
		t.Fatalf("as-of text:\n%s", text)
	}
	for _, c := range []struct {
		args    []string
		mention string
	}{
		{[]string{"--offsets", "a/0=61"}, "only up to offset 60"},
		{[]string{"--offsets", "a/0=1", "--time", at}, "exactly one of"},
		{[]string{"--offsets", "a/0=1", "--rows", "-o", "x.txt"}, "unknown extension"},
		{[]string{"--time", "noon"}, "RFC3339"},
	} {
		code, _, errs := floe(t, append(append([]string{"as-of", "--table", "lake.a"}, loc...), c.args...)...)
		if code != exitError || !strings.Contains(errs, c.mention) {
			t.Errorf("as-of %v: exit %d %q; want mention of %q", c.args, code, errs, c.mention)
		}
	}
}

// TestReplayPublishSaysMainWentBack (from a new-user run): publishing a
// branch that ends before main's next offsets (--until) moved main back
// with exit 0 and no word of it: the output names each partition main
// went back on, and the next sink reads those offsets again.
func TestReplayPublishSaysMainWentBack(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	before := openFloeTable(t, st, "lake.orders")
	l, err := before.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	next0 := l.Next()[mapping.TopicPartition{Topic: "orders", Partition: 0}]
	out := mustFloe(t, append([]string{"replay", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--branch", "short",
		"--until", "0=10,1=10,2=10", "--publish"}, loc...)...)
	if want := fmt.Sprintf("main went back on orders/0 from offset %d to 10: the next floe sink session reads those offsets again", next0); !strings.Contains(out, want) {
		t.Errorf("publish output:\n%s\nwant %q", out, want)
	}
	if out := mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...); !strings.Contains(out, "270 rows") {
		t.Errorf("the sink after the publish: %s; want the 270 offsets main went back on", out)
	}
}
