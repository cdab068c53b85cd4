package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

type replayFlags struct {
	tableFlags
	brokerFlags
	topic         string
	from, until   string
	branch        string
	publish       bool
	publishDiff   bool
	tagMain       string
	json          bool
	fold          string
	partitionBy   *mapping.PartitionBy
	flushRecords  int
	flushBytes    int64
	flushInterval time.Duration
	onDataLoss    string
	retryFor      time.Duration
	// like is --like: the table whose layout a new target takes.
	like string
	decodeFlags
	upsertFlags
}

func newReplayCmd() *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay --brokers HOST:PORT --topic NAME --table NAMESPACE.TABLE [--from ...] [--until ...]",
		Short: "Rebuild a table from the log: from offset 0, an offset, a time or a snapshot's positions",
		Long: `Replay a topic into a new table, or onto a branch of an existing one, with the same sink and
commit path as floe sink, bounded: every partition from --from up to --until, then exit. The
rebuilt table has its own ledger, so floe audit works on it like on any other.

--from   earliest (default): each partition's log start. Where retention already deleted the
         beginning, the replay says so and records [0, log start) as lost in the ledger.
         RFC3339 time: per partition the first offset whose record timestamp is at or after
         it (Kafka's ListOffsets by timestamp), or the end offset where no record is.
         P=OFFSET[,P=OFFSET]: explicit offsets; partitions not named start at their log start.
         snapshot:ID: the positions a snapshot of a floe table (found in the catalog, or in
         its ledger archive once expired) had reached; a partition added since starts at 0.
--until  end (default): the end offsets (last stable offsets) at start, so the replay is a
         finite job with a known total. Or an RFC3339 time (offsets below the first record at or
         after it), or P=OFFSET[,...]. The resolved end is recorded in the target (table property
         floe.replay.until): running the replay again with --until end continues to that same
         end, not to the log's end at that run; pass --until to take it further.

Without --branch the target must be a new (or empty) table; floe refuses to write into a table that
holds anything but this same replay. --like TABLE gives it the layout and partition spec of an
existing table (the typed or upsert table being rebuilt), where flags given win. With --branch NAME
the replay writes onto that branch of an existing table, starting empty (it shares nothing with
main), and --topic may be left out when the table's ledger (main's and the branch's) holds one
topic: the replay takes that one and says so (a table of several topics is refused, naming them);
--publish then makes the branch's head main's head in one atomic commit, so readers of main switch
from the old content to the rebuilt one at once.

--partition-by gives a new target table that Iceberg partition spec (see floe sink --help); run
again, the replay evolves its own target to a changed one. A branch has its table's spec: a replay
onto one refuses a --partition-by that differs from it.

--mode upsert rebuilds an upsert table (docs/upsert.md) through the same sink pipeline as floe sink
--mode upsert, keyed as it is (--key string or raw: the Kafka key; --key json or registry: the
key's fields; --id-columns: value columns): one row per key, the latest record's, a tombstone
deletes the key. A replay onto a branch of an upsert table without --mode keeps the table's mode
and key, as floe sink does (its layout too: --value, --key and --envelope may be left out). With
--branch and --publish, the branch is first compared with main key by key (rows read with deletes
applied: the same keys, each the row of the same offset with the same values); on a difference
nothing is published and floe names the first keys that differ (exit 2). A branch of any mode is
not published either when main holds offsets below its next offset that it lacks (it starts later,
or retention deleted them before the replay): publishing would drop them from main.
--publish-different publishes anyway: a repair of a main known to be wrong. A publish replaces
main's history with the branch's: floe as-of no longer reaches the offsets main held below the
replay's start (nor, of an upsert table, positions within the replay's first commit), and snapshot
expiry removes main's earlier snapshots. --tag-main NAME tags main's previous head in the publish's
commit, so Iceberg engines can still read it and expiry keeps it. The branch is kept after the
publish; floe drop --table TABLE --branch NAME deletes it.

--fold latest is an alias: --mode upsert keyed by the Kafka key within its partition (columns
kafka_topic, kafka_partition, kafka_key), a KTable's semantics: per partition the latest value of
each key, a null value deletes the key, records without a key are skipped (counted in the ledger).
State tables of an earlier floe (floe.fold=latest, written copy-on-write) stay readable by audit,
where, as-of and files, but floe no longer writes into them: replay into a new table.

Every bound is checked before anything is written. SIGINT commits what was read and stops: the
table is consistent, and running the same command again continues where it stopped. A complete
replay run again reads and writes nothing. A dead-letter table is refused as the target; a replay
that committed dead letters and no row exits 3, naming the first reason (docs/exit-codes.md).`,
		Example: `  floe replay --brokers localhost:9092 --topic orders --table lake.orders_rebuilt
  floe replay --brokers localhost:9092 --topic orders --table lake.orders_today --from 2024-05-01T00:00:00Z
  floe replay --brokers localhost:9092 --topic orders --table lake.orders --branch rebuild --publish
  floe replay --brokers localhost:9092 --topic customers --table lake.customers --mode upsert --key json --value json --branch rebuild --publish
  floe replay --brokers localhost:9092 --topic customers --table lake.customers_state --fold latest --key string`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runReplay(cmd, &f) },
	}
	fs := cmd.Flags()
	f.tableFlags.register(fs)
	f.brokerFlags.register(fs, " (required)")
	topicFlag(fs, &f.topic, "topic to replay; every partition is read (required, but with --branch when the table's ledger holds one topic: that one)")
	fs.StringVar(&f.from, "from", "earliest", "where to start: earliest, an RFC3339 time, P=OFFSET[,P=OFFSET] or snapshot:ID")
	fs.StringVar(&f.until, "until", "end", "where to stop: end (the end offsets when the replay first started), an RFC3339 time or P=OFFSET[,P=OFFSET]")
	fs.StringVar(&f.branch, "branch", "", "write onto this branch of an existing table instead of a new table")
	fs.BoolVar(&f.json, "json", false, "print the plan and the result as one JSON document when the replay ends (schema floe.replay/v1) instead of text")
	fs.BoolVar(&f.publish, "publish", false, "with --branch: when the replay is complete, make the branch main's head atomically (refused when main holds offsets the branch lacks, or the branch differs key by key)")
	fs.BoolVar(&f.publishDiff, "publish-different", false, "with --publish: publish even when the branch differs from main: lacks offsets main holds, or (--mode upsert) differs key by key (repairing a main known to be wrong)")
	fs.StringVar(&f.tagMain, "tag-main", "", "with --publish: tag main's previous head `NAME` in the publish's commit, keeping the history the publish replaces readable by Iceberg engines")
	fs.StringVar(&f.fold, "fold", "", "latest: an alias of --mode upsert keyed by the Kafka key within its partition (a KTable's state)")
	fs.StringVar(&f.like, "like", "", "give a new target table the layout of the table `NAMESPACE.TABLE` (its --mode, --key, --value, --keep-raw-value, --envelope, --id-columns, --partition-by and --format-version, and a Debezium table's --on-truncate and --unavailable-placeholder; flags given win): a rebuild of a typed or upsert table into a new table")
	fs.Var(partitionBy{&f.partitionBy}, "partition-by", partitionByUsage)
	f.decodeFlags.register(fs)
	f.upsertFlags.register(fs)
	fs.Var(newPositiveInt(&f.flushRecords, 0), "flush-records", fmt.Sprintf("commit after this many records (default %d; %d for an upsert table, whose flush is held in memory until its commit)", connector.DefaultFlushRecords, connector.DefaultUpsertFlushRecords))
	fs.Var(newByteSize(&f.flushBytes, connector.DefaultFlushBytes), "flush-bytes", "commit after this many bytes of keys, values and headers: "+sizeHelp)
	fs.Var(newPositiveDuration(&f.flushInterval, connector.DefaultFlushInterval), "flush-interval", "commit at most this long after the first uncommitted record")
	fs.StringVar(&f.onDataLoss, "on-data-loss", "fail", "when retention deletes records during the replay: fail, or record the lost range and go on")
	fs.DurationVar(&f.retryFor, "retry-for", connector.DefaultRetryFor,
		"how long to keep retrying when storage, the catalog or the brokers fail transiently before giving up, counted from the first failure since the last commit or since the replay last caught up with the end of the log with nothing to commit; 0s never retries")
	return cmd
}

