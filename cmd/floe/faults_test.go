//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// The fault campaign (Linux only: network namespaces, signals) runs real
// floe sink processes (this test binary, re-executed as the CLI:
// cliChildEnv) as members of one consumer group, injects faults into them
// and into the components they depend on, and lets floe audit judge the
// table. Each scenario counts, from the
// members' JSON logs, what the fault made them do, so that a pass shows
// the fault was met and not dodged.
const cliChildEnv = "FLOE_TEST_CLI_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(cliChildEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(floetest.BrokerChildEnv) != "" {
		os.Exit(floetest.BrokerChild())
	}
	os.Exit(m.Run())
}

// Timeouts of the campaign's groups: short, so that a lost member is noticed
// within seconds; the broker's minimum session timeout is lowered to allow
// them.
const (
	campaignSession   = 4 * time.Second
	campaignRebalance = 10 * time.Second
)

// faultBroker is a kfake broker in this process with its log in a data
// directory, so that it can be restarted with what it held.
type faultBroker struct {
	t       *testing.T
	dir     string
	host    string // the address it listens on
	port    int
	mu      sync.Mutex
	cluster *kfake.Cluster
	// control installs fault injection on each (re)started cluster.
	control func(*kfake.Cluster)
	// opts are more options of each (re)started cluster: TLS, SASL, ACLs.
	opts []kfake.Opt
	// clientOpts secure the test's own clients (topic creation, the
	// producer, end offsets); floeArgs are the --kafka-* flags of every
	// floe command; secrets are the passwords no floe output may hold.
	clientOpts []kgo.Opt
	floeArgs   []string
	secrets    []string
}

func startFaultBroker(t *testing.T, host string, control func(*kfake.Cluster)) *faultBroker {
	t.Helper()
	b := &faultBroker{t: t, dir: t.TempDir(), host: host, control: control}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *faultBroker) start() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	host := b.host
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(b.port), kfake.DataDir(b.dir),
		kfake.GroupMinSessionTimeout(time.Second),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			// kfake listens on 127.0.0.1; a broker that members in other
			// network namespaces reach listens on the address they route to.
			_, port, _ := net.SplitHostPort(addr)
			return net.Listen(network, net.JoinHostPort(host, port))
		})}, b.opts...)...)
	if err != nil {
		b.t.Fatalf("start broker: %v", err)
	}
	_, port, _ := net.SplitHostPort(c.ListenAddrs()[0])
	b.port, _ = strconv.Atoi(port)
	if b.control != nil {
		b.control(c)
	}
	b.cluster = c
}

// stop closes the broker; its log stays in the data directory.
func (b *faultBroker) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cluster != nil {
		b.cluster.Close()
		b.cluster = nil
	}
}

func (b *faultBroker) addr() string { return net.JoinHostPort(b.host, strconv.Itoa(b.port)) }

// member is one floe sink process of the campaign's group, with what its
// JSON log said it did.
type member struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed

	commits, fenced, commitRetries, sessionRetries atomic.Int64
	assigned, givenUp, lost, revokeDropped         atomic.Int64
	// sessions counts the sessions it started outside a group.
	sessions atomic.Int64
	// compactions and dlqCompactions count its scheduled compactions
	// that committed, of the table and of a dead-letter table.
	compactions, dlqCompactions atomic.Int64
	// secrets are the broker's passwords; leaks counts the log lines
	// holding one.
	secrets []string
	leaks   atomic.Int64
	// owned is the partitions the group gave it and it has not given up.
	owned atomic.Int64

	mu   sync.Mutex
	tail []string // its last log lines, for failures
}

// logLine is what the campaign reads of a member's JSON log lines.
type logLine struct {
	Msg       string `json:"msg"`
	Scheduled bool   `json:"scheduled"`
	Table     string `json:"table"`
	// Lost, Revoked and an assignment's Partitions are partitions as
	// runs: "0-3,7". Partitions is any: other lines' "partitions" is a
	// count (a session's start), which a string field would refuse, and
	// the whole line with it.
	Lost       string `json:"lost"`
	Revoked    string `json:"revoked"`
	Partitions any    `json:"partitions"`
}

