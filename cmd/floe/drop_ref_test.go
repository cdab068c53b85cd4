package main

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

// dropRefStack is sinkStack with a record that cannot become a row of a
// JSON table at orders/0 offset 100, sunk into lake.orders (300 rows and
// a dead letter in lake.orders_dlq).
func dropRefStack(t *testing.T) (*localstack.Stack, []string, string) {
	t.Helper()
	st, loc := sinkStack(t)
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "orders", Partition: 0, Value: []byte("oops")}}); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(st.Brokers, ",")
	if out := mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json", "--stop-at-end"}, loc)...); !strings.Contains(out, "1 dead letter") {
		t.Fatalf("sink: %s", out)
	}
	return st, loc, brokers
}

// branchFiles returns the data files of the head of ref of table name.
func branchFiles(t *testing.T, st *localstack.Stack, name, ref string) []string {
	t.Helper()
	tbl := foreignTable(t, st.Catalog(), name)
	r, ok := maps.Collect(tbl.Metadata().Refs())[ref]
	if !ok {
		t.Fatalf("%s has no ref %s", name, ref)
	}
	tasks, err := tbl.Scan(table.WithSnapshotID(r.SnapshotID)).PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, task := range tasks {
		files = append(files, strings.TrimPrefix(task.File.FilePath(), "file://"))
	}
	return files
}

// TestDropUnpublishedBranch: a replay onto a branch that is abandoned
// (never published) is dropped with its own dead-letter table and the
// replay's recorded bounds; main and its dead-letter table stay, and the
// next floe maintain with short retention deletes the branch's files, main's
// audit complete. Without --yes nothing changes (exit 2).
func TestDropUnpublishedBranch(t *testing.T) {
	st, loc, brokers := dropRefStack(t)
	mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json", "--branch", "rebuild"}, loc)...)
	if !replayTableExists(t, st, "lake.orders_rebuild_dlq") {
		t.Fatal("the replay created no dead-letter table of its branch")
	}
	files := branchFiles(t, st, "lake.orders", "rebuild")
	if len(files) == 0 {
		t.Fatal("the branch has no data files")
	}
	drop := slices.Concat([]string{"drop", "--table", "lake.orders", "--branch", "rebuild"}, loc)

	code, out, errs := floe(t, drop...)
	if code != exitError || !strings.Contains(out, "would drop branch rebuild of lake.orders (snapshot ") ||
		!strings.Contains(out, "would drop lake.orders_rebuild_dlq, the branch's dead-letter table") ||
		!regexp.MustCompile(`branch rebuild of lake.orders was last committed \d+s ago: stop the replay`).MatchString(out) ||
		!strings.Contains(errs, "pass --yes") {
		t.Fatalf("drop --branch without --yes: exit %d\n%s%s", code, out, errs)
	}
	if !openTable(t, st.Catalog(), "lake.orders").HasBranch("rebuild") || !replayTableExists(t, st, "lake.orders_rebuild_dlq") {
		t.Fatal("drop --branch without --yes changed the table")
	}

	code, out, errs = floe(t, append(drop, "--yes", "--json")...)
	if code != exitOK || !strings.Contains(out, `"dropped":true`) || !strings.Contains(out, `"table":"lake.orders_rebuild_dlq"`) ||
		!strings.Contains(out, `"files_deleted":true`) || !strings.Contains(errs, "a replay still writing it") {
		t.Fatalf("drop --branch --yes --json: exit %d\n%s%s", code, out, errs)
	}
	tbl := openTable(t, st.Catalog(), "lake.orders")
	if tbl.HasBranch("rebuild") || replayTableExists(t, st, "lake.orders_rebuild_dlq") || !replayTableExists(t, st, "lake.orders_dlq") {
		t.Fatalf("after the drop: branch %v, its dead-letter table %v, main's %v; want only main's left",
			tbl.HasBranch("rebuild"), replayTableExists(t, st, "lake.orders_rebuild_dlq"), replayTableExists(t, st, "lake.orders_dlq"))
	}
	for k := range tbl.Iceberg().Properties() {
		if strings.HasSuffix(k, ".rebuild") || strings.HasSuffix(k, "orders_rebuild_dlq") {
			t.Errorf("property %s of the dropped branch is left", k)
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("branch file %s gone before maintenance: %v", f, err)
		}
	}

	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.orders", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("file %s of the dropped branch is left after maintenance", f)
		}
	}
	if code, out, errs := floe(t, slices.Concat([]string{"audit", "--table", "lake.orders", "--brokers", brokers}, loc)...); code != exitOK {
		t.Errorf("audit of main after the drop and maintenance: exit %d\n%s%s", code, out, errs)
	}
	if out := mustFloe(t, slices.Concat([]string{"dead-letters", "--table", "lake.orders"}, loc)...); !strings.Contains(out, "1 dead letter") {
		t.Errorf("main's dead letters after the drop:\n%s", out)
	}
}