func runReplay(cmd *cobra.Command, f *replayFlags) error {
	ctx := cmd.Context()
	w := cmd.OutOrStdout()
	switch {
	case len(f.brokers) == 0:
		return errNoBrokers
	case f.table == "":
		return errMissingTable(ctx)
	case f.topic == "" && f.branch == "":
		return errors.New("missing --topic NAME")
	case f.topic == "":
		topic, err := ledgerTopic(ctx, f)
		if err != nil {
			return err
		}
		f.topic = topic
		// Said, for the topic was not asked for; on stderr with --json,
		// whose stdout is one document.
		say := w
		if f.json {
			say = cmd.ErrOrStderr()
		}
		fmt.Fprintf(say, "topic %s: the one topic of %s's ledger (no --topic given)\n", topic, f.table)
	}
	ident, err := catalog.ParseIdent(f.table)
	if err != nil {
		return err
	}
	taken := ""
	if f.like != "" {
		if taken, err = takeLayout(ctx, cmd, f); err != nil {
			return err
		}
	}
	from, err := replay.ParseBound(f.from, f.topic, true)
	if err != nil {
		return err
	}
	until, err := replay.ParseBound(f.until, f.topic, false)
	if err != nil {
		return err
	}
	var bar *progress // started by OnStart, once the total is known
	opts := replay.Options{
		Topic: f.topic, From: from, Until: until,
		Branch: f.branch, Publish: f.publish, PublishDifferent: f.publishDiff, TagMain: f.tagMain, Fold: f.fold, PartitionBy: f.partitionBy,
		Sink: connector.Config{
			FlushRecords:  f.flushRecords,
			FlushBytes:    f.flushBytes,
			FlushInterval: f.flushInterval,
			OnDataLoss:    connector.OnDataLoss(f.onDataLoss),
			RetryFor:      retryFor(f.retryFor),
			OnRecords: func(n int64) {
				if bar != nil {
					bar.Add(n)
				}
			},
		},
		OnStart: func(s replay.Start) {
			if taken != "" {
				// Once the target is accepted: a replay refused (a
				// table not empty) took nothing (from a new-user run).
				say := w
				if f.json {
					say = cmd.ErrOrStderr()
				}
				fmt.Fprintf(say, "layout of %s taken: %s\n", f.like, taken)
			}
			if !f.json {
				printReplayStart(w, s)
			}
			bar = newProgress(cmd.ErrOrStderr(), "replay "+f.topic, s.Remaining)
		},
	}
	registry, err := f.registry()
	if err != nil {
		return err
	}
	var p connector.Pipeline
	if err := f.decodeFlags.pipeline(&p, pipeline{}, registry); err != nil {
		return err
	}
	opts.Layout, opts.DeadLetters, opts.NoDeadLetters = p.Layout, p.DeadLetters, p.NoDeadLetters
	opts.Sink.Registry, opts.Sink.OnSchemaConflict, opts.Sink.OnTruncate = p.Config.Registry, p.Config.OnSchemaConflict, p.Config.OnTruncate
	opts.Sink.UnavailablePlaceholder, opts.Sink.EnvelopeGiven = p.Config.UnavailablePlaceholder, p.Config.EnvelopeGiven
	if err := f.upsertFlags.pipeline(&p, pipeline{}); err != nil {
		return err
	}
	if p.NewTableRefusal != nil {
		// A replay takes these flags as given, into a new table or onto
		// a branch.
		return p.NewTableRefusal
	}
	opts.Mode, opts.Key, opts.Properties = p.Mode, p.Key, p.Properties
	// Every option is checked before the brokers or the catalog are asked.
	if err := opts.Validate(); err != nil {
		return err
	}
	broker, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer broker.Close()
	cat, err := f.openCatalog(ctx)
	if err != nil {
		return err
	}
	res, err := replay.Run(ctx, broker, cat, ident, opts)
	if bar != nil {
		bar.Finish()
	}
	if differ, ok := errors.AsType[*replay.DifferError](err); ok {
		// The replay is complete and its comparison is its result: the
		// document says how it differed, then the error; the text says
		// what the branch now holds, then the error.
		res.Differ = differ
		if f.json {
			printJSONLine(w, newReplayReport(res))
		} else {
			printReplayResult(w, res, strings.Join(ident, "."), f.branch)
		}
	}
	if err != nil {
		return err
	}
	if f.json {
		printJSONLine(w, newReplayReport(res))
	} else {
		printReplayResult(w, res, strings.Join(ident, "."), f.branch)
		if f.branch == "" {
			// An interrupted replay still says its layout, and then how
			// to continue: ctx is cancelled by then (from a new-user run).
			if err := printReplayLayout(context.WithoutCancel(ctx), w, cat, ident, cmd.Flags().Changed); err != nil {
				return err
			}
		}
	}
	if !res.Complete {
		return fmt.Errorf("replay interrupted: %s is consistent up to the next offsets above; run the same command again to continue", res.Target)
	}
	// A resumed replay whose earlier runs made rows read a few bad records
	// of a layout that fits, as a sink into a table holding rows does.
	if res.Rows == 0 && deadOnly(res.Stats) {
		remove, err := replayWayBack(ctx, cat, ident, f.branch)
		if err != nil {
			return err
		}
		return &codeError{code: exitOnlyDeadLetters, err: errors.New(onlyDeadLetters(res.Target, res.Stats, remove))}
	}
	return nil
}

