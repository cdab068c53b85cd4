package connector_test

import (
	"fmt"
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
