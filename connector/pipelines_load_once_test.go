package connector_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// loadCountingCatalog counts the loads of one table.
type loadCountingCatalog struct {
	icecat.Catalog
	ident table.Identifier
	loads atomic.Int64
}

func (c *loadCountingCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if slices.Equal(ident, c.ident) {
		c.loads.Add(1)
	}
	return c.Catalog.LoadTable(ctx, ident)
}

// TestPipelineLoadsExistingTableOnce: a sink without --envelope opens an
// existing table with one load of it, taking its envelope (a Debezium
// table's too), where it loaded every table once to learn the envelope
// and once more to open it.
func TestPipelineLoadsExistingTableOnce(t *testing.T) {
	e := newEnv(t)
	e.Topic("customers", 1, nil)
	e.debeziumTable("lake.customers", floetest.CDCPlainJSON)
	e.TypedTable("lake.events", mapping.Layout{Value: mapping.ValueJSON})
	for _, c := range []struct {
		table  string
		layout mapping.Layout
		want   mapping.Envelope
	}{
		{"lake.customers", mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON}, mapping.EnvelopeDebezium},
		{"lake.customers", mapping.Layout{}, mapping.EnvelopeDebezium},
		{"lake.events", mapping.Layout{Value: mapping.ValueJSON}, mapping.EnvelopeNone},
	} {
		cat, ident := e.CatalogOf(c.table)
		counting := &loadCountingCatalog{Catalog: cat, ident: ident}
		p := pipeline(c.table, "customers", connector.Config{StopAtEnd: true})
		p.Layout = c.layout
		var loads int64
		var envelope mapping.Envelope
		p.OnStart = func(tbl *snapshot.Table) { loads, envelope = counting.loads.Load(), tbl.Layout().Envelope }
		if err := (connector.Pipelines{p}).Run(e.Ctx, e.Broker(), counting); err != nil {
			t.Fatalf("%s with %+v: %v", c.table, c.layout, err)
		}
		if loads != 1 || envelope != c.want {
			t.Errorf("%s with %+v: %d loads before the sink started, envelope %q; want 1 load, envelope %q", c.table, c.layout, loads, envelope, c.want)
		}
	}
}
