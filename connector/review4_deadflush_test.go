package connector_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// heldTypedTable is heldTable for a JSON table with its dead-letter table
// (which commits through the same fault catalog, but only the data
// table's commits are held).
func (e *env) heldTypedTable(name string) (tbl, dlq *snapshot.Table, hc *faultCatalog) {
	e.T.Helper()
	hc = e.newFaultCatalog(name)
	tbl, dlq = e.openTyped(hc, hc.ident)
	return tbl, dlq, hc
}

// badRecords returns n malformed JSON records of partition p (dead
// letters), of about size bytes each.
func badRecords(topic string, p int32, n, size int, tag string) []*kgo.Record {
	out := make([]*kgo.Record, n)
	for i := range out {
		out[i] = &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i),
			Value: fmt.Appendf(nil, "oops %s %d %-*s", tag, i, size, "x")}
	}
	return out
}

// evolvingRecords returns n JSON records of partition p, of about size
// bytes each, with a column named after tag that no earlier round had: a
// schema change in every round.
func evolvingRecords(topic string, p int32, n, size int, tag string) []*kgo.Record {
	out := make([]*kgo.Record, n)
	for i := range out {
		out[i] = &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i),
			Value: fmt.Appendf(nil, `{"id":%d,"c_%s":"%-*s"}`, i, tag, size, "x")}
	}
	return out
}

// TestReview4DeadFlushHoldsRevocationBack is
// TestReviewSlowCommitHoldsRevocationBack for the flushes that the poll
// ends: member A's commit hangs (a slow catalog) while records keep
// coming. The loop's flush waits for the commit with the group lock
// released (waitReleased), so that a revocation can give its partitions
// up within the rebalance timeout. "dead" is a stream of dead letters,
// which end a flush at the spill bytes; when 2884d0a ended that one inside
// poll, it waited for the commit in flight (flush -> wait) holding the
// lock: member B joined and the group could give it nothing while A's
// commit hung. "schema" is a stream of records with a new column in every
// round, which ends a flush whose files are open (errSchemaFlush); the
// poll flushed those itself until db26f9a, the same way. "reserve" is a
// member that commits its flushes' columns ahead of their files
// (Sink.reserveSchema, set in every session after another writer's
// schema change moved a flush's files: group members evolving one JSON
// table meet it), with a new column every round: the loop commits them
// with the lock released (session.reserve); until 9324ba3 the poll and
// the flush committed them holding it (found by the review of 8b2e2c2).
func TestReview4DeadFlushHoldsRevocationBack(t *testing.T) {
	for _, name := range []string{"dead", "schema", "reserve"} {
		t.Run(name, func(t *testing.T) { testPollFlushHoldsRevocationBack(t, name) })
	}
}

func testPollFlushHoldsRevocationBack(t *testing.T, name string) {
	e := newEnv(t)
	e.spillBytes = 8 << 10
	topic, tableName, group := "r4slow"+name, "lake.r4slow"+name, "floe-r4slow"+name
	e.Topic(topic, 2, nil)
	tblA, dlqA, hc := e.heldTypedTable(tableName)
	cfgA := groupConfig(topic, group)
	cfgA.DeadLetters = dlqA
	// A flushes when its dead letters reach the spill bytes, or for a
	// schema change, within a second or two; a flush on time, which
	// waits with the lock released, comes later (and ends the test's
	// last rows).
	cfgA.FlushInterval = 10 * time.Second
	var tune []func(*connector.Sink)
	if name == "reserve" {
		tune = append(tune, connector.SetReserveSchema)
	}
	a := e.startMemberOn(tblA, cfgA, tune...)
	waitOwnsBoth(t, e, a, topic, tableName)

	release := hc.holdCommits()
	defer release()
	pr := e.produceRounds(2, 200*time.Millisecond, func(p int32, round int) []*kgo.Record {
		switch name {
		case "reserve":
			return evolvingRecords(topic, p, 10, 100, fmt.Sprintf("r%d", round))
		case "schema":
			// A new column a second: the flush it ends comes while the
			// first commit is held, and the table does not grow a column
			// a round.
			return evolvingRecords(topic, p, 10, 100, fmt.Sprintf("r%d", round/5))
		}
		return badRecords(topic, p, 10, 100, fmt.Sprintf("r%d", round))
	})
	select {
	case <-hc.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("member A did not commit its flush")
	}
	// A's poll ends a flush again while the first commit is held.
	time.Sleep(2 * time.Second)
	bTbl, bDLQ := e.TypedTable(tableName, mapping.Layout{Value: mapping.ValueJSON})
	cfgB := groupConfig(topic, group)
	cfgB.DeadLetters = bDLQ
	b := e.startMemberOn(bTbl, cfgB)
	within := cfgA.RebalanceTimeout + 15*time.Second
	deadline := time.Now().Add(within)
	for b.assigned.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	assigned := b.assigned.Load()
	if assigned == 0 {
		t.Errorf("member B was assigned nothing within %s (rebalance timeout %s) while member A's commit hung: A waited for it holding the rebalance callbacks back",
			within, cfgA.RebalanceTimeout)
	}
	produced := pr.halt()
	release()
	want := e.endOffsets(topic)
	waitLedger(t, e, tableName, want, 120*time.Second)
	a.halt(t)
	b.halt(t)
	tbl, dlq := e.TypedTable(tableName, mapping.Layout{Value: mapping.ValueJSON})
	rs, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	if int64(len(rs)+len(dead)) != produced {
		t.Fatalf("%d rows and %d dead letters, want %d", len(rs), len(dead), produced)
	}
}

