package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agnivade/levenshtein"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/metrics"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

type sinkFlags struct {
	tableFlags
	brokerFlags
	topics        []string
	topicRegex    string
	topicCheck    time.Duration
	start         string
	flushRecords  int
	flushBytes    int64
	flushInterval time.Duration
	stopAtEnd     bool
	createTable   bool
	json          bool
	onDataLoss    string
	retryFor      time.Duration
	group         string
	groupProtocol string
	sessionTO     time.Duration
	rebalanceTO   time.Duration
	maintain      bool
	partitionBy   *mapping.PartitionBy
	compaction    sinkCompaction
	opsFlags
	decodeFlags
	upsertFlags
}

func newSinkCmd() *cobra.Command {
	var f sinkFlags
	cmd := &cobra.Command{
		Use:   "sink --brokers HOST:PORT --topic NAME --table NAMESPACE.TABLE",
		Short: "Sink Kafka topics into Iceberg tables, exactly once",
		Long: `Sink every partition of a topic into an Iceberg table. Each flush (--flush-records,
--flush-bytes or --flush-interval, whichever comes first) writes Parquet files by bytes and commits
them in one snapshot whose summary records the offset ranges it covers (the ledger). Every
partition resumes from the ledger's next offset, not from consumer-group offsets, so a restart or
a crash never duplicates or skips a record. Records are read with read_committed. The table and
its namespace are created when missing (docs/sinking.md).

Several topics: repeat --topic or give --topic-regex; {topic} in --table gives each its own table.
Several processes: --group NAME makes each one a member of a consumer group; the ledger fences a
member that lost a partition (docs/consumer-groups.md).

Records that cannot become rows (--value, --key, registry) go to a dead-letter table (--dlq-table,
default TABLE_dlq; docs/dead-letters.md). --mode upsert keeps one row per key, a tombstone
deleting it (docs/upsert.md); --partition-by sets the Iceberg partition spec
(docs/partitioning.md). Between commits the sink expires old snapshots and stale files, their
ledger archived first (--maintain=false turns it off; docs/maintenance.md).

Stopping and failing: SIGINT, SIGTERM or SIGHUP flushes, commits and exits 0; a --stop-at-end run
stopped before its end exits 2, naming what it did not finish. Offsets retention deleted before
they were sunk stop the sink, naming them (--on-data-loss record records them as lost and goes
on). Transient failures (storage, catalog, brokers) are retried from the ledger for --retry-for,
then exit 2; rejected credentials and other errors that need a person stop it at once. A
--stop-at-end run whose every record was a dead letter exits 3 (docs/exit-codes.md).`,
		Example: `  floe sink --brokers localhost:9092 --topic orders --table lake.orders
  floe sink --brokers localhost:9092 --topic orders --table lake.orders --group floe-orders   # on each of N hosts
  floe sink --brokers localhost:9092 --topic orders --topic payments --table 'lake.{topic}'
  floe sink --brokers localhost:9092 --topic-regex 'events\..*' --table lake.events --group floe-events
  floe sink --brokers localhost:9092 --topic orders --table lake.orders --stop-at-end
  floe sink --brokers localhost:9092 --topic orders --table lake.orders --partition-by 'day(kafka_timestamp)'
  floe sink --brokers localhost:9092 --topic accounts --table lake.accounts --mode upsert --key string
  floe sink --brokers localhost:9092 --topic customers --table lake.customers --mode upsert --value json --id-columns id
  floe sink --config floe.yaml --metrics-addr :9464
  FLOE_CATALOG="postgres://floe:$PG_PASSWORD@pg:5432/iceberg" floe sink --brokers kafka:9092 \
    --topic orders --table lake.orders --warehouse s3://lake/warehouse --s3-endpoint http://minio:9000`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSink(cmd, &f)
		},
	}
	fs := cmd.Flags()
	f.tableFlags.register(fs)
	f.opsFlags.register(fs)
	f.brokerFlags.register(fs, " (required)")
	fs.StringArrayVarP(&f.topics, "topic", "t", nil, "topic `NAME` to sink, repeatable; every partition is consumed (or, with --group, those the group assigns)")
	fs.StringVar(&f.topicRegex, "topic-regex", "", "sink every topic whose whole name matches this Go regular expression `REGEX`, those created later too")
	fs.Var(newPositiveDuration(&f.topicCheck, connector.DefaultPartitionCheck), "topic-check", "how often --topic-regex looks for new matching topics (with --stop-at-end it takes those that match at start only)")
	fs.Lookup("table").Usage = "Iceberg table as `NAMESPACE.TABLE` (required); {topic} in it stands for the topic's name, with dots and dashes made underscores: lake.{topic} gives each topic its own table"
	f.decodeFlags.register(fs)
	f.upsertFlags.register(fs)
	fs.StringVar(&f.start, "start", "earliest", "where partitions the ledger has never seen begin: earliest or latest (to begin at given offsets, create the table with floe replay --from PARTITION=OFFSET,...; floe sink resumes from its ledger)")
	fs.Var(newPositiveInt(&f.flushRecords, 0), "flush-records", fmt.Sprintf("flush after this many records (default %d; %d for an upsert table, whose flush is held in memory until its commit)", connector.DefaultFlushRecords, connector.DefaultUpsertFlushRecords))
	fs.Var(newByteSize(&f.flushBytes, connector.DefaultFlushBytes), "flush-bytes", "flush after this many bytes of keys, values and headers: "+sizeHelp)
	fs.Var(newPositiveDuration(&f.flushInterval, connector.DefaultFlushInterval), "flush-interval", "flush at most this long after the first unflushed record")
	fs.BoolVar(&f.stopAtEnd, "stop-at-end", false, "sink each partition up to its end offset as of start (last stable offset), commit and exit")
	fs.BoolVar(&f.createTable, "create-table", true, "create a missing table (with its namespace and dead-letter table); --create-table=false refuses one (exit 2) before anything is created,\n"+
		"a guard for production sinks against a misspelt --table, which would otherwise get a new table and the whole topic")
	fs.BoolVar(&f.json, "json", false, "print each table's summary, when its sinking ends, as one line of JSON (schema floe.sink/v1) instead of text")
	fs.StringVar(&f.onDataLoss, "on-data-loss", "fail", "when retention deleted records before they were sunk: fail, or record the lost range in the ledger and go on")
	fs.DurationVar(&f.retryFor, "retry-for", connector.DefaultRetryFor,
		"how long to keep retrying when storage, the catalog or the brokers fail transiently (refused connections, timeouts, 5xx) before giving up, counted from the first failure since the last commit or since the sink last caught up with the end of the log with nothing to commit; each retry resumes from the ledger; 0s never retries. Rejected credentials and other errors to fix fail at once")
	fs.Var(partitionBy{&f.partitionBy}, "partition-by", partitionByUsage)
	fs.StringVar(&f.group, "group", "", "share the topics' partitions with the other members of this consumer `GROUP` (floe sink processes with the same --group and --table); each commit's next offsets are written to the group for lag tooling, resuming never reads them")
	fs.StringVar(&f.groupProtocol, "group-protocol", string(connector.GroupClassic), "consumer group protocol with --group: classic (cooperative-sticky, any Kafka) or consumer (KIP-848, Kafka 4.0+: the broker assigns)")
	fs.Var(newPositiveDuration(&f.sessionTO, 45*time.Second), "session-timeout", "with --group: how long the group waits for a silent member before it gives its partitions to others")
	fs.Var(newPositiveDuration(&f.rebalanceTO, connector.DefaultRebalanceTimeout), "rebalance-timeout", "with --group: how long a member has to commit and give up revoked partitions; what is not committed by then is dropped and read again by the next owner")
	f.compaction.register(fs)
	fs.BoolVar(&f.maintain, "maintain", true,
		"between commits, expire snapshots as the table's history.expire.* properties say (floe's defaults: older than 1h beyond the newest 50, and beyond the newest 100 whatever their age), the ledger archived first; --maintain=false leaves it to floe maintain")
	return cmd
}

