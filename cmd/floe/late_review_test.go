package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

// TestStatusListsUpsertRows (from a review): floe status without --table gives an upsert
// table's rows as its data files' record count, not the rows it holds
// (equality deletes not applied): it gives none, and its text says why
// and what counts them (from a new user's run).
func TestStatusListsUpsertRows(t *testing.T) {
	st := topicStack(t, "up")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	var recs []*kgo.Record
	for _, k := range []string{"a", "b", "c", "a", "b"} {
		recs = append(recs, &kgo.Record{Topic: "up", Key: []byte(k), Value: []byte("v")})
	}
	recs = append(recs, &kgo.Record{Topic: "up", Key: []byte("c")})
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "up", "--table", "lake.up", "--mode", "upsert", "--key", "string", "--stop-at-end", "--flush-records", "3", "-b", st.Brokers[0]}, cat)...)
	if text := mustFloe(t, append([]string{"status"}, cat...)...); !strings.Contains(text, "ROWS of lake.up: - (its delete files hide rows its data files hold; floe as-of --table lake.up --time now --rows counts them)") {
		t.Errorf("status's text does not say why lake.up has no ROWS (a new user took it for a table without rows):\n%s", text)
	}
	out := mustFloe(t, append([]string{"status", "--json"}, cat...)...)
	var doc struct {
		Tables []catalogTable `json:"tables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, tb := range doc.Tables {
		if tb.Table == "lake.up" {
			if tb.Rows != nil {
				t.Errorf("status lists lake.up (keys a, b; c deleted) with rows %d; want none (null): its deletes hide rows the count holds", *tb.Rows)
			}
			return
		}
	}
	t.Fatalf("lake.up not listed: %s", out)
}

// TestStatusListsBrokenTable (from a review): one table whose metadata file is gone
// makes floe status without --table fail for the whole catalog.
func TestStatusListsBrokenTable(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "-b", st.Brokers[0], "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	mustFloe(t, append([]string{"sink", "-b", st.Brokers[0], "-t", "orders", "--table", "lake.broken", "--stop-at-end"}, loc...)...)
	cfg := st.Catalog()
	tbl := openTable(t, cfg, "lake.broken")
	loc0 := strings.TrimPrefix(tbl.Iceberg().MetadataLocation(), "file://")
	if err := os.Rename(loc0, loc0+".gone"); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, append([]string{"status"}, loc...)...)
	if code != 0 || !strings.Contains(out, "lake.orders") || !regexp.MustCompile(`lake\.broken +unreadable \(below\)`).MatchString(out) ||
		!strings.Contains(out, "lake.broken cannot be read: ") {
		t.Errorf("status without --table, with lake.broken's metadata gone: exit %d\n%s%s\nwant lake.orders listed (and lake.broken said unreadable)", code, out, errs)
	}
	// With no table readable (the storage down, say) the listing fails:
	// it listed every table with its error and exited 0 (from a new-user
	// run).
	loc1 := strings.TrimPrefix(openTable(t, cfg, "lake.orders").Iceberg().MetadataLocation(), "file://")
	if err := os.Rename(loc1, loc1+".gone"); err != nil {
		t.Fatal(err)
	}
	code, out, errs = floe(t, append([]string{"status"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "no table of the catalog can be read") {
		t.Errorf("status without --table, no table readable: exit %d\n%s%s\nwant exit 2 saying no table can be read", code, out, errs)
	}
	_ = filepath.Join
	_ = catalog.Config{}
	_ = time.Now
}

// asOfDLSetup sinks 4 JSON records into lake.dl, one (offset 1, stamped
// after the cut time) a dead letter, and returns the as-of arguments.
func asOfDLSetup(t *testing.T) (*localstack.Stack, catalog.Config, []string, []string) {
	st := topicStack(t, "dl")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	base := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	recs := []*kgo.Record{
		{Topic: "dl", Value: []byte(`{"a":0}`), Timestamp: base},
		{Topic: "dl", Value: []byte(`not json`), Timestamp: base.Add(2 * time.Hour)},
		{Topic: "dl", Value: []byte(`{"a":2}`), Timestamp: base.Add(30 * time.Minute)},
		{Topic: "dl", Value: []byte(`{"a":3}`), Timestamp: base.Add(3 * time.Hour)},
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "dl", "--table", "lake.dl", "--value", "json", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	asOf := slices.Concat([]string{"as-of", "--table", "lake.dl", "--time", base.Add(time.Hour).UTC().Format(time.RFC3339), "--json"}, cat)
	return st, cfg, cat, asOf
}

func checkCut1(t *testing.T, what string, asOf []string) {
	t.Helper()
	code, out, errs := floe(t, asOf...)
	var res lookup.AsOfResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Positions) != 1 || res.Positions[0].Offset != 1 {
		t.Errorf("as-of --time %s: exit %d, %s%s; want the cut at offset 1", what, code, out, errs)
	}
}

// TestAsOfTimeAfterReplayRestoredLostDeadLetters (from a review): dead letters recorded
// lost, then a replay of the table (--branch rebuild --publish) brings
// them back, as the docs say only a replay can. as-of --time stays refused
// for good: the old dead-letter table's lost-property is never cleared,
// and deadLettersHeld looks at it whether or not the live ledger still has
// the commit.
func TestAsOfTimeAfterReplayRestoredLostDeadLetters(t *testing.T) {
	st, cfg, cat, asOf := asOfDLSetup(t)
	checkCut1(t, "before", asOf)
	loseDeadLetterFile(t, cfg, cat)
	mustFloe(t, slices.Concat([]string{"replay", "--topic", "dl", "--table", "lake.dl", "--branch", "rebuild", "--publish", "-b", st.Brokers[0]}, cat)...)
	code, out, errs := floe(t, slices.Concat([]string{"audit", "--table", "lake.dl"}, cat)...)
	t.Logf("audit after the replay: exit %d\n%s%s", code, out, errs)
	checkCut1(t, "after the replay restored the dead letters", asOf)
}

// TestAsOfTimeIgnoresBranchDLQ (from a review): an unpublished replay branch's
// own dead-letter table (lake.dl_rebuild_dlq) is dropped. main's ledger
// never named it and main holds every dead letter it counts, yet as-of
// --time of main is refused, saying "its ledger names" the dropped table.
func TestAsOfTimeIgnoresBranchDLQ(t *testing.T) {
	st, cfg, cat, asOf := asOfDLSetup(t)
	mustFloe(t, slices.Concat([]string{"replay", "--topic", "dl", "--table", "lake.dl", "--branch", "rebuild", "-b", st.Brokers[0]}, cat)...)
	c, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent("lake.dl_rebuild_dlq")
	if err := c.DropTable(t.Context(), ident); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, slices.Concat([]string{"audit", "--table", "lake.dl"}, cat)...)
	t.Logf("audit of main: exit %d\n%s%s", code, out, errs)
	checkCut1(t, "of main, with the branch's dead-letter table dropped", asOf)
}

// TestAsOfNowUpsertTable (from a review): as-of --time now is "the table as it is"
// (docs/replay.md); of an upsert table, from the table alone, it is
// refused, as a record time cannot be placed, though "as it is" needs none.
func TestAsOfNowUpsertTable(t *testing.T) {
	st := topicStack(t, "up")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	recs := []*kgo.Record{
		{Topic: "up", Key: []byte("a"), Value: []byte("1")},
		{Topic: "up", Key: []byte("b"), Value: []byte("2")},
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "up", "--table", "lake.up", "--mode", "upsert", "--key", "string", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.up", "--time", "now", "--json"}, cat)...)
	var res lookup.AsOfResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Positions) != 1 || res.Positions[0].Offset != 2 {
		t.Errorf("as-of --time now of an upsert table: exit %d, %s%s; want the table as it is (cut at offset 2)", code, out, errs)
	}
}

// TestAsOfNowFutureStamped (from a review): a record stamped ahead of now (a producer's
// clock, CreateTime) is in the table; as-of --time now, "the table as it
// is", leaves it and every later record out.
func TestAsOfNowFutureStamped(t *testing.T) {
	st := topicStack(t, "ev")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	now := time.Now()
	recs := []*kgo.Record{
		{Topic: "ev", Value: []byte("a"), Timestamp: now.Add(-time.Hour)},
		{Topic: "ev", Value: []byte("b"), Timestamp: now.Add(time.Hour)},
		{Topic: "ev", Value: []byte("c"), Timestamp: now.Add(-time.Minute)},
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "ev", "--table", "lake.ev", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.ev", "--time", "now", "--json"}, cat)...)
	var res lookup.AsOfResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Positions) != 1 || res.Positions[0].Offset != 3 {
		t.Errorf("as-of --time now: exit %d, %s%s; want the table as it is (cut at offset 3)", code, out, errs)
	}
}

// TestAsOfNowDeadLettersDropped (from a review): --time now, "the table as it is", is
// refused once the dead-letter table is gone, though no record time
// needs placing.
func TestAsOfNowDeadLettersDropped(t *testing.T) {
	_, cfg, cat, _ := asOfDLSetup(t)
	c, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent("lake.dl_dlq")
	if err := c.DropTable(t.Context(), ident); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.dl", "--time", "now", "--json"}, cat)...)
	var res lookup.AsOfResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Positions) != 1 || res.Positions[0].Offset != 4 {
		t.Errorf("as-of --time now, dead-letter table dropped: exit %d, %s%s; want the table as it is (cut at offset 4)", code, out, errs)
	}
}

// TestAsOfTimeDeadLetterDeletedByOtherEngine (from a review): another engine deletes the
// dead letter's row from lake.dl_dlq (DELETE FROM, copy-on-write). The
// table no longer holds every dead letter its ledger counts, but
// deadLettersHeld only looks for dropped tables and recorded losses:
// as-of --time answers from the table alone with the cut past offset 1.
func TestAsOfTimeDeadLetterDeletedByOtherEngine(t *testing.T) {
	_, cfg, cat, asOf := asOfDLSetup(t)
	checkCut1(t, "before", asOf)
	foreignDelete(t, cfg, "lake.dl_dlq", iceberg.EqualTo(iceberg.Reference(mapping.ColOffset), int64(1)), table.WriteModeCopyOnWrite)
	code, out, errs := floe(t, slices.Concat([]string{"audit", "--table", "lake.dl"}, cat)...)
	t.Logf("audit: exit %d\n%s%s", code, out, errs)
	code, out, errs = floe(t, asOf...)
	var res lookup.AsOfResult
	if code == 0 && json.Unmarshal([]byte(out), &res) == nil && len(res.Positions) == 1 && res.Positions[0].Offset != 1 {
		t.Errorf("as-of --time with the dead letter deleted from the dead-letter table: cut at offset %d (rows past the time); want the cut at 1, or a refusal", res.Positions[0].Offset)
	}
}

// TestAsOfNowBrokersLag (from a review): with --brokers, as-of --time now of a table
// behind its topic (2 records not sunk yet).
func TestAsOfNowBrokersLag(t *testing.T) {
	st := topicStack(t, "ev")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	now := time.Now()
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, &kgo.Record{Topic: "ev", Value: []byte("a"), Timestamp: now.Add(time.Duration(i-10) * time.Minute)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "ev", "--table", "lake.ev", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "ev", Value: []byte("b")}, {Topic: "ev", Value: []byte("c")}}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.ev", "--time", "now", "--json", "-b", st.Brokers[0]}, cat)...)
	var res lookup.AsOfResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Positions) != 1 || res.Positions[0].Offset != 3 {
		t.Errorf("as-of --time now --brokers, table 2 records behind: exit %d, %s%s; want the table as it is (cut at offset 3)", code, out, errs)
	}
}

// loseDeadLetterFile deletes the one data file of lake.dl_dlq (asOfDLSetup's
// dead-letter table), as a storage that lost it, and has floe maintain
// record its dead letters lost (--drop-missing-dead-letter-files), the
// documented recovery.
func loseDeadLetterFile(t *testing.T, cfg catalog.Config, cat []string) {
	t.Helper()
	dlq := openTable(t, cfg, "lake.dl_dlq")
	files, err := dlq.Files(t.Context(), dlq.Head().SnapshotID)
	if err != nil || len(files) != 1 {
		t.Fatalf("dead-letter files: %v %v", files, err)
	}
	if err := os.Remove(strings.TrimPrefix(files[0].Path, "file://")); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.dl", "--drop-missing-dead-letter-files"}, cat)...)
}

// TestStatusListsLastLedgerCommitSorted (from a new-user run): floe status
// without --table gave as a table's last commit its newest snapshot, a
// compaction's after the last sink commit, so a stalled sink looked fresh
// to the docs' cron audit, which selects tables by last_commit_at; and it
// listed the tables in the catalog's row order. A floe table's last commit
// is its ledger's, and the list is sorted by name.
func TestStatusListsLastLedgerCommitSorted(t *testing.T) {
	st, loc := sinkStack(t)
	for _, name := range []string{"lake.zz", "lake.aa"} {
		mustFloe(t, slices.Concat([]string{"sink", "-b", st.Brokers[0], "-t", "orders", "--table", name, "--stop-at-end", "--flush-records", "40"}, loc)...)
	}
	var ledger struct {
		Commits []struct {
			CommittedAt time.Time `json:"committed_at"`
		} `json:"commits"`
	}
	out := mustFloe(t, slices.Concat([]string{"ledger", "--table", "lake.zz", "--json"}, loc)...)
	if err := json.Unmarshal([]byte(out), &ledger); err != nil || len(ledger.Commits) == 0 {
		t.Fatalf("floe ledger --json: %v\n%s", err, out)
	}
	sunk := ledger.Commits[len(ledger.Commits)-1].CommittedAt
	time.Sleep(50 * time.Millisecond) // the compaction's snapshot is later
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.zz", "--compact", "--target-file-size", "1MiB"}, loc)...)
	head := openTable(t, st.Catalog(), "lake.zz").Iceberg().CurrentSnapshot()
	if compacted := time.UnixMilli(head.TimestampMs); !compacted.After(sunk) {
		t.Fatalf("the compaction made no later snapshot: head at %s, last sink commit at %s", compacted, sunk)
	}

	out = mustFloe(t, slices.Concat([]string{"status", "--json"}, loc)...)
	var doc struct {
		Tables []catalogTable `json:"tables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var names []string
	for _, tb := range doc.Tables {
		names = append(names, tb.Table)
		if tb.Table == "lake.zz" && (tb.LastCommitAt == nil || !tb.LastCommitAt.Equal(sunk)) {
			t.Errorf("lake.zz's last_commit_at is %v, want its last sink commit's, %s, not the compaction's:\n%s", tb.LastCommitAt, sunk, out)
		}
	}
	if want := []string{"lake.aa", "lake.aa_dlq", "lake.zz", "lake.zz_dlq"}; !slices.Equal(names, want) && !slices.Equal(names, []string{"lake.aa", "lake.zz"}) {
		t.Errorf("status lists %v, want them sorted by name", names)
	}
	text := mustFloe(t, append([]string{"status"}, loc...)...)
	if !regexp.MustCompile(`(?s)\nlake\.aa .*\nlake\.zz +append +\d+ +` + regexp.QuoteMeta(sunk.UTC().Format(time.RFC3339))).MatchString(text) {
		t.Errorf("status text, want lake.aa before lake.zz and lake.zz's last sink commit %s:\n%s", sunk.UTC().Format(time.RFC3339), text)
	}
}

// TestStatusListsSortedPostgres: floe status without --table listed a
// PostgreSQL catalog's tables in its rows' order, which a commit changes
// (PostgreSQL writes the updated row anew), namespace by namespace in no
// order: sorted by name.
func TestStatusListsSortedPostgres(t *testing.T) {
	st := topicStack(t, "up")
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "up", Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	cat := []string{"--catalog", testenv.Postgres(t).URI, "--warehouse", t.TempDir()}
	names := []string{"zone.b", "arch.z", "arch.a", "mid.m", "zone.a"}
	for _, name := range append(names, "arch.z", "zone.b") {
		mustFloe(t, slices.Concat([]string{"sink", "-b", st.Brokers[0], "-t", "up", "--table", name, "--value", "raw"}, cat, []string{"--stop-at-end"})...)
		if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "up", Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	out := mustFloe(t, append([]string{"status"}, cat...)...)
	var listed []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		listed = append(listed, strings.Fields(l)[0])
	}
	if slices.Sort(names); !slices.Equal(listed, names) {
		t.Errorf("status without --table lists %v, want %v:\n%s", listed, names, out)
	}
}