// failingTypedTable opens a JSON table and its dead-letter table through a
// faultCatalog; fails, set later, is how many commit attempts of the data
// table fail from then on (snapshot.Table.Commit makes 5 before it gives
// up on errors that are not conflicts).
func (e *env) failingTypedTable(name string) (tbl, dlq *snapshot.Table, fails *atomic.Int32) {
	e.T.Helper()
	fc := &countFailCatalog{faultCatalog: e.newFaultCatalog(name)}
	tbl, dlq = e.openTyped(fc, fc.ident)
	return tbl, dlq, &fc.fails
}

// countFailCatalog fails the next fails commits of its table.
type countFailCatalog struct {
	*faultCatalog
	fails atomic.Int32
}

func (c *countFailCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(ident, tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

func (c *countFailCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, upds []table.Update) (table.Metadata, string, error) {
	if slices.Equal(ident, c.ident) && c.fails.Add(-1) >= 0 {
		return nil, "", errInjected
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, upds)
}

// TestReview4InlineFlushFailureIsAFence: a commit that fails (the catalog
// refuses it 5 times: snapshot.Table.Commit gives up) ends the session,
// and without Config.RetryFor, the run, with that error; the sink is the
// table's only writer, so it is never fenced. "inline" learns the failure
// in a flush that dead letters end: when 2884d0a ended it inside poll,
// poll returned the failure as the session's and consume ran its final
// flush anyway: that flush's ranges began where the failed commit's end,
// above the ledger, so it was fenced (its files written for nothing), and
// Run, seeing ErrFenced in the joined error, counted a fence, called
// OnFenced and started again, swallowing the catalog's error. The loop's
// flush ends it now. "schema" learns it in a flush that a new column ends
// (errSchemaFlush), which poll ran itself until db26f9a. "loop" is the
// same failure learned by a flush by count (valid records).
func TestReview4InlineFlushFailureIsAFence(t *testing.T) {
	for _, name := range []string{"inline", "schema", "loop"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			topic, tableName := "r4fail"+name, "lake.r4fail"+name
			e.Topic(topic, 1, nil)
			var recs []*kgo.Record
			switch name {
			case "inline":
				// Polls of at most 10,000 records: several flushes.
				recs = badRecords(topic, 0, 30000, 100, "a")
			case "schema":
				// A new column every 500 records, past the spill bytes:
				// each ends a flush.
				for i := range 10 {
					recs = append(recs, evolvingRecords(topic, 0, 500, 100, fmt.Sprint(i))...)
				}
			default:
				recs = review2JSON(topic, 0, 3000, "a")
				for _, r := range recs {
					if string(r.Value) == "oops not json" {
						r.Value = []byte(`{"id":-1}`)
					}
				}
			}
			e.Produce(recs)
			tbl, dlq, fails := e.failingTypedTable(tableName)
			var commits, fenced atomic.Int64
			cfg := connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger(), DeadLetters: dlq,
				FlushRecords: 1_000_000, FlushInterval: time.Minute,
				OnCommit: func(snapshot.Result) {
					if commits.Add(1) == 2 {
						fails.Store(5) // the third commit fails
					}
				},
				OnFenced: func(error) { fenced.Add(1) }}
			if name == "loop" {
				cfg.FlushRecords = 50
			}
			s, err := connector.NewSink(e.Dial(), tbl, cfg)
			if err != nil {
				t.Fatal(err)
			}
			connector.SetSpillBytes(s, 8<<10)
			st, err := s.Run(e.Ctx)
			t.Logf("run: %d commits, %d fenced, err %v", st.Commits, st.Fenced, err)
			if st.Fenced != 0 || fenced.Load() != 0 {
				t.Errorf("the table's only writer was fenced %d times (OnFenced %d): a failed commit was reported as another writer's", st.Fenced, fenced.Load())
			}
			if !errors.Is(err, errInjected) {
				t.Errorf("Run returned %v, want the catalog's error (no RetryFor)", err)
			}
			// Whatever it reported, nothing is lost or doubled.
			if err := tbl.Refresh(e.Ctx); err != nil {
				t.Fatal(err)
			}
			l := mustLedger(t, tbl)
			t.Logf("ledger next %v", l.Next())
		})
	}
}

