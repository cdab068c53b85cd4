package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// produceKeyed produces, on 2 partitions of a new topic, 240 records over
// 10 string keys: updates, tombstones (every ninth) and records without a
// key (every 23rd).
func produceKeyed(t *testing.T, st *localstack.Stack, topic string) {
	t.Helper()
	if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 240 {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: fmt.Appendf(nil, "c%02d", (i*7)%10),
			Value: fmt.Appendf(nil, `{"n":%d}`, i), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*1000)}
		switch {
		case i%9 == 4:
			r.Value = nil
		case i%23 == 5:
			r.Key = nil
		}
		recs = append(recs, r)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
}

// keyedRows reads a table's rows (deletes applied) as partition/key ->
// offset=value, failing on a key held twice.
func keyedRows(t *testing.T, tbl *snapshot.Table, perPartition bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range floetest.Rows(t, tbl) {
		id := r.Key
		if perPartition {
			id = fmt.Sprintf("%d/%s", r.TP.Partition, id)
		}
		if _, dup := out[id]; dup {
			t.Fatalf("key %s held twice", id)
		}
		out[id] = fmt.Sprintf("%d/%d=%s", r.TP.Partition, r.Offset, r.Value)
	}
	return out
}

// TestReplayCommandUpsertBranchPublish: replay --mode upsert rebuilds an
// upsert table through the sink's upsert path into a new table and onto a
// branch of it; --publish compares the branch with main key by key first
// and publishes when they are equal; a branch that differs (it starts
// later in the log) is refused, naming the first keys that differ and
// leaving main as it was, until --publish-different publishes it.
func TestReplayCommandUpsertBranchPublish(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "customers"
	produceKeyed(t, st, topic)
	brokers := strings.Join(st.Brokers, ",")
	base := append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.customers", "--mode", "upsert", "--key", "string",
		"--flush-records", "50"}, loc...)

	out := mustFloe(t, base...)
	main := openFloeTable(t, st, "lake.customers")
	// Its summary counts the records as the ledger does, as a sink's.
	if main.Mode() != mapping.ModeUpsert || main.UpsertKey().String() != "kafka-key" || !strings.Contains(out, " upserts, ") || !strings.Contains(out, " rows written)") {
		t.Fatalf("replay --mode upsert: mode %s key %s\n%s", main.Mode(), main.UpsertKey(), out)
	}
	want := keyedRows(t, main, false)
	if len(want) == 0 || len(want) >= 10 {
		t.Fatalf("upsert table holds %d keys, want some of the 10 keys (tombstones delete)", len(want))
	}
	l, err := main.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	var c mapping.Coverage
	for _, tp := range l.Partitions() {
		p := mapping.Cover(l.Ranges(tp))
		c.Records, c.Deletes, c.DeadLetters = c.Records+p.Records, c.Deletes+p.Deletes, c.DeadLetters+p.DeadLetters
	}
	if c.Records+c.Deletes+c.DeadLetters != 240 || c.Deletes == 0 || c.DeadLetters == 0 {
		t.Fatalf("ledger counts %+v: want 240 records as upserts, deletes and dead letters (no key)", c)
	}
	before := main.Head().SnapshotID

	out = mustFloe(t, append(base, "--branch", "rebuild", "--publish")...)
	if !strings.Contains(out, fmt.Sprintf("compared with main key by key (rows with deletes applied, %d keys): EQUAL", len(want))) ||
		!strings.Contains(out, fmt.Sprintf("main moved from snapshot %d to", before)) {
		t.Fatalf("publish of an equal branch:\n%s", out)
	}
	main = openFloeTable(t, st, "lake.customers")
	if got := keyedRows(t, main, false); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("main after publish:\n%v\nwant:\n%v", got, want)
	}

	published := main.Head().SnapshotID
	code, out, errs := floe(t, append(base, "--branch", "late", "--publish", "--from", "0=117,1=117")...)
	if code != exitError || !strings.Contains(errs, "branch late of lake.customers differs from main: main's ledger holds customers/0 [0, 120), customers/1 [0, 120), the branch's customers/0 [117, 120)") ||
		!strings.Contains(errs, `5 keys differ, first kafka_key="c00": main customers/0@115, branch no row;`) ||
		!strings.Contains(lastLine(errs), "not published, main is unchanged; find out why they differ") || !strings.Contains(lastLine(errs), "--publish-different") {
		t.Fatalf("publish of a different branch: exit %d\n%s\n%s", code, out, errs)
	}
	// The result before the error says DIFFERENT, not EQUAL (from a new-user run).
	if !strings.Contains(out, "compared with main key by key: DIFFERENT: not published (below)") || strings.Contains(out, "EQUAL") {
		t.Errorf("the refused publish's result:\n%s", out)
	}
	main = openFloeTable(t, st, "lake.customers")
	if main.Head().SnapshotID != published || !main.HasBranch("late") {
		t.Fatalf("a refused publish moved main (head %d, was %d) or lost the branch", main.Head().SnapshotID, published)
	}
	out = mustFloe(t, append(base, "--branch", "late", "--publish", "--publish-different", "--from", "0=117,1=117")...)
	// Published is said once (it was "...: published all the same);
	// published anyway").
	if !strings.Contains(out, "compared with main key by key: DIFFERENT: branch late of lake.customers differs from main") ||
		!strings.Contains(out, ": published all the same (--publish-different)\n") || strings.Count(out, "published anyway")+strings.Count(out, "all the same") != 1 ||
		!strings.Contains(out, "main moved from snapshot") {
		t.Fatalf("--publish-different:\n%s", out)
	}

	// Bad input: --id-columns without upsert, an unknown mode, a key for
	// raw values, --publish-different alone.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--id-columns", "id,region"}, "--id-columns id,region keys an upsert table: add --mode upsert"},
		{[]string{"--mode", "fold"}, `--mode "fold": want append or upsert`},
		{[]string{"--mode", "upsert", "--id-columns", "id"}, "a new table's values are raw"},
		{[]string{"--branch", "b", "--publish-different"}, "--publish-different needs --publish"},
		{[]string{"--mode", "upsert", "--fold", "latest"}, "--fold \"latest\": want no --mode"},
	} {
		args := append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.bad"}, append(c.args, loc...)...)
		if code, _, errs := floe(t, args...); code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d %q, want %q", c.args, code, errs, c.want)
		}
	}
}

