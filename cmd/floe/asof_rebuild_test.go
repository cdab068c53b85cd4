package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// TestAsOfExpiredPrintsReplay (from a new-user run): as-of --rows at an
// expired snapshot of an upsert table prints the whole floe replay command
// that rebuilds it (topic, a new table, --until the position, the table's
// layout flags), not only "floe replay --until the position", and that
// command, run as printed, rebuilds the state as of the position.
func TestAsOfExpiredPrintsReplay(t *testing.T) {
	st, loc := keyedStack(t, "lake.u")
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.u", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.u", "--offsets", "u/0=8", "--rows"}, loc)...)
	const want = "rebuild it into a new table with: floe replay -t u --table lake.u_at --until 0=8 --like lake.u"
	if code != exitError || !strings.Contains(errs, "has expired") || !strings.HasSuffix(strings.TrimSpace(errs), want) {
		t.Fatalf("as-of at an expired snapshot: exit %d\n%s\n%s\nwant it to end with %q", code, out, errs, want)
	}
	replay := strings.Fields(strings.TrimPrefix(want, "rebuild it into a new table with: floe "))
	mustFloe(t, slices.Concat(replay, []string{"-b", st.Brokers[0]}, loc)...)
	out = mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.u_at", "--offsets", "u/0=8", "--rows"}, loc)...)
	if !strings.Contains(out, "u/0 below offset 8 (given): a commit boundary") || !strings.Contains(out, "\n4 rows") {
		t.Fatalf("as-of the rebuilt table:\n%s", out)
	}
}

