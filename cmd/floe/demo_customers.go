package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// demoCustomers is the demo's upsert step: Debezium change events of a
// customers table captured from PostgreSQL (a snapshot, inserts, updates,
// deletes with their tombstones) sunk into an upsert table, its final rows shown, the audit proving it
// equal to the log, and where a deleted key stands.
func demoCustomers(ctx context.Context, w io.Writer, stack *localstack.Stack) error {
	const (
		topic     = "dbserver1.inventory.customers"
		tableName = "lake.customers"
	)
	if err := localstack.CreateTopic(ctx, stack.Brokers, topic, 1, nil); err != nil {
		return err
	}
	changes, err := localstack.DemoCustomers(topic, time.Now().Add(-30*time.Minute).Truncate(time.Second), true)
	if err != nil {
		return err
	}
	if err := localstack.Produce(ctx, stack.Brokers, changes.Records); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nUpsert tables. Produced %d changes of a customers table to %s: a snapshot of %d rows,\n", len(changes.Records), topic, changes.Snapshot)
	fmt.Fprintf(w, "%d inserts, %d updates and %d deletes, each followed by its tombstone: Debezium's change events\n(before, after, source, op), keyed by the primary key {\"id\": N}.\n", changes.Inserts, changes.Updates, changes.Deletes)

	cat, err := catalog.Open(ctx, stack.Catalog())
	if err != nil {
		return err
	}
	ident, _ := catalog.ParseIdent(tableName)
	layout := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON, Envelope: mapping.EnvelopeDebezium}
	key, err := mapping.KeyFor(layout, nil)
	if err != nil {
		return err
	}
	tbl, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Create: true, Layout: layout, Mode: mapping.ModeUpsert, Key: &key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	dlq, err := snapshot.OpenDeadLetters(ctx, cat, snapshot.DeadLetterName(ident), tbl.Name(), true)
	if err != nil {
		return err
	}
	broker, err := connector.Dial(ctx, stack.Brokers, 0)
	if err != nil {
		return err
	}
	defer broker.Close()
	sink, err := connector.NewSink(broker, tbl, connector.Config{
		Topic: topic, StopAtEnd: true, FlushRecords: 6, DeadLetters: dlq, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n$ floe sink --topic %s --table %s \\\n    --envelope debezium --key json --value json --stop-at-end\n", topic, tableName)
	stats, err := sink.Run(ctx)
	if err != nil {
		return err
	}
	if err := tbl.Refresh(ctx); err != nil {
		return err
	}
	ledger, err := tbl.Ledger()
	if err != nil {
		return err
	}
	var upserts, deletes int64
	for _, tp := range ledger.Partitions() {
		c := mapping.Cover(ledger.Ranges(tp))
		upserts, deletes = upserts+c.Records, deletes+c.Deletes
	}
	fmt.Fprintf(w, "%d upserts and %d deletes (each delete event and its tombstone: log compaction may remove the event and\nkeep the tombstone) in %d snapshots, each one row delta: the rows of the keys it changed and equality\ndeletes of their older rows (format v2, read by any Iceberg engine)\n", upserts, deletes, stats.Commits)

	fmt.Fprintf(w, "\nthe customers now (one row per key, read with the deletes applied):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	show := []string{"id", "name", "email", "country", "__op", mapping.ColOffset}
	fmt.Fprintln(tw, "  "+strings.Join(show, "\t"))
	var lines [][]string
	err = tbl.Rows(ctx, 0, nil, func(b arrow.RecordBatch) error {
		for i := range int(b.NumRows()) {
			cells := make([]string, len(show))
			for j, name := range show {
				cells[j] = b.Column(b.Schema().FieldIndices(name)[0]).ValueStr(i)
			}
			lines = append(lines, cells)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// By id, numerically.
	slices.SortFunc(lines, func(a, b []string) int { return cmp.Or(cmp.Compare(len(a[0]), len(b[0])), cmp.Compare(a[0], b[0])) })
	for _, l := range lines {
		fmt.Fprintln(tw, "  "+strings.Join(l, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\n$ floe audit --table %s --deep --verify-content --brokers %s\n", tableName, stack.Brokers[0])
	rep, err := audit.Run(ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: broker, VerifyContent: true})
	if err != nil {
		return err
	}
	if err := rep.WriteText(w); err != nil {
		return err
	}

	deleted := `{"id":3}`
	fmt.Fprintf(w, "\n$ floe where --table %s --key '%s' --brokers %s\n", tableName, deleted, stack.Brokers[0])
	res, err := lookup.WhereKey(ctx, tbl, broker, deleted)
	if err != nil {
		return err
	}
	printWhereKey(w, res)
	return nil
}
