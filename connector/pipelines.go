package connector

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Pipeline is one topic -> table sink of Pipelines.
type Pipeline struct {
	// Table is created, with its namespace, when missing.
	Table  table.Identifier
	Config Config
	// Layout is how a table Run creates holds records (the zero Layout:
	// raw); an existing table keeps its own, and a non-zero Layout that
	// differs from it is an error.
	Layout mapping.Layout
	// DeadLetters names the dead-letter table of a table whose records are
	// decoded (its layout is not raw); nil means
	// snapshot.DeadLetterName(Table). It is created when missing.
	DeadLetters table.Identifier
	// NoDeadLetters runs without a dead-letter table: the first record
	// that cannot become a row stops the sink (Config.DeadLetters).
	NoDeadLetters bool
	// OnStart, when set, is called with the open table once every pipeline
	// is checked and every table open, just before the pipeline's sink
	// runs (metrics read its ledger here).
	OnStart func(*snapshot.Table)
	// OnStop, when set, is called as the pipeline's sink returns, with its
	// stats and error (nil when it stopped cleanly, also when another
	// pipeline's failure stopped it). Calls of all pipelines are
	// serialized, so they may share a writer.
	OnStop func(tbl *snapshot.Table, stats Stats, err error)
}

// String names the pipeline in messages: TOPIC -> NAMESPACE.TABLE.
func (p Pipeline) String() string { return p.Config.Topic + " -> " + strings.Join(p.Table, ".") }

// Pipelines are sinks that run in one process: they share one broker
// connection and one catalog, and succeed or fail together.
type Pipelines []Pipeline

// Run checks every pipeline, opens their tables and runs their sinks
// concurrently until ctx is cancelled (each commits what it consumed and
// Run returns nil) or every bounded sink is done.
//
// Everything that can be checked is checked before anything is created:
// each Config, that each topic exists on the brokers and has the
// partitions Config.Partitions names, and that each existing table can
// hold floe rows; only then are missing tables and namespaces created. A
// mistake in one pipeline therefore leaves no empty table behind for any.
//
// When one sink fails, the others are stopped as if ctx were cancelled:
// each commits what it consumed, so nothing is lost or duplicated, and the
// failures are returned (joined, each naming its pipeline when there are
// several).
func (ps Pipelines) Run(ctx context.Context, broker *Broker, cat catalog.Catalog) error {
	if err := ps.Check(ctx, broker); err != nil {
		return err
	}
	tables, err := ps.open(ctx, cat)
	if err != nil {
		return err
	}
	sinks := make([]*Sink, len(ps))
	for i, p := range ps {
		cfg := p.Config
		if tables[i].Layout() != mapping.RawLayout && !p.NoDeadLetters {
			name := p.DeadLetters
			if name == nil {
				name = snapshot.DeadLetterName(p.Table)
			}
			if cfg.DeadLetters, err = snapshot.OpenDeadLetters(ctx, cat, name, tables[i].Name(), true); err != nil {
				return ps.wrap(i, err)
			}
		}
		if sinks[i], err = NewSink(broker, tables[i], cfg); err != nil {
			return ps.wrap(i, err)
		}
	}

	// A failing pipeline stops the others.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i, p := range ps {
		wg.Go(func() {
			if p.OnStart != nil {
				p.OnStart(tables[i])
			}
			stats, err := sinks[i].Run(runCtx)
			mu.Lock()
			defer mu.Unlock()
			if p.OnStop != nil {
				p.OnStop(tables[i], stats, err)
			}
			if err != nil {
				errs = append(errs, ps.wrap(i, err))
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Check checks what Run checks before it opens anything: each Config, and
// that each topic exists on the brokers with the partitions
// Config.Partitions names. A caller that creates things before Run (a
// catalog) calls it first.
func (ps Pipelines) Check(ctx context.Context, broker *Broker) error {
	for i, p := range ps {
		if err := p.Config.Validate(); err != nil {
			return ps.wrap(i, err)
		}
	}
	for i, p := range ps {
		t, err := broker.Topic(ctx, p.Config.Topic)
		if err == nil {
			err = checkPartitions(t, p.Config.Partitions)
		}
		if err != nil {
			return ps.wrap(i, err)
		}
	}
	return nil
}

// wrap names pipeline i in err when there are several.
func (ps Pipelines) wrap(i int, err error) error {
	if len(ps) > 1 {
		return fmt.Errorf("pipeline %s: %w", ps[i], err)
	}
	return err
}

// open opens every pipeline's table: first those that exist, so that a
// table that cannot hold floe rows fails before any is created, then the
// missing ones, with their namespaces.
func (ps Pipelines) open(ctx context.Context, cat catalog.Catalog) ([]*snapshot.Table, error) {
	tables := make([]*snapshot.Table, len(ps))
	var missing []int
	for i, p := range ps {
		t, err := snapshot.Open(ctx, cat, p.Table, snapshot.OpenOptions{Layout: p.Layout})
		switch {
		case errors.Is(err, snapshot.ErrTableNotFound):
			missing = append(missing, i)
		case err != nil:
			return nil, ps.wrap(i, err)
		default:
			tables[i] = t
		}
	}
	for _, i := range missing {
		t, err := snapshot.Open(ctx, cat, ps[i].Table, snapshot.OpenOptions{Create: true, Layout: ps[i].Layout})
		if err != nil {
			return nil, ps.wrap(i, err)
		}
		tables[i] = t
	}
	return tables, nil
}
