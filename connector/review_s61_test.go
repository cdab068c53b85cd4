package connector_test

import (
	"errors"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewS61UndoneRollbackAfterPartialExpiryKeepsDeadLetters (review
// s61): main is rolled back (by another engine) below two commits, C1
// with a dead letter and C2 after it. floe maintain with a retention that
// C1 is older than and C2 younger than expires C1 (archiving its ledger
// entry) and keeps C2, an unreferenced snapshot whose history still holds
// C1 (iceberg keeps unreferenced snapshots younger than the cutoff). The
// rollback is then undone (main set back to C2): C2's ledger names C1's
// dead letters, and its data files are there (C2's manifests), but
// maintain deleted C1's dead-letter files: keptFiles keeps the files of
// the commits whose own snapshots the table still has and of the refs'
// ledgers, not those of the expired ancestors of a snapshot it keeps.
// The dead letter is lost for good and the audit is NOT COMPLETE.
func TestReviewS61UndoneRollbackAfterPartialExpiryKeepsDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON}
	tbl, dlq := e.TypedTable("lake.orders", layout)
	cfg := connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq}
	e.Produce(jsonRecords("orders", 0, `{"id":0}`))
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	before := tbl.Head().SnapshotID
	// C1: a row and a dead letter.
	e.Produce(jsonRecords("orders", 0, `{"id":1}`, `oops`))
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	const retention = 8 * time.Second
	time.Sleep(retention + 2*time.Second)
	// C2: younger than the retention when maintain runs.
	e.Produce(jsonRecords("orders", 0, `{"id":3}`))
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	c2 := tbl.Head().SnapshotID
	c2At := time.UnixMilli(tbl.Head().TimestampMs)

	e.rollBack("lake.orders", before) // another engine

	m, _ := e.TypedTable("lake.orders", layout)
	res, err := m.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, ExpireOlderThan: retention, RetainLast: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(c2At) >= retention {
		t.Skipf("the machine was too slow: C2 is older than the retention already (%s)", time.Since(c2At))
	}
	m, _ = e.TypedTable("lake.orders", layout)
	if m.Iceberg().Metadata().SnapshotByID(c2) == nil {
		t.Fatalf("maintain expired C2 (%d), which the scenario needs kept; expired %v", c2, res.Expired)
	}
	t.Logf("maintain expired %v, dead letters %+v", res.Expired, res.DeadLetters)

	// The rollback undone: main set back to C2.
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent("lake.orders")
	if _, _, err := cat.CommitTable(e.Ctx, ident, []table.Requirement{table.AssertRefSnapshotID("main", &before)},
		[]table.Update{table.NewSetSnapshotRefUpdate("main", c2, table.BranchRef, 0, 0, 0)}); err != nil {
		t.Fatal(err)
	}

	tbl, dlq = e.TypedTable("lake.orders", layout)
	if _, err := tbl.ReconcileDeadLetters(e.Ctx, dlq, quietLogger()); err != nil {
		var missing *snapshot.DeadLettersMissingError
		if errors.As(err, &missing) {
			t.Fatalf("the rollback undone, C1's dead letters cannot be added back: maintain deleted their files while a snapshot it kept (C2) names them through its expired ancestor: %v", err)
		}
		t.Fatal(err)
	}
	floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{{Topic: "orders"}: 4})
}

// TestReviewS61TwoSinksOneTableWithDeadLetters: TestTwoSinksOneTable with
// a typed table and dead letters: two sinks of the same partitions race
// (each fences the other's flushes, their dead-letter files are removed
// with them, the winners' dead letters are added after each commit, and
// each session start reconciles); every offset must end as one row or
// one dead letter (review s61).
func TestReviewS61TwoSinksOneTableWithDeadLetters(t *testing.T) {
	e := newEnv(t)
	const topic = "contended"
	e.Topic(topic, 3, nil)
	for p := range int32(3) {
		var vals []string
		for i := range 1500 {
			if i%7 == 3 {
				vals = append(vals, `oops`)
			} else {
				vals = append(vals, `{"id":1}`)
			}
		}
		e.Produce(jsonRecords(topic, p, vals...))
	}
	layout := mapping.Layout{Value: mapping.ValueJSON}
	ta, da := e.TypedTable("lake.contended", layout)
	tb, db := e.TypedTable("lake.contended", layout)
	errs := make(chan error, 2)
	for _, pair := range [][2]*snapshot.Table{{ta, da}, {tb, db}} {
		go func() {
			_, err := e.sink(pair[0], connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 150, DeadLetters: pair[1], Logger: quietLogger()})
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	tbl, dlq := e.TypedTable("lake.contended", layout)
	if _, err := tbl.ReconcileDeadLetters(e.Ctx, dlq, quietLogger()); err != nil {
		t.Fatal(err)
	}
	floetest.CheckWithDeadLetters(t, tbl, dlq, e.endOffsets(topic))
}