// TestReplayCommandFoldLatest: replay --fold latest writes an upsert table
// keyed by (kafka_topic, kafka_partition, kafka_key) whose rows are those
// of the copy-on-write state table earlier floes wrote for the same log;
// both audit COMPLETE at every level (the legacy one as a state table),
// and floe refuses
// to write into it (sink, replay), naming the fix.
func TestReplayCommandFoldLatest(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "kv"
	produceKeyed(t, st, topic)
	brokers := strings.Join(st.Brokers, ",")

	out := mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.kv_state", "--fold", "latest",
		"--flush-records", "40"}, loc...)...)
	state := openFloeTable(t, st, "lake.kv_state")
	if state.Mode() != mapping.ModeUpsert || !state.UpsertKey().Equal(mapping.FoldLatestKey()) || !strings.Contains(out, "replayed") {
		t.Fatalf("--fold latest: mode %s key %s\n%s", state.Mode(), state.UpsertKey(), out)
	}

	// A key given alone is shown as the object --key takes (from a new
	// user); the raw keys of this table (no --key string) are given as
	// their text (they were refused: "--key cannot give yet").
	code, _, errs := floe(t, append([]string{"where", "--table", "lake.kv_state", "--key", "c03"}, loc...)...)
	if want := `e.g. {"kafka_topic":"TOPIC","kafka_partition":0,"kafka_key":"c03"}`; code != exitError || !strings.Contains(errs, want) {
		t.Errorf("where --key c03 on a --fold latest table: exit %d\n%s\nwant %q", code, errs, want)
	}
	for p, want := range map[int]string{0: "in lake.kv_state: never seen", 1: "in lake.kv_state: row\n  record     kv/1 offset 119"} {
		key := fmt.Sprintf(`{"kafka_topic":"kv","kafka_partition":%d,"kafka_key":"c03"}`, p)
		code, out, errs := floe(t, append([]string{"where", "--table", "lake.kv_state", "--key", key}, loc...)...)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("where --key %s on a --fold latest table: exit %d\n%s%s\nwant %q", key, code, out, errs, want)
		}
	}

	e := &floetest.Env{T: t, Ctx: t.Context(), Stack: st}
	legacy := e.LegacyStateTable("lake.kv_legacy")
	e.FoldLegacy(legacy, topic, 40)
	got, old := keyedRows(t, state, true), keyedRows(t, legacy, true)
	if len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(old) {
		t.Fatalf("--fold latest:\n%v\nthe copy-on-write fold of the same log:\n%v", got, old)
	}

	out = mustFloe(t, append([]string{"audit", "--table", "lake.kv_state", "--deep", "--verify-content", "--brokers", brokers}, loc...)...)
	if !strings.Contains(out, "verdict: COMPLETE") || !strings.Contains(out, "upsert table (key partition-kafka-key)") {
		t.Fatalf("audit of the --fold latest table:\n%s", out)
	}
	out = mustFloe(t, append([]string{"audit", "--table", "lake.kv_legacy", "--deep", "--verify-content", "--brokers", brokers}, loc...)...)
	if !strings.Contains(out, "verdict: COMPLETE") || !strings.Contains(out, "state table (floe.fold=latest)") {
		t.Fatalf("audit of the legacy state table:\n%s", out)
	}
	for _, args := range [][]string{
		{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.kv_legacy", "--stop-at-end"},
		{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.kv_legacy", "--fold", "latest", "--branch", "again"},
	} {
		code, _, errs := floe(t, append(args, loc...)...)
		if code != exitError || !strings.Contains(errs, "is a state table of an earlier floe") ||
			!strings.Contains(lastLine(errs), "replay the topic into a new table with floe replay --fold latest") {
			t.Errorf("%s into a legacy state table: exit %d\n%s", args[0], code, errs)
		}
	}
	legacy = openFloeTable(t, st, "lake.kv_legacy")
	if legacy.HasBranch("again") {
		t.Error("the refused replay created a branch of the legacy state table")
	}
}

// TestReplayBranchEqualDespiteRecordedHead (from a new-user run): main was
// sunk after retention had deleted the start of a partition, so its ledger
// begins at the log start; a replay from offset 0 onto a branch records
// the deleted head as lost. Both hold the same offsets and every key is
// equal, and the publish was refused as differing ("main's ledger covers
// [300, 353), the branch's [0, 353)"), advising to replay from offsets
// the log no longer has.
func TestReplayBranchEqualDespiteRecordedHead(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "customers"
	produceKeyed(t, st, topic)
	if err := st.Cluster.DeleteRecords(topic, 1, 40); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.customers", "--mode", "upsert", "--key", "string", "--stop-at-end"}, loc...)...)
	main := openFloeTable(t, st, "lake.customers")
	want := keyedRows(t, main, false)
	out := mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.customers", "--mode", "upsert", "--key", "string",
		"--branch", "rebuild", "--publish"}, loc...)...)
	if !strings.Contains(out, "EQUAL") || !strings.Contains(out, "main moved from snapshot") {
		t.Fatalf("publish of a branch holding what main holds:\n%s", out)
	}
	if got := keyedRows(t, openFloeTable(t, st, "lake.customers"), false); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("main after publish:\n%v\nwant:\n%v", got, want)
	}
}

