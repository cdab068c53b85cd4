package audit_test

import (
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
)

// TestRetainedLoss (from a review): a hand-written commit records offsets
// [10, 20) as aborted records deleted by retention (a lost range alike),
// although the log still holds them (log start 0): ten committed records
// without a row. The sink records such a range only below the log start,
// so the broker level names it, where every level called the table
// complete with a note that nothing was lost.
func TestRetainedLoss(t *testing.T) {
	for _, aborted := range []bool{true, false} {
		e := newEnv(t)
		const topic = "forgedabort"
		e.Topic(topic, 1, nil)
		e.Produce(records(topic, 0, 10, "a"))
		tbl := e.Table("lake." + topic)
		e.sink(tbl, connector.Config{Topic: topic})
		e.Produce(records(topic, 0, 10, "b")) // offsets 10-19, committed
		tp := mapping.TopicPartition{Topic: topic, Partition: 0}
		floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 10, High: 20}, Aborted: aborted, Lost: !aborted}}, nil)
		rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
		found := false
		for _, f := range rep.Findings {
			found = found || f.Kind == audit.KindRetainedLoss && f.Offsets == mapping.Interval{Low: 10, High: 20}
		}
		if rep.Complete() || !found {
			t.Errorf("aborted %v: findings %+v; want retained-loss [10, 20)", aborted, rep.Findings)
		}
	}
}