// listed counts the partitions of runs such as "0-3,7" (5).
func listed(runs string) int64 {
	var n int64
	for run := range strings.SplitSeq(runs, ",") {
		if run == "" {
			continue
		}
		lo, hi, ok := strings.Cut(run, "-")
		if !ok {
			n++
			continue
		}
		a, _ := strconv.ParseInt(lo, 10, 32)
		b, _ := strconv.ParseInt(hi, 10, 32)
		n += b - a + 1
	}
	return n
}

// count records one log line.
func (m *member) count(line string) {
	m.mu.Lock()
	m.tail = append(m.tail, line)
	if len(m.tail) > 40 {
		m.tail = m.tail[1:]
	}
	m.mu.Unlock()
	for _, s := range m.secrets {
		if strings.Contains(line, s) {
			m.leaks.Add(1)
		}
	}
	var l logLine
	if json.Unmarshal([]byte(line), &l) != nil {
		return
	}
	switch {
	case l.Msg == "sink session started":
		m.sessions.Add(1)
	case l.Msg == "committed":
		m.commits.Add(1)
	case strings.HasPrefix(l.Msg, "fenced by another writer"):
		m.fenced.Add(1)
	case strings.HasPrefix(l.Msg, "commit attempt failed"):
		m.commitRetries.Add(1)
	case strings.HasSuffix(l.Msg, "; starting again from the ledger after a pause"): // whatever failed
		m.sessionRetries.Add(1)
	case strings.HasPrefix(l.Msg, "partitions assigned by the group"):
		m.assigned.Add(1)
		runs, _ := l.Partitions.(string)
		m.owned.Add(listed(runs))
	case l.Msg == "partitions given up":
		m.givenUp.Add(1)
		if listed(l.Lost) > 0 {
			m.lost.Add(1)
		}
		m.owned.Add(-listed(l.Lost) - listed(l.Revoked))
	case strings.HasPrefix(l.Msg, "the commit of revoked partitions did not finish"):
		m.revokeDropped.Add(1)
	case l.Msg == "compacted" && l.Scheduled && strings.HasSuffix(l.Table, "_dlq"):
		m.dlqCompactions.Add(1)
	case l.Msg == "compacted" && l.Scheduled:
		m.compactions.Add(1)
	}
}

func (m *member) logTail() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.tail, "\n")
}

func (m *member) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *member) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s to %s: %v", sig, m.name, err)
	}
}

// campaign is one scenario: a topic produced to continuously, a table, a
// group of members, and what the scenario did to them.
type campaign struct {
	t          *testing.T
	name       string
	broker     *faultBroker
	topic      string
	table      string
	group      string // empty: no group, each member sinks its --partitions (or all)
	partitions int32
	// catalogArgs are the --catalog and --warehouse flags of every floe
	// command; cat opens the same catalog in the test.
	catalogArgs []string
	cat         catalog.Config
	// wrap, when set, runs a member's command line differently (in a
	// network namespace).
	wrap func(argv []string) []string

	// malformed, when positive, makes every malformed-th record produced
	// not JSON: a typed table's dead letter.
	malformed int

	members  []*member
	restarts int
	faults   []string

	stopProducing context.CancelFunc
	producing     sync.WaitGroup
	produceErrs   atomic.Int64
}

// newCampaign creates the campaign's topic of partitions partitions.
func newCampaign(t *testing.T, name string, partitions int32, b *faultBroker, cat catalog.Config, catalogArgs ...string) *campaign {
	t.Helper()
	c := &campaign{t: t, name: name, broker: b, topic: "events", table: "lake.events", group: "floe-campaign",
		partitions: partitions, cat: cat, catalogArgs: catalogArgs}
	if err := localstack.CreateTopic(t.Context(), []string{b.addr()}, c.topic, c.partitions, nil, b.clientOpts...); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	return c
}

// produce keeps producing rounds of records to every partition until
// settle. Records that fail to produce (the broker down or faulty) are
// simply not in the log: the broker's offsets, read at the end, are what
// the table must hold.
func (c *campaign) produce(perRound int, pause time.Duration) {
	ctx, stop := context.WithCancel(context.WithoutCancel(c.t.Context()))
	c.stopProducing = stop
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.broker.addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond)}, c.broker.clientOpts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.producing.Go(func() {
		defer cl.Close()
		for round := 0; ctx.Err() == nil; round++ {
			recs := make([]*kgo.Record, 0, perRound*int(c.partitions))
			for p := range c.partitions {
				for i := range perRound {
					value := fmt.Appendf(nil, `{"round":%d,"p":%d,"i":%d}`, round, p, i)
					if c.malformed > 0 && (round*perRound+i)%c.malformed == 0 {
						value = fmt.Appendf(nil, `{"round":%d,"p":%d,"i":`, round, p)
					}
					recs = append(recs, &kgo.Record{Topic: c.topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: value})
				}
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := cl.ProduceSync(rctx, recs...).FirstErr(); err != nil && ctx.Err() == nil {
				c.produceErrs.Add(1)
			}
			cancel()
			time.Sleep(pause)
		}
	})
}

