package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

func newDemoCmd() *cobra.Command {
	var (
		dir    string
		events int
		html   string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run produce, sink, audit, replay, as-of, where, fold and upsert on an embedded stack (nothing to install)",
		Long: `Start an in-process Kafka-protocol broker on loopback TCP, a SQLite catalog and a file
warehouse, and run floe's whole story on them:
  - produce realistic keyed order events with headers across four partitions (with one
    committed and one aborted transaction) and sink them into lake.orders; produce more and
    sink again, resuming from the ledger; print the snapshots and each one's offset ranges;
  - audit lake.orders (--deep --verify-content, with the broker); then sink a payments topic
    that loses offsets to retention, recorded as lost, audit that finding and write the
    audit's HTML report (--html), whose path it prints;
  - replay the topic from offset 0 into lake.orders_rebuilt and compare it row by row with
    lake.orders; show the table as of an earlier position (as-of) and which snapshot and file
    hold an offset (where); fold the topic into lake.orders_state (--fold latest: an upsert
    table of the latest event per key and partition);
  - produce Avro shipment events through the embedded schema registry, with one schema
    change and three records that cannot become rows, sink them into the typed table
    lake.shipments (--value registry), and show its columns, a few rows, the dead letters in
    lake.shipments_dlq and the audit that accounts for both;
  - sink Debezium change events of a customers table (a snapshot, inserts, updates, deletes
    with their tombstones) into the upsert table lake.customers (--envelope debezium), show its
    rows, the audit
    that proves it equal to the log (--verify-content) and where a deleted key stands
    (where --key).
Nothing outside --dir is touched but the HTML report when --html puts it elsewhere. Without --dir
the demo makes a new folder in the system's temporary folder and keeps it, with the report
beside the catalog and warehouse it describes, so that the report's re-verify steps can be
followed; the demo ends by naming the folder.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), dir, events, html)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "keep the demo's catalog, warehouse and report in this new or empty folder (default: a new folder in the system's temporary folder, kept)")
	cmd.Flags().Var(newBoundedInt(&events, 3000, maxDemoEvents, "the demo's broker keeps every event in memory"), "events",
		"number of events to produce, up to 100,000")
	cmd.Flags().StringVar(&html, "html", "", "write the HTML audit report of the incomplete table to this `FILE` (default: payments-audit.html in the demo's folder)")
	return cmd
}

// maxDemoEvents bounds --events: the embedded broker holds the log in
// memory, and the demo's copies of it add more (a million events took
// 1.9 GB).
const maxDemoEvents = 100_000

// demoFlush is the demo's --flush-records: a few snapshots whatever
// --events is, so that the snapshots it shows are not expired by the
// sink's own maintenance before it shows them.
func demoFlush(events int) int { return max(1000, events/3) }

func runDemo(ctx context.Context, w io.Writer, dir string, events int, html string) error {
	const (
		topic      = "orders"
		partitions = 4
		tableName  = "lake.orders"
	)
	if dir == "" {
		// Kept, not removed at exit: the HTML report's re-verify steps
		// need the catalog and warehouse it describes.
		d, err := os.MkdirTemp("", "floe-demo-")
		if err != nil {
			return fmt.Errorf("create the demo's folder: %w", err)
		}
		dir = d
	}
	// The demo's broker lives in memory: a catalog left by an earlier run
	// holds ledgers of a log that no longer exists. Any other folder's
	// files are not the demo's to mix with (a local stack's folder was
	// taken for a demo's: found by a new user).
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		why := ""
		if _, err := os.Stat(filepath.Join(dir, "catalog.db")); err == nil {
			why = " (its catalog.db holds ledgers of another stack's log: an earlier demo's is gone with its in-memory broker)"
		}
		return fmt.Errorf("--dir %s is not empty: it holds %s, such as %s%s; pass a new or empty folder", dir, plural(len(entries), "item"), entries[0].Name(), why)
	}
	stack, err := localstack.Start(ctx, localstack.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer stack.Close()
	fmt.Fprintf(w, "embedded broker on %s, catalog and warehouse in %s\n", strings.Join(stack.Brokers, ","), stack.Dir)

	if err := localstack.CreateTopic(ctx, stack.Brokers, topic, partitions, nil); err != nil {
		return err
	}
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	evs := localstack.DemoEvents(topic, partitions, events, start, 42)
	half := len(evs) / 2
	if err := localstack.Produce(ctx, stack.Brokers, evs[:half]); err != nil {
		return err
	}
	txn := func(id string, n int, commit bool) error {
		recs := localstack.DemoEvents(topic, partitions, n, start.Add(time.Hour), uint64(len(id)))
		return localstack.ProduceTxn(ctx, stack.Brokers, id, recs, commit)
	}
	if err := txn("demo-committed", 40, true); err != nil {
		return err
	}
	if err := txn("demo-aborted", 25, false); err != nil {
		return err
	}
	if err := localstack.Produce(ctx, stack.Brokers, evs[half:]); err != nil {
		return err
	}
	fmt.Fprintf(w, "produced %d events to %s (%d partitions), a committed transaction of 40 and an aborted one of 25\n",
		events, topic, partitions)

	// The demo tells its own story: creating the catalog it just made
	// room for is no news.
	cfg := stack.Catalog()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cat, err := catalog.Open(ctx, cfg)
	if err != nil {
		return err
	}
	ident, _ := catalog.ParseIdent(tableName)
	tbl, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Create: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	broker, err := connector.Dial(ctx, stack.Brokers, 0)
	if err != nil {
		return err
	}
	defer broker.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sink, err := connector.NewSink(broker, tbl, connector.Config{
		Topic: topic, StopAtEnd: true, FlushRecords: demoFlush(events), Logger: quiet,
	})
	if err != nil {
		return err
	}
	stats, err := sink.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nsink --stop-at-end: %d rows in %d snapshots\n", stats.Records, stats.Commits)

	// A second run after more events resumes exactly from the ledger.
	more := localstack.DemoEvents(topic, partitions, 200, start.Add(90*time.Minute), 7)
	if err := localstack.Produce(ctx, stack.Brokers, more); err != nil {
		return err
	}
	stats, err = sink.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "produced 200 more; the next run resumed from the ledger and added %d rows in %d snapshot(s)\n\n",
		stats.Records, stats.Commits)

	if err := tbl.Refresh(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "$ floe ledger --table %s\n", tbl.Name())
	sum, err := tbl.Summary(ctx, 0)
	if err != nil {
		return err
	}
	if err := printLedger(ctx, w, tbl, sum, ledgerSelection{}); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ntable %s: metadata at %s\n", tbl.Name(), tbl.Iceberg().MetadataLocation())
	if html == "" {
		html = filepath.Join(dir, "payments-audit.html")
	}
	if err := demoAudit(ctx, w, stack, tbl, html); err != nil {
		return err
	}
	if err := demoReplay(ctx, w, stack, tbl); err != nil {
		return err
	}
	if err := demoTyped(ctx, w, stack); err != nil {
		return err
	}
	if err := demoCustomers(ctx, w, stack); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthe demo's catalog, warehouse and HTML report stay in %s (rm -r it when done);\nthe report's re-verify steps run against them with --catalog %s\n(the ledger and file levels: the broker and content levels need the demo's broker, which stopped with it)\n",
		stack.Dir, cfg.Catalog)
	return nil
}

// demoAudit is the demo's audit step. It audits the demo table at every
// level, then shows a finding: on a second topic, retention deletes
// records before they are sunk, floe sink --on-data-loss record records the
// loss in the ledger, the audit names the lost range, and its HTML report
// is written to htmlPath.
func demoAudit(ctx context.Context, w io.Writer, stack *localstack.Stack, tbl *snapshot.Table, htmlPath string) error {
	broker, err := connector.Dial(ctx, stack.Brokers, 0)
	if err != nil {
		return err
	}
	defer broker.Close()
	fmt.Fprintf(w, "\n$ floe audit --table %s --deep --verify-content \\\n    --brokers %s\n", tbl.Name(), stack.Brokers[0])
	rep, err := audit.Run(ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: broker, VerifyContent: true})
	if err != nil {
		return err
	}
	if err := rep.WriteText(w); err != nil {
		return err
	}

	const (
		topic     = "payments"
		tableName = "lake.payments"
	)
	if err := localstack.CreateTopic(ctx, stack.Brokers, topic, 1, nil); err != nil {
		return err
	}
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := localstack.Produce(ctx, stack.Brokers, localstack.DemoEvents(topic, 1, 100, start, 11)); err != nil {
		return err
	}
	cat, err := catalog.Open(ctx, stack.Catalog())
	if err != nil {
		return err
	}
	ident, _ := catalog.ParseIdent(tableName)
	payments, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Create: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	sink := func(loss connector.OnDataLoss) error {
		s, err := connector.NewSink(broker, payments, connector.Config{
			Topic: topic, StopAtEnd: true, OnDataLoss: loss, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			return err
		}
		_, err = s.Run(ctx)
		return err
	}
	if err := sink(connector.LossFail); err != nil {
		return err
	}
	if err := localstack.Produce(ctx, stack.Brokers, localstack.DemoEvents(topic, 1, 100, start.Add(30*time.Minute), 12)); err != nil {
		return err
	}
	if err := stack.Cluster.DeleteRecords(topic, 0, 150); err != nil {
		return fmt.Errorf("delete records of %s: %w", topic, err)
	}
	fmt.Fprintf(w, "\nNow a finding. Offsets [0, 100) of topic %s were sunk into %s,\n", topic, tableName)
	fmt.Fprintf(w, "then 100 more were produced, and retention deleted offsets [100, 150) before\n")
	fmt.Fprintf(w, "they were sunk; floe sink --on-data-loss record wrote the loss into the ledger.\n")
	if err := sink(connector.LossRecord); err != nil {
		return err
	}
	if err := payments.Refresh(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n$ floe audit --table %s --brokers %s \\\n    --html %s\n", tableName, stack.Brokers[0], htmlPath)
	rep, err = audit.Run(ctx, payments, audit.Options{Broker: broker})
	if err != nil {
		return err
	}
	rep.CatalogArgs = reportCatalogArgs(stack.Catalog().Catalog)
	if err := writeHTMLReport(htmlPath, rep); err != nil {
		return err
	}
	if err := rep.WriteText(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "(floe audit exits 1 here: the table is not complete, and the report says why)\n")
	fmt.Fprintf(w, "the HTML report of this audit, to open in a browser or print:\n    %s\n", htmlPath)
	return nil
}

// demoReplay is the demo's rebuild step: replay into a new table from offset
// 0 and show it equals the sunk table, show the table as of an earlier
// position, and fold the log into a state table.
func demoReplay(ctx context.Context, w io.Writer, stack *localstack.Stack, tbl *snapshot.Table) error {
	ledger, err := tbl.Ledger()
	if err != nil {
		return err
	}
	tps := ledger.Partitions()
	if len(tps) == 0 {
		return errors.New("demo: the sunk table has no ledger")
	}
	topic := tps[0].Topic
	broker, err := connector.Dial(ctx, stack.Brokers, 0)
	if err != nil {
		return err
	}
	defer broker.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	replayInto := func(table, fold string) (replay.Result, error) {
		ident, err := catalog.ParseIdent(table)
		if err != nil {
			return replay.Result{}, err
		}
		return replay.Run(ctx, broker, tbl.Catalog(), ident, replay.Options{
			Topic: topic, Fold: fold, Sink: connector.Config{FlushRecords: 1000, Logger: quiet}})
	}

	fmt.Fprintf(w, "\n$ floe replay --topic %s --table lake.orders_rebuilt   (from offset 0 to the end offsets)\n", topic)
	res, err := replayInto("lake.orders_rebuilt", "")
	if err != nil {
		return err
	}
	rebuilt, err := snapshot.Open(ctx, tbl.Catalog(), []string{"lake", "orders_rebuilt"}, snapshot.OpenOptions{})
	if err != nil {
		return err
	}
	a, err := lookup.ReadRowSet(ctx, tbl, 0, nil)
	if err != nil {
		return err
	}
	b, err := lookup.ReadRowSet(ctx, rebuilt, 0, nil)
	if err != nil {
		return err
	}
	same := "EQUAL"
	if !a.Equal(b) {
		same = "DIFFERENT"
	}
	fmt.Fprintf(w, "replayed %d rows in %d snapshots; the demo read it and %s and compared them row by row (partition, offset, key, value, headers, timestamp): %s\n",
		res.Stats.Records, res.Stats.Commits, tbl.Name(), same)

	// The table as of an earlier position: half-way through every partition.
	cut := mapping.Cut{}
	for tp, next := range ledger.Next() {
		cut[tp] = next / 2
	}
	c, err := lookup.AsOf(ctx, tbl, nil, lookup.AsOfQuery{Offsets: cut.String()})
	if err != nil {
		return err
	}
	if err := lookup.ExactAt(ctx, tbl, c.SnapshotID, c.Cut); err != nil {
		return err
	}
	asOf, err := lookup.ReadRowSet(ctx, tbl, c.SnapshotID, c.Cut)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n$ floe as-of --table %s --offsets %s --rows\n", tbl.Name(), cut)
	fmt.Fprintf(w, "first snapshot covering those positions: %d (committed %s); rows below the cut: %d of %d\n",
		c.SnapshotID, c.CommittedAt.Format(time.RFC3339), asOf.Len(), a.Len())
	// Which snapshot holds an offset: the first partition's cut, and the
	// nearest row below it when the cut itself has none.
	tp := slices.MinFunc(tps, mapping.TopicPartition.Compare)
	for o, shown := cut[tp], 0; o >= 0 && shown < 2; o-- {
		r, err := lookup.Where(ctx, tbl, broker, tp, o)
		if err != nil {
			return err
		}
		if shown > 0 && r.Status != lookup.StatusRow {
			continue
		}
		fmt.Fprintf(w, "\n$ floe where --table %s --topic %s --partition %d --offset %d --brokers %s\n", tbl.Name(), tp.Topic, tp.Partition, o, stack.Brokers[0])
		printWhere(w, r)
		shown++
		if r.Status == lookup.StatusRow {
			break
		}
	}

	fmt.Fprintf(w, "\n$ floe replay --topic %s --table lake.orders_state --fold latest\n", topic)
	res, err = replayInto("lake.orders_state", mapping.FoldLatest)
	if err != nil {
		return err
	}
	state, err := snapshot.Open(ctx, tbl.Catalog(), []string{"lake", "orders_state"}, snapshot.OpenOptions{})
	if err != nil {
		return err
	}
	keys, err := lookup.ReadRowSet(ctx, state, 0, nil)
	if err != nil {
		return err
	}
	stateLedger, err := state.Ledger()
	if err != nil {
		return err
	}
	var folded int64
	for _, tp := range stateLedger.Partitions() {
		c := mapping.Cover(stateLedger.Ranges(tp))
		folded += c.Records + c.Deletes + c.Skipped
	}
	fmt.Fprintf(w, "folded %d records into %d rows: the latest order event per customer and partition (tombstones delete), an upsert table\nkeyed by (kafka_topic, kafka_partition, kafka_key), in %d snapshots; its ledger covers the same offsets\n",
		folded, keys.Len(), res.Stats.Commits)
	return nil
}
