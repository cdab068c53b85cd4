package audit_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

// sink runs a bounded sink of cfg.Topic into tbl.
func (e *env) sink(tbl *snapshot.Table, cfg connector.Config) connector.Stats {
	e.T.Helper()
	cfg.StopAtEnd = true
	stats, err := e.Env.Sink(e.Broker(), tbl, cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	return stats
}

// records is floetest.Records.
func records(topic string, partition int32, n int, tag string) []*kgo.Record {
	return floetest.Records(topic, partition, n, tag)
}

// audit runs an audit of tbl as currently committed.
func (e *env) audit(tbl *snapshot.Table, opts audit.Options) *audit.Report {
	e.T.Helper()
	if err := tbl.Refresh(e.Ctx); err != nil {
		e.T.Fatal(err)
	}
	rep, err := audit.Run(e.Ctx, tbl, opts)
	if err != nil {
		e.T.Fatal(err)
	}
	return rep
}

// batch builds the rows of partition tp at the given offsets, as the sink
// would.
func batch(t testing.TB, tbl *snapshot.Table, tp mapping.TopicPartition, offsets ...int64) arrow.RecordBatch {
	t.Helper()
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for _, o := range offsets {
		rb.Append(&kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: o,
			Key: fmt.Appendf(nil, "k%d", o), Value: fmt.Appendf(nil, "v%d", o), Timestamp: time.UnixMilli(1_700_000_000_000 + o)})
	}
	return rb.NewBatch()
}

// span returns the offsets [low, high).
func span(low, high int64) []int64 {
	out := make([]int64, 0, high-low)
	for o := low; o < high; o++ {
		out = append(out, o)
	}
	return out
}

// commit writes a hand-made floe commit: rows at offsets, and one range
// [low, high) holding them.
func commit(t testing.TB, tbl *snapshot.Table, tp mapping.TopicPartition, low, high int64, offsets []int64) {
	t.Helper()
	f := snapshot.Flush{
		Batches: map[mapping.TopicPartition][]arrow.RecordBatch{tp: {batch(t, tbl, tp, offsets...)}},
		Ranges: []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: low, High: high},
			Records: int64(len(offsets))}},
	}
	if _, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test", Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
}

// forceCommit writes a commit whose range [low, high) holds rows at
// offsets, wherever the ledger ends (see floetest.ForceCommit).
func forceCommit(t testing.TB, tbl *snapshot.Table, tp mapping.TopicPartition, low, high int64, offsets []int64) {
	t.Helper()
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: low, High: high},
		Records: int64(len(offsets))}}, batch(t, tbl, tp, offsets...))
}

// want describes the findings a test expects: level, kind, partition and
// offsets, rendered by key.
func key(f audit.Finding) string {
	s := fmt.Sprintf("%s %s", f.Level, f.Kind)
	if f.HasPartition {
		s += " " + f.Partition.String()
	}
	if f.HasOffsets {
		s += " " + f.Offsets.String()
	}
	return s
}

// findings returns the keys of the report's findings, sorted.
func findings(rep *audit.Report) []string {
	out := make([]string, 0, len(rep.Findings))
	for _, f := range rep.Findings {
		out = append(out, key(f))
	}
	slices.Sort(out)
	return out
}

// expectFindings fails unless the report holds exactly the wanted findings.
func expectFindings(t testing.TB, rep *audit.Report, want ...string) {
	t.Helper()
	got := findings(rep)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Fatalf("findings:\n  got  %q\n  want %q\nreport:\n%s", got, want, b.String())
	}
}

// levels of increasing depth, for checking that a fault is found by the
// cheapest level that can see it and not before.
var (
	ledgerOnly = audit.Options{Depth: audit.DepthLedger}
	filesDepth = audit.Options{Depth: audit.DepthFiles}
	rowsDepth  = audit.Options{Depth: audit.DepthRows}
)
