package audit_test

import (
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
)

// TestContentCountsRowsRetentionDeleted: an event table sank offsets 0-3
// and 4-9 in two commits; retention then deleted offsets 0-5, cutting the
// second range. The content level verifies the four rows the log still
// holds and counts the six whose records are gone as unverifiable, as
// docs/audit.md says (they were not counted at all).
func TestContentCountsRowsRetentionDeleted(t *testing.T) {
	e := newEnv(t)
	const topic = "retained"
	e.Topic(topic, 1, nil)
	tbl := e.Table("lake." + topic)
	e.Produce(records(topic, 0, 4, "a"))
	e.sink(tbl, connector.Config{Topic: topic})
	e.Produce(records(topic, 0, 6, "b"))
	e.sink(tbl, connector.Config{Topic: topic})
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 6); err != nil {
		t.Fatal(err)
	}
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	c := rep.Partitions[0].Content
	if !rep.Complete() || c == nil || c.Verified != 4 || c.Unverifiable != 6 {
		t.Errorf("complete %v, findings %+v, content %+v; want 4 rows verified and 6 unverifiable", rep.Complete(), rep.Findings, c)
	}
}
