package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
)

// TestInterruptedCallSaysSo cancels catalog calls of a SQLite catalog at
// every point of their run: each one that fails says it was interrupted
// (errors.Is context.Canceled). database/sql reports a context ended
// inside a transaction as sql.ErrTxDone, and a sink stopping on
// cancellation took that for a catalog failure (TestPipelinesFailTogether
// failed once in CI with "reload table lake.live: sql: transaction has
// already been committed or rolled back").
func TestInterruptedCallSaysSo(t *testing.T) {
	dir := t.TempDir()
	cat, err := catalog.Open(t.Context(), catalog.Config{Catalog: dir + "/catalog.db", Warehouse: dir + "/warehouse"})
	if err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"lake", "t"}
	if err := cat.CreateNamespace(t.Context(), ident[:1], nil); err != nil {
		t.Fatal(err)
	}
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	if _, err := cat.CreateTable(t.Context(), ident, sc); err != nil {
		t.Fatal(err)
	}
	// How long a load takes here, to spread the cancellations over it.
	start := time.Now()
	if _, err := cat.LoadTable(t.Context(), ident); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	failed := 0
	for i := range 400 {
		ctx, cancel := context.WithCancel(t.Context())
		stop := time.AfterFunc(took*time.Duration(i%40)/40, cancel)
		_, lerr := cat.LoadTable(ctx, ident)
		_, xerr := cat.CheckTableExists(ctx, ident)
		stop.Stop()
		cancel()
		for _, err := range []error{lerr, xerr} {
			if err == nil {
				continue
			}
			failed++
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("call %d interrupted after %v: %v; want it to say it was interrupted", i, took*time.Duration(i%40)/40, err)
			}
		}
	}
	t.Logf("%d calls interrupted (a load takes %v)", failed, took)
}