// opsFlags are floe sink's operations flags: partitions, metrics and health.
type opsFlags struct {
	partitions  []int32
	metricsAddr string
	lagInterval time.Duration
}

func (f *opsFlags) register(fs *pflag.FlagSet) {
	fs.Int32SliceVar(&f.partitions, "partitions", nil,
		"sink only these partitions of the topic, `P[,P]`, e.g. 0,1,2 (default: all); processes with disjoint partitions share a table without fencing each other")
	// The usage says what the default is; pflag would add "(default [])".
	fs.Lookup("partitions").DefValue = ""
	fs.StringVar(&f.metricsAddr, "metrics-addr", "",
		"serve Prometheus metrics on http://`ADDR`/metrics, liveness on http://ADDR/healthz (200 while no pipeline failed, one retrying after an outage too), readiness on http://ADDR/readyz (200 while every pipeline runs or finished, 503 while one starts, retries or failed, or the sink stops) and a live status page on http://ADDR/ (its numbers at /status.json), e.g. :9464 (default: off)")
	// Above 0: 0 panicked the lag watcher's ticker after the table was
	// created (found by a new user).
	fs.Var(newPositiveDuration(&f.lagInterval, 15*time.Second), "lag-interval", "how often the partition lag gauges (and the status page's broker offsets) poll the broker's offsets; they also poll after each commit, at most once a second")
}

// sinkPipelines returns what floe sink runs: the --topic/--table of the
// command line (or of the flat config keys), else the config file's
// pipelines.
func sinkPipelines(ctx context.Context, f *sinkFlags) ([]pipeline, error) {
	file := configFrom(ctx)
	if len(f.topics) == 0 && f.topicRegex == "" && f.table == "" && file != nil && len(file.pipelines) > 0 {
		if f.partitions != nil {
			// It was left out without a word, and the run sank every
			// partition (found by an operator).
			return nil, errors.New("--partitions names partitions of one topic, and the config file's pipelines are run: give a partitions: key to a pipeline of the file instead, or --topic and --table with --partitions")
		}
		if err := file.checkDuplicatePipelines(); err != nil {
			return nil, err
		}
		return file.pipelines, nil
	}
	if len(f.topics) == 0 && f.topicRegex == "" {
		return nil, errors.New("missing --topic NAME or --topic-regex REGEX (or pipelines in the --config file)")
	}
	if file != nil && len(file.pipelines) > 0 {
		// Said, where the file's pipelines were left out without a word
		// (found by an operator).
		slog.Warn("--topic, --topic-regex and --table replace the config file's pipelines: only the command line's run", "config_pipelines", len(file.pipelines))
	}
	if f.table == "" {
		return nil, errors.New("missing --table NAMESPACE.TABLE")
	}
	if f.partitions != nil && (len(f.topics) > 1 || f.topicRegex != "") {
		return nil, errors.New("--partitions names partitions of one topic: give one --topic with it")
	}
	if !f.createTable && f.topicRegex != "" {
		// A matching topic created later would stop the sink.
		return nil, errors.New("--create-table=false refuses missing tables, and --topic-regex sinks the topics created later into tables of their own: give --topic instead, or leave --create-table out")
	}
	var out []pipeline
	for _, t := range f.topics {
		if !slices.ContainsFunc(out, func(p pipeline) bool { return p.Topic == t }) {
			out = append(out, pipeline{Topic: t, Table: tableFor(f.table, t), Partitions: f.partitions})
		}
	}
	return out, nil
}

// filePipelines ties the errors of the config file's pipelines, when they
// are what runs, to the pipeline of the file they are about; nil when the
// command line's run. A pipeline's error named the command-line flags of
// its keys (a bad partitions: key was reported as the --partitions flag,
// a bad value: as --value), which no one had given (from new-user runs).
func filePipelines(ctx context.Context, fs *pflag.FlagSet, f *sinkFlags) *pipelineSource {
	file := configFrom(ctx)
	if file == nil || len(file.pipelines) == 0 || len(f.topics) > 0 || f.topicRegex != "" || f.table != "" {
		return nil
	}
	return &pipelineSource{file: file, given: func(key string) bool {
		fl := fs.Lookup(key)
		return fl != nil && fl.Changed
	}}
}

// pipelineSource is the config file whose pipelines run.
type pipelineSource struct {
	file *configFile
	// given reports whether the flag of a pipeline key was set for all
	// pipelines (on the command line, by a FLOE_* variable or by the
	// file's key of that name outside the pipelines).
	given func(key string) bool
}

// pipelineErr is err of the file's pipeline i.
func (s *pipelineSource) pipelineErr(i int, err error) error {
	if s == nil || err == nil || i < 0 || i >= len(s.file.pipelines) {
		return err
	}
	p := s.file.pipelines[i]
	e := &filePipelineError{path: s.file.path, index: i, line: s.file.pipeLines[i], pipeline: p, err: err}
	// A key the pipeline sets, or one no flag set for all (the fix
	// names it), is the pipeline's; a key it inherits names the flag, so
	// that the error says where that value was set.
	for _, key := range pipelineKeys {
		if p.sets(key) || !s.given(key) {
			e.keys = append(e.keys, key)
		}
	}
	return e
}

// attribute ties the connector's errors of pipelines (several joined, one
// per pipeline that failed) to the file's pipelines.
func (s *pipelineSource) attribute(err error) error {
	if s == nil || err == nil {
		return err
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			errs = append(errs, s.attribute(e))
		}
		return errors.Join(errs...)
	}
	if pe, ok := errors.AsType[*connector.PipelineError](err); ok {
		return s.pipelineErr(pe.Index, pe.Err)
	}
	return err
}

// tableFor is the table of topic under --table pattern: {topic} stands for
// the topic's name with dots and dashes made underscores, so that a topic
// name is one identifier (a dot would start a namespace).
func tableFor(pattern, topic string) string {
	return strings.ReplaceAll(pattern, "{topic}", strings.NewReplacer(".", "_", "-", "_").Replace(topic))
}

// tableOwners checks that topics meet in one table only when the --table
// pattern says so: with {topic} in it, two topic names that differ only in
// dots, dashes and underscores would share a table by accident.
type tableOwners struct {
	pattern bool
	mu      sync.Mutex
	owner   map[string]string
}

