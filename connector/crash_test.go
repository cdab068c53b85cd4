package connector_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// The crash tests run the sink in a child process (this test binary,
// re-executed) so that it can be killed with SIGKILL or interrupted with
// SIGINT like a real deployment.
const childEnv = "FLOE_TEST_SINK_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(sinkChild())
	}
	os.Exit(m.Run())
}

// sinkChild runs one sink configured by environment variables and prints
// "consumed N" lines as it advances.
func sinkChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	env := func(k string) string { return os.Getenv("FLOE_TEST_" + k) }
	flush, _ := strconv.Atoi(env("FLUSH_RECORDS"))
	cat, err := catalog.Open(ctx, catalog.Config{Catalog: env("CATALOG"), Warehouse: env("WAREHOUSE")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ident, _ := catalog.ParseIdent(env("TABLE"))
	tbl, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Create: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	b, err := connector.Dial(ctx, strings.Split(env("BROKERS"), ","), 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer b.Close()
	var consumed atomic.Int64
	s, err := connector.NewSink(b, tbl, connector.Config{
		Topic: env("TOPIC"), Start: connector.Start(env("START")), StopAtEnd: env("STOP_AT_END") == "1", FlushRecords: flush,
		FlushInterval: time.Hour, Logger: quietLogger(),
		OnRecords: func(n int64) { fmt.Printf("consumed %d\n", consumed.Add(n)) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := s.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

func (e *env) childCmd(topic, table string, flush int, stopAtEnd bool) *exec.Cmd {
	return e.childCmdFrom(topic, table, flush, stopAtEnd, connector.StartEarliest)
}

// childCmdFrom is childCmd with a --start for partitions the ledger does
// not have.
func (e *env) childCmdFrom(topic, table string, flush int, stopAtEnd bool, start connector.Start) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cfg := e.Stack.Catalog()
	stop := "0"
	if stopAtEnd {
		stop = "1"
	}
	cmd.Env = append(os.Environ(), childEnv+"=1",
		"FLOE_TEST_CATALOG="+cfg.Catalog, "FLOE_TEST_WAREHOUSE="+cfg.Warehouse,
		"FLOE_TEST_TABLE="+table, "FLOE_TEST_TOPIC="+topic,
		"FLOE_TEST_BROKERS="+strings.Join(e.Stack.Brokers, ","),
		"FLOE_TEST_FLUSH_RECORDS="+strconv.Itoa(flush), "FLOE_TEST_STOP_AT_END="+stop, "FLOE_TEST_START="+string(start))
	return cmd
}

// dataFiles lists the Parquet files under the warehouse.
func dataFiles(t testing.TB, root string) map[string]bool {
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			out[p] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSinkSurvivesSIGKILL kills a sink process at random points of its
// work (while consuming, writing Parquet files, committing, and right after
// a commit), restarts it each time, and checks that the table ends with
// every offset exactly once. With --start latest, the table begins where
// the first run that recorded its start began, and nothing after that is
// skipped, however often the sink is killed before a partition's first
// row.
func TestSinkSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs many processes")
	}
	for _, c := range []struct {
		start connector.Start
		kills int
	}{{connector.StartEarliest, 40}, {connector.StartLatest, 20}} {
		t.Run(string(c.start), func(t *testing.T) { sigkillRun(t, c.start, c.kills) })
	}
}

func sigkillRun(t *testing.T, start connector.Start, kills int) {
	e := newEnv(t)
	const topic, table = "crash", "lake.crash"
	e.Topic(topic, 4, nil)
	produced := 0
	produce := func(n int) {
		for p := range int32(4) {
			e.Produce(records(topic, p, n, fmt.Sprintf("r%d", produced)))
		}
		produced += 4 * n
	}
	produce(2000)
	tbl := e.Table(table)
	rng := rand.New(rand.NewPCG(1, 2))
	var orphanKills, commitKills, orphans int
	for range kills {
		before := len(mustLedger(t, tbl).Commits)
		cmd := e.childCmdFrom(topic, table, 100+rng.IntN(300), true, start)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(700)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if err := tbl.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		l := mustLedger(t, tbl)
		if len(l.Commits) > before {
			commitKills++
		}
		files, err := tbl.Files(e.Ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(dataFiles(t, e.Stack.Catalog().Warehouse)) - len(files); n > orphans {
			orphanKills++ // killed after writing files, before their commit
			orphans = n
		}
		// The table is consistent after every crash, not only at the end.
		checkExactlyOnce(t, tbl, l.Next())
		produce(250 + rng.IntN(500))
	}
	t.Logf("%d kills: %d after at least one commit, %d left uncommitted files behind", kills, commitKills, orphanKills)
	if commitKills == 0 || orphanKills == 0 {
		t.Fatalf("kills did not cover both commit and file-write phases (commit %d, files %d)", commitKills, orphanKills)
	}
	out, err := e.childCmdFrom(topic, table, 1000, true, start).CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	rs := checkExactlyOnce(t, tbl, e.endOffsets(topic))
	want := produced
	for tp := range e.endOffsets(topic) {
		want -= int(mapping.Cover(mustLedger(t, tbl).Ranges(tp)).First) // before a --start latest
	}
	if len(rs) != want {
		t.Fatalf("%d rows after crashes, want %d", len(rs), want)
	}
}

// TestSinkSIGINTFlushes interrupts a live sink that has consumed records
// but not yet flushed them: it must commit them and exit 0.
func TestSinkSIGINTFlushes(t *testing.T) {
	e := newEnv(t)
	const topic, table = "interrupt", "lake.interrupt"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 400, "a"))
	e.Produce(records(topic, 1, 600, "a"))
	tbl := e.Table(table)
	cmd := e.childCmd(topic, table, 1_000_000, false)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if n, _ := strconv.Atoi(strings.TrimPrefix(sc.Text(), "consumed ")); n >= 1000 {
			break
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("interrupted sink exited with %v: %s", err, stderr.String())
	}
	if rs := checkExactlyOnce(t, tbl, e.endOffsets(topic)); len(rs) != 1000 {
		t.Fatalf("%d rows after interrupt, want 1000", len(rs))
	}
}

func mustLedger(t testing.TB, tbl *snapshot.Table) mapping.Ledger {
	t.Helper()
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	return l
}
