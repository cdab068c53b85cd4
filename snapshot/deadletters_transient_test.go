package snapshot_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// errConnectionLost is a transient catalog failure (catalog.IsTransient):
// a connection that ended mid-answer.
var errConnectionLost = fmt.Errorf("injected: %w", io.ErrUnexpectedEOF)

// flakyCatalog fails its next loads (loads), then its next commits: lost
// of them are applied before they fail (their answer is lost), commits of
// them are not. So a PostgreSQL catalog whose server closes its
// connections fails.
type flakyCatalog struct {
	icecat.Catalog
	loads, lost, commits *atomic.Int32
}

func newFlakyCatalog(cat icecat.Catalog, loads, lost, commits int32) flakyCatalog {
	c := flakyCatalog{Catalog: cat, loads: &atomic.Int32{}, lost: &atomic.Int32{}, commits: &atomic.Int32{}}
	c.loads.Store(loads)
	c.lost.Store(lost)
	c.commits.Store(commits)
	return c
}

func (c flakyCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if c.loads.Add(-1) >= 0 {
		return nil, errConnectionLost
	}
	return loadThrough(ctx, c.Catalog, c, ident)
}

func (c flakyCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, upds []table.Update) (table.Metadata, string, error) {
	if c.lost.Add(-1) >= 0 {
		if _, _, err := c.Catalog.CommitTable(ctx, ident, reqs, upds); err != nil {
			return nil, "", err
		}
		return nil, "", errConnectionLost
	}
	if c.commits.Add(-1) >= 0 {
		return nil, "", errConnectionLost
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, upds)
}

// TestReconcileDeadLettersRetriesTransientFailures (from a review):
// reconciling a dead-letter table whose catalog fails a reload and two
// commits transiently adds the pending dead letters all the same, and a
// commit of it that was applied but whose answer was lost is not made
// twice. Every sink session starts by reconciling: it gave up at the first
// such failure, failing the session, and behind a PostgreSQL catalog
// whose connections were killed every 50-500 ms the next sessions failed
// the same way after pauses growing to 15-22 s, sinking nothing.
func TestReconcileDeadLettersRetriesTransientFailures(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		loads, lost, commits int32
	}{
		{"failed", 1, 0, 2},
		{"answer lost", 0, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, tbl, dlq := deadLetterTables(t)
			pendingCommit(t, cat, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
			flaky := newFlakyCatalog(cat, 0, 0, 0)
			through, err := snapshot.OpenDeadLetters(t.Context(), flaky, dlq.Identifier(), tbl.Name(), false)
			if err != nil {
				t.Fatal(err)
			}
			flaky.loads.Store(tc.loads)
			flaky.lost.Store(tc.lost)
			flaky.commits.Store(tc.commits)
			if _, err := tbl.ReconcileDeadLetters(t.Context(), through, floetest.QuietLogger()); err != nil {
				t.Fatalf("reconcile on a catalog that fails %d loads and %d commits (%d of them applied): %v", tc.loads, tc.lost+tc.commits, tc.lost, err)
			}
			wantDeadLetters(t, dlq, "t/0/1")
		})
	}
}