func (o *tableOwners) claim(table, topic string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if other, taken := o.owner[table]; taken && o.pattern && other != topic {
		return fmt.Errorf("topics %s and %s both map to table %s under --table's {topic}; sink one of them with a --table of its own", other, topic, table)
	}
	o.owner[table] = topic
	return nil
}

// tableTurns gives the pipelines of one table (several topics sunk into it)
// one commit turn and one scheduled compaction. With one each, every
// pipeline compacted the table at every interval, on the same files, and
// all but one threw their rewrite away (found by review).
type tableTurns struct {
	mu     sync.Mutex
	tables map[string]*tableTurn
}

type tableTurn struct {
	turn  sync.Mutex
	users int
	stop  func()
}

// turn is the lock the pipelines of table hold around their commits and
// their compaction's (connector.Config.CommitTurn).
func (t *tableTurns) turn(table string) *sync.Mutex {
	return &t.get(table).turn
}

func (t *tableTurns) get(table string) *tableTurn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tables == nil {
		t.tables = map[string]*tableTurn{}
	}
	tt := t.tables[table]
	if tt == nil {
		tt = &tableTurn{}
		t.tables[table] = tt
	}
	return tt
}

// compact runs start for the first pipeline of table that starts, and
// the stop it returns when the last one stops.
func (t *tableTurns) compact(table string, start func() (stop func())) (stop func()) {
	tt := t.get(table)
	t.mu.Lock()
	tt.users++
	if tt.users == 1 {
		tt.stop = start()
	}
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			tt.users--
			var last func()
			if tt.users == 0 {
				last, tt.stop = tt.stop, nil
			}
			t.mu.Unlock()
			if last != nil {
				last()
			}
		})
	}
}

