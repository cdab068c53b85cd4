package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
)

// TestDropCommand (from a new-user run: floe had no way to drop a table
// created by mistake): floe drop lists the table and its dead-letter table
// and drops nothing without --yes, refuses a dead-letter table, and with
// --yes drops both with their files, after which a sink creates the table
// afresh under the same name.
func TestDropCommand(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "orders", Partition: 0, Value: []byte("oops")}}); err != nil {
		t.Fatal(err)
	}
	sink := append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "orders", "--table", "lake.ordres", "--value", "json", "--stop-at-end"}, loc...)
	if out := mustFloe(t, sink...); !strings.Contains(out, "1 dead letter") {
		t.Fatalf("sink: %s", out)
	}
	location := strings.TrimPrefix(openTable(t, st.Catalog(), "lake.ordres").Iceberg().Location(), "file://")
	// A replay onto a branch creates the branch's dead-letter table, which
	// no commit names while it holds none: it was left behind, and then
	// refused (from a new-user run).
	mustFloe(t, append([]string{"replay", "-b", strings.Join(st.Brokers, ","), "-t", "orders", "--table", "lake.ordres", "--branch", "rebuild", "--until", "0=3,1=0,2=0"}, loc...)...)
	if !replayTableExists(t, st, "lake.ordres_rebuild_dlq") {
		t.Fatal("the replay created no dead-letter table of its branch")
	}
	drop := append([]string{"drop", "--table", "lake.ordres"}, loc...)

	code, out, errs := floe(t, drop...)
	if code != exitError || !strings.Contains(out, "would drop lake.ordres_dlq") || !strings.Contains(out, "would drop lake.ordres (") ||
		!strings.Contains(out, "would drop lake.ordres_rebuild_dlq") ||
		!strings.Contains(errs, "pass --yes") || !replayTableExists(t, st, "lake.ordres") || !replayTableExists(t, st, "lake.ordres_dlq") {
		t.Fatalf("drop without --yes: exit %d\n%s\n%s", code, out, errs)
	}
	// Committed moments ago: a sink may still write it (from an
	// operator's run).
	if !regexp.MustCompile(`lake.ordres was last committed \d+s ago: stop the sinks that write it before dropping it`).MatchString(out) {
		t.Errorf("drop without --yes of a table committed moments ago:\n%s", out)
	}
	code, _, errs = floe(t, append([]string{"drop", "--table", "lake.ordres_dlq", "--yes"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "is the dead-letter table of lake.ordres") || !replayTableExists(t, st, "lake.ordres_dlq") {
		t.Fatalf("drop of the dead-letter table: exit %d, %s", code, errs)
	}
	if strings.Contains(errs, "stops at its next commit") {
		// From a new user: a warning of a drop the command then refused.
		t.Errorf("drop of the dead-letter table warned of a sink finding it gone, then refused:\n%s", errs)
	}

	code, out, errs = floe(t, append(drop, "--yes")...)
	if code != 0 || !strings.Contains(out, "dropped lake.ordres_dlq and deleted its files") || !strings.Contains(out, "dropped lake.ordres and deleted its files") {
		t.Fatalf("drop --yes: exit %d\n%s\n%s", code, out, errs)
	}
	// With --yes too (from a new-user run: said only without it).
	if !regexp.MustCompile(`lake.ordres was last committed \d+s ago: a sink still writing it stops`).MatchString(errs) {
		t.Errorf("drop --yes of a table committed moments ago says nothing of it:\n%s", errs)
	}
	if replayTableExists(t, st, "lake.ordres") || replayTableExists(t, st, "lake.ordres_dlq") || replayTableExists(t, st, "lake.ordres_rebuild_dlq") {
		t.Fatal("a table is still in the catalog")
	}
	// Local storage keeps the empty folders.
	var left []string
	filepath.WalkDir(location, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, path)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("files left under the table's location: %v", left)
	}
	code, _, errs = floe(t, append(drop, "--yes")...)
	if code != exitError || !strings.Contains(errs, "lake.ordres") {
		t.Errorf("drop of a table that is gone: exit %d, %s", code, errs)
	}

	if out := mustFloe(t, sink...); !strings.Contains(out, "300 rows and 1 dead letter") {
		t.Errorf("sink after the drop: %s; want the table afresh", out)
	}
	// A dead-letter table whose data table is gone (dropped by another
	// tool) is dropped on its own.
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.DropTable(t.Context(), []string{"lake", "ordres"}); err != nil {
		t.Fatal(err)
	}
	if out := mustFloe(t, append([]string{"drop", "--table", "lake.ordres_dlq", "--yes"}, loc...)...); !strings.Contains(out, "dropped lake.ordres_dlq") || replayTableExists(t, st, "lake.ordres_dlq") {
		t.Errorf("drop of a dead-letter table whose data table is gone: %s", out)
	}
}

