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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/internal/testenv"
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
	if os.Getenv(floetest.BrokerChildEnv) != "" {
		os.Exit(floetest.BrokerChild())
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
	opts := snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Value: mapping.ValueMode(env("VALUE"))}}
	upsert := env("MODE") == string(mapping.ModeUpsert)
	if upsert {
		// An upsert table keyed by the record key as text (upsert_test.go).
		opts.Mode, opts.Layout.Key = mapping.ModeUpsert, mapping.KeyString
	}
	tbl, err := snapshot.Open(ctx, cat, ident, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var (
		dlq      *snapshot.Table
		registry *connector.Registry
	)
	if env("REGISTRY") != "" {
		if registry, err = connector.NewRegistry(connector.RegistryConfig{URL: env("REGISTRY")}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	if env("VALUE") != "" || upsert {
		if dlq, err = snapshot.OpenDeadLetters(ctx, cat, snapshot.DeadLetterName(ident), tbl.Name(), true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	b, err := connector.Dial(ctx, strings.Split(env("BROKERS"), ","), 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer b.Close()
	var consumed atomic.Int64
	cfg := connector.Config{
		Topic: env("TOPIC"), Start: connector.Start(env("START")), StopAtEnd: env("STOP_AT_END") == "1", FlushRecords: flush,
		FlushInterval: time.Hour, Logger: quietLogger(), DeadLetters: dlq, Registry: registry,
		OnRecords: func(n int64) { fmt.Printf("consumed %d\n", consumed.Add(n)) },
	}
	if g := env("GROUP"); g != "" {
		// A group member (group_crash_test.go) reports what happens to it.
		cfg.Group, cfg.SessionTimeout, cfg.RebalanceTimeout = g, 6*time.Second, 10*time.Second
		cfg.FlushInterval, _ = time.ParseDuration(env("FLUSH_INTERVAL"))
		cfg.OnRecords = nil
		cfg.OnFenced = func(error) { fmt.Println("fenced") }
		cfg.OnCommit = func(r snapshot.Result) { fmt.Printf("committed %d\n", r.Rows) }
		cfg.OnRebalance = func(r connector.Rebalance) {
			fmt.Printf("rebalance assigned=%d revoked=%d lost=%d\n", len(r.Assigned), len(r.Revoked), len(r.Lost))
		}
	}
	s, err := connector.NewSink(b, tbl, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if n, _ := strconv.ParseInt(env("SPILL_BYTES"), 10, 64); n > 0 {
		connector.SetSpillBytes(s, n)
	}
	if _, err := s.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// The peak resident set of this process alone: the rusage a parent
	// gets counts the parent's own peak, which its address space had when
	// it started this process.
	if st, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				fmt.Printf("peak_rss %s\n", strings.TrimSpace(v))
			}
		}
	}
	return 0
}

func (e *env) childCmd(topic, table string, flush int, stopAtEnd bool) *exec.Cmd {
	return e.childCmdFrom(topic, table, flush, stopAtEnd, connector.StartEarliest, "")
}

// childCmdFrom is childCmd with a --start for partitions the ledger does
// not have, and a value mode ("": raw; json with a dead-letter table).
func (e *env) childCmdFrom(topic, table string, flush int, stopAtEnd bool, start connector.Start, value mapping.ValueMode) *exec.Cmd {
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
		"FLOE_TEST_FLUSH_RECORDS="+strconv.Itoa(flush), "FLOE_TEST_STOP_AT_END="+stop, "FLOE_TEST_START="+string(start), "FLOE_TEST_VALUE="+string(value), "FLOE_TEST_REGISTRY="+e.Stack.Registry)
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
// row. The typed run decodes JSON with bad records mixed in: every offset
// ends exactly once in exactly one of the table and its dead-letter table,
// with the dead letters of a commit whose writer was killed before it
// added them rolled forward by the next session. The spilled run moves
// every row to the flush's spill lane as it is consumed, so that kills
// land while the lane's files are written mid-flush.
func TestSinkSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs many processes")
	}
	for _, c := range []struct {
		name  string
		start connector.Start
		value mapping.ValueMode
		// kills are those of go test ./... and of FLOE_TEST_FULL=1
		// (testenv.Faults): enough of the first that each run surely
		// kills a sink between writing files and committing them, which
		// about 1 kill in 4 to 5 does on a quiet machine.
		kills, fullKills int
		partitions       int32
		spill            int64
	}{{"earliest", connector.StartEarliest, "", 20, 40, 4, 0}, {"latest", connector.StartLatest, "", 20, 20, 4, 0}, {"typed", connector.StartEarliest, mapping.ValueJSON, 15, 30, 4, 0},
		// Flushes of 100-400 records over 32 partitions: every commit's
		// rows are in file groups (lanes of small partitions).
		{"grouped", connector.StartEarliest, "", 15, 20, 32, 0},
		// The same, typed with dead letters, every row spilled.
		{"spilled", connector.StartEarliest, mapping.ValueJSON, 10, 25, 32, 1}} {
		kills := testenv.Faults(0, c.kills, c.fullKills)
		t.Run(c.name, func(t *testing.T) { sigkillRun(t, c.start, c.value, kills, c.partitions, c.spill) })
	}
}

// jsonWithBadRecords makes n records of one partition whose values are
// JSON objects, except that every 13th is not JSON and every 17th has a
// field whose type conflicts with its column.
func jsonWithBadRecords(topic string, partition int32, n int, tag string) []*kgo.Record {
	out := records(topic, partition, n, tag)
	for i, r := range out {
		switch {
		case r.Value == nil:
		case i%13 == 5:
			r.Value = []byte("{not json " + tag)
		case i%17 == 3:
			r.Value = fmt.Appendf(nil, `{"n":"text %d","tag":%q}`, i, tag)
		default:
			r.Value = fmt.Appendf(nil, `{"n":%d,"tag":%q}`, i, tag)
		}
	}
	return out
}

func sigkillRun(t *testing.T, start connector.Start, value mapping.ValueMode, kills int, partitions int32, spill int64) {
	e := newEnv(t)
	const topic, table = "crash", "lake.crash"
	child := func(flush int) *exec.Cmd {
		cmd := e.childCmdFrom(topic, table, flush, true, start, value)
		cmd.Env = append(cmd.Env, "FLOE_TEST_SPILL_BYTES="+strconv.FormatInt(spill, 10))
		return cmd
	}
	e.Topic(topic, partitions, nil)
	produced := 0
	gen := records
	if value != "" {
		gen = jsonWithBadRecords
	}
	// produce writes about 4n records, spread over the partitions.
	produce := func(n int) {
		per := max(1, 4*n/int(partitions))
		for p := range partitions {
			e.Produce(gen(topic, p, per, fmt.Sprintf("r%d", produced)))
		}
		produced += int(partitions) * per
	}
	produce(2000)
	var tbl, dlq *snapshot.Table
	if value == "" {
		tbl = e.Table(table)
	} else {
		tbl, dlq = e.TypedTable(table, mapping.Layout{Value: value})
	}
	// check is CheckWithDeadLetters after what the next session does first:
	// adding the dead letters of a commit whose writer was killed before.
	rolled := 0
	check := func(next map[mapping.TopicPartition]int64) (rows, dead []floetest.Row) {
		t.Helper()
		if dlq != nil {
			res, err := tbl.ReconcileDeadLetters(e.Ctx, dlq, quietLogger())
			if err != nil {
				t.Fatal(err)
			}
			rolled += res.Added
		}
		return floetest.CheckWithDeadLetters(t, tbl, dlq, next)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var orphanKills, commitKills, orphans int
	// Where a kill lands depends on the machine's load as well as on rng:
	// on a loaded one (a CI run beside benchmarks), 20 kills all landed
	// after commits. Up to twice as many more kills, until both phases
	// are covered.
	n := 0
	for ; n < kills || (n < 3*kills && (commitKills == 0 || orphanKills == 0)); n++ {
		before := len(mustLedger(t, tbl).Commits)
		killWhileSinking(t, child(100+rng.IntN(300)), rng, 700*time.Millisecond)
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
		if dlq != nil {
			if err := dlq.Refresh(e.Ctx); err != nil {
				t.Fatal(err)
			}
			dead, err := dlq.Files(e.Ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, dead...)
		}
		if n := len(dataFiles(t, e.Stack.Catalog().Warehouse)) - len(files); n > orphans {
			orphanKills++ // killed after writing files, before their commit
			orphans = n
		}
		// The table is consistent after every crash, not only at the end.
		check(l.Next())
		produce(250 + rng.IntN(500))
	}
	t.Logf("%d kills: %d after at least one commit, %d left uncommitted files behind, %d left dead letters to add", n, commitKills, orphanKills, rolled)
	if commitKills == 0 || orphanKills == 0 {
		t.Fatalf("kills did not cover both commit and file-write phases (commit %d, files %d)", commitKills, orphanKills)
	}
	out, err := child(1000).CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	rs, dead := check(e.endOffsets(topic))
	if grouped := slices.ContainsFunc(mustLedger(t, tbl).Commits, func(c mapping.Commit) bool { return len(c.FileGroups) > 0 }); grouped != (partitions > 4) {
		t.Fatalf("file groups in the ledger: %v, want them exactly when flushes cover more than 4 small partitions", grouped)
	}
	want := produced
	for tp := range e.endOffsets(topic) {
		want -= int(mapping.Cover(mustLedger(t, tbl).Ranges(tp)).First) // before a --start latest
	}
	if len(rs)+len(dead) != want || (value != "" && len(dead) == 0) {
		t.Fatalf("%d rows and %d dead letters after crashes, want %d in all", len(rs), len(dead), want)
	}
}

// killWhileSinking starts a sink process (childCmd) and kills it with
// SIGKILL at a random point up to maxDelay after it consumed its first
// records (counted from there, not from the process start, which a loaded
// machine makes slow), and waits for it to be gone.
func killWhileSinking(t *testing.T, cmd *exec.Cmd, rng *rand.Rand, maxDelay time.Duration) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	consuming := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			if first && strings.HasPrefix(sc.Text(), "consumed ") {
				close(consuming)
				first = false
			}
		}
		if first {
			close(consuming)
		}
	}()
	select {
	case <-consuming:
	case <-time.After(30 * time.Second):
	}
	time.Sleep(time.Duration(rng.IntN(int(maxDelay/time.Millisecond))) * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
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

// fileGroups counts the file groups the commits of l record.
func fileGroups(l mapping.Ledger) int {
	n := 0
	for _, c := range l.Commits {
		n += len(c.FileGroups)
	}
	return n
}

func mustLedger(t testing.TB, tbl *snapshot.Table) mapping.Ledger {
	t.Helper()
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	return l
}
