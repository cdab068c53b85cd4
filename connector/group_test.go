package connector_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// member is one in-process group member: a sink with its own broker
// connection and table handle, as a separate process would have.
type member struct {
	stop  context.CancelFunc
	done  chan struct{}
	stats connector.Stats
	err   error
	// assigned counts partitions assigned to it over its life.
	assigned atomic.Int64
}

// groupConfig is a group member's configuration in these tests: short
// flushes, and the broker's shortest session timeout.
func groupConfig(topic, group string) connector.Config {
	return connector.Config{Topic: topic, Group: group, FlushInterval: 300 * time.Millisecond, SessionTimeout: 6 * time.Second,
		RebalanceTimeout: 10 * time.Second, Logger: quietLogger()}
}

// startMember runs a member sinking into table until stopped.
func (e *env) startMember(table string, cfg connector.Config) *member {
	e.T.Helper()
	return e.startMemberOn(e.Table(table), cfg)
}

// startMemberOn runs a member sinking into tbl, a table handle of its own,
// until stopped; tune sets the sink up further (connector.SetReserveSchema).
func (e *env) startMemberOn(tbl *snapshot.Table, cfg connector.Config, tune ...func(*connector.Sink)) *member {
	e.T.Helper()
	m := &member{done: make(chan struct{})}
	ctx, stop := context.WithCancel(e.Ctx)
	m.stop = stop
	user := cfg.OnRebalance
	cfg.OnRebalance = func(r connector.Rebalance) {
		m.assigned.Add(int64(len(r.Assigned)))
		if user != nil {
			user(r)
		}
	}
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	if e.spillBytes > 0 {
		connector.SetSpillBytes(s, e.spillBytes)
	}
	for _, f := range tune {
		f(s)
	}
	go func() {
		defer close(m.done)
		m.stats, m.err = s.Run(ctx)
	}()
	return m
}

// halt stops a member the way SIGINT does: it commits what it consumed.
func (m *member) halt(t testing.TB) connector.Stats {
	t.Helper()
	m.stop()
	<-m.done
	if m.err != nil {
		t.Fatalf("member: %v", m.err)
	}
	return m.stats
}

// waitLedger waits until the table exists and its ledger reaches want on
// every partition. It never creates the table: the sinks do.
func waitLedger(t testing.TB, e *env, table string, want map[mapping.TopicPartition]int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	cat := e.catalog()
	ident, err := catalog.ParseIdent(table)
	if err != nil {
		t.Fatal(err)
	}
	var reader *snapshot.Table
	for reader == nil {
		reader, err = snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{})
		switch {
		case errors.Is(err, snapshot.ErrTableNotFound) && time.Now().Before(deadline):
			time.Sleep(100 * time.Millisecond)
		case err != nil:
			t.Fatal(err)
		}
	}
	for {
		if err := reader.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		next := mustLedger(t, reader).Next()
		behind := 0
		for tp, n := range want {
			if next[tp] < n {
				behind++
			}
		}
		if behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d partitions are behind: ledger %v, want %v", within, behind, next, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// auditComplete runs the row-level audit with the broker and fails on any
// finding.
func auditComplete(t testing.TB, e *env, tbl *snapshot.Table) {
	t.Helper()
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("audit finding: %+v", f)
	}
	if !rep.Complete() {
		t.Fatal("audit: not complete")
	}
}

// TestGroupMembersShareTopic: three members join one group one after the
// other while records are produced, so partitions move between them
// (cooperative rebalances revoke partitions that hold uncommitted
// records); then one leaves. The table ends with every offset exactly
// once, the audit is complete, every member sank something, and the
// group's offsets equal the ledger's next offsets with the snapshot in
// their metadata. "spilled" moves every row to the spill lane as it is
// read, with flushes long enough that revocations meet laned partitions:
// a cooperative revocation commits what was consumed (the lane with it),
// then the partition is dropped.
func TestGroupMembersShareTopic(t *testing.T) {
	t.Run("own", func(t *testing.T) { testGroupMembersShareTopic(t, false) })
	t.Run("spilled", func(t *testing.T) { testGroupMembersShareTopic(t, true) })
}

