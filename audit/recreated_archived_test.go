package audit_test

import (
	"testing"
	"time"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// TestTopicRecreatedAfterEveryCommitExpired (from a review) is TestFaultTopicRecreated with
// every floe commit expired (archived) behind a compaction at the head:
// the topic ID the commits recorded is in the ledger archive only. The
// topic is deleted and recreated with more records than the ledger's
// next offset: the audit must still name the recreation, not call the
// table complete.
func TestTopicRecreatedAfterEveryCommitExpired(t *testing.T) {
	e := newEnv(t)
	const topic = "again"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	tbl := e.Table("lake.again")
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 10})
	res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20})
	if err != nil || res.SnapshotID == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	time.Sleep(5 * time.Millisecond)
	m, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1})
	if err != nil || m.ExpiredCommits == 0 {
		t.Fatalf("expiry: %+v, %v", m, err)
	}
	if err := e.Stack.Cluster.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 80, "b"))
	rep := e.audit(tbl, audit.Options{Broker: e.Broker()})
	expectFindings(t, rep, "broker topic-recreated")
	rep = e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if rep.Complete() {
		t.Fatalf("audit --deep --verify-content calls the table complete against the recreated topic: %v", findings(rep))
	}
}