// replayWayBack is the way back from a replay into ident (onto branch,
// "": into the table itself) that made dead letters and no row: dropping
// its branch, or the table when it holds no row of any topic; a table
// that holds rows of others (sunk beside the replay's) keeps them
// (tableWayBack).
func replayWayBack(ctx context.Context, cat icecat.Catalog, ident table.Identifier, branch string) (string, error) {
	name := strings.Join(ident, ".")
	if branch != "" {
		return branchWayBack(name, branch), nil
	}
	tbl, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil {
		return "", fmt.Errorf("read which topics' rows %s holds: %w", name, err)
	}
	return tableWayBack(name, topicsWithRows(ctx, tbl)), nil
}

func printReplayStart(w io.Writer, s replay.Start) {
	p := s.Plan
	var total int64
	for _, part := range p.Partitions {
		total += p.End[part] - p.Start[part]
	}
	fmt.Fprintf(w, "replay %s into %s: %s, %s\n", p.Topic, s.Target, plural(len(p.Partitions), "partition"), plural(int(total), "offset"))
	if s.SourceTable != "" {
		fmt.Fprintf(w, "  starting from the positions of a snapshot of %s\n", s.SourceTable)
	}
	for _, part := range p.Partitions {
		fmt.Fprintf(w, "  %s/%d: [%d, %d)\n", p.Topic, part, p.Start[part], p.End[part])
	}
	for _, n := range replayNotes(s) {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// replayNotes are what a replay's plan says beyond its ranges: what it
// starts past and why, what it may leave unseen, where its end comes from
// and whether it resumes. The text prints them under the plan and --json
// lists them (notes), so that a script learns what a reader of the text
// does.
func replayNotes(s replay.Start) []string {
	p := s.Plan
	var notes []string
	for _, part := range slices.Sorted(maps.Keys(p.HeadLost)) {
		ls := p.HeadLost[part]
		notes = append(notes, fmt.Sprintf("note: %s/%d starts at offset %d, not 0: retention deleted [0, %d) before this replay; the ledger records it as lost",
			p.Topic, part, ls, ls))
	}
	for _, part := range slices.Sorted(maps.Keys(p.TrustedRetention)) {
		ls := p.TrustedRetention[part]
		notes = append(notes, fmt.Sprintf("note: %s/%d starts at its log start %d: the topic deletes by time alone (retention.ms), so the records deleted below it were stamped before --from; records deleted by hand (kafka-delete-records) are not seen: after such a deletion, replay from earliest, which records [0, %d) as lost",
			p.Topic, part, ls, ls))
	}
	for _, part := range slices.Sorted(maps.Keys(p.Emptied)) {
		end := p.Emptied[part]
		notes = append(notes, fmt.Sprintf("note: %s/%d starts at its end %d: retention deleted all of it, [0, %d), whose times no broker keeps, and the topic's retention does not rule out records stamped at or after --from among them: this replay neither holds them nor records them as lost; replay --from earliest, which records [0, %d) as lost",
			p.Topic, part, end, end, end))
	}
	if from := fromTakingUnseen(p); from != "" {
		for _, part := range p.Partitions {
			if iv, ok := p.StampedBefore[part]; ok {
				notes = append(notes, fmt.Sprintf("note: %s/%d starts at offset %d, where --from resolves (its first record stamped at or after it, or its end where none is); retention deleted [0, %d), whose times no broker keeps: had one been stamped at or after --from (a producer's clock ahead), the replay would take %v too, stamped before it",
					p.Topic, part, iv.High, iv.Low, iv))
			}
		}
		notes = append(notes, "to take them, replay --from "+from)
	}
	if s.Folds && !p.Earliest {
		// The table is as the log's records from the start make it: a
		// key whose latest record is below it is not in it (a new user
		// took it for a mirror of the source).
		notes = append(notes, "note: this table keeps the latest record per key from the start offsets above: a key whose records all come before them has no row; replay --from earliest for every key")
	}
	if s.FixedEnd {
		notes = append(notes, "until: the end offsets recorded when this replay started; records produced since are not part of it, and --until end keeps this end: pass --until TIME or --until OFFSETS to go further")
	}
	if s.Resumed {
		if s.Remaining == 0 {
			notes = append(notes, fmt.Sprintf("resuming: %s already holds this whole replay; nothing left to read", s.Target))
		} else {
			notes = append(notes, fmt.Sprintf("resuming: %s already holds part of this replay; %d offsets left", s.Target, s.Remaining))
		}
	}
	return notes
}

// fromTakingUnseen is the --from (PARTITION=OFFSET,...) that takes, beside
// what a replay from a time takes, the retained records stamped before the
// time that StampedBefore says it may leave unseen; empty when it names
// none.
func fromTakingUnseen(p replay.Plan) string {
	if len(p.StampedBefore) == 0 {
		return ""
	}
	spec := make([]string, 0, len(p.Partitions))
	for _, part := range p.Partitions {
		start := p.Start[part]
		if iv, ok := p.StampedBefore[part]; ok {
			start = iv.Low
		}
		spec = append(spec, fmt.Sprintf("%d=%d", part, start))
	}
	return strings.Join(spec, ",")
}

// replayReport is a replay's plan and result, as --json prints them. Its
// field names are stable (schema floe.replay/v1): a run's (runReport) and
// the replay's own.
type replayReport struct {
	runReport
	// Start and End are each partition's offsets [start, end) the replay
	// covers (TOPIC/PARTITION).
	Start map[string]int64 `json:"start"`
	End   map[string]int64 `json:"end"`
	// Complete is false for a replay interrupted before its end offsets.
	Complete bool  `json:"complete"`
	Head     int64 `json:"head_snapshot_id,omitempty"`
	// Compared is set when an upsert table's branch was compared with main
	// key by key: Equal says whether it was, Differ how it differed.
	Compared     bool   `json:"compared"`
	Equal        *bool  `json:"equal,omitempty"`
	ComparedKeys int    `json:"compared_keys,omitempty"`
	Differ       string `json:"differ,omitempty"`
	// Published is set when main moved to the branch: from MainFrom to
	// MainTo. PublishedBefore: the branch's head was published before
	// and main has moved on since, so it was not published again.
	Published       bool  `json:"published"`
	PublishedBefore bool  `json:"published_before,omitempty"`
	MainFrom        int64 `json:"main_from,omitempty"`
	MainTo          int64 `json:"main_to,omitempty"`
	// TaggedMain is the tag the publish gave main's previous head
	// (--tag-main).
	TaggedMain string `json:"tagged_main,omitempty"`
	// MainWasAhead are the partitions (TOPIC/PARTITION) whose next offset
	// main's previous head had past the branch's, with that offset: the
	// publish moved main back, and the next sink reads them again.
	MainWasAhead map[string]int64 `json:"main_was_ahead,omitempty"`
	// Resumed and FixedEnd are the plan's: the target already held part
	// of this replay; its end is the one recorded when it started.
	Resumed  bool `json:"resumed,omitempty"`
	FixedEnd bool `json:"fixed_end,omitempty"`
	// SourceTable is the table a --from snapshot:ID was found in.
	SourceTable string `json:"source_table,omitempty"`
	// Notes are the plan's notes as the text prints them under the plan;
	// FromTakingUnseen is the --from that takes the records they say a
	// replay from a time may leave unseen.
	Notes            []string `json:"notes,omitempty"`
	FromTakingUnseen string   `json:"from_taking_unseen,omitempty"`
}

// replayNext is each partition's next offset in the target's ledger.
func replayNext(r replay.Result) map[mapping.TopicPartition]int64 {
	next := map[mapping.TopicPartition]int64{}
	for p, o := range r.Next {
		next[mapping.TopicPartition{Topic: r.Plan.Topic, Partition: p}] = o
	}
	return next
}

func newReplayReport(r replay.Result) replayReport {
	st := r.Stats
	st.Next = replayNext(r)
	out := replayReport{runReport: newRunReport(r.Target, r.Plan.Topic, st, false), Start: map[string]int64{}, End: map[string]int64{},
		Complete: r.Complete, Head: r.Head, Compared: r.Compared, ComparedKeys: r.ComparedKeys,
		Published: r.Published, PublishedBefore: r.PublishedBefore, MainFrom: r.MainFrom, MainTo: r.MainTo, TaggedMain: r.Tagged,
		Resumed: r.Resumed, FixedEnd: r.FixedEnd, SourceTable: r.SourceTable,
		Notes: replayNotes(r.Start), FromTakingUnseen: fromTakingUnseen(r.Plan)}
	for p, o := range r.MainWasAhead {
		if out.MainWasAhead == nil {
			out.MainWasAhead = map[string]int64{}
		}
		out.MainWasAhead[mapping.TopicPartition{Topic: r.Plan.Topic, Partition: p}.String()] = o
	}
	if r.Compared || r.Differ != nil {
		equal := r.Differ == nil
		out.Equal = &equal
	}
	out.Schema = "floe.replay/v1"
	for _, p := range r.Plan.Partitions {
		tp := mapping.TopicPartition{Topic: r.Plan.Topic, Partition: p}.String()
		out.Start[tp], out.End[tp] = r.Plan.Start[p], r.Plan.End[p]
	}
	if r.Differ != nil {
		out.Differ = r.Differ.Error()
	}
	return out
}

// printReplayLayout names the layout of the table a replay without
// --branch wrote, as the flags that make it: a replay given none of them
// makes a raw append table, which one rebuilding an upsert or typed table
// did not mean (a new user's report). given tells which flags were given.
func printReplayLayout(ctx context.Context, w io.Writer, cat icecat.Catalog, ident table.Identifier, given func(string) bool) error {
	tbl, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "layout of %s: %s", tbl.Name(), quotedFlags(layoutFlags(tbl)))
	if !slices.ContainsFunc([]string{"mode", "fold", "key", "value", "envelope", "id-columns"}, given) {
		fmt.Fprint(w, " (the defaults, as no --mode, --key or --value was given: a replay that rebuilds an upsert or typed table takes the flags that table was sunk with, or --like TABLE takes them from it)")
	}
	fmt.Fprintln(w)
	return nil
}

// layoutFlags are the flags of floe replay (and sink) that make a table of
// tbl's layout: its mode or fold, envelope, key and value formats and
// key columns.
func layoutFlags(tbl *snapshot.Table) []string {
	l, key := tbl.Layout(), tbl.UpsertKey()
	var flags []string
	switch {
	case tbl.Mode() != mapping.ModeUpsert:
		flags = append(flags, "--mode "+string(tbl.Mode()))
	case key.Source == mapping.KeyFromPartitionKey:
		flags = append(flags, "--fold latest")
	default:
		flags = append(flags, "--mode upsert")
	}
	if l.Envelope != mapping.EnvelopeNone {
		flags = append(flags, "--envelope "+string(l.Envelope))
	}
	flags = append(flags, "--key "+string(l.Key), "--value "+string(l.Value))
	if key.Source == mapping.KeyFromValue {
		flags = append(flags, "--id-columns "+strings.Join(key.Columns, ","))
	}
	if l.Typed() && l.RawValue {
		// A flag without a value (takeLayout sets it true).
		flags = append(flags, "--keep-raw-value")
	}
	if l.Envelope == mapping.EnvelopeDebezium {
		// What a Debezium table's sink does with truncates and which
		// placeholder it takes for unavailable values are the table's
		// too (its properties): a replay into a new table records none,
		// and without them it dead-letters the truncates the table
		// applied, and makes rows of the events with the table's own
		// placeholder (found by review s65: the rebuild floe as-of prints
		// gave back every row a truncate had removed).
		props := tbl.Iceberg().Properties()
		if props[mapping.PropOnTruncate] == string(connector.TruncateDeleteAll) || props[mapping.PropTruncated] != "" {
			flags = append(flags, "--on-truncate "+string(connector.TruncateDeleteAll))
		}
		if p := props[mapping.PropPlaceholder]; p != "" {
			flags = append(flags, "--unavailable-placeholder "+p)
		}
	}
	return flags
}

// quotedFlags joins layout flags ("--name value") into a command line's
// words, each value quoted for a POSIX shell when it needs it (an
// --unavailable-placeholder of any text).
func quotedFlags(flags []string) string {
	out := make([]string, len(flags))
	for i, fl := range flags {
		name, value, ok := strings.Cut(fl, " ")
		if !ok {
			out[i] = fl
			continue
		}
		out[i] = name + " " + shellQuote(value)
	}
	return strings.Join(out, " ")
}

// takeLayout sets the layout flags of the table --like names (layoutFlags,
// its partition spec and format version) that were not given, and returns
// them for the replay to say once it starts: a replay into a new table
// otherwise made a raw append table of a typed table's topic (from a
// new-user run).
func takeLayout(ctx context.Context, cmd *cobra.Command, f *replayFlags) (string, error) {
	if f.branch != "" {
		return "", errors.New("--like gives a new table another table's layout; a replay onto --branch takes its table's own: drop --like")
	}
	from := tableFlags{table: f.like, catalogFlags: f.catalogFlags}
	tbl, err := from.open(ctx, snapshot.OpenOptions{})
	if err != nil {
		return "", fmt.Errorf("--like %s: %w", f.like, err)
	}
	flags := layoutFlags(tbl)
	pb, err := tbl.PartitionBy()
	if err != nil {
		return "", fmt.Errorf("--like %s: %w", f.like, err)
	}
	if pb != nil {
		flags = append(flags, "--partition-by "+pb.String())
	}
	if v := tbl.Iceberg().Metadata().Version(); v != 2 {
		// A v3 table's copy is a v3 table (its deletion vectors, its
		// types): a new table is v2 unless told.
		flags = append(flags, fmt.Sprintf("--format-version %d", v))
	}
	var taken []string
	for _, fl := range flags {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(fl, "--"), " ")
		if !hasValue {
			value = "true" // a boolean flag: --keep-raw-value
		}
		// The mode, --fold and the key columns are one choice: a given
		// one leaves the others' values out, which would contradict it
		// (--mode append refused for the --id-columns of an upsert
		// table it never gave); given key columns make the copy of an
		// upsert table one keyed by them.
		given := cmd.Flags().Changed
		keyed := given("mode") || given("fold") || given("id-columns")
		switch {
		case given(name), name == "id-columns" && keyed, (name == "mode" || name == "fold") && (given("mode") || given("fold")):
			continue
		case (name == "mode" || name == "fold") && given("id-columns"):
			if value == string(mapping.ModeAppend) {
				continue
			}
			name, value, fl = "mode", string(mapping.ModeUpsert), "--mode upsert"
		}
		if err := cmd.Flags().Set(name, value); err != nil {
			return "", fmt.Errorf("--like %s: take %s: %w", f.like, fl, err)
		}
		taken = append(taken, fl)
	}
	return strings.Join(taken, " "), nil
}

