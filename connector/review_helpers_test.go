package connector_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// errInjected is the fault faultCatalog injects.
var errInjected = errors.New("injected catalog failure")

// faultCatalog is the stack's real catalog whose commits of one table fail
// while failing is set: a fault (the catalog going away between two
// commits) that the real SQLite catalog cannot be made to produce on cue.
// Tables it loads commit through it.
type faultCatalog struct {
	icecat.Catalog
	ident   table.Identifier
	failing atomic.Bool
	// lost, while positive, makes that many commits of ident apply and
	// then fail, as a catalog whose answer is lost.
	lost atomic.Int32
	// afterLost, when set, runs after each commit whose answer is lost
	// was applied: what other writers do before the retry reloads.
	afterLost func()
	// delay, a time.Duration, holds each commit of ident that long before
	// it is applied, as an overloaded catalog does.
	delay atomic.Int64
	// hold, while set, holds each commit of ident until release is
	// closed, after announcing it on entered when there is room.
	hold             atomic.Bool
	entered, release chan struct{}
}

// newFaultCatalog is a faultCatalog of table name on the stack's catalog.
func (e *env) newFaultCatalog(name string) *faultCatalog {
	e.T.Helper()
	cat, ident := e.CatalogOf(name)
	return &faultCatalog{Catalog: cat, ident: ident, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

// openTyped opens (creating) ident as a JSON table and its dead-letter
// table through cat.
func (e *env) openTyped(cat icecat.Catalog, ident table.Identifier) (tbl, dlq *snapshot.Table) {
	e.T.Helper()
	tbl, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Value: mapping.ValueJSON}})
	if err != nil {
		e.T.Fatal(err)
	}
	if dlq, err = snapshot.OpenDeadLetters(e.Ctx, cat, snapshot.DeadLetterName(ident), tbl.Name(), true); err != nil {
		e.T.Fatal(err)
	}
	return tbl, dlq
}

// holdCommits holds the table's commits from now on, until release,
// which may be called more than once.
func (c *faultCatalog) holdCommits() (release func()) {
	c.hold.Store(true)
	var once sync.Once
	return func() {
		once.Do(func() {
			c.hold.Store(false)
			close(c.release)
		})
	}
}

// waitOwnsBoth waits until member m owns both partitions of topic and has
// started them in table's ledger.
func waitOwnsBoth(t *testing.T, e *env, m *member, topic, table string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the member assigned both partitions", func() bool { return m.assigned.Load() == 2 })
	waitLedger(t, e, table, map[mapping.TopicPartition]int64{{Topic: topic, Partition: 0}: 0, {Topic: topic, Partition: 1}: 0}, 30*time.Second)
}

func (c *faultCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(ident, tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

func (c *faultCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, upds []table.Update) (table.Metadata, string, error) {
	if c.hold.Load() && slices.Equal(ident, c.ident) {
		select {
		case c.entered <- struct{}{}:
		default:
		}
		<-c.release
	}
	if d := time.Duration(c.delay.Load()); d > 0 && slices.Equal(ident, c.ident) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	if c.failing.Load() && slices.Equal(ident, c.ident) {
		return nil, "", errInjected
	}
	if slices.Equal(ident, c.ident) && c.lost.Add(-1) >= 0 {
		if _, _, err := c.Catalog.CommitTable(ctx, ident, reqs, upds); err != nil {
			return nil, "", err
		}
		if c.afterLost != nil {
			c.afterLost()
		}
		return nil, "", errInjected
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, upds)
}

// faultyDeadLetters opens the dead-letter table of data table tbl through a
// faultCatalog, failing its commits.
func (e *env) faultyDeadLetters(tbl *snapshot.Table) (*snapshot.Table, *faultCatalog) {
	e.T.Helper()
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		e.T.Fatal(err)
	}
	ident, err := catalog.ParseIdent(tbl.Name())
	if err != nil {
		e.T.Fatal(err)
	}
	fc := &faultCatalog{Catalog: cat, ident: snapshot.DeadLetterName(ident)}
	fc.failing.Store(true)
	dlq, err := snapshot.OpenDeadLetters(e.Ctx, fc, fc.ident, tbl.Name(), false)
	if err != nil {
		e.T.Fatal(err)
	}
	return dlq, fc
}

// headBatches reads tbl's branch head, as reloaded, with iceberg-go's scan
// (deletes applied), giving fn each batch, released after it; nothing when
// the table has no snapshot.
func headBatches(t *testing.T, tbl *snapshot.Table, fn func(arrow.RecordBatch)) {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if tbl.Head() == nil {
		return
	}
	_, it, err := tbl.Iceberg().Scan(table.WithSnapshotID(tbl.Head().SnapshotID)).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		fn(b)
		b.Release()
	}
}