func testGroupMembersShareTopic(t *testing.T, spilled bool) {
	e := newEnv(t)
	topic, table, group := "shared", "lake.shared", "floe-shared"
	gen, joinEvery := records, 3*time.Second
	if spilled {
		e.spillBytes = 1
		topic, table, group = "sharedlaned", "lake.sharedlaned", "floe-sharedlaned"
		gen, joinEvery = paddedRecords, 4*time.Second
	}
	e.Topic(topic, 6, nil)
	tbl := e.Table(table)
	pr := e.produceRounds(6, 50*time.Millisecond, func(p int32, round int) []*kgo.Record {
		return gen(topic, p, 50, fmt.Sprintf("r%d", round))
	})
	var members []*member
	var revoked, committed atomic.Int64
	for range 3 {
		cfg := groupConfig(topic, group)
		if spilled {
			cfg.FlushInterval = 3 * time.Second
		}
		cfg.OnRebalance = func(r connector.Rebalance) {
			if len(r.Revoked) > 0 {
				revoked.Add(1)
				if r.Committed {
					committed.Add(1)
				}
			}
		}
		members = append(members, e.startMember(table, cfg))
		time.Sleep(joinEvery)
	}
	// The first member leaves: its partitions are revoked, committed and
	// taken on by the others from the ledger.
	first := members[0].halt(t)
	time.Sleep(2 * time.Second)
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 60*time.Second)
	stats := []connector.Stats{first}
	for _, m := range members[1:] {
		stats = append(stats, m.halt(t))
	}
	rs := checkExactlyOnce(t, tbl, want)
	if int64(len(rs)) != produced {
		t.Fatalf("%d rows, want %d", len(rs), produced)
	}
	auditComplete(t, e, tbl)
	for i, s := range stats {
		t.Logf("member %d: %d rows in %d commits, %d rebalances, %d fenced, %d partitions assigned", i, s.Records, s.Commits, s.Rebalances, s.Fenced, members[i].assigned.Load())
		if s.Records == 0 || members[i].assigned.Load() == 0 {
			t.Errorf("member %d sank nothing", i)
		}
	}
	t.Logf("%d revocations, %d committed what they had consumed", revoked.Load(), committed.Load())
	if revoked.Load() == 0 || committed.Load() == 0 {
		t.Error("no revocation committed what it had consumed")
	}
	offs, err := kadm.NewClient(e.Dial().Client()).FetchOffsets(e.Ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	next := mustLedger(t, tbl).Next()
	for tp, n := range next {
		o, ok := offs.Lookup(topic, tp.Partition)
		if !ok || o.Err != nil || o.At != n || len(o.Metadata) < len("floe:snapshot=") || o.Metadata[:len("floe:snapshot=")] != "floe:snapshot=" {
			t.Errorf("%s: group offset %+v, want %d with the snapshot as metadata", tp, o, n)
		}
	}
}

// TestGroupConfigConflicts: group mode excludes settings that fix the
// partitions or bound the run.
func TestGroupConfigConflicts(t *testing.T) {
	for _, c := range []connector.Config{
		{Topic: "t", Group: "g", Partitions: []int32{0}},
		{Topic: "t", Group: "g", StopAtEnd: true},
		{Topic: "t", Group: "g", StartOffsets: map[int32]int64{0: 1}},
		{Topic: "t", Group: "g", GroupProtocol: "eager"},
	} {
		err := c.Validate()
		var ce *connector.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%+v: %v, want a *ConfigError", c, err)
		}
	}
}

// TestGroupConsumerProtocol: with KIP-848's consumer protocol (kfake
// serves it) the broker's coordinator assigns the partitions; two members
// share the topic and the table ends exactly once.
func TestGroupConsumerProtocol(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "nextgen", "lake.nextgen", "floe-nextgen"
	e.Topic(topic, 6, nil)
	tbl := e.Table(table)
	pr := e.produceContinuously(topic, 6, 20, 50*time.Millisecond)
	var ms []*member
	for range 2 {
		cfg := groupConfig(topic, group)
		cfg.GroupProtocol = connector.GroupConsumer
		ms = append(ms, e.startMember(table, cfg))
	}
	waitFor(t, 60*time.Second, "both members assigned partitions", func() bool {
		return ms[0].assigned.Load() > 0 && ms[1].assigned.Load() > 0
	})
	time.Sleep(time.Second)
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 60*time.Second)
	for _, m := range ms {
		m.halt(t)
	}
	if rs := checkExactlyOnce(t, tbl, want); int64(len(rs)) != produced {
		t.Fatalf("%d rows, want %d", len(rs), produced)
	}
}

