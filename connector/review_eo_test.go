package connector_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// heldTable opens table name through a faultCatalog whose commits of it
// wait, while hold is set, until released: a slow catalog (a commit that
// takes seconds).
func (e *env) heldTable(name string) (*snapshot.Table, *faultCatalog) {
	e.T.Helper()
	hc := e.newFaultCatalog(name)
	tbl, err := snapshot.Open(e.Ctx, hc, hc.ident, snapshot.OpenOptions{Create: true})
	if err != nil {
		e.T.Fatal(err)
	}
	return tbl, hc
}

// TestReviewRevocationCommittedMeansInLedger: Rebalance.Committed (and the
// README's protocol, step 3) says that a revocation reported as committed
// gave its partitions up only after what the member consumed of them was
// in the table. Here member A's flush of both partitions is still
// committing (a slow catalog) when member B joins and the group revokes
// one partition from A: A has nothing newer of it, so it reports the
// revocation committed at once and gives the partition up, although the
// ledger does not hold what it consumed. B then starts the partition from
// the ledger's older position and one of the two commits is fenced. A's
// commit lands a second later, well within the rebalance timeout: the
// revocation should wait for it, report it committed and B should start
// where it ends.
func TestReviewRevocationCommittedMeansInLedger(t *testing.T) {
	e := newEnv(t)
	const topic, tableName, group = "revoke", "lake.revoke", "floe-revoke"
	e.Topic(topic, 2, nil)
	tblA, hc := e.heldTable(tableName)
	reader := e.Table(tableName)

	type report struct {
		r    connector.Rebalance
		next map[mapping.TopicPartition]int64
	}
	reports := make(chan report, 16)
	cfgA := groupConfig(topic, group)
	cfgA.OnRebalance = func(r connector.Rebalance) {
		if len(r.Revoked) == 0 {
			return
		}
		// The ledger as the partitions are given up.
		if err := reader.Refresh(context.Background()); err != nil {
			t.Error(err)
		}
		l, err := reader.Ledger()
		if err != nil {
			t.Error(err)
		}
		reports <- report{r: r, next: l.Next()}
	}
	a := e.startMemberOn(tblA, cfgA)
	waitOwnsBoth(t, e, a, topic, tableName)

	release := hc.holdCommits()
	e.Produce(append(records(topic, 0, 100, "a"), records(topic, 1, 100, "a")...))
	select {
	case <-hc.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("member A did not commit its flush")
	}
	var bPositions atomic.Value
	cfgB := groupConfig(topic, group)
	cfgB.OnRebalance = func(r connector.Rebalance) {
		if len(r.Assigned) > 0 {
			bPositions.Store(r.Positions)
		}
	}
	b := e.startMember(tableName, cfgB)
	// A's commit takes a second more: well within the rebalance timeout
	// (10 s), which a revocation has to commit what it consumed.
	time.AfterFunc(time.Second, release)
	var got report
	select {
	case got = <-reports:
	case <-time.After(40 * time.Second):
		t.Fatal("no revocation from member A")
	}
	want := map[mapping.TopicPartition]int64{{Topic: topic, Partition: 0}: 100, {Topic: topic, Partition: 1}: 100}
	waitLedger(t, e, tableName, want, 60*time.Second)
	// A cooperative rebalance assigns what A gave up to B in a second
	// round, after the revocation.
	waitFor(t, 30*time.Second, "member B assigned the revoked partition", func() bool { return bPositions.Load() != nil })
	statsA, statsB := a.halt(t), b.halt(t)
	t.Logf("revocation %+v; ledger then %v; B started at %v; A fenced %d, B fenced %d", got.r, got.next, bPositions.Load(), statsA.Fenced, statsB.Fenced)
	checkExactlyOnce(t, reader, want)
	if !got.r.Committed {
		t.Errorf("revocation of %v not committed, although A's commit took a second of a 10 s rebalance timeout", got.r.Revoked)
	}
	for _, p := range got.r.Revoked {
		tp := mapping.TopicPartition{Topic: topic, Partition: p}
		if got.next[tp] != 100 {
			t.Errorf("revocation of %v reported (Committed %v) while the ledger held %s only up to %d of the 100 offsets member A had consumed and was committing",
				got.r.Revoked, got.r.Committed, tp, got.next[tp])
		}
	}
	if pos, _ := bPositions.Load().(map[int32]int64); len(pos) == 0 || slices.ContainsFunc(got.r.Revoked, func(p int32) bool { return pos[p] != 100 }) {
		t.Errorf("member B took the revoked partitions on at %v, want 100 (what A consumed, committed before it gave them up)", pos)
	}
}