// ledgerTopic is the topic of a replay onto a branch given no --topic: the
// one topic the ledgers of the existing table's main and of the branch
// (when it exists) name. A replay onto a branch rebuilds what the table
// holds, so its ledger says which topic; a table of several topics, or of
// none yet, is refused naming them, for the replay cannot choose.
func ledgerTopic(ctx context.Context, f *replayFlags) (string, error) {
	tbl, err := f.open(ctx, snapshot.OpenOptions{})
	if err != nil {
		return "", fmt.Errorf("missing --topic NAME: a replay onto --branch %s takes it from the ledger of the existing table, and %w", f.branch, err)
	}
	ledger, err := tbl.Summary(ctx, 0)
	if err != nil {
		return "", fmt.Errorf("missing --topic NAME: read the ledger of %s for it: %w", tbl.Name(), err)
	}
	topics := ledger.Topics()
	if tbl.HasBranch(f.branch) {
		branch, err := snapshot.Open(ctx, tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{Branch: f.branch})
		if err != nil {
			return "", err
		}
		s, err := branch.Summary(ctx, 0)
		if err != nil {
			return "", fmt.Errorf("missing --topic NAME: read the ledger of branch %s of %s for it: %w", f.branch, tbl.Name(), err)
		}
		for _, topic := range s.Topics() {
			if !slices.Contains(topics, topic) {
				topics = append(topics, topic)
			}
		}
		slices.Sort(topics)
	}
	switch len(topics) {
	case 1:
		return topics[0], nil
	case 0:
		return "", fmt.Errorf("missing --topic NAME: %s's ledger names no topic yet, so floe cannot take it from there", tbl.Name())
	}
	return "", fmt.Errorf("missing --topic NAME: %s's ledger holds topics %s; name the one to replay, e.g. --topic %s", tbl.Name(), strings.Join(topics, ", "), topics[0])
}