// runSink runs floe sink: one connector.Pipeline per pipeline, sharing the
// broker connection, the catalog and the metrics endpoint. Every flag is
// checked, and the metrics address bound, before the brokers are asked
// anything; connector.Pipelines checks topics and partitions before it
// creates a table.
func runSink(cmd *cobra.Command, f *sinkFlags) error {
	ctx := cmd.Context()
	if len(f.brokers) == 0 {
		return errNoBrokers
	}
	pipes, err := sinkPipelines(ctx, f)
	if err != nil {
		return err
	}
	source := filePipelines(ctx, cmd.Flags(), f)
	var match *regexp.Regexp
	if f.topicRegex != "" {
		// Anchored like Kafka's own subscriptions by pattern: the whole
		// name matches.
		if match, err = regexp.Compile("^(?:" + f.topicRegex + ")$"); err != nil {
			return fmt.Errorf("--topic-regex: %w", err)
		}
	}
	// A malformed registry URL, conflicting credentials or an unreadable
	// CA file stop the sink before anything starts.
	registry, err := f.registry()
	if err != nil {
		return err
	}
	reg := metrics.New()
	// A stopping sink is not ready: /readyz says so while it commits.
	stopReady := context.AfterFunc(ctx, reg.Stopping)
	defer stopReady()
	w := cmd.OutOrStdout()
	var onlyDead []string // --stop-at-end pipelines that wrote dead letters and no row
	var short []string    // --stop-at-end pipelines interrupted before their end offsets
	var emptyNew []string // tables a failed run created and left without a snapshot
	owners := &tableOwners{pattern: strings.Contains(f.table, "{topic}"), owner: map[string]string{}}
	turns := &tableTurns{}
	var started sync.Once // once every pipeline is checked and its table open
	// srvCtx serves metrics, and watches lag, beyond the signal: the sinks
	// commit what they consumed meanwhile.
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	warnLongFlush(f.flushInterval)
	var broker *connector.Broker
	build := func(p pipeline) (connector.Pipeline, error) {
		// turn orders the sink's commits and its compaction's: a
		// compaction's commit waits for the sink's, never the reverse race.
		turn := turns.turn(p.Table)
		cfg := connector.Config{
			Topic:            p.Topic,
			Partitions:       p.Partitions,
			Start:            connector.Start(f.start),
			StopAtEnd:        f.stopAtEnd,
			FlushRecords:     f.flushRecords,
			FlushBytes:       f.flushBytes,
			FlushInterval:    f.flushInterval,
			OnDataLoss:       connector.OnDataLoss(f.onDataLoss),
			RetryFor:         retryFor(f.retryFor),
			Group:            f.group,
			GroupProtocol:    connector.GroupProtocol(f.groupProtocol),
			SessionTimeout:   f.sessionTO,
			RebalanceTimeout: f.rebalanceTO,
			NoMaintain:       !f.maintain,
			CommitTurn:       turn,
		}
		if err := cfg.Validate(); err != nil {
			return connector.Pipeline{}, err
		}
		ident, err := catalog.ParseIdent(p.Table)
		if err != nil {
			return connector.Pipeline{}, err
		}
		if err := owners.claim(p.Table, p.Topic); err != nil {
			return connector.Pipeline{}, err
		}
		pb := f.partitionBy
		if p.PartitionBy != "" {
			if pb, err = pipelinePartitionBy(p); err != nil {
				return connector.Pipeline{}, err
			}
		}
		run := connector.Pipeline{Table: ident, Config: cfg, PartitionBy: pb}
		if err := f.decodeFlags.pipeline(&run, p, registry); err != nil {
			return connector.Pipeline{}, err
		}
		if err := f.upsertFlags.pipeline(&run, p); err != nil {
			return connector.Pipeline{}, err
		}
		mp := reg.Pipeline(p.Topic, p.Table, p.Partitions)
		mp.Hook(&run.Config)
		var stopLag context.CancelFunc
		stopCompaction := func() {}
		// created warns of the table this run created (newTableWarning),
		// of the topic it adds to a table (warnNewTopic) or of the
		// partition spec it changed, for the summary to say again.
		var created []string
		run.OnStart = func(tbl *snapshot.Table) {
			stopCompaction = turns.compact(p.Table, func() func() { return f.compaction.start(srvCtx, tbl, turn) })
			started.Do(func() {
				// Only what is set: a sink of topics has no pattern, and a
				// pattern may match no topic yet.
				var attrs []any
				if names := pipelineNames(pipes); names != "" {
					attrs = append(attrs, "pipelines", names)
				}
				if f.topicRegex != "" {
					attrs = append(attrs, "topic_regex", f.topicRegex)
				}
				slog.Info("sinking", attrs...)
			})
			mp.Table(tbl.Mode(), tbl.UpsertKey())
			if l, err := tbl.Summary(srvCtx, 0); err == nil {
				mp.Started(l)
				if warning := warnNewTopic(tbl, l, p.Topic, runTopics(pipes, p.Table), f.topicRegex != ""); warning != "" {
					created = append(created, warning)
				}
			}
			if warning := newTableWarning(srvCtx, tbl, pipes, f.topicRegex != ""); warning != "" {
				created = append(created, warning)
			}
			if c := tbl.SpecChange(); c != nil {
				created = append(created, fmt.Sprintf("this run changed the partition spec of %s from %s to %s (--partition-by): files written before keep the spec they were written with; --partition-by '%s' changes it back",
					tbl.Name(), c.From, c.To, c.From))
			}
			if pending, err := tbl.PendingPartitionFields(); err == nil && len(pending) > 0 {
				logPendingPartitionFields(tbl, pending)
			}
			// A member of a group follows the ledger: the others commit
			// its topic's other partitions. The status page, when served,
			// lists the table's branches and tags.
			if group := run.Config.Group != ""; group || f.metricsAddr != "" {
				mp.FollowTable(tableReader(tbl, group))
			}
			var lagCtx context.Context
			lagCtx, stopLag = context.WithCancel(srvCtx)
			go mp.WatchLag(lagCtx, broker, f.lagInterval)
		}
		run.OnStop = func(tbl *snapshot.Table, stats connector.Stats, err error) {
			stopLag()
			stopCompaction()
			mp.Stopped(err)
			if err != nil && tbl.Created() && neverCommitted(srvCtx, tbl) {
				emptyNew = append(emptyNew, tbl.Name())
			}
			// The run's warnings: the summary says them again.
			warnings := slices.Concat(created, pendingPartitionWarnings(tbl, stats))
			// A failed pipeline's error says what happened; what it
			// committed before is said too, as such, and not as a success.
			switch {
			case err == nil:
				if f.json {
					r := newRunReport(tbl.Name(), p.Topic, stats, f.group != "")
					r.Warnings = slices.Concat(warnings, r.Warnings)
					printJSONLine(w, r)
				} else {
					printSinkStats(w, tbl, p.Topic, stats, true, f.group != "", warnings)
				}
				// The ledger's summary is read only for a run that made dead
				// letters and no row.
				if f.stopAtEnd && deadOnly(stats) {
					if rowsOf := topicsWithRows(srvCtx, tbl); !slices.Contains(rowsOf, p.Topic) {
						onlyDead = append(onlyDead, onlyDeadLetters(tbl.Name(), stats, tableWayBack(tbl.Name(), rowsOf)))
					}
				}
				if len(stats.Unfinished) > 0 {
					short = append(short, tbl.Name()+" at "+unfinishedPhrase(stats))
				}
			case committedRecords(stats) && f.json:
				r := newRunReport(tbl.Name(), p.Topic, stats, f.group != "")
				r.Error, r.Warnings = err.Error(), slices.Concat(warnings, r.Warnings)
				printJSONLine(w, r)
			case committedRecords(stats) && tableGone(err):
				// Gone only when the files went too: a table dropped
				// with its files kept is put back by floe register
				// (found by a new user).
				switch filesKept(srvCtx, tbl) {
				case filesThere:
					fmt.Fprintf(w, "stopped by an error (below); committed before it, and kept in the table's files (floe register --table %s --location %s puts back a table dropped with its files kept; a renamed table holds them under its new name):\n",
						tbl.Name(), tbl.Iceberg().Location())
				case filesGone:
					fmt.Fprintf(w, "stopped by an error (below); committed before it, and gone with the dropped table:\n")
				default:
					fmt.Fprintf(w, "stopped by an error (below); committed before it, and gone with the dropped table unless its files at %s were kept (then floe register --table %s --location %s puts it back):\n",
						tbl.Iceberg().Location(), tbl.Name(), tbl.Iceberg().Location())
				}
				printSinkStats(w, tbl, p.Topic, stats, false, f.group != "", warnings)
			case committedRecords(stats):
				fmt.Fprintf(w, "stopped by an error (below); committed before it, and kept:\n")
				printSinkStats(w, tbl, p.Topic, stats, true, f.group != "", warnings)
			}
		}
		return run, nil
	}
	run := make(connector.Pipelines, len(pipes))
	for i, p := range pipes {
		if run[i], err = build(p); err != nil {
			return source.pipelineErr(i, err)
		}
	}
	var watch *connector.TopicWatch
	if match != nil {
		watch = &connector.TopicWatch{Match: match, Pattern: f.topicRegex, Every: f.topicCheck, Pipeline: func(topic string) (connector.Pipeline, error) {
			return build(pipeline{Topic: topic, Table: tableFor(f.table, topic)})
		}}
		if f.stopAtEnd {
			// A batch run sinks the topics that match now, and ends.
			watch.Every = -1
		}
	}

	if f.metricsAddr != "" {
		addr, err := reg.Serve(srvCtx, f.metricsAddr)
		if err != nil {
			return listenError("--metrics-addr", f.metricsAddr, err)
		}
		slog.Info("serving metrics, health and status", "metrics", "http://"+addr+"/metrics", "health", "http://"+addr+"/healthz", "ready", "http://"+addr+"/readyz", "status", "http://"+addr+"/")
	}
	if broker, err = f.dial(ctx); err != nil {
		return err
	}
	defer broker.Close()
	// Topics and partitions are checked before a new catalog is created.
	if err := run.Check(ctx, broker); err != nil {
		if errors.Is(err, connector.ErrUnknownTopic) && !f.stopAtEnd {
			// A deployment may start the sink before anything made the
			// topic (found by a new user).
			pattern := "PATTERN"
			if len(f.topics) == 1 {
				pattern = "'" + regexp.QuoteMeta(f.topics[0]) + "'"
			}
			return fmt.Errorf("%w; a sink that should wait for the topic to be created subscribes by pattern: --topic-regex %s", err, pattern)
		}
		return source.attribute(err)
	}
	if err := refusedWithoutCatalog(ctx, f, run, source); err != nil {
		return err
	}
	if err := tablesExist(ctx, f, run, source); err != nil {
		return err
	}
	cat, err := f.openCatalog(ctx)
	if err != nil {
		return err
	}
	if err := run.RunWatching(ctx, broker, cat, watch); err != nil {
		return leftEmpty(source.attribute(err), emptyNew)
	}
	if len(short) > 0 {
		// A scheduler's timeout (SIGTERM) must not record a batch job
		// that stopped short as done.
		return fmt.Errorf("interrupted before the end offsets: %s; what was consumed is committed, run the same command again to continue", strings.Join(short, "; "))
	}
	if len(onlyDead) > 0 {
		return &codeError{code: exitOnlyDeadLetters, err: errors.New(strings.Join(onlyDead, "; "))}
	}
	return nil
}

// tablesExist refuses, with --create-table=false, a pipeline whose table
// the catalog lacks, before anything is created: a misspelt --table made a
// new table and sank the whole topic into it (from a new-user run). The
// refusal says which tables come close, as every command's does.
func tablesExist(ctx context.Context, f *sinkFlags, run connector.Pipelines, source *pipelineSource) error {
	if f.createTable {
		return nil
	}
	for i, p := range run {
		tf := f.tableFlags
		tf.table = strings.Join(p.Table, ".")
		_, err := tf.open(ctx, snapshot.OpenOptions{})
		if errors.Is(err, snapshot.ErrTableNotFound) {
			// The hint of every missing table adds "check --table and
			// --catalog": said here too, it came twice.
			err = fmt.Errorf("%w; --create-table=false refuses to create it (leave --create-table out to create it)", err)
		} else if catalog.NoCatalogTables(err) {
			// Explained alone, a database without the catalog's tables
			// said "floe sink creates the catalog's tables" to a user
			// who had just run floe sink (from a new-user run): the
			// cause is the flag, as for any missing table.
			err = &emptyCatalogError{table: tf.table, why: "the catalog's database holds no Iceberg catalog yet"}
		} else if errors.Is(err, catalog.ErrCatalogNotFound) {
			// A SQLite catalog file that does not exist yet said "floe
			// sink creates one" too.
			err = &emptyCatalogError{table: tf.table, why: fmt.Sprintf("no catalog exists at --catalog %s yet", f.catalog)}
		}
		switch {
		case err != nil && source != nil:
			return source.pipelineErr(i, err)
		case err != nil && len(run) > 1:
			return fmt.Errorf("pipeline %s: %w", p, err)
		case err != nil:
			return err
		}
	}
	return nil
}