// start starts a member: floe sink in the group (when the campaign has one),
// JSON logs on stderr.
func (c *campaign) start(flushInterval time.Duration, extra ...string) *member {
	c.t.Helper()
	m := &member{name: fmt.Sprintf("m%d", len(c.members)+1), done: make(chan struct{}), secrets: c.broker.secrets}
	argv := []string{os.Args[0], "sink", "--log-format", "json", "--brokers", c.broker.addr(), "--topic", c.topic,
		"--table", c.table, "--flush-interval", flushInterval.String()}
	if c.group != "" {
		argv = append(argv, "--group", c.group, "--session-timeout", campaignSession.String(), "--rebalance-timeout", campaignRebalance.String())
	}
	argv = append(argv, c.catalogArgs...)
	argv = append(append(argv, c.broker.floeArgs...), extra...)
	if c.wrap != nil {
		argv = c.wrap(argv)
	}
	m.cmd = exec.Command(argv[0], argv[1:]...)
	m.cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	// A member outlives no test binary (a timeout kills it): it would sink
	// and retry for ever.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := m.cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		c.t.Fatalf("start member %s: %v", m.name, err)
	}
	// FLOE_CAMPAIGN_LOGS=DIR keeps every member's whole log there, with
	// the goroutine dump of one that a failed scenario finds still running.
	var keep io.WriteCloser
	if dir := os.Getenv("FLOE_CAMPAIGN_LOGS"); dir != "" {
		f, err := os.Create(filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(c.t.Name())+"-"+m.name+".log"))
		if err != nil {
			c.t.Fatal(err)
		}
		keep = f
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			m.count(sc.Text())
			if keep != nil {
				fmt.Fprintln(keep, sc.Text())
			}
		}
		if keep != nil {
			keep.Close()
		}
		_, _ = io.Copy(io.Discard, stderr)
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	c.t.Cleanup(func() {
		if !m.exited() {
			_ = m.cmd.Process.Signal(syscall.SIGCONT)
			if c.t.Failed() && keep != nil {
				_ = m.cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-m.done:
				case <-time.After(5 * time.Second):
				}
			}
			_ = m.cmd.Process.Kill()
			<-m.done
		}
		if c.t.Failed() {
			c.t.Logf("member %s (exit %v), last log lines:\n%s", m.name, m.err, m.logTail())
		}
	})
	c.members = append(c.members, m)
	return m
}

// kill kills m with SIGKILL and waits for it to be gone.
func (c *campaign) kill(m *member) {
	c.t.Helper()
	m.signal(c.t, syscall.SIGKILL)
	<-m.done
}

// live are the members still running.
func (c *campaign) live() []*member {
	var out []*member
	for _, m := range c.members {
		if !m.exited() {
			out = append(out, m)
		}
	}
	return out
}

// fault notes a fault injected, for the table.
func (c *campaign) fault(what string) {
	c.faults = append(c.faults, what)
}