// lostHistory says what floe as-of no longer reaches once a publish put
// main's previous history on no branch: the offsets main's ledger held
// below the replay's start; for an upsert table, the states within the
// replay's first commit; else nothing, the replay began where main did
// (it said "positions below the replay's first commit" of every publish,
// a replay from offset 0 too: a new user's report).
func lostHistory(r replay.Result) string {
	if len(r.MainHeldBelow) > 0 {
		var parts []string
		for _, p := range slices.Sorted(maps.Keys(r.MainHeldBelow)) {
			parts = append(parts, fmt.Sprintf("%s/%d %v", r.Plan.Topic, p, r.MainHeldBelow[p]))
		}
		return fmt.Sprintf(": main's ledger held %s below the replay's start, which floe as-of no longer reaches", strings.Join(parts, ", "))
	}
	if r.Folds {
		return ": floe as-of no longer reaches positions within the replay's first commit (an upsert table's states there were main's)"
	}
	return " (the replay began where main's ledger did, so floe as-of reaches the positions it reached before)"
}

// printReplayResult prints the result of a replay into table name, onto
// branch (empty: into a new table).
func printReplayResult(w io.Writer, r replay.Result, name, branch string) {
	fmt.Fprintf(w, "replayed %s", recordsPhrase(r.Stats))
	if r.Stats.DeadLetters > 0 {
		fmt.Fprintf(w, " and %s (into %s)", plural(int(r.Stats.DeadLetters), "dead letter"), r.Stats.DeadLetterTable)
	}
	fmt.Fprintf(w, " in %s (%s) into %s", plural(r.Stats.Commits, "commit"), filesPhrase(r.Stats), r.Target)
	if r.Head != 0 {
		fmt.Fprintf(w, ", head snapshot %d", r.Head)
	}
	fmt.Fprintln(w)
	if next := replayNext(r); len(next) > 0 {
		fmt.Fprintf(w, "next offsets: %s\n", formatNext(next))
	}
	if r.PublishedBefore {
		fmt.Fprintf(w, "published before: main (snapshot %d) has moved on from the branch's head since; not published again, which would drop main's newer commits", r.MainTo)
		if r.MainMaintainedOnly {
			fmt.Fprint(w, " (maintenance only, such as compaction: main holds no records past the branch's, so it already holds what this replay rebuilt)")
		}
		fmt.Fprintf(w, "; to rebuild again, replay onto a new branch (--branch %s-2)\n", branch)
	}
	checked := "checked against main"
	if r.Compared {
		checked = "compared with main key by key"
	}
	switch {
	case r.Differ != nil && r.Differ.Published:
		// The difference's text ends by saying it was published.
		fmt.Fprintf(w, "%s: DIFFERENT: %v (--publish-different)\n", checked, r.Differ)
	case r.Differ != nil:
		// The error after the result says how.
		fmt.Fprintf(w, "%s: DIFFERENT: not published (below)\n", checked)
	case r.Compared:
		fmt.Fprintf(w, "%s (rows with deletes applied, %s): EQUAL\n", checked, plural(r.ComparedKeys, "key"))
	}
	if r.Published {
		if r.MainFrom == r.MainTo {
			fmt.Fprintf(w, "published: main already was the branch's head %d\n", r.MainTo)
		} else {
			fmt.Fprintf(w, "published: main moved from snapshot %d to %d in one commit\n", r.MainFrom, r.MainTo)
			if r.Tagged != "" {
				fmt.Fprintf(w, "  main's previous head %d is tag %s: Iceberg engines read the history the publish replaced from it\n", r.MainFrom, r.Tagged)
			} else if r.MainFrom != 0 {
				fmt.Fprintf(w, "  main's history before it is on no branch now%s, and snapshot expiry removes it (--tag-main NAME keeps it next time)\n", lostHistory(r))
			}
		}
		// How to delete it is said, so that it is not looked for (a new
		// user's report).
		fmt.Fprintf(w, "  branch %s is kept, at the head main has now; floe drop --table %s --branch %s deletes it\n", branch, name, branch)
	}
	for _, p := range slices.Sorted(maps.Keys(r.MainWasAhead)) {
		fmt.Fprintf(w, "  main went back on %s/%d from offset %d to %d: the next floe sink session reads those offsets again (while retention still holds them)\n",
			r.Plan.Topic, p, r.MainWasAhead[p], r.Next[p])
	}
}
