package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// demoTyped is the demo's typed-table step: Avro shipment events through
// the embedded schema registry, with one schema change and a few records
// that cannot become rows, sunk into a typed table with a dead-letter
// table, shown and audited.
func demoTyped(ctx context.Context, w io.Writer, stack *localstack.Stack) error {
	const (
		topic      = "shipments"
		tableName  = "lake.shipments"
		partitions = 2
		events     = 400
	)
	if err := localstack.CreateTopic(ctx, stack.Brokers, topic, partitions, nil); err != nil {
		return err
	}
	recs, err := localstack.DemoShipments(ctx, stack.Registry, topic, partitions, events, time.Now().Add(-time.Hour).Truncate(time.Second), 5)
	if err != nil {
		return err
	}
	if err := localstack.Produce(ctx, stack.Brokers, recs); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nTyped tables. Produced %d Avro shipment events to %s through the schema registry at %s:\n", events, topic, stack.Registry)
	fmt.Fprintf(w, "%d with schema version 1, %d with version 2 (adds an optional carrier), then 3 records that\n", events/2, events-events/2)
	fmt.Fprintf(w, "cannot become rows (JSON without the wire header, an unknown schema id, a truncated payload).\n")

	cat, err := catalog.Open(ctx, stack.Catalog())
	if err != nil {
		return err
	}
	ident, _ := catalog.ParseIdent(tableName)
	layout := mapping.Layout{Value: mapping.ValueRegistry, Key: mapping.KeyString}
	tbl, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Create: true, Layout: layout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	dlq, err := snapshot.OpenDeadLetters(ctx, cat, snapshot.DeadLetterName(ident), tbl.Name(), true)
	if err != nil {
		return err
	}
	registry, err := connector.NewRegistry(connector.RegistryConfig{URL: stack.Registry})
	if err != nil {
		return err
	}
	broker, err := connector.Dial(ctx, stack.Brokers, 0)
	if err != nil {
		return err
	}
	defer broker.Close()
	sink, err := connector.NewSink(broker, tbl, connector.Config{
		Topic: topic, StopAtEnd: true, FlushRecords: 150, Registry: registry, DeadLetters: dlq,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n$ floe sink --topic %s --table %s --value registry --key string \\\n    --schema-registry %s --stop-at-end\n", topic, tableName, stack.Registry)
	stats, err := sink.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d rows and %d dead letters (into %s) in %d snapshots\n", stats.Records, stats.DeadLetters, dlq.Name(), stats.Commits)
	if err := tbl.Refresh(ctx); err != nil {
		return err
	}

	fmt.Fprintf(w, "\ncolumns of %s (the value's fields beside floe's kafka_* columns; carrier came with version 2):\n", tableName)
	var names []string
	for _, f := range tbl.Iceberg().Schema().Fields() {
		names = append(names, fmt.Sprintf("%s %s", f.Name, f.Type))
	}
	fmt.Fprintf(w, "  %s\n", strings.Join(names, ", "))

	show := []string{mapping.ColPartition, mapping.ColOffset, mapping.ColKey, "shipment_id", "order_id", "weight_kg", "status", "shipped_at", "carrier"}
	fmt.Fprintf(w, "\ntwo rows, one without a carrier (schema version 1, or none given) and one with:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  "+strings.Join(show, "\t"))
	var v1, v2 bool
	err = tbl.Rows(ctx, 0, nil, func(b arrow.RecordBatch) error {
		carrier := b.Column(b.Schema().FieldIndices("carrier")[0])
		for i := range int(b.NumRows()) {
			isV2 := !carrier.IsNull(i)
			if (isV2 && v2) || (!isV2 && v1) {
				continue
			}
			v1, v2 = v1 || !isV2, v2 || isV2
			cells := make([]string, len(show))
			for j, name := range show {
				cells[j] = b.Column(b.Schema().FieldIndices(name)[0]).ValueStr(i)
			}
			fmt.Fprintln(tw, "  "+strings.Join(cells, "\t"))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if err := dlq.Refresh(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndead letters in %s (each keeps the record's key, value, headers and why):\n", dlq.Name())
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  partition\toffset\tschema_id\terror")
	err = dlq.Rows(ctx, 0, nil, func(b arrow.RecordBatch) error {
		col := func(name string, i int) string { return b.Column(b.Schema().FieldIndices(name)[0]).ValueStr(i) }
		for i := range int(b.NumRows()) {
			reason := col(mapping.ColError, i)
			if len(reason) > 90 {
				reason = reason[:90] + "..."
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", col(mapping.ColPartition, i), col(mapping.ColOffset, i), col(mapping.ColSchemaID, i), reason)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\n$ floe audit --table %s --deep --verify-content --brokers %s \\\n    --schema-registry %s\n", tableName, stack.Brokers[0], stack.Registry)
	rep, err := audit.Run(ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: broker, VerifyContent: true, Registry: registry})
	if err != nil {
		return err
	}
	return rep.WriteText(w)
}
