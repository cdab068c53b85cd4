// Package floetest is the test harness shared by the tests of several floe
// packages (connector, replay, audit, lookup): one test's stack (an
// in-process kfake broker over TCP, a SQLite catalog and a file warehouse
// in t.TempDir()), helpers to create topics, produce records, open tables
// and run sinks, and the exactly-once check of a table's rows against its
// ledger (rows.go).
//
// It is for tests only: production code must not import it. Every helper
// fails the test (t.Fatal) on error, except Env.Sink, whose error is part of
// what tests check.
package floetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// DialTimeout bounds how long the harness waits for the in-process broker.
const DialTimeout = 5 * time.Second

// Env is one test's stack: broker, catalog and warehouse. It is closed in
// t.Cleanup.
type Env struct {
	T     testing.TB
	Ctx   context.Context
	Stack *localstack.Stack

	broker *connector.Broker // the shared connection Broker returns
}

// New starts a stack for t.
func New(t testing.TB) *Env {
	t.Helper()
	stack, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	return &Env{T: t, Ctx: t.Context(), Stack: stack}
}

// Topic creates topic name with the given partitions and configs.
func (e *Env) Topic(name string, partitions int32, configs map[string]*string) {
	e.T.Helper()
	if err := localstack.CreateTopic(e.Ctx, e.Stack.Brokers, name, partitions, configs); err != nil {
		e.T.Fatal(err)
	}
}

// Produce produces recs, non-transactionally.
func (e *Env) Produce(recs []*kgo.Record) {
	e.T.Helper()
	if err := localstack.Produce(e.Ctx, e.Stack.Brokers, recs); err != nil {
		e.T.Fatal(err)
	}
}

// Txn produces recs in one transaction of transactional id id, and commits
// or aborts it.
func (e *Env) Txn(id string, recs []*kgo.Record, commit bool) {
	e.T.Helper()
	if err := localstack.ProduceTxn(e.Ctx, e.Stack.Brokers, id, recs, commit); err != nil {
		e.T.Fatal(err)
	}
}

// OpenTxn returns a transactional producer (records go to the partition
// they name) with a transaction begun and left open: the test produces
// into it and ends it. The client is closed when the test ends.
func (e *Env) OpenTxn(id string) *kgo.Client {
	e.T.Helper()
	txn, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Brokers...), kgo.TransactionalID(id),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(txn.Close)
	if err := txn.BeginTransaction(); err != nil {
		e.T.Fatal(err)
	}
	return txn
}

// Table opens the floe table name ("namespace.table"), creating it.
func (e *Env) Table(name string) *snapshot.Table {
	e.T.Helper()
	return e.OpenTable(name, snapshot.OpenOptions{Create: true})
}

// CatalogOf opens the stack's catalog and names table name
// ("namespace.table") in it.
func (e *Env) CatalogOf(name string) (icecat.Catalog, table.Identifier) {
	e.T.Helper()
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		e.T.Fatal(err)
	}
	ident, err := catalog.ParseIdent(name)
	if err != nil {
		e.T.Fatal(err)
	}
	return cat, ident
}

// OpenTable opens the floe table name ("namespace.table") with opts.
func (e *Env) OpenTable(name string, opts snapshot.OpenOptions) *snapshot.Table {
	e.T.Helper()
	cat, ident := e.CatalogOf(name)
	tbl, err := snapshot.Open(e.Ctx, cat, ident, opts)
	if err != nil {
		e.T.Fatal(err)
	}
	return tbl
}

// TypedTable opens the floe table name ("namespace.table") of layout l,
// creating it, and its dead-letter table (snapshot.DeadLetterName).
func (e *Env) TypedTable(name string, l mapping.Layout) (tbl, dlq *snapshot.Table) {
	e.T.Helper()
	return e.TableWithDeadLetters(name, snapshot.OpenOptions{Create: true, Layout: l})
}

// TableWithDeadLetters opens the floe table name ("namespace.table") with
// opts, and its dead-letter table (snapshot.DeadLetterName), creating it.
func (e *Env) TableWithDeadLetters(name string, opts snapshot.OpenOptions) (tbl, dlq *snapshot.Table) {
	e.T.Helper()
	tbl = e.OpenTable(name, opts)
	ident, err := catalog.ParseIdent(name)
	if err != nil {
		e.T.Fatal(err)
	}
	if dlq, err = snapshot.OpenDeadLetters(e.Ctx, tbl.Catalog(), snapshot.DeadLetterName(ident), tbl.Name(), true); err != nil {
		e.T.Fatal(err)
	}
	return tbl, dlq
}

// Registry returns a client of the stack's schema registry.
func (e *Env) Registry() *connector.Registry {
	e.T.Helper()
	r, err := connector.NewRegistry(connector.RegistryConfig{URL: e.Stack.Registry})
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

// Dial returns a new connection to the stack's broker, closed in t.Cleanup.
// Each call is its own client, as a separate process would have.
func (e *Env) Dial() *connector.Broker {
	e.T.Helper()
	b, err := connector.Dial(e.Ctx, e.Stack.Brokers, DialTimeout)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(b.Close)
	return b
}

// Broker returns one connection to the stack's broker, shared by every call
// on e (dialled on the first).
func (e *Env) Broker() *connector.Broker {
	e.T.Helper()
	if e.broker == nil {
		e.broker = e.Dial()
	}
	return e.broker
}

// Sink runs a sink of cfg.Topic into tbl over broker connection b (Broker,
// or Dial for a sink of its own, as a separate process would have) and
// returns its stats. A nil cfg.Logger discards the sink's log.
func (e *Env) Sink(b *connector.Broker, tbl *snapshot.Table, cfg connector.Config) (connector.Stats, error) {
	e.T.Helper()
	if cfg.Logger == nil {
		cfg.Logger = QuietLogger()
	}
	s, err := connector.NewSink(b, tbl, cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	return s.Run(e.Ctx)
}

// QuietLogger discards everything.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Records makes n keyed records for one partition, each with two headers
// of the same key; every tenth has a null value and every seventh a null
// key. Values are "tag-partition-i", timestamps one second apart.
func Records(topic string, partition int32, n int, tag string) []*kgo.Record {
	out := make([]*kgo.Record, n)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: partition,
			Key:       fmt.Appendf(nil, "k%d", i%13),
			Value:     fmt.Appendf(nil, "%s-%d-%d", tag, partition, i),
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*1000),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}},
		}
		if i%10 == 3 {
			r.Value = nil
		}
		if i%7 == 5 {
			r.Key = nil
		}
		out[i] = r
	}
	return out
}

// UpsertTable opens the upsert table name ("namespace.table") keyed by the
// Kafka key as text (floe sink --mode upsert --key string), creating it,
// and its dead-letter table.
func (e *Env) UpsertTable(name string) (tbl, dlq *snapshot.Table) {
	e.T.Helper()
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	return e.TableWithDeadLetters(name, snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString},
		Mode: mapping.ModeUpsert, Key: &key})
}