// TestGroupMemberKickedRejoins: the coordinator tells a member that it no
// longer knows it (UNKNOWN_MEMBER_ID on a heartbeat, as after a pause or a
// network cut past the session timeout). franz-go calls the lost callback,
// which drops the partitions, and reports the loss in the next poll
// (kgo.ErrGroupSession) while it rejoins on its own: the member must go on
// with the partitions it is given again, not end. It used to end with
// "fetch /0: unable to join group session", so floe sink exited 2 in the
// fault campaign's zombie scenario.
func TestGroupMemberKickedRejoins(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "kicked", "lake.kicked", "floe-kicked"
	e.Topic(topic, 3, nil)
	tbl := e.Table(table)
	var lost, assigned atomic.Int64
	cfg := groupConfig(topic, group)
	cfg.OnRebalance = func(r connector.Rebalance) {
		lost.Add(int64(len(r.Lost)))
		assigned.Add(int64(len(r.Assigned)))
	}
	m := e.startMember(table, cfg)
	for p := range int32(3) {
		e.Produce(records(topic, p, 20, "before"))
	}
	waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)
	kickMember(t, e, &lost)
	for p := range int32(3) {
		e.Produce(records(topic, p, 20, "after"))
	}
	want := e.endOffsets(topic)
	deadline := time.Now().Add(30 * time.Second)
	for assigned.Load() <= 3 {
		select {
		case <-m.done:
			t.Fatalf("the member ended after it was kicked: %v", m.err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the member never rejoined the group")
		}
	}
	waitLedger(t, e, table, want, 30*time.Second)
	m.halt(t)
	checkExactlyOnce(t, tbl, want)
	auditComplete(t, e, tbl)
}

// kickMember answers the next heartbeat with UNKNOWN_MEMBER_ID, as the
// coordinator does to a member it dropped (paused or cut off past the
// session timeout), and waits until the member has reported partitions
// lost (lost counts them, from its OnRebalance).
func kickMember(t *testing.T, e *env, lost *atomic.Int64) {
	t.Helper()
	var kicked atomic.Bool
	e.Stack.Cluster.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kicked.Store(true)
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	waitFor(t, 30*time.Second, "the member told it is unknown and its partitions lost", func() bool { return kicked.Load() && lost.Load() > 0 })
}

// TestGroupMemberLostWhileBuffering: a member holds records it has not
// flushed yet when the coordinator drops it, so they are lost (dropped,
// for the next owner to read from the ledger) and the flush deadline they
// set passes while the member rejoins. It must go on committing what it
// reads next. It used to keep the dropped records' deadline: every poll
// then returned at once, with nothing, and every flush found nothing to
// flush, so the member spun without reading or logging anything (seen
// once in the fault campaign after a broker restart, as 90 s of silence).
//
// With every row moved to the flush's spill lane as it is read, the lane
// goes with the partitions it was lost with, and the member takes its
// partitions on again from the ledger before it commits anything.
func TestGroupMemberLostWhileBuffering(t *testing.T) {
	for _, spill := range []int64{0, 1} {
		t.Run(fmt.Sprintf("spill=%d", spill), func(t *testing.T) {
			e := newEnv(t)
			e.spillBytes = spill
			memberLostWhileBuffering(t, e)
		})
	}
}

func memberLostWhileBuffering(t *testing.T, e *env) {
	const topic, table, group = "lostbuf", "lake.lostbuf", "floe-lostbuf"
	e.Topic(topic, 3, nil)
	tbl := e.Table(table)
	var lost atomic.Int64
	cfg := groupConfig(topic, group)
	cfg.FlushInterval, cfg.FlushRecords = 8*time.Second, 1_000_000
	cfg.OnRebalance = func(r connector.Rebalance) { lost.Add(int64(len(r.Lost))) }
	m := e.startMember(table, cfg)
	// Read but not flushed: the flush deadline is 8 s away, the next
	// heartbeat at most 3 s.
	for p := range int32(3) {
		e.Produce(records(topic, p, 20, "buffered"))
	}
	time.Sleep(time.Second)
	var joinRefused atomic.Bool
	joinRefused.Store(true)
	// The coordinator refuses to let it join again until the dropped
	// records' deadline has passed (as a restarting broker does).
	e.Stack.Cluster.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !joinRefused.Load() {
			return nil, nil, false
		}
		e.Stack.Cluster.KeepControl()
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	kickMember(t, e, &lost)
	l := mustLedger(t, e.Table(table))
	for _, tp := range l.Partitions() {
		if n := l.Next()[tp]; n > 0 {
			t.Fatalf("the member committed %s up to %d before it was dropped: nothing was buffered to lose", tp, n)
		}
	}
	time.Sleep(cfg.FlushInterval)
	joinRefused.Store(false)
	for p := range int32(3) {
		e.Produce(records(topic, p, 20, "after"))
	}
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 30*time.Second)
	m.halt(t)
	checkExactlyOnce(t, tbl, want)
	auditComplete(t, e, tbl)
}