// TestDropRecreatedUnderLiveSink (from a review): a table dropped under a
// live sink and created again at once, for another topic, by another sink:
// the live sink reloaded the new table by name, found its partition gone
// from the ledger ("fenced"), and sank its topic from offset 0 into the
// new table, which then held two topics. It stops at its next commit,
// saying the table was dropped and created again (exit 2), and the new
// table keeps only its own topic.
func TestDropRecreatedUnderLiveSink(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "other", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "other", 1, 5, map[int32]int64{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := liveFloe(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.t", "--flush-interval", "200ms", "--lag-interval", "1s"}, loc...)...)
	waitFor(t, 20*time.Second, "the live sink's first commit", func() bool {
		code, out, _ := floe(t, append([]string{"status", "--table", "lake.t", "--json"}, loc[:2]...)...)
		return code == 0 && strings.Contains(out, `"snapshot_id"`)
	})
	mustFloe(t, append([]string{"drop", "--table", "lake.t", "--yes"}, loc[:2]...)...)
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "other", "--table", "lake.t", "--stop-at-end"}, loc...)...)
	r := produceUntilStopped(ctx, t, st, done)
	t.Logf("live sink: %v", r.err)
	if r.err == nil || !strings.Contains(r.err.Error(), "was dropped and created again while this process had it open") {
		t.Errorf("live sink: %v\n%s", r.err, r.errs)
	}
	if strings.Contains(r.out, "kept") {
		t.Errorf("live sink's summary after its table was dropped:\n%s", r.out)
	}
	sum, err := openTable(t, st.Catalog(), "lake.t").Summary(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range sum.Partitions() {
		if tp.Topic != "other" {
			t.Errorf("the new table, made for topic other, holds %s", tp)
		}
	}
}

// TestSinkSummaryAfterDrop: a live sink whose table floe drop --yes
// removes stops (exit 2) at its next commit; its summary said what it had
// committed was "kept", when it went with the table (from a new-user run).
func TestSinkSummaryAfterDrop(t *testing.T) {
	st, loc := sinkStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := liveFloe(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.t", "--flush-interval", "200ms", "--lag-interval", "1s"}, loc...)...)
	waitFor(t, 20*time.Second, "the live sink's first rows", func() bool {
		code, out, _ := floe(t, append([]string{"files", "--table", "lake.t"}, loc[:2]...)...)
		return code == 0 && strings.Contains(out, ".parquet")
	})
	mustFloe(t, append([]string{"drop", "--table", "lake.t", "--yes"}, loc[:2]...)...)
	r := produceUntilStopped(ctx, t, st, done)
	if r.err == nil || strings.Contains(r.out, "kept") || !strings.Contains(r.out, "gone with the dropped table") {
		t.Errorf("live sink after its table was dropped: %v\nstdout:\n%s", r.err, r.out)
	}
}

// produceUntilStopped produces to topic orders of st until the live floe
// run done ends, and returns its end.
func produceUntilStopped(ctx context.Context, t *testing.T, st *localstack.Stack, done <-chan floeRun) floeRun {
	t.Helper()
	for {
		produceRound(t, st.Brokers, "orders", 3, 3, map[int32]int64{})
		select {
		case r := <-done:
			return r
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("the live sink did not stop")
		}
	}
}

// TestDropKilledDuringPurge (from a review): floe drop --yes SIGKILLed
// while it deletes the table's files. iceberg-go's purge dropped the
// catalog entry first: running the drop again said the table did not
// exist, and floe sink refused to create it again because its location
// still held metadata. The data goes first now, with the table still in
// the catalog, and a drop run again finishes.
func TestDropKilledDuringPurge(t *testing.T) {
	st, loc := sinkStack(t)
	sink := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.d", "--stop-at-end"}, loc...)
	mustFloe(t, sink...)
	tbl := openTable(t, st.Catalog(), "lake.d")
	dir := strings.TrimPrefix(tbl.Iceberg().Location(), "file://")
	// Many files in the data folder, so that the purge takes a moment.
	const n = 40000
	for i := range n {
		if err := os.WriteFile(fmt.Sprintf("%s/data/zz-%06d.parquet", dir, i), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	count := func(sub string) int {
		es, _ := os.ReadDir(dir + "/" + sub)
		return len(es)
	}
	cmd := exec.Command(os.Args[0], append([]string{"drop", "--table", "lake.d", "--yes"}, loc...)...)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(fmt.Sprintf("%s/data/zz-%06d.parquet", dir, 100)); err != nil {
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	t.Logf("killed with %d data files and %d metadata files left", count("data"), count("metadata"))
	if count("metadata") == 0 {
		t.Skip("the purge finished before the kill")
	}
	code, out, errs := floe(t, append([]string{"drop", "--table", "lake.d", "--yes"}, loc...)...)
	t.Logf("floe drop again: exit %d\n%s%s", code, out, errs)
	if code != 0 {
		t.Errorf("floe drop run again after it was cut short: exit %d, want it to finish the drop\n%s", code, errs)
	}
	code, out, errs = floe(t, sink...)
	if code != 0 {
		t.Errorf("floe sink into the dropped table's name: exit %d, want a new table\n%s%s", code, out, errs)
	}
}