// TestDropPublishedBranchAndTag: a published replay's branch is dropped,
// and its dead-letter table, which main's ledger names, stays: main's
// audit is complete and floe dead-letters reads its dead letter. The tag
// --tag-main made is dropped too, and maintenance then deletes the files
// of main's history before the publish, main still complete. main, an unknown ref, a ref of the other
// kind, --branch with --tag and a branch a publish holds are refused, and a
// drop cut short after its commit is finished by running it again.
func TestDropPublishedBranchAndTag(t *testing.T) {
	st, loc, brokers := dropRefStack(t)
	replay := func(branch string, extra ...string) {
		t.Helper()
		mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json", "--branch", branch}, extra, loc)...)
	}
	replay("rebuild", "--publish", "--tag-main", "pre")
	dropArgs := func(extra ...string) []string {
		return slices.Concat([]string{"drop", "--table", "lake.orders"}, extra, loc)
	}

	// Refusals, the table unchanged.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--branch", "main", "--yes"}, "main is the table itself"},
		{[]string{"--branch", "nope", "--yes"}, "lake.orders has no branch named nope; its refs are main (branch), rebuild (branch), pre (tag)"},
		{[]string{"--tag", "nope", "--yes"}, "has no tag named nope"},
		{[]string{"--branch", "pre", "--yes"}, "pre of lake.orders is a tag, not a branch: floe drop --tag pre"},
		{[]string{"--tag", "rebuild", "--yes"}, "is a branch, not a tag: floe drop --branch rebuild"},
		{[]string{"--branch", "rebuild", "--tag", "pre", "--yes"}, "--branch and --tag"},
	} {
		// No "last committed ... ago" warning before the refusal of
		// main (from a new-user run).
		if code, out, errs := floe(t, dropArgs(c.args...)...); code != exitError || !strings.Contains(errs, c.want) || out != "" || strings.Contains(errs, "last committed") {
			t.Errorf("drop %v: exit %d\n%s%s\nwant exit 2 saying %q", c.args, code, out, errs, c.want)
		}
	}
	if refs := openTable(t, st.Catalog(), "lake.orders").Refs(); len(refs) != 3 {
		t.Fatalf("refs after the refusals: %+v", refs)
	}

	// The replay that published the branch has ended: no advice to stop
	// it (from a new-user run), in the listing or the drop.
	if code, out, errs := floe(t, dropArgs("--branch", "rebuild")...); code != exitError || strings.Contains(out+errs, "last committed") {
		t.Fatalf("listing of the published branch's drop: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := floe(t, dropArgs("--branch", "rebuild", "--json")...); code != exitError || !strings.Contains(out, `"published":true`) {
		t.Fatalf("JSON listing of the published branch's drop: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := floe(t, dropArgs("--branch", "rebuild", "--yes")...)
	if code != exitOK || strings.Contains(errs, "last committed") || !strings.Contains(out, "dropped branch rebuild of lake.orders") || !strings.Contains(out, "it was published as main") ||
		strings.Contains(out, "dropped lake.orders_rebuild_dlq") {
		t.Fatalf("drop of the published branch:\n%s", out)
	}
	// Only what holds the table is said, not every reason a table can
	// stay for (from a user).
	if !strings.Contains(out, "  lake.orders_rebuild_dlq stays: main's ledger names it (the same drop run again drops it once that no longer holds)\n") {
		t.Errorf("drop of the published branch does not say that main's ledger holds its dead-letter table, or says more:\n%s", out)
	}
	tbl := openTable(t, st.Catalog(), "lake.orders")
	if tbl.HasBranch("rebuild") || !replayTableExists(t, st, "lake.orders_rebuild_dlq") || tbl.Iceberg().Properties()[snapshot.PropPublished+"rebuild"] == "" {
		t.Fatalf("after the drop of the published branch: branch %v, its dead-letter table %v, published property %q",
			tbl.HasBranch("rebuild"), replayTableExists(t, st, "lake.orders_rebuild_dlq"), tbl.Iceberg().Properties()[snapshot.PropPublished+"rebuild"])
	}
	audit := slices.Concat([]string{"audit", "--table", "lake.orders", "--brokers", brokers}, loc)
	if code, out, errs := floe(t, audit...); code != exitOK {
		t.Errorf("audit of main after the drop of its published branch: exit %d\n%s%s", code, out, errs)
	}
	if out := mustFloe(t, slices.Concat([]string{"dead-letters", "--table", "lake.orders"}, loc)...); !strings.Contains(out, "1 dead letter in lake.orders_rebuild_dlq") {
		t.Errorf("main's dead letters after the drop of its published branch:\n%s", out)
	}

	tagged := branchFiles(t, st, "lake.orders", "pre")
	if len(tagged) == 0 {
		t.Fatal("the tag has no data files")
	}
	code, out, errs = floe(t, dropArgs("--tag", "pre")...)
	if code != exitError || !strings.Contains(out, "would drop tag pre of lake.orders") || !strings.Contains(errs, "pass --yes") || !openTable(t, st.Catalog(), "lake.orders").HasTag("pre") {
		t.Fatalf("drop --tag without --yes: exit %d\n%s%s", code, out, errs)
	}
	if out := mustFloe(t, dropArgs("--tag", "pre", "--yes")...); !strings.Contains(out, "dropped tag pre of lake.orders") || openTable(t, st.Catalog(), "lake.orders").HasTag("pre") {
		t.Fatalf("drop --tag --yes:\n%s", out)
	}
	// main's history before the publish, which only the tag kept, goes
	// at the next maintenance; main stays complete.
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.orders", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	for _, f := range tagged {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("file %s of the dropped tag is left after maintenance", f)
		}
	}
	if code, out, errs := floe(t, audit...); code != exitOK {
		t.Errorf("audit of main after the drop of the tag and maintenance: exit %d\n%s%s", code, out, errs)
	}
	if out := mustFloe(t, slices.Concat([]string{"dead-letters", "--table", "lake.orders"}, loc)...); !strings.Contains(out, "1 dead letter in lake.orders_rebuild_dlq") {
		t.Errorf("main's dead letters after the drop of the tag and maintenance:\n%s", out)
	}

	// A branch a publish is swapping onto main is refused while its hold
	// stands.
	replay("other")
	tbl = openTable(t, st.Catalog(), "lake.orders")
	hold := "other " + strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	if err := tbl.SetProperties(t.Context(), map[string]string{snapshot.PropPublishHold: hold}); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := floe(t, dropArgs("--branch", "other", "--yes")...); code != exitError || !strings.Contains(errs, "a replay is publishing it as main") || !openTable(t, st.Catalog(), "lake.orders").HasBranch("other") {
		t.Errorf("drop of a branch a publish holds: exit %d\n%s%s", code, out, errs)
	}

	// A drop cut short after its commit (the branch gone, its
	// dead-letter table left) is finished by running it again.
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	head := maps.Collect(tbl.Iceberg().Metadata().Refs())["other"].SnapshotID
	if _, _, err := cat.CommitTable(t.Context(), tbl.Identifier(), []table.Requirement{table.AssertRefSnapshotID("other", &head)},
		[]table.Update{table.NewRemoveSnapshotRefUpdate("other"),
			table.NewSetPropertiesUpdate(map[string]string{snapshot.PropDroppingPrefix + "other": "lake.orders_other_dlq"})}); err != nil {
		t.Fatal(err)
	}
	// floe maintain says so: only the drop run again reads the record.
	if code, out, errs := floe(t, slices.Concat([]string{"maintain", "--table", "lake.orders"}, loc)...); code != exitOK ||
		!strings.Contains(errs, "a drop of a branch was cut short") || !strings.Contains(errs, "floe drop --table lake.orders --branch other --yes") {
		t.Errorf("maintain after a cut-short drop: exit %d\n%s%s", code, out, errs)
	}
	if out := mustFloe(t, dropArgs("--branch", "other", "--yes")...); !strings.Contains(out, "branch other of lake.orders was dropped before, its drop cut short: finishing it") ||
		!strings.Contains(out, "dropped lake.orders_other_dlq") || replayTableExists(t, st, "lake.orders_other_dlq") {
		t.Errorf("drop of a branch whose drop was cut short:\n%s", out)
	}
	if !replayTableExists(t, st, "lake.orders_rebuild_dlq") || !replayTableExists(t, st, "lake.orders_dlq") {
		t.Error("a dead-letter table main's ledger names or main's writers write is gone")
	}
}