// waitFor polls cond every 100ms, failing the scenario after within and
// when a member exits on its own.
func (c *campaign) waitFor(within time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		for _, m := range c.members {
			if m.exited() && m.cmd.ProcessState.Success() {
				continue
			}
			if m.exited() && !killedOrInterrupted(m) {
				c.t.Fatalf("%s: member %s exited (%v) while waiting for %s; last log lines:\n%s", c.name, m.name, m.err, what, m.logTail())
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: after %s still waiting for %s", c.name, within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func killedOrInterrupted(m *member) bool {
	ws, ok := m.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGKILL || ws.Signal() == syscall.SIGINT)
}

// interruptedAfterFailure reports whether m exited 2 because an interrupt
// came while it waited to retry, or started again, after a transient
// failure: a stop that leaves nothing behind, though not a clean one.
func interruptedAfterFailure(m *member) bool {
	var ee *exec.ExitError
	if !errors.As(m.err, &ee) || ee.ExitCode() != 2 {
		return false
	}
	tail := m.logTail()
	return strings.Contains(tail, `"msg":"interrupted while waiting to retry`) ||
		strings.Contains(tail, `"msg":"interrupted while starting again after a failure`)
}

// committedAfter waits until m committed more than n times.
func (c *campaign) committedAfter(m *member, n int64, within time.Duration) {
	c.t.Helper()
	c.waitFor(within, m.name+" committing", func() bool { return m.commits.Load() > n })
}

// allCommitting waits until every member has committed: a member that
// meets a fault while it starts exits, by design (a sink that cannot reach
// its storage at start is more likely misconfigured than unlucky).
func (c *campaign) allCommitting() {
	c.t.Helper()
	c.waitFor(90*time.Second, "every member committing", func() bool {
		for _, m := range c.members {
			if m.commits.Load() == 0 {
				return false
			}
		}
		return true
	})
}

// ends reads the broker's end offsets of the topic.
func (c *campaign) ends() map[int32]int64 {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.broker.addr())}, c.broker.clientOpts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(c.t.Context(), c.topic)
	if err != nil {
		c.t.Fatalf("list end offsets: %v", err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) != int(c.partitions) {
		c.t.Fatalf("end offsets of %d partitions, want %d: %v", len(out), c.partitions, offs.Error())
	}
	return out
}

// ledgerNext reads the table's ledger; nil while the table is not there.
func (c *campaign) ledgerNext() map[mapping.TopicPartition]int64 {
	cat, err := catalog.Open(c.t.Context(), c.cat)
	if err != nil {
		return nil
	}
	ident, _ := catalog.ParseIdent(c.table)
	tbl, err := snapshot.Open(c.t.Context(), cat, ident, snapshot.OpenOptions{})
	if err != nil {
		return nil
	}
	l, err := tbl.Ledger()
	if err != nil {
		return nil
	}
	return l.Next()
}

// verdict is one row of the campaign's table.
type verdict struct {
	scenario, faults                                       string
	commits, fencings, retries, rebalances, restarts, rows int64
	revokeDropped                                          int64
	seconds                                                float64
	verdict                                                string
}

