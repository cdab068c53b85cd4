package replay_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// env is one test's stack: floetest.Env (a kfake broker over TCP, a SQLite
// catalog and a file warehouse) with this package's helpers.
type env struct {
	*floetest.Env
}

func newEnv(t testing.TB) *env { return &env{floetest.New(t)} }

func quietLogger() *slog.Logger { return floetest.QuietLogger() }

// sink runs a sink of cfg.Topic into tbl, over a broker connection of its
// own, and returns its stats: the live tables replays are compared with.
func (e *env) sink(tbl *snapshot.Table, cfg connector.Config) (connector.Stats, error) {
	e.T.Helper()
	return e.Env.Sink(e.Dial(), tbl, cfg)
}

// compactedTopic creates topic with one partition whose cleanup policy
// is compact, as the publish check reads it, and returns a producer of
// one record per key from offset from on, valued and stamped after it.
func (e *env) compactedTopic(topic string) func(from int, keys ...string) {
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	base := time.Now().Add(-time.Hour)
	return func(from int, keys ...string) {
		for i, k := range keys {
			e.Produce([]*kgo.Record{{Topic: topic, Key: []byte(k), Value: fmt.Appendf(nil, "%s-%d", k, from+i), Timestamp: base.Add(time.Duration(from+i) * time.Second)}})
		}
	}
}

// mainVerdict is what audit --deep --verify-content --brokers says of
// table's main: a test of a publish that dropped records no log holds
// any more reports it, as the audit cannot see them.
func (e *env) mainVerdict(table string) string {
	rep, err := audit.Run(e.Ctx, e.openExisting(table, ""), audit.Options{Depth: audit.DepthRows, VerifyContent: true, Broker: e.Dial()})
	if err != nil {
		return "audit failed: " + err.Error()
	}
	return fmt.Sprintf("audit --deep --verify-content --brokers of main: complete %v", rep.Complete())
}

// records is floetest.Records.
func records(topic string, partition int32, n int, tag string) []*kgo.Record {
	return floetest.Records(topic, partition, n, tag)
}

// rows is floetest.Rows.
func rows(t testing.TB, tbl *snapshot.Table) []floetest.Row { return floetest.Rows(t, tbl) }

// checkExactlyOnce is floetest.CheckExactlyOnce.
func checkExactlyOnce(t testing.TB, tbl *snapshot.Table, want map[mapping.TopicPartition]int64) []floetest.Row {
	t.Helper()
	return floetest.CheckExactlyOnce(t, tbl, want)
}

// endOffsets is floetest.Env.HighWatermarks.
func (e *env) endOffsets(topic string) map[mapping.TopicPartition]int64 {
	e.T.Helper()
	return e.HighWatermarks(topic)
}