// TestAsOfBeforePublishedReplay (from a new-user run): once a replay
// published onto main committed the whole topic in one commit, main's
// history holds no state at an earlier boundary; as-of said "0 rows" and
// "empty": false, as of an empty table. It is refused, saying why, where
// the state then may be and the replay that rebuilds it; a position main's
// history does reach is answered as before.
func TestAsOfBeforePublishedReplay(t *testing.T) {
	st, loc := keyedStack(t, "lake.u")
	asOf := func(extra ...string) (int, string, string) {
		return floe(t, slices.Concat([]string{"as-of", "--table", "lake.u"}, loc, extra)...)
	}
	if code, out, errs := asOf("--offsets", "u/0=8", "--rows"); code != exitOK || !strings.Contains(out, "\n4 rows") {
		t.Fatalf("before the publish: exit %d\n%s\n%s", code, out, errs)
	}
	mustFloe(t, slices.Concat([]string{"replay", "-b", st.Brokers[0], "-t", "u", "--table", "lake.u", "--branch", "rebuild", "--publish"}, loc)...)
	for _, extra := range [][]string{
		{"--offsets", "u/0=8", "--rows"},
		{"--offsets", "u/0=8", "--json"},
		{"--time", "2023-11-14T22:13:28Z", "--brokers", st.Brokers[0], "--rows", "--json"},
	} {
		code, out, errs := asOf(extra...)
		if code != exitError || out != "" || !strings.Contains(errs, "lake.u as of u/0=8: main's history no longer reaches back to that position: a replay published from branch rebuild replaced main's earlier commits") ||
			!strings.Contains(errs, "a tag made by the publish (floe replay --tag-main)") ||
			!strings.HasSuffix(strings.TrimSpace(errs), "rebuild it into a new table with: floe replay -t u --table lake.u_at --until 0=8 --like lake.u") {
			t.Errorf("%v after the publish: exit %d\n%s\n%s", extra, code, out, errs)
		}
	}
	if code, out, errs := asOf("--offsets", "u/0=12", "--rows"); code != exitOK || !strings.Contains(out, "a commit boundary") || !strings.Contains(out, "\n3 rows") {
		t.Fatalf("at main's head: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := asOf("--offsets", "u/0=0", "--rows"); code != exitOK || !strings.Contains(out, "\n0 rows") {
		t.Fatalf("before the topic's first record: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestAsOfRebuildNameIsFree (from a new-user run): as-of --rows at an
// expired snapshot suggested floe replay into TABLE_at also once that
// table existed (from following the suggestion before), where the replay
// refuses. The suggestion names a table the catalog does not have, and
// runs as printed.
func TestAsOfRebuildNameIsFree(t *testing.T) {
	st, loc := keyedStack(t, "lake.u")
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.u", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	const prefix = "rebuild it into a new table with: floe "
	suggested := func(offsets string) []string {
		t.Helper()
		code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.u", "--offsets", offsets, "--rows"}, loc)...)
		i := strings.LastIndex(errs, prefix)
		if code != exitError || i < 0 {
			t.Fatalf("as-of %s at an expired snapshot: exit %d\n%s\n%s", offsets, code, out, errs)
		}
		return strings.Fields(errs[i+len(prefix):])
	}
	first := suggested("u/0=8")
	if !slices.Contains(first, "lake.u_at") {
		t.Fatalf("first suggestion %v: want --table lake.u_at", first)
	}
	mustFloe(t, slices.Concat(first, []string{"-b", st.Brokers[0]}, loc)...)
	second := suggested("u/0=6")
	if !slices.Contains(second, "lake.u_at_2") {
		t.Fatalf("suggestion once lake.u_at exists %v: want --table lake.u_at_2", second)
	}
	if code, out, errs := floe(t, slices.Concat(second, []string{"-b", st.Brokers[0]}, loc)...); code != 0 {
		t.Fatalf("the suggested replay: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestAsOfExpiredRebuildNamesEveryPartition (from a new-user run): as-of
// --rows at an expired snapshot, for a position naming one partition of
// three, suggested floe replay --until that partition only, and the replay
// took the two others to the log's end: the rebuilt table was not the
// table as of the position, whose partitions not named are as the answer's
// snapshot has them. The suggestion names every partition, at the offsets
// the answer's snapshot had, and the table it rebuilds holds the rows the
// table held as of the position.
func TestAsOfExpiredRebuildNamesEveryPartition(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "40"}, loc)...)
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.orders", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--offsets", "orders/0=10", "--rows"}, loc)...)
	const prefix = "rebuild it into a new table with: floe "
	i := strings.LastIndex(errs, prefix)
	if code != exitError || i < 0 || !strings.Contains(errs, "leaves out orders/1 and orders/2") {
		t.Fatalf("as-of of one partition at an expired snapshot: exit %d\n%s\n%s", code, out, errs)
	}
	replay := strings.Fields(errs[i+len(prefix):])
	until := replay[slices.Index(replay, "--until")+1]
	parts := strings.Split(until, ",")
	if len(parts) != 3 || parts[0] != "0=10" {
		t.Fatalf("suggested --until %s: want every partition, orders/0 at 10", until)
	}
	mustFloe(t, slices.Concat(replay, []string{"-b", st.Brokers[0]}, loc)...)
	// The position with every partition named as the answer has them reads
	// the rows from the current snapshot: the rebuilt table holds as many.
	offsets := "orders/" + strings.Join(parts, ",orders/")
	want := mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--offsets", offsets, "--rows"}, loc)...)
	got := mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.orders_at", "--time", "now", "--rows"}, loc)...)
	count := func(s string) string { return s[strings.LastIndex(strings.TrimSpace(s), "\n")+1:] }
	if count(got) != count(want) {
		t.Fatalf("the rebuilt table holds %q, the table as of %s %q", count(got), offsets, count(want))
	}
}

// TestAsOfInsideFirstCommit (from a new-user run): as-of an upsert table
// at a position inside its first commit said "empty": false while the
// state it answered with, the boundary at offset 0, holds no row. It says
// the table was empty then; and an answer that is not exact, there or
// inside a later commit, prints the floe replay command that rebuilds the
// exact state, as the refusal of an expired snapshot does, in --json too
// (rebuild); run as printed, it rebuilds it.
func TestAsOfInsideFirstCommit(t *testing.T) {
	st, loc := keyedStack(t, "lake.u") // commits of 4 records: [0, 4), [4, 8), [8, 12)
	asOf := func(extra ...string) string {
		return mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.u"}, loc, extra)...)
	}
	var doc struct {
		Empty   bool   `json:"empty"`
		Exact   *bool  `json:"exact"`
		Rebuild string `json:"rebuild"`
		Rows    []any  `json:"rows"`
	}
	const first = "floe replay -t u --table lake.u_at --until 0=2 --like lake.u"
	out := asOf("--offsets", "0=2", "--rows", "--json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("as-of --json: %v\n%s", err, out)
	}
	if !doc.Empty || doc.Exact == nil || *doc.Exact || len(doc.Rows) != 0 || doc.Rebuild != first {
		t.Fatalf("as-of inside the first commit: want empty, not exact, no rows and rebuild %q:\n%s", first, out)
	}
	text := asOf("--offsets", "0=2")
	if !strings.Contains(text, ": the empty table, before its first record") || !strings.Contains(text, "rebuild the exact state as of the position into a new table with: "+first+"\n") {
		t.Fatalf("as-of inside the first commit, text:\n%s", text)
	}
	later := asOf("--offsets", "0=6")
	const second = "floe replay -t u --table lake.u_at --until 0=6 --like lake.u"
	if strings.Contains(later, "the empty table") || !strings.Contains(later, "rebuild the exact state as of the position into a new table with: "+second+"\n") {
		t.Fatalf("as-of inside a later commit:\n%s", later)
	}
	if exact := asOf("--offsets", "0=4"); strings.Contains(exact, "floe replay") {
		t.Fatalf("as-of at a commit boundary, exact, names a replay:\n%s", exact)
	}
	replay := strings.Fields(strings.TrimPrefix(first, "floe "))
	mustFloe(t, slices.Concat(replay, []string{"-b", st.Brokers[0]}, loc)...)
	rebuilt := mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.u_at", "--offsets", "0=2", "--rows"}, loc)...)
	if !strings.Contains(rebuilt, "\n2 rows") {
		t.Fatalf("as-of the rebuilt table, want the 2 rows of a and b:\n%s", rebuilt)
	}
}

// TestAsOfRebuildKeepsPartitionSpec (from a new-user run): as-of inside a
// commit of a bucketed upsert table suggested a floe replay with the
// table's layout flags but not its --partition-by, so that the rebuilt
// table was unpartitioned. The suggestion says --like TABLE, which takes
// the layout and the spec; run as printed, the rebuild has both.
func TestAsOfRebuildKeepsPartitionSpec(t *testing.T) {
	st, loc := keyedStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "-b", st.Brokers[0], "-t", "u", "--stop-at-end", "--table", "lake.p", "--mode", "upsert", "--key", "string",
		"--flush-records", "4", "--partition-by", "bucket(8, kafka_key)"}, loc)...)
	out := mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.p", "--offsets", "0=6"}, loc)...)
	const want = "floe replay -t u --table lake.p_at --until 0=6 --like lake.p"
	if !strings.Contains(out, "into a new table with: "+want+"\n") {
		t.Fatalf("as-of inside a commit of a bucketed table: want %q\n%s", want, out)
	}
	mustFloe(t, slices.Concat(strings.Fields(strings.TrimPrefix(want, "floe ")), []string{"-b", st.Brokers[0]}, loc)...)
	rebuilt, table := openTable(t, st.Catalog(), "lake.p_at"), openTable(t, st.Catalog(), "lake.p")
	if got, had := rebuilt.PartitionSpec(), table.PartitionSpec(); got != had {
		t.Errorf("the rebuilt table's spec %s, the table's %s", got, had)
	}
	if rebuilt.Mode() != mapping.ModeUpsert {
		t.Errorf("the rebuilt table is of mode %s, want upsert", rebuilt.Mode())
	}
}