// emptyCatalogError is tablesExist's refusal of a table in a catalog that
// does not exist yet (a PostgreSQL database without the catalog's tables,
// a SQLite file that does not exist), why: a missing table
// (snapshot.ErrTableNotFound), whose first sink must create the catalog.
type emptyCatalogError struct{ table, why string }

func (e *emptyCatalogError) Error() string {
	return fmt.Sprintf("table %s does not exist: %s; "+
		"--create-table=false refuses to create it (leave --create-table out of the first sink, "+
		"which creates the catalog and the table, then set it false; "+
		"or check that --catalog names the catalog the tables are in)", e.table, e.why)
}

func (e *emptyCatalogError) Unwrap() error { return snapshot.ErrTableNotFound }

// refusedWithoutCatalog returns the first refusal of a pipeline's flags
// for a new table (connector.Pipeline.NewTableRefusal) when the catalog
// does not exist yet: it holds no table to judge them, and a refused run
// does not create it.
func refusedWithoutCatalog(ctx context.Context, f *sinkFlags, run connector.Pipelines, source *pipelineSource) error {
	for i, p := range run {
		if p.NewTableRefusal == nil {
			continue
		}
		if _, err := f.openExisting(ctx); !errors.Is(err, catalog.ErrCatalogNotFound) {
			return nil
		}
		if source != nil {
			return source.pipelineErr(i, p.NewTableRefusal)
		}
		if len(run) > 1 {
			return fmt.Errorf("pipeline %s: %w", p, p.NewTableRefusal)
		}
		return p.NewTableRefusal
	}
	return nil
}

// warnNewTopic warns when a sink by --topic (or a config file's pipeline)
// adds topic to an existing table whose ledger holds none of the topics
// this run sinks into it (run, topic among them): a wrong --topic sank
// into the table beside its own without a word (from a new-user run). A
// table may hold several topics, so it is a warning, and a run that also
// names one of the table's topics says what it means; a --topic-regex run
// is left alone, its topics come and go by design. It returns the warning,
// naming the topics, for the run's summary to say again (a log line
// scrolled by unseen: a new user's report); "" when it does not warn.
func warnNewTopic(tbl *snapshot.Table, l mapping.Summary, topic string, run []string, byPattern bool) string {
	if tbl.Created() || byPattern {
		return ""
	}
	topics := l.Topics()
	if len(topics) == 0 || slices.ContainsFunc(topics, func(t string) bool { return slices.Contains(run, t) }) {
		return ""
	}
	const msg = "this run adds a topic to a table that holds other topics: a table may hold several, but if --topic (or --table) is a mistake, stop the sink; docs/deployment.md, recovering from mistakes, says how to take the topic out again"
	slog.Warn(msg, "table", tbl.Name(), "topic", topic, "table_topics", strings.Join(topics, ","))
	return fmt.Sprintf("this run added topic %s to table %s, which held %s: a table may hold several, but if --topic (or --table) was a mistake, docs/deployment.md, recovering from mistakes, says how to take the topic out again",
		topic, tbl.Name(), strings.Join(topics, ", "))
}

// newTableWarning warns, and returns the warning, when the run created
// tbl and the catalog has a table of a close name that the run does not
// sink into: a misspelt --table (lake.prodcuts) got a new table and the
// whole topic, where every read command would have asked "did you mean
// lake.products?" (a new user's report). A --topic-regex run's tables
// are named by topics that come and go, and are left alone.
func newTableWarning(ctx context.Context, tbl *snapshot.Table, pipes []pipeline, byPattern bool) string {
	if !tbl.Created() || byPattern {
		return ""
	}
	near := slices.DeleteFunc(nearTables(ctx, tbl.Catalog(), tbl.Name()), func(name string) bool {
		return !likelyMisspelt(tbl.Name(), name) || slices.ContainsFunc(pipes, func(p pipeline) bool { return p.Table == name })
	})
	if len(near) == 0 {
		return ""
	}
	msg := fmt.Sprintf("this run created table %s, and the catalog has %s, of a close name: if --table is misspelt, stop the sink, remove the new table with floe drop --table %s and sink into the table meant",
		tbl.Name(), strings.Join(near, " and "), tbl.Name())
	slog.Warn(msg, "table", tbl.Name(), "did_you_mean", strings.Join(near, ","))
	return msg
}

// likelyMisspelt reports whether name, a table a run created, is close
// enough to other, a table of nearTables, to be a misspelling of it: two
// edits apart when both table names have five characters or more, one
// apart otherwise. Two edits turn any two-letter name into any other: a
// new table lake.po was taken for a misspelt lake.js, and lake.cdcjs for
// lake.cdc2 (a new user's run).
func likelyMisspelt(name, other string) bool {
	if strings.EqualFold(name, other) {
		return true
	}
	short := min(len(name[strings.LastIndex(name, ".")+1:]), len(other[strings.LastIndex(other, ".")+1:]))
	limit := 1
	if short >= 5 {
		limit = 2
	}
	return levenshtein.ComputeDistance(name, other) <= limit
}

// neverCommitted reports whether tbl, as the catalog has it now, holds
// no snapshot: nothing, not even where a partition starts, was committed
// to it, by this run or by another writer. A failed read reports false,
// and so does one that takes long: the run's failure may be the catalog's.
func neverCommitted(ctx context.Context, tbl *snapshot.Table) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now, err := tbl.Reopen(ctx)
	return err == nil && len(now.Iceberg().Metadata().Snapshots()) == 0
}

// leftEmpty adds to err, the error a run stopped with, the tables it
// created and left without a snapshot (neverCommitted), with how to remove
// them: a member refused by its group left its new table behind without
// a word (a new user's report). They are named, not dropped: another
// member may commit to the same table meanwhile.
func leftEmpty(err error, tables []string) error {
	if len(tables) == 0 {
		return err
	}
	if len(tables) == 1 {
		return fmt.Errorf("%w; this run created %s, which is empty: floe drop --table %s --yes, with this run's --catalog, removes it",
			err, tables[0], tables[0])
	}
	return fmt.Errorf("%w; this run created %s, which are empty: floe drop --table NAME --yes, with this run's --catalog, removes each",
		err, strings.Join(tables, ", "))
}

// runTopics are the topics the run's pipes sink into table.
func runTopics(pipes []pipeline, table string) []string {
	var topics []string
	for _, p := range pipes {
		if p.Table == table {
			topics = append(topics, p.Topic)
		}
	}
	return topics
}