// TestReview4GroupInlineFenceEndsSession: in group mode a fence resets the
// session (survive): the member stays in the group and takes its
// partitions on again from the ledger, without a rebalance. Member A's
// commit is held while another writer (a sink of partition 0) commits
// partition 0, so that A's commit is fenced when let through; A learns it
// in the flush that its dead letters end. When 2884d0a ended that flush
// inside poll, poll returned the fence as the session's failure: consume
// ran a final flush (fenced again) and the session ended, so A left the
// group and joined again (its partitions assigned a second time), a
// rebalance of the whole group for one fence.
func TestReview4GroupInlineFenceEndsSession(t *testing.T) {
	e := newEnv(t)
	e.spillBytes = 8 << 10
	const topic, tableName, group = "r4fence", "lake.r4fence", "floe-r4fence"
	e.Topic(topic, 2, nil)
	tblA, dlqA, hc := e.heldTypedTable(tableName)
	cfgA := groupConfig(topic, group)
	cfgA.DeadLetters = dlqA
	cfgA.FlushInterval = time.Minute
	var fencedA atomic.Int64
	cfgA.OnFenced = func(error) { fencedA.Add(1) }
	a := e.startMemberOn(tblA, cfgA)
	waitOwnsBoth(t, e, a, topic, tableName)

	release := hc.holdCommits()
	defer release()
	for p := range int32(2) {
		e.Produce(badRecords(topic, p, 200, 100, "a"))
	}
	select {
	case <-hc.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("member A did not commit its flush")
	}
	time.Sleep(time.Second) // A's next dead-letter flush waits for the held commit
	// Another writer commits partition 0 meanwhile.
	other, otherDLQ := e.TypedTable(tableName, mapping.Layout{Value: mapping.ValueJSON})
	if _, err := e.sink(other, connector.Config{Topic: topic, Partitions: []int32{0}, StopAtEnd: true, Logger: quietLogger(),
		DeadLetters: otherDLQ, FlushInterval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	release()
	waitFor(t, 30*time.Second, "member A fenced", func() bool { return fencedA.Load() > 0 })
	for p := range int32(2) {
		e.Produce(badRecords(topic, p, 50, 100, "b"))
	}
	want := e.endOffsets(topic)
	waitLedger(t, e, tableName, want, 60*time.Second)
	st := a.halt(t)
	tbl, dlq := e.TypedTable(tableName, mapping.Layout{Value: mapping.ValueJSON})
	floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	t.Logf("A: %d commits, %d fenced, %d rebalances, %d partitions assigned", st.Commits, st.Fenced, st.Rebalances, a.assigned.Load())
	if n := a.assigned.Load(); n != 2 {
		t.Errorf("member A was assigned %d partitions over its life, want 2: the fence ended its session (it left the group and joined again) instead of resetting it", n)
	}
}