// TestReplayPublishUpsertWithoutRows (from a review): a table keyed by its
// key's fields names its key columns with its first rows; while neither
// main nor the replay's branch holds any (every record a dead letter), the
// replay's key-by-key comparison was refused ("has no identifier fields").
// There are no keys to compare: the comparison is equal, and publishes.
func TestReplayPublishUpsertWithoutRows(t *testing.T) {
	recs := []*kgo.Record{rec("kd", 0, []byte(`{"id":1}`), []byte("not json"), 1), rec("kd", 0, []byte(`{"id":2}`), []byte("nor this"), 2)}
	st, sink, loc := upsertStack(t, "kd", 1, recs)
	code, out, errs := floe(t, append(sink, "--table", "lake.kd", "--mode", "upsert", "--key", "json", "--value", "json")...)
	if code != exitOnlyDeadLetters {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = floe(t, slices.Concat([]string{"replay", "-b", st.Brokers[0], "-t", "kd", "--table", "lake.kd", "--branch", "rebuild", "--publish"}, loc)...)
	if !strings.Contains(out, "0 keys): EQUAL") || !strings.Contains(out, "published") {
		t.Fatalf("replay --publish of an upsert table without rows: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestReplayUpsertFromLaterSaysKeysLeftOut (from a new user's run): an
// upsert table replayed from a later start holds only the keys written
// since, and the audit calls it complete from where it began: the user
// took it for a mirror of the source. The plan says so; from earliest it
// does not.
func TestReplayUpsertFromLaterSaysKeysLeftOut(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "mirror"
	produceKeyed(t, st, topic)
	base := append([]string{"replay", "--brokers", strings.Join(st.Brokers, ","), "--topic", topic, "--mode", "upsert", "--key", "string"}, loc...)
	const note = "a key whose records all come before them has no row"
	if out := mustFloe(t, append(base, "--table", "lake.later", "--from", "0=110,1=110")...); !strings.Contains(out, note) {
		t.Errorf("replay --mode upsert --from later offsets lacks %q:\n%s", note, out)
	}
	if out := mustFloe(t, append(base, "--table", "lake.all")...); strings.Contains(out, note) {
		t.Errorf("replay --mode upsert from earliest says %q:\n%s", note, out)
	}
}