// TestGroupRevocationSlowCommit: a member's commits become slower than its
// revocation may take (the catalog holds each commit for the whole
// rebalance timeout), and a second member joins. The first member's
// revocation cannot commit what it consumed of the partitions it gives up
// within the rebalance timeout (less the margin to rejoin): it drops those
// records, reports the revocation as not committed, and rejoins in time;
// the second member reads them again from the ledger. Every offset ends in
// the table exactly once and the audit is complete. The revocation used
// to wait for the slow commit with no bound, holding up the group's
// rebalance.
func TestGroupRevocationSlowCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a rebalance timeout")
	}
	e := newEnv(t)
	const topic, table, group = "slowrevoke", "lake.slowrevoke", "floe-slowrevoke"
	e.Topic(topic, 6, nil)
	e.Table(table)
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(table)
	fc := &faultCatalog{Catalog: cat, ident: ident}
	slow, err := snapshot.Open(e.Ctx, fc, ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pr := e.produceContinuously(topic, 6, 20, 50*time.Millisecond)
	var dropped, revokedAt atomic.Int64
	cfg := groupConfig(topic, group)
	cfg.OnRebalance = func(r connector.Rebalance) {
		if len(r.Revoked) > 0 {
			revokedAt.Store(time.Now().UnixNano())
			if !r.Committed {
				dropped.Add(1)
			}
		}
	}
	first := e.startMemberOn(slow, cfg)
	waitFor(t, 30*time.Second, "the first member assigned every partition", func() bool { return first.assigned.Load() == 6 })
	time.Sleep(time.Second)
	waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)
	// Each commit now takes the rebalance timeout, longer than a
	// revocation may wait for it.
	fc.delay.Store(int64(cfg.RebalanceTimeout))
	time.Sleep(time.Second)
	joined := time.Now()
	second := e.startMember(table, groupConfig(topic, group))
	waitFor(t, 60*time.Second, "the second member assigned partitions", func() bool { return second.assigned.Load() > 0 })
	if dropped.Load() == 0 {
		t.Fatalf("the first member's revocation did not drop its records (revocations at %v)", time.Unix(0, revokedAt.Load()))
	}
	if took := time.Unix(0, revokedAt.Load()).Sub(joined); took > cfg.RebalanceTimeout {
		t.Errorf("the revocation gave its partitions up %s after the second member joined, beyond the rebalance timeout %s", took, cfg.RebalanceTimeout)
	}
	fc.delay.Store(0)
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 60*time.Second)
	first.halt(t)
	second.halt(t)
	tbl := e.Table(table)
	if rs := checkExactlyOnce(t, tbl, want); int64(len(rs)) != produced {
		t.Fatalf("%d rows, want %d", len(rs), produced)
	}
	auditComplete(t, e, tbl)
}

// TestGroupOffsetsWrittenWhenHaltedMidCommit: a member halted while its
// last group offset commit is still at the broker lets that commit finish,
// so the group's offsets end equal to the ledger. Halting used to cancel
// the commit in flight and drop its offsets (seen in CI as
// TestGroupMembersShareTopic's offsets one flush behind).
func TestGroupOffsetsWrittenWhenHaltedMidCommit(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "midcommit", "lake.midcommit", "floe-midcommit"
	e.Topic(topic, 1, nil)
	tbl := e.Table(table)
	c := e.Stack.Cluster
	c.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { time.Sleep(time.Second) })
		return nil, nil, false
	})
	m := e.startMember(table, groupConfig(topic, group))
	e.Produce(records(topic, 0, 20, "a"))
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 30*time.Second)
	m.halt(t)
	offs, err := kadm.NewClient(e.Dial().Client()).FetchOffsets(e.Ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	for tp, n := range mustLedger(t, tbl).Next() {
		if o, ok := offs.Lookup(topic, tp.Partition); !ok || o.Err != nil || o.At != n {
			t.Errorf("%s: group offset %+v, want %d", tp, o, n)
		}
	}
}
