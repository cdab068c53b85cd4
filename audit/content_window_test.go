package audit_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestContentWindows: the content level checks a partition in windows of
// offsets, each with its own rows' digests, so that its memory does not
// follow the partition's length. Windows of 7, 13 and 50 offsets, cutting
// transactions (committed and aborted, their markers after the window)
// and a finding's offsets, give the report of one window per partition:
// the same findings, merged across windows, and the same counts.
func TestContentWindows(t *testing.T) {
	e := newEnv(t)
	const topic = "win"
	e.MixedLog(topic, floetest.MixedLog{Partitions: 3, Records: 120, Committed: 10, Aborted: 7, Trailing: 25})
	tbl := e.Table("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 50})

	compare := func(what string, wantFindings bool) {
		t.Helper()
		opts := audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true}
		if whole := sameInWindows(t, e, tbl, opts, what, 7, 13, 50); (len(whole.Findings) > 0) != wantFindings {
			t.Fatalf("%s: findings %v", what, findings(whole))
		}
	}
	compare("the table as sunk", false)

	// Partition 1's first file rewritten with other rows at every offset
	// its bounds span: content mismatches, and rows where markers and
	// aborted records are, across window boundaries.
	tp := mapping.TopicPartition{Topic: topic, Partition: 1}
	files, err := tbl.Files(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(files, func(f snapshot.DataFile) bool { return f.PartitionMin == 1 && f.Offsets.Low == 0 })
	if i < 0 {
		t.Fatalf("no file of partition 1 at offset 0 among %+v", files)
	}
	f := files[i]
	rewriteInPlace(t, tbl, f, batch(t, tbl, tp, span(f.Offsets.Low, f.Offsets.High)...))
	compare(fmt.Sprintf("file %s rewritten", f.Path), true)
}

// details are rep's findings with their details.
func details(rep *audit.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, fmt.Sprintf("%s %s %s %s: %s", f.Level, f.Kind, f.Partition, f.Offsets, f.Detail))
	}
	return out
}

// sameInWindows audits tbl at the content level with opts in one window
// per partition and in windows of each of sizes offsets, and fails unless
// each windowed report has the one-window report's findings (with their
// details), content counts, rows and dead letters read. It returns the
// one-window report.
func sameInWindows(t *testing.T, e *env, tbl *snapshot.Table, opts audit.Options, what string, sizes ...int64) *audit.Report {
	t.Helper()
	whole := e.audit(tbl, audit.WithContentWindow(opts, 1<<40))
	for _, n := range sizes {
		rep := e.audit(tbl, audit.WithContentWindow(opts, n))
		if got, want := details(rep), details(whole); !slices.Equal(got, want) {
			t.Errorf("%s, windows of %d offsets: findings\n%q\nwant\n%q", what, n, got, want)
		}
		for i, p := range rep.Partitions {
			if w := whole.Partitions[i].Content; (p.Content == nil) != (w == nil) || p.Content != nil && *p.Content != *w {
				t.Errorf("%s, windows of %d offsets: %s content %+v, want %+v", what, n, p.TopicPartition, p.Content, w)
			}
		}
		if rep.RowsRead != whole.RowsRead || rep.DeadLettersRead != whole.DeadLettersRead {
			t.Errorf("%s, windows of %d offsets: %d rows and %d dead letters read, want %d and %d",
				what, n, rep.RowsRead, rep.DeadLettersRead, whole.RowsRead, whole.DeadLettersRead)
		}
	}
	return whole
}