// summaryName is the table's name as a run's summary gives it, marked
// when the run created it (in every topic's summary of a table several
// topics go into): a misspelt --table makes a new table.
func summaryName(tbl *snapshot.Table, s connector.Stats) string {
	if s.NewTable {
		return tbl.Name() + " (new table)"
	}
	return tbl.Name()
}

// unfinishedPhrase names the partitions an interrupted bounded run did
// not finish: where the ledger is, of which end offset.
func unfinishedPhrase(s connector.Stats) string {
	tps := slices.SortedFunc(maps.Keys(s.Unfinished), mapping.TopicPartition.Compare)
	parts := make([]string, 0, min(len(tps), maxListedPositions))
	for _, tp := range tps[:min(len(tps), maxListedPositions)] {
		parts = append(parts, fmt.Sprintf("%s %d of %d", tp, s.Next[tp], s.Unfinished[tp]))
	}
	if len(tps) > maxListedPositions {
		parts = append(parts, fmt.Sprintf("and %d more partitions", len(tps)-maxListedPositions))
	}
	return strings.Join(parts, ", ")
}

// tableReader returns a reader of the table sink writes, for the lag polls
// (metrics.Pipeline.FollowTable): its branches and tags as floe status
// lists them, and with ledger its ledger summary, through a handle of its
// own (the sink's is not safe to share, and its commits change it while
// the polls run: what the handle needs is taken now), reloaded at each
// call: the summary extends from the last read.
func tableReader(sink *snapshot.Table, ledger bool) func(context.Context) (metrics.TableView, error) {
	cat, ident := sink.Catalog(), sink.Identifier()
	opts := snapshot.OpenOptions{Branch: sink.Branch(), ReadTag: sink.OnTag(), ArchiveCache: sink.ArchiveCache()}
	var view *snapshot.Table
	return func(ctx context.Context) (metrics.TableView, error) {
		var err error
		if view == nil {
			view, err = snapshot.Open(ctx, cat, ident, opts)
		} else {
			err = view.Refresh(ctx)
		}
		if err != nil {
			view = nil
			return metrics.TableView{}, err
		}
		v := metrics.TableView{Refs: lookup.Refs(view)}
		if ledger {
			l, err := view.Summary(ctx, 0)
			if err != nil {
				return metrics.TableView{}, err
			}
			v.Ledger = &l
		}
		return v, nil
	}
}

// filesPhrase counts a run's data files, and its dead-letter files when
// it wrote some.
func filesPhrase(s connector.Stats) string {
	files := plural(s.Files, "file")
	if s.DeleteFiles > 0 {
		files += ", " + plural(s.DeleteFiles, "delete file")
	}
	if s.DeadLetterFiles > 0 {
		files += ", " + plural(s.DeadLetterFiles, "dead-letter file")
	}
	return files
}

// committedRecords reports whether a run committed records (rows, dead
// letters, deletes or skipped records), not only where partitions start.
func committedRecords(s connector.Stats) bool {
	return s.Records+s.DeadLetters+s.Deletes+s.Skipped > 0
}

// topicsWithRows returns, sorted, the topics of which tbl's ledger counts
// a record that became a row. A run of only dead letters into a table
// holding rows of its topic read a few bad records of a layout that fits
// the topic (the sink logs them at WARN), not a layout that does not: it
// is no failure. Rows of other topics say nothing of this one's, but are
// what floe drop would lose (onlyDeadLetters).
func topicsWithRows(ctx context.Context, tbl *snapshot.Table) []string {
	l, err := tbl.Summary(ctx, 0)
	if err != nil {
		return nil
	}
	return l.TopicsWithRecords()
}

// deadOnly reports whether a run committed dead letters and no row.
func deadOnly(s connector.Stats) bool { return s.Records == 0 && s.DeadLetters > 0 }

// onlyDeadLetters says, for floe sink --stop-at-end and floe replay, that
// a run into table committed dead letters and no row, with their number
// and the first; "" otherwise. Such a run exits exitOnlyDeadLetters: its
// records most likely do not match the table's layout, which a batch job
// must not take for success. remove is the way back from the run
// (tableWayBack, branchWayBack).
func onlyDeadLetters(table string, s connector.Stats, remove string) string {
	if !deadOnly(s) {
		return ""
	}
	advice := connector.OnlyDeadLettersAdvice(s.FirstDeadLetter)
	if s.DebeziumEvents != "" {
		// Kafka Connect's JSON events with schemas clash with themselves:
		// the conflict is not the advice to give.
		advice = fmt.Sprintf("the records are Debezium change events, decoded without --envelope debezium: sink the topic with --envelope debezium into a new table, or %s (docs/upsert.md, Debezium)", remove)
	} else if !mapping.IsSchemaConflictReason(s.FirstDeadLetter) && !connector.NoFlagDecodes(s.FirstDeadLetter) {
		advice += fmt.Sprintf(" (a table keeps the layout it was created with: sink into a new table, or %s)", remove)
	}
	return fmt.Sprintf("%s: 0 rows and %s (into %s): no record became a row; %s; first: %s",
		table, plural(int(s.DeadLetters), "dead letter"), s.DeadLetterTable, advice, s.FirstDeadLetter)
}

// tableWayBack is onlyDeadLetters' way back from a run into table, which
// held rows of the topics rowsOf before it: removing it with floe drop
// when it held none; otherwise, as dropping it would lose them (a user
// told to drop a good table after sinking the wrong topic into it),
// rebuilding it from its own topic, as docs/deployment.md's Recovering
// from mistakes does for a wrong --topic.
func tableWayBack(table string, rowsOf []string) string {
	if len(rowsOf) == 0 {
		return fmt.Sprintf("remove this one with floe drop --table %s, which lists what it drops", table)
	}
	right := "RIGHT"
	if len(rowsOf) == 1 {
		right = rowsOf[0]
	}
	return fmt.Sprintf("if this is the wrong topic for the table, which holds rows of %s that floe drop would lose, floe replay --topic %s --table %s --branch rebuild --publish --publish-different rebuilds it from its own topic, leaving this run's out (docs/deployment.md, Recovering from mistakes)",
		strings.Join(rowsOf, ", "), right, table)
}

// branchWayBack is onlyDeadLetters' way back from a replay onto branch of
// table: dropping the branch, which leaves main and its rows as they are
// (floe drop --table alone would drop them with the table).
func branchWayBack(table, branch string) string {
	return fmt.Sprintf("remove the branch with floe drop --table %s --branch %s --yes, which leaves main and its rows as they are", table, branch)
}

// logPendingPartitionFields says that partition fields of tbl wait for
// their columns, each added with the first commit that has its column; as
// a warning, naming the column meant, when the table has a column whose
// name is close to one's: a misspelt --partition-by leaves the table
// unpartitioned for good, which an INFO line did not tell (a new user's
// report).
func logPendingPartitionFields(tbl *snapshot.Table, pending []mapping.PartitionField) {
	var names []string
	for _, f := range tbl.Iceberg().Schema().Fields() {
		names = append(names, f.Name)
	}
	var meant []string
	for _, f := range pending {
		for _, c := range closeTo(f.Column, names) {
			meant = append(meant, fmt.Sprintf("%s for %s", c, f.Column))
		}
	}
	if len(meant) > 0 {
		slog.Warn("partition fields wait for columns the table does not have, and it has columns of close names: check --partition-by (the spec keeps the names given)",
			"table", tbl.Name(), "spec", tbl.PartitionSpec(), "waiting", fmt.Sprint(pending), "did_you_mean", strings.Join(meant, ", "))
		return
	}
	slog.Info("partition fields wait for their columns: each is added with the first commit that has its column",
		"table", tbl.Name(), "spec", tbl.PartitionSpec(), "waiting", fmt.Sprint(pending))
}