// settle stops production, waits for the ledger to reach the broker's end
// offsets, interrupts the members (each commits and exits 0), and runs
// floe audit --deep --verify-content against the broker: the table must be
// complete (or, with foreign, hold only findings about the foreign
// writer's files) and hold one row per produced record, or, for a typed
// table, one row or one dead letter (verified against its record).
func (c *campaign) settle(started time.Time, foreign func(auditFinding) bool) verdict {
	c.t.Helper()
	c.stopProducing()
	c.producing.Wait()
	ends := c.ends()
	if n := c.produceErrs.Load(); n > 0 {
		c.t.Logf("%s: %d rounds of records failed to produce (they are not in the log: the broker's end offsets are what the table must hold)", c.name, n)
	}
	var produced int64
	for _, n := range ends {
		produced += n
	}
	c.waitFor(90*time.Second, "the ledger to reach the broker's end offsets", func() bool {
		next := c.ledgerNext()
		for p, n := range ends {
			if next[mapping.TopicPartition{Topic: c.topic, Partition: p}] != n {
				return false
			}
		}
		return true
	})
	for _, m := range c.live() {
		m.signal(c.t, syscall.SIGINT)
	}
	for _, m := range c.members {
		select {
		case <-m.done:
		case <-time.After(60 * time.Second):
			c.t.Fatalf("%s: member %s did not stop within a minute of SIGINT; last log lines:\n%s", c.name, m.name, m.logTail())
		}
		switch {
		case m.err == nil || killedOrInterrupted(m):
		case interruptedAfterFailure(m):
			// By design (floe sink --help): the faults may have failed
			// its last session just before the interrupt.
			c.t.Logf("%s: member %s, interrupted while it started again after a failure, exited with %v", c.name, m.name, m.err)
		default:
			c.t.Errorf("%s: member %s exited with %v; last log lines:\n%s", c.name, m.name, m.err, m.logTail())
		}
		if n := m.leaks.Load(); n > 0 {
			c.t.Errorf("%s: member %s logged a password in %d lines", c.name, m.name, n)
		}
	}
	args := append([]string{"audit", "--table", c.table, "--deep", "--brokers", c.broker.addr(), "--verify-content", "--json"}, c.catalogArgs...)
	code, out, errs := floe(c.t, append(args, c.broker.floeArgs...)...)
	for _, s := range c.broker.secrets {
		if strings.Contains(out+errs, s) {
			c.t.Errorf("%s: floe audit's output holds a password:\n%s\n%s", c.name, out, errs)
		}
	}
	var rep auditReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		c.t.Fatalf("%s: floe audit exit %d, no JSON report (%v):\n%s\n%s", c.name, code, err, out, errs)
	}
	var records, rows, dead, deadVerified int64
	for _, p := range rep.Partitions {
		if p.Topic != c.topic {
			continue
		}
		records += p.Records
		dead += p.DeadLetters
		if p.Rows != nil {
			rows += *p.Rows
		}
		if p.Content != nil {
			deadVerified += p.Content.DeadLetters
		}
	}
	v := verdict{scenario: c.name, faults: strings.Join(c.faults, "; "), restarts: int64(c.restarts), rows: rows,
		seconds: time.Since(started).Seconds(), verdict: "complete"}
	for _, m := range c.members {
		v.commits += m.commits.Load()
		v.fencings += m.fenced.Load()
		v.retries += m.commitRetries.Load() + m.sessionRetries.Load()
		v.rebalances += m.assigned.Load() + m.givenUp.Load()
		v.revokeDropped += m.revokeDropped.Load()
	}
	var other []auditFinding
	for _, f := range rep.Findings {
		if foreign == nil || !foreign(f) {
			other = append(other, f)
		}
	}
	switch {
	case len(other) > 0:
		v.verdict = "FINDINGS"
		c.t.Errorf("%s: the audit found %d problems:\n%s", c.name, len(other), findingLines(other))
	case !rep.Complete && foreign == nil:
		v.verdict = "INCOMPLETE"
		c.t.Errorf("%s: the audit says incomplete (exit %d):\n%s", c.name, code, errs)
	case len(rep.Findings) > 0:
		v.verdict = fmt.Sprintf("floe's ranges complete; %d findings, all on the foreign files", len(rep.Findings))
	}
	if records+dead != produced || rows != records || deadVerified != dead {
		v.verdict = "MISCOUNT"
		c.t.Errorf("%s: the ledger holds %d records and %d dead letters, the table %d rows of %s, and %d dead letters matched their record; the broker holds %d",
			c.name, records, dead, rows, c.topic, deadVerified, produced)
	}
	return v
}

// auditReport is what the campaign reads of floe audit --json.
type auditReport struct {
	Complete   bool `json:"complete"`
	Partitions []struct {
		Topic       string `json:"topic"`
		Records     int64  `json:"records"`
		DeadLetters int64  `json:"dead_letters"`
		Rows        *int64 `json:"rows"`
		Content     *struct {
			DeadLetters int64 `json:"dead_letters"`
		} `json:"content"`
	} `json:"partitions"`
	Findings []auditFinding `json:"findings"`
}

type auditFinding struct {
	Level     string  `json:"level"`
	Kind      string  `json:"kind"`
	Topic     *string `json:"topic"`
	Partition *int32  `json:"partition"`
	File      *string `json:"file"`
	Detail    string  `json:"detail"`
}

func findingLines(fs []auditFinding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s %s: %s\n", f.Level, f.Kind, f.Detail)
	}
	return b.String()
}

// campaignVerdicts collects the scenarios' rows for the table
// TestFaultCampaign prints at its end.
type campaignVerdicts struct {
	mu   sync.Mutex
	rows []verdict
}

func (cv *campaignVerdicts) add(v verdict) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	cv.rows = append(cv.rows, v)
}

func (cv *campaignVerdicts) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | faults injected | commits | fencings | retries | rebalances | restarts | rows | s | verdict |\n")
	fmt.Fprintf(&b, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, v := range cv.rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %.0f | %s |\n",
			v.scenario, v.faults, v.commits, v.fencings, v.retries, v.rebalances, v.restarts, v.rows, v.seconds, v.verdict)
	}
	return b.String()
}

// pick returns a random member of ms.
func pick(ms []*member) *member { return ms[rand.IntN(len(ms))] }