// TestReviewStuckMemberLosesItsPartitions: member A's commit hangs in a
// slow catalog while records keep coming, so A's loop waits for it with
// the next flush due and A cannot answer the rebalance that member B's
// arrival starts: the group gives every partition to B after the
// rebalance timeout, and B commits from the ledger. When A's commit is
// let through it is fenced; A takes on again the partitions it still
// believes it owns, until the group tells it they are gone. The table
// ends with every offset once and a complete audit.
func TestReviewStuckMemberLosesItsPartitions(t *testing.T) {
	e := newEnv(t)
	const topic, tableName, group = "stuck", "lake.stuck", "floe-stuck"
	e.Topic(topic, 2, nil)
	tblA, hc := e.heldTable(tableName)
	reader := e.Table(tableName)
	a := e.startMemberOn(tblA, groupConfig(topic, group))
	waitOwnsBoth(t, e, a, topic, tableName)

	release := hc.holdCommits()
	pr := e.produceContinuously(topic, 2, 10, 50*time.Millisecond)
	select {
	case <-hc.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("member A did not commit its flush")
	}
	var bCommits atomic.Int64
	cfgB := groupConfig(topic, group)
	cfgB.OnCommit = func(snapshot.Result) { bCommits.Add(1) }
	b := e.startMember(tableName, cfgB)
	// B commits once it has a partition; whether the group gives it one
	// while A's commit hangs depends on whether A's loop already waits
	// for that commit (TestReviewSlowCommitHoldsRevocationBack).
	for deadline := time.Now().Add(20 * time.Second); bCommits.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	release()
	time.Sleep(3 * time.Second)
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, tableName, want, 60*time.Second)
	statsA, statsB := a.halt(t), b.halt(t)
	t.Logf("A: %d commits, %d fenced, %d rebalances; B: %d commits, %d fenced", statsA.Commits, statsA.Fenced, statsA.Rebalances, statsB.Commits, statsB.Fenced)
	if err := reader.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if rs := checkExactlyOnce(t, reader, want); int64(len(rs)) != produced {
		t.Fatalf("%d rows, want %d", len(rs), produced)
	}
	auditComplete(t, e, reader)
}

// TestReviewSlowCommitHoldsRevocationBack: --rebalance-timeout is "how
// long a member has to commit and give up revoked partitions; what is not
// committed by then is dropped". Member A's commit hangs (a slow catalog)
// while records keep coming, so A's next flush falls due and A's loop
// waits for the first commit holding the lock that the rebalance
// callbacks need. Member B joins: the group asks A to revoke a partition,
// and A cannot answer until its commit returns (up to the 10-minute commit
// timeout), so B gets nothing for as long as the commit hangs, far beyond
// the 10 s rebalance timeout.
func TestReviewSlowCommitHoldsRevocationBack(t *testing.T) {
	e := newEnv(t)
	const topic, tableName, group = "slow", "lake.slow", "floe-slow"
	e.Topic(topic, 2, nil)
	tblA, hc := e.heldTable(tableName)
	cfgA := groupConfig(topic, group)
	a := e.startMemberOn(tblA, cfgA)
	waitOwnsBoth(t, e, a, topic, tableName)

	release := hc.holdCommits()
	defer release()
	pr := e.produceContinuously(topic, 2, 10, 50*time.Millisecond)
	select {
	case <-hc.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("member A did not commit its flush")
	}
	// A's next flush falls due (300 ms) while the first is held.
	time.Sleep(2 * time.Second)
	b := e.startMember(tableName, groupConfig(topic, group))
	within := cfgA.RebalanceTimeout + 15*time.Second
	deadline := time.Now().Add(within)
	for b.assigned.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	assigned := b.assigned.Load()
	release()
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, tableName, want, 60*time.Second)
	a.halt(t)
	b.halt(t)
	if rs := checkExactlyOnce(t, e.Table(tableName), want); int64(len(rs)) != produced {
		t.Fatalf("%d rows, want %d", len(rs), produced)
	}
	if assigned == 0 {
		t.Fatalf("member B was assigned nothing within %s (rebalance timeout %s) while member A's commit hung: A's loop waited for it holding the rebalance callbacks back",
			within, cfgA.RebalanceTimeout)
	}
}