// pendingPartitionWarnings warn, and return the warnings, when a run that
// sank rows into tbl ends with partition fields still waiting for their
// columns: no record of the run had the column, so the name is likely
// misspelt, and the table stays unpartitioned by it. Waiting is right for
// a typed table, whose columns come with its records, but a run that
// exited 0 with only an INFO line at its start left a misspelt
// --partition-by unseen (a new user's report). One warning a field.
func pendingPartitionWarnings(tbl *snapshot.Table, s connector.Stats) []string {
	if s.Records == 0 {
		return nil
	}
	pending, err := tbl.PendingPartitionFields()
	if err != nil || len(pending) == 0 {
		return nil
	}
	var names []string
	for _, f := range tbl.Iceberg().Schema().Fields() {
		names = append(names, f.Name)
	}
	var out []string
	for _, f := range pending {
		misspelt := "a misspelt name?"
		if meant := closeTo(f.Column, names); len(meant) > 0 {
			misspelt = fmt.Sprintf("did you mean %s?", strings.Join(meant, " or "))
		}
		msg := fmt.Sprintf("partition field %s waits for column %s, which no record of this run had (%s): the table is not partitioned by it; --partition-by none removes the table's spec, or --partition-by with the right spec replaces it",
			f, f.Column, misspelt)
		slog.Warn(msg, "table", tbl.Name(), "spec", tbl.PartitionSpec(), "field", f.String())
		out = append(out, msg)
	}
	return out
}

// pipelinePartitionBy parses a config file pipeline's own partition-by.
func pipelinePartitionBy(p pipeline) (*mapping.PartitionBy, error) {
	pb, err := mapping.ParsePartitionBy(p.PartitionBy)
	if err != nil {
		return nil, err // the caller names the pipeline (pipelineSource)
	}
	return &pb, nil
}

