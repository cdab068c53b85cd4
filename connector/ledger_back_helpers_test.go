package connector_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// partition0Ahead makes topic, of partitions partitions (1 or 2), and
// table with 10 records of each in its ledger, then 5 more of partition 0
// in a commit of their own: the tests of main moved back roll it back to
// the snapshot returned, where partition 0 ends at 10 again.
func (e *env) partition0Ahead(topic, table string, partitions int32) (tbl *snapshot.Table, before int64) {
	e.T.Helper()
	e.Topic(topic, partitions, nil)
	for p := range partitions {
		e.Produce(records(topic, p, 10, "a"))
	}
	tbl = e.Table(table)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		e.T.Fatal(err)
	}
	before = tbl.Head().SnapshotID
	e.Produce(records(topic, 0, 5, "b"))
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		e.T.Fatal(err)
	}
	return tbl, before
}

// rollBack moves main of table back to snapshot id, as an operator's
// rollback or a published replay does, on a handle of its own. It runs in
// sinks' callbacks, so a failure is reported with Error, not Fatal.
func (e *env) rollBack(table string, id int64) {
	txn := e.Table(table).Iceberg().NewTransaction()
	if err := txn.RollbackToSnapshot(id); err != nil {
		e.T.Error(err)
	} else if _, err := txn.Commit(e.Ctx); err != nil {
		e.T.Error(err)
	}
}

// publishHold sets on table the hold a publish of branch rb asks main's
// writers for, until until (past: lifted).
func (e *env) publishHold(table string, until time.Time) {
	e.T.Helper()
	if err := e.Table(table).SetProperties(e.Ctx, map[string]string{snapshot.PropPublishHold: fmt.Sprintf("rb %d", until.UnixMilli())}); err != nil {
		e.T.Fatal(err)
	}
}

// startMemberMovedBack starts a group member of cfg on table that, once
// first assigned partitions (taken on at the ledger's positions), rolls
// main back to before (rollBack), and waits for that. cfg.OnRebalance, if
// any, is called first at every rebalance.
func (e *env) startMemberMovedBack(table string, before int64, cfg connector.Config) *member {
	e.T.Helper()
	rolledBack := make(chan struct{})
	var once sync.Once
	then := cfg.OnRebalance
	cfg.OnRebalance = func(r connector.Rebalance) {
		if then != nil {
			then(r)
		}
		if len(r.Assigned) > 0 {
			once.Do(func() {
				e.rollBack(table, before)
				close(rolledBack)
			})
		}
	}
	m := e.startMember(table, cfg)
	select {
	case <-rolledBack:
	case <-time.After(30 * time.Second):
		m.stop()
		<-m.done
		e.T.Fatal("the member was not assigned its partitions")
	}
	return m
}
