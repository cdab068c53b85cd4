package connector_test

import (
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// env is one test's stack: floetest.Env (a kfake broker over TCP, a SQLite
// catalog and a file warehouse) with this package's helpers.
type env struct {
	*floetest.Env
	// spillBytes, when set, is the spill bytes of the group members it
	// starts (connector.SetSpillBytes).
	spillBytes int64
}

func newEnv(t testing.TB) *env { return &env{Env: floetest.New(t)} }

func quietLogger() *slog.Logger { return floetest.QuietLogger() }

// sink runs a sink of cfg.Topic into tbl, over a broker connection of its
// own, and returns its stats.
func (e *env) sink(tbl *snapshot.Table, cfg connector.Config) (connector.Stats, error) {
	e.T.Helper()
	return e.Env.Sink(e.Dial(), tbl, cfg)
}

// records is floetest.Records.
func records(topic string, partition int32, n int, tag string) []*kgo.Record {
	return floetest.Records(topic, partition, n, tag)
}

// row is floetest.Row.
type row = floetest.Row

// rows is floetest.Rows.
func rows(t testing.TB, tbl *snapshot.Table) []row { return floetest.Rows(t, tbl) }

// checkExactlyOnce is floetest.CheckExactlyOnce.
func checkExactlyOnce(t testing.TB, tbl *snapshot.Table, want map[mapping.TopicPartition]int64) []row {
	t.Helper()
	return floetest.CheckExactlyOnce(t, tbl, want)
}

// endOffsets is floetest.Env.HighWatermarks.
func (e *env) endOffsets(topic string) map[mapping.TopicPartition]int64 {
	e.T.Helper()
	return e.HighWatermarks(topic)
}