// retryFor turns --retry-for into connector.Config.RetryFor, where zero
// means the default: 0s on the command line means no retries.
func retryFor(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// pipelineNames lists pipelines for messages.
func pipelineNames(pipes []pipeline) string {
	var s []string
	for _, p := range pipes {
		s = append(s, p.Topic+"->"+p.Table)
	}
	return strings.Join(s, ", ")
}

// printSinkStats prints what a sink committed into tbl; kept says that
// the table is still there, to list its dead letters, group that the
// sink was a member of a consumer group, and warnings what the run
// warned of besides its stats' (runWarnings).
func printSinkStats(w io.Writer, tbl *snapshot.Table, topic string, s connector.Stats, kept, group bool, warnings []string) {
	fmt.Fprintf(w, "sink %s: %s", summaryName(tbl, s), recordsPhrase(s))
	if s.DeadLetters > 0 {
		fmt.Fprintf(w, " and %s (into %s)", plural(int(s.DeadLetters), "dead letter"), s.DeadLetterTable)
	}
	fmt.Fprintf(w, " in %s (%s)", plural(s.Commits, "commit"), filesPhrase(s))
	if s.Fenced > 0 {
		fmt.Fprintf(w, ", fenced %s by another writer", plural(s.Fenced, "time"))
	}
	if s.Rebalances > 0 {
		fmt.Fprintf(w, ", %s of %s", plural(s.Rebalances, "rebalance"), topic)
	}
	fmt.Fprintln(w)
	switch {
	case group:
		printMemberNext(w, tbl.Name(), s)
	case len(s.Next) > 0:
		fmt.Fprintf(w, "next offsets: %s\n", formatNext(s.Next))
	}
	if s.FirstDeadLetter != "" {
		fmt.Fprintf(w, "first dead letter: %s\n", s.FirstDeadLetter)
		if kept {
			fmt.Fprintf(w, "floe dead-letters --table %s lists them all, counted by reason\n", tbl.Name())
		}
	}
	// Said in the log as it happened, and again where a batch run's
	// result is read: a WARN scrolled by unseen (a new user's report).
	for _, warning := range slices.Concat(warnings, runWarnings(s)) {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
}

// runWarnings are the warnings of a run that its summary repeats.
func runWarnings(s connector.Stats) []string {
	var out []string
	if s.DebeziumEvents != "" {
		out = append(out, s.DebeziumEvents)
	}
	if s.LostRanges > 0 {
		out = append(out, lostWarning(s))
	}
	return out
}

// lostWarning says what a run recorded as lost in the ledger
// (--on-data-loss record, a replay's head of the log): the run exits 0, as
// asked, and a WARN line in the log was the only word of it (a new user's
// report). It names the first maxListedPositions ranges.
func lostWarning(s connector.Stats) string {
	tps := slices.SortedFunc(maps.Keys(s.Lost), mapping.TopicPartition.Compare)
	var parts []string
	for _, tp := range tps {
		for _, iv := range s.Lost[tp] {
			if len(parts) < maxListedPositions {
				parts = append(parts, fmt.Sprintf("%s %s", tp, iv))
			}
		}
	}
	if more := s.LostRanges - len(parts); more > 0 {
		parts = append(parts, fmt.Sprintf("and %s more", plural(more, "range")))
	}
	return fmt.Sprintf("this run recorded %s as lost in the ledger, deleted by retention before they were sunk: %s; floe audit reports them as lost findings, which a reviewed report given to floe audit --accept sets aside (docs/audit.md)",
		plural(int(s.LostOffsets), "offset"), strings.Join(parts, ", "))
}

// printMemberNext prints a group member's next offsets: its own
// partitions' apart from the others', which are as it last read the
// table. One list read as if every partition were this member's, the
// others' stale (found by an operator).
func printMemberNext(w io.Writer, table string, s connector.Stats) {
	own, others := map[mapping.TopicPartition]int64{}, map[mapping.TopicPartition]int64{}
	for tp, n := range s.Next {
		if slices.Contains(s.Owned, tp.Partition) {
			own[tp] = n
		} else {
			others[tp] = n
		}
	}
	if len(own) > 0 {
		fmt.Fprintf(w, "next offsets: %s (this member's partitions when it stopped)\n", formatNext(own))
	} else {
		fmt.Fprintln(w, "next offsets: none of this member's (the group had assigned it no partition when it stopped)")
	}
	if len(others) > 0 {
		fmt.Fprintf(w, "other members' partitions, as this member last read the table (their owners may have committed since; floe status --table %s has the table's now): %s\n",
			table, formatNext(others))
	}
}

// runReport is what a run of a sink (or a replay) committed into a table,
// as --json prints it. Its field names are stable (schema floe.sink/v1).
type runReport struct {
	Schema string `json:"schema"`
	Table  string `json:"table"`
	Topic  string `json:"topic"`
	// Rows are the rows written; for an upsert table Upserts, Deletes and
	// Skipped count its records as the ledger does.
	Rows            int64            `json:"rows"`
	Upserts         *int64           `json:"upserts,omitempty"`
	Deletes         *int64           `json:"deletes,omitempty"`
	Skipped         *int64           `json:"skipped,omitempty"`
	DeadLetters     int64            `json:"dead_letters"`
	DeadLetterTable string           `json:"dead_letter_table,omitempty"`
	FirstDeadLetter string           `json:"first_dead_letter,omitempty"`
	Commits         int              `json:"commits"`
	Files           int              `json:"files"`
	DeadLetterFiles int              `json:"dead_letter_files,omitempty"`
	DeleteFiles     int              `json:"delete_files,omitempty"`
	Fenced          int              `json:"fenced"`
	Rebalances      int              `json:"rebalances"`
	Next            map[string]int64 `json:"next"` // TOPIC/PARTITION: the ledger's next offset
	// Owned, for a member of a consumer group, are the partitions the
	// group had assigned to it when it stopped ([] for none); Next's
	// others are as it last read the table. Absent outside a group.
	Owned *[]int32 `json:"owned,omitempty"`
	// NewTable is set when the run created the table.
	NewTable bool `json:"new_table,omitempty"`
	// Warnings are the warnings of the run that the log gave once (a new
	// table of a name close to an existing one's, records that are
	// Debezium change events sunk without the envelope, offsets recorded
	// as lost).
	Warnings []string `json:"warnings,omitempty"`
	// Lost are the ranges the run recorded as lost in the ledger
	// (--on-data-loss record), a partition's first
	// connector.MaxLostListed; LostRanges counts them all, LostOffsets
	// their offsets.
	Lost        []lookup.LostRange `json:"lost,omitempty"`
	LostRanges  int                `json:"lost_ranges,omitempty"`
	LostOffsets int64              `json:"lost_offsets,omitempty"`
	// Unfinished, set when the run was interrupted before its end
	// offsets, holds each partition's end offset it did not reach
	// (TOPIC/PARTITION).
	Unfinished map[string]int64 `json:"unfinished,omitempty"`
	// Error, set when the run stopped with an error, is that error: the
	// rest of the report is what it committed before (a restart resumes
	// after it).
	Error string `json:"error,omitempty"`
}

func newRunReport(table, topic string, s connector.Stats, group bool) runReport {
	r := runReport{Schema: "floe.sink/v1", Table: table, Topic: topic, Rows: s.Records, DeadLetters: s.DeadLetters,
		FirstDeadLetter: s.FirstDeadLetter, Commits: s.Commits, Files: s.Files, DeadLetterFiles: s.DeadLetterFiles, DeleteFiles: s.DeleteFiles,
		Fenced: s.Fenced, Rebalances: s.Rebalances, NewTable: s.NewTable, Next: map[string]int64{}}
	if s.Upsert {
		r.Upserts, r.Deletes, r.Skipped = &s.Upserts, &s.Deletes, &s.Skipped
	}
	if group {
		owned := append([]int32{}, s.Owned...)
		r.Owned = &owned
	}
	if s.DeadLetters > 0 {
		r.DeadLetterTable = s.DeadLetterTable
	}
	r.Warnings = runWarnings(s)
	r.LostRanges, r.LostOffsets = s.LostRanges, s.LostOffsets
	for _, tp := range slices.SortedFunc(maps.Keys(s.Lost), mapping.TopicPartition.Compare) {
		for _, iv := range s.Lost[tp] {
			r.Lost = append(r.Lost, lookup.LostRange{Topic: tp.Topic, Partition: tp.Partition, Low: iv.Low, High: iv.High})
		}
	}
	for tp, o := range s.Next {
		r.Next[tp.String()] = o
	}
	for tp, o := range s.Unfinished {
		if r.Unfinished == nil {
			r.Unfinished = map[string]int64{}
		}
		r.Unfinished[tp.String()] = o
	}
	return r
}

// printJSONLine prints r as one line of JSON. Every field of a report
// marshals, so there is no error to report.
func printJSONLine(w io.Writer, r any) {
	b, _ := lookup.MarshalJSON(r)
	fmt.Fprintf(w, "%s\n", b)
}

// printJSON prints v as an indented JSON document, the form of every
// command's --json, with <, > and & as they are (offsets "< 100" in a
// reason, not "\u003c 100").
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// recordsPhrase says what a run of a sink committed: its rows, or for an
// upsert table its records as the ledger counts them and the rows it
// wrote.
func recordsPhrase(s connector.Stats) string {
	if !s.Upsert {
		return plural(int(s.Records), "row")
	}
	p := plural(int(s.Upserts), "upsert") + ", " + plural(int(s.Deletes), "delete")
	if s.Skipped > 0 {
		p += ", " + plural(int(s.Skipped), "skipped record")
	}
	return p + " (" + plural(int(s.Records), "row") + " written)"
}

// warnLongFlush warns of a --flush-interval above half the default
// --orphan-min-age: a flush's files wait uncommitted, unreferenced, up to
// that long, and floe maintain --remove-orphans at its default age would
// delete them before their commit, which then finds them gone and reads
// the flush's records again (snapshot.FlushFilesGoneError), for nothing.
func warnLongFlush(interval time.Duration) {
	if interval <= snapshot.DefaultOrphanMinAge/2 {
		return
	}
	slog.Warn(fmt.Sprintf("--flush-interval %s: a flush's files wait uncommitted up to that long, and floe maintain --remove-orphans deletes unreferenced files older than --orphan-min-age (%s by default): a flush that finds one of its files gone reads its records again; run it with --orphan-min-age above twice the flush interval, or flush more often",
		interval, snapshot.DefaultOrphanMinAge))
}

// plural is n and noun, with an s unless n is 1: "1 commit", "2 files".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// fileState is what filesKept found of a table's files.
type fileState int

const (
	filesUnknown fileState = iota // storage could not be read
	filesThere
	filesGone
)

// filesKept says whether the files of tbl, whose catalog entry is gone,
// are still in its storage: whether its location holds a whole metadata
// file (catalog.LatestMetadata, what floe register --location takes). A
// table dropped with its files kept (floe drop --keep-files) still has
// its rows and ledger, and floe register puts it back; one dropped with
// its files does not. Not the metadata file tbl last loaded: another
// writer's commits since may have deleted it as an old version (found by
// review).
func filesKept(ctx context.Context, tbl *snapshot.Table) fileState {
	_, err := catalog.LatestMetadata(ctx, tbl.Catalog(), tbl.Iceberg().Location())
	var tie *catalog.TiedMetadataError
	switch {
	case err == nil, errors.As(err, &tie):
		return filesThere
	case errors.Is(err, catalog.ErrNoTableMetadata):
		return filesGone
	}
	return filesUnknown
}

// tableGone reports whether err says that the sink's table was dropped
// (and perhaps created again) under it: what it committed went with it.
func tableGone(err error) bool {
	_, replaced := errors.AsType[*snapshot.TableReplacedError](err)
	return replaced || errors.Is(err, icecat.ErrNoSuchTable)
}
