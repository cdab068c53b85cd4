package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Start says where a partition the ledger has never seen begins.
type Start string

const (
	// StartEarliest begins at the partition's log start offset.
	StartEarliest Start = "earliest"
	// StartLatest begins at the partition's last stable offset: only
	// records written from now on are sunk.
	StartLatest Start = "latest"
)

// OnDataLoss says what happens when retention deleted offsets before they
// were sunk.
type OnDataLoss string

const (
	// LossFail stops the sink with a *DataLossError after committing what
	// came before the loss.
	LossFail OnDataLoss = "fail"
	// LossRecord writes the lost offsets into the ledger as a lost range and
	// goes on.
	LossRecord OnDataLoss = "record"
)

// Defaults of the flush policy.
const (
	DefaultFlushRecords = 500_000
	// DefaultUpsertFlushRecords replaces DefaultFlushRecords for an upsert
	// table: its flush is held in memory as rows until the commit picks
	// each key's winner (a 500,000-record flush of ~150 B values peaked
	// at 827 MiB, a 100,000-record one at 338 MiB).
	DefaultUpsertFlushRecords = 100_000
	DefaultFlushBytes         = 128 << 20
	DefaultFlushInterval      = 30 * time.Second
	// DefaultPartitionCheck is how often a live sink looks for new partitions.
	DefaultPartitionCheck = time.Minute
	// DefaultRebalanceTimeout is how long a group member has to give up
	// revoked partitions (Kafka's rebalance.timeout.ms default).
	DefaultRebalanceTimeout = time.Minute
	// DefaultRetryFor is how long a sink keeps retrying transient storage,
	// catalog and broker errors before it gives up.
	DefaultRetryFor = 5 * time.Minute
)

// Config configures a sink run.
type Config struct {
	Topic string
	// Start applies to partitions the ledger has no range for and that
	// StartOffsets does not name. Empty means StartEarliest.
	Start Start
	// StartOffsets override Start per partition (replay from an offset or a
	// time). A partition the ledger already has resumes from the ledger.
	StartOffsets map[int32]int64
	// NewTopic says that the topic was created after this process began
	// watching for it (TopicWatch): every record of it was written since,
	// so partitions the ledger has no range for start at offset 0 whatever
	// Start says, as partitions added while a sink runs do.
	NewTopic bool
	// RecordHeadLoss records [0, logStart) as lost when a partition starts
	// at its log start above offset 0, so the ledger shows that the
	// beginning of the log was gone before the table was built.
	RecordHeadLoss bool
	// EndOffsets bound the job: each partition is sunk up to its end offset,
	// then the run returns. Nil with StopAtEnd means the last stable offsets
	// at start.
	EndOffsets map[int32]int64
	StopAtEnd  bool

	// FlushRecords, FlushBytes and FlushInterval end a flush, whichever is
	// reached first: a number of records, of bytes of keys, values and
	// headers, or a time since the flush's first record. Zero means the
	// default (DefaultFlushRecords, DefaultFlushBytes,
	// DefaultFlushInterval), as Go's zero value should; a negative value is
	// an error, since no default is what a caller computing a negative
	// threshold meant. (floe's CLI refuses 0 too: there it is a typo.)
	FlushRecords  int
	FlushBytes    int64
	FlushInterval time.Duration
	OnDataLoss    OnDataLoss

	// Writer identifies this process in the ledger; empty means host:pid:id.
	Writer string
	Logger *slog.Logger
	// OnCommit, when set, is called after every successful commit.
	OnCommit func(snapshot.Result)
	// OnRecords, when set, is called with the number of offsets consumed
	// (records, markers and gaps alike) as the sink advances.
	OnRecords func(offsets int64)
	// OnConsumed, when set, is called after each poll with the records
	// (rows, not markers) and their bytes (keys, values, headers) it added.
	OnConsumed func(records int, bytes int64)
	// OnFenced, when set, is called each time another writer fences this
	// one, before the sink re-reads the ledger.
	OnFenced func(err error)
	// OnRetry, when set, is called each time a transient error ended a
	// session and the sink waits before it starts the next one, and when
	// the brokers start refusing the sink's connections (SASL, TLS) while
	// it waits for them to accept one again.
	OnRetry func(err error, wait time.Duration)
	// OnSession, when set, is called each time a session has started
	// (the first, and each after a retry), in a group each time the
	// group assigns this member partitions, and when the brokers accept a
	// connection again after refusing them: the sink runs again.
	OnSession func()
	// OnGroupDropped, when set, is called each time the consumer group
	// drops this member (its partitions given up) before it rejoins, with
	// what the group answered: until the group assigns it partitions again
	// (OnSession), it sinks nothing.
	OnGroupDropped func(err error)
	// OnOnlyDeadLetters, when set, is called after a commit whose records
	// all went to the dead-letter table, none to a row (after OnCommit),
	// with their number and the first one (its position and why it could
	// not become a row).
	OnOnlyDeadLetters func(deadLetters int64, first string)
	// OnSchema, when set, is called the first time the sink decodes a
	// record written with a registry schema (by its ID), value or key.
	OnSchema func(id int)

	// RetryFor is how long transient storage, catalog and broker errors
	// (catalog.IsTransient) are retried: how long the sink may keep
	// failing, counted from the first failure since it was last healthy,
	// that is since its last commit or since a session last caught up
	// with the log with nothing to commit (every partition read to its
	// last stable offset, nothing consumed uncommitted, no commit in
	// flight; in a group, every partition assigned taken on). A quiet
	// topic's sink that caught up is healthy however long it commits
	// nothing. Zero means DefaultRetryFor, negative never retries. Each
	// retry starts a new session from the ledger, so what was consumed
	// but not committed is read again, never lost.
	RetryFor time.Duration

	// NoMaintain turns off the sink's own maintenance. Otherwise, after a
	// commit, the sink expires snapshots as the table's retention says
	// (snapshot.Table.AutoMaintain: the ledger archived first, as floe
	// maintain does), so that its metadata, and each commit's latency,
	// stays bounded however long it runs.
	NoMaintain bool
	// CommitTurn, when set, is held around each of the sink's commits and
	// the maintenance after it. A compaction of the sink's table that
	// holds it around its own commit attempts
	// (snapshot.CompactOptions.Turn) then commits between two of the
	// sink's commits and never loses to this sink, however often it
	// commits; the sink waits for that commit only, not for the
	// compaction's planning and rewriting.
	CommitTurn sync.Locker

	// Group, when set, makes the sink a member of this consumer group: the
	// group's coordinator assigns it partitions of the topic, shared with
	// the other members (floe processes with the same Group and table).
	// On every assignment a partition starts at the ledger's next offset,
	// never at the group's committed offset; a revoked partition's records
	// are committed before it is given up (within RebalanceTimeout) or
	// dropped. The group's offsets are written after each commit, with
	// the snapshot id as their metadata ("floe:snapshot=ID"), for lag
	// tooling only. Group excludes Partitions, StopAtEnd, StartOffsets
	// and EndOffsets.
	Group string
	// GroupProtocol is the group protocol; empty means GroupClassic.
	GroupProtocol GroupProtocol
	// SessionTimeout is how long the group waits for a silent member
	// before it reassigns its partitions; zero means Kafka's default,
	// 45s. RebalanceTimeout is how long members have to give partitions
	// up in a rebalance (a revocation's commit included); zero means
	// DefaultRebalanceTimeout.
	SessionTimeout, RebalanceTimeout time.Duration
	// OnRebalance, when set, is called in group mode each time partitions
	// are assigned to, revoked from or lost by this member.
	OnRebalance func(Rebalance)
	// OnOwned, when set, is called in group mode each time the partitions
	// this member owns change, with all of them, sorted: after an
	// assignment, a revocation or a loss, and with none when a session
	// ends (the member leaves the group until the next one joins).
	OnOwned func(partitions []int32)
	// OnUnconfirmed, when set, is called in group mode when the group's
	// coordinator has not answered this member for longer than the
	// group's session timeout (its connections refused or failing, its
	// credentials revoked), with an error saying so: the group has
	// dropped it, or is about to, and may have given its partitions to
	// another member, which franz-go tells it (OnRebalance's Lost) only
	// once it reaches the coordinator again. Meanwhile the partitions it
	// owns (OnOwned) are unconfirmed: it goes on sinking what it holds,
	// and a commit of partitions another member committed meanwhile is
	// fenced. It is called with nil when the coordinator answers again,
	// or when the session ends.
	OnUnconfirmed func(err error)

	// PartitionCheck is how often a live sink of a whole topic looks for
	// partitions added to it; zero means DefaultPartitionCheck.
	PartitionCheck time.Duration

	// Partitions restricts the sink to these partitions of the topic; nil
	// means every partition. Processes with disjoint Partitions share one
	// table without fencing each other.
	Partitions []int32

	// Registry reads the schemas of a table whose keys or values are in
	// the schema registry's wire format (mapping.ValueRegistry,
	// mapping.KeyRegistry); it is needed for those layouts only.
	Registry *Registry
	// DeadLetters is the dead-letter table (snapshot.OpenDeadLetters) of a
	// table whose records are decoded: a record that cannot become a row
	// goes there, exactly once, accounted for in the ledger. Nil stops the
	// sink at such a record with a *BadRecordError, after committing what
	// came before it.
	DeadLetters *snapshot.Table
	// OnSchemaConflict says what a record whose type the table cannot take
	// does (a dead letter, or a stop); empty means ConflictDeadLetter.
	OnSchemaConflict SchemaConflict
	// OnTruncate says what a Debezium truncate event (op t) does in a
	// table of mapping.EnvelopeDebezium. The sink records it in the table
	// (mapping.PropOnTruncate); empty means the table's, TruncateDeadLetter
	// when it records none.
	OnTruncate OnTruncate
	// UnavailablePlaceholder is the Debezium connector's
	// unavailable.value.placeholder, for a table of
	// mapping.EnvelopeDebezium whose connector does not write Debezium's
	// default (mapping.ParsePlaceholder reads it): an event holding it in a
	// column is a dead letter. The sink records it in the table
	// (mapping.PropPlaceholder); empty means the table's, Debezium's
	// default when it records none.
	UnavailablePlaceholder string
	// EnvelopeGiven says the envelope was asked for (--envelope), also as
	// none: an existing table of another envelope refuses it (where a
	// Layout without value and key modes is otherwise taken as no ask),
	// and a sink of a table without an envelope looks for Debezium change
	// events among its records only when it was not (warnDebeziumEvents).
	EnvelopeGiven bool
}

// OnTruncate says what a sink does with a Debezium truncate event.
type OnTruncate string

const (
	// TruncateDeadLetter sends the event to the dead-letter table: the
	// table keeps its rows, and the event says so.
	TruncateDeadLetter OnTruncate = "dead-letter"
	// TruncateDeleteAll deletes every row of the table, in the commit of
	// the event, as the truncate did in the source table.
	TruncateDeleteAll OnTruncate = "delete-all"
)

// Stats summarises a run.
type Stats struct {
	Records int64 // rows committed
	// Upsert is set for an upsert table, whose records Upserts, Deletes
	// and Skipped count as the ledger does: Upserts upserted a row
	// (Records counts fewer rows when a later record of a key in the same
	// flush superseded one), Deletes deleted their key, Skipped were
	// ignored on purpose (a record without a key where the key is the
	// partition key, a Debezium tombstone without a key).
	Upsert                    bool
	Upserts, Deletes, Skipped int64
	// DeadLetters are the records committed to the dead-letter table
	// (DeadLetterTable) instead of rows.
	DeadLetters     int64
	DeadLetterTable string
	// FirstDeadLetter names the first dead letter the run committed: its
	// position and why it could not become a row ("" without one).
	FirstDeadLetter string
	// DebeziumEvents is the warning the sink logged when the records are
	// Debezium change events sunk without --envelope debezium ("" when
	// they are not), for the run's summary to repeat.
	DebeziumEvents string
	Commits        int
	// Files are the data files committed to the table, DeadLetterFiles
	// those written for the dead-letter table.
	Files, DeadLetterFiles int
	// DeleteFiles are the delete files committed to an upsert table.
	DeleteFiles int
	Fenced      int // times another writer fenced this one
	// Rebalances counts the assignments, revocations and losses of
	// partitions in group mode.
	Rebalances int
	// Maintenance counts the runs of the sink's own maintenance.
	Maintenance int
	Retries     int // sessions started again after a transient error
	// Next is each partition's next offset in the ledger when the run ended.
	// In group mode only Owned's are this member's: the others' are as it
	// last read the table, and their owners may have committed since.
	Next map[mapping.TopicPartition]int64
	// Owned are, in group mode, the partitions of the topic the group had
	// assigned to this member when its last session ended, sorted; none
	// when it had none (or its last session was never assigned any).
	Owned []int32
	// HeadLost lists partitions whose log began above offset 0.
	HeadLost map[int32]int64
	// Lost are the ranges of offsets the run recorded as lost in the
	// ledger (OnDataLoss LossRecord), by partition, for its summary to
	// say: a partition's first MaxLostListed of them. LostRanges counts
	// them all, LostOffsets their offsets.
	Lost        map[mapping.TopicPartition][]mapping.Interval
	LostRanges  int
	LostOffsets int64
	// Unfinished holds, for a bounded run (StopAtEnd, EndOffsets) that
	// ctx ended first, the end offset of each partition it had not
	// reached: what it consumed is committed (Next), the rest is left
	// for the next run.
	Unfinished map[mapping.TopicPartition]int64
	// NewTable is set, by Pipelines.Run, when the run created the table:
	// for every pipeline of the run writing it, not only the one whose
	// open created it.
	NewTable bool
}

// MaxLostListed bounds the lost ranges Stats.Lost lists of a partition: a
// live sink that retention keeps overtaking records one a session.
const MaxLostListed = 8

// lost counts r, a range the run recorded as lost, into s.
func (s *Stats) lost(r mapping.Range) {
	s.LostRanges++
	s.LostOffsets += r.Len()
	if s.Lost == nil {
		s.Lost = map[mapping.TopicPartition][]mapping.Interval{}
	}
	if len(s.Lost[r.TopicPartition]) < MaxLostListed {
		s.Lost[r.TopicPartition] = append(s.Lost[r.TopicPartition], r.Interval)
	}
}

// Sink consumes one topic into one table.
type Sink struct {
	cfg    Config
	broker *Broker
	tbl    *snapshot.Table
	log    *slog.Logger
	alloc  memory.Allocator
	// spillBytes is the most record bytes that the rows of partitions
	// without a stream of their own take before they move to the flush's
	// spill lane (session.spillRows): defaultSpillBytes.
	spillBytes int64
	// lookForFilesAfter is snapshot.CommitOptions.LookForFilesAfter (zero:
	// its default).
	lookForFilesAfter time.Duration
	// fetchPool is the consumer's memory for fetched records.
	fetchPool fetchPool
	stats     Stats
	// failing is the run of transient failures the sink is in, if any.
	failing failureRun
	// smallFilesWarned is set once the run warned that its partition spec
	// splits commits into files of a few rows each.
	smallFilesWarned bool
	// known are the topic's partitions when the run's first session began:
	// a partition the ledger does not have and that is not among them was
	// added to the topic while the sink ran, and all of it is new data.
	known map[int32]bool
	// topicID is the topic's ID as the broker reported it when the session
	// began ("" without topic IDs); every commit records it.
	topicID string
	// caughtUp is set when the session found itself where a healthy sink
	// of a quiet topic idles (session.atEnd): like a commit, it ends a
	// run of failures that Config.RetryFor bounds.
	caughtUp bool
	// inLedger are the session's partitions once its start commit is in:
	// one missing from the ledger at a commit fences the sink.
	inLedger []mapping.TopicPartition
	// dec decodes records of a table whose layout is not raw; nil for raw.
	dec *decoder
	// mirror writes each commit's next offsets into the consumer group in
	// group mode; nil otherwise.
	mirror *offsetMirror
	// reserveSchema is set once another writer's schema change made a
	// flush's streamed files unfit (snapshot.ErrSchemaMoved): from then on
	// a flush commits the columns it adds before writing any file
	// (snapshot.Table.ReserveSchema), so that another writer adding
	// columns can no longer take their field IDs, and every flush could.
	reserveSchema bool
	// schema is the table's schema as the sink last logged it (noteSchema);
	// caseWarned are the pairs of fields differing only in case it warned
	// of.
	schema     *iceberg.Schema
	caseWarned map[[2]string]bool
	// lookForEvents is set when the table has no envelope and none was
	// given (Config.EnvelopeGiven): its records may be Debezium change
	// events sunk without --envelope debezium.
	lookForEvents bool
	// heldRows is set when the table held rows as the run began, before
	// any commit of it (snapshot.Table.HoldsRows), other
	// than the sink's own topic's (heldOtherRows): advice to drop it would
	// lose them (warnDebeziumEvents). Rows of the topic alone are the
	// events of an earlier run of the same mistake.
	heldRows bool
	// debeziumWarning is the warning it logged once that its records are
	// Debezium change events sunk without the envelope
	// (warnDebeziumEvents), from the commit's goroutine or the loop's.
	debeziumWarning atomic.Pointer[string]
	// groupSession is a KIP-848 group's session timeout once read
	// (groupSessionTimeout); zero until then.
	groupSession time.Duration
}

// Validate reports the first invalid setting of c, as a *ConfigError.
func (c Config) Validate() error { return c.normalize() }

// normalize checks c and fills in defaults.
func (c *Config) normalize() error {
	if c.Topic == "" {
		return &ConfigError{Setting: SettingTopic, Want: "a topic name"}
	}
	switch c.Start {
	case "":
		c.Start = StartEarliest
	case StartEarliest, StartLatest:
	default:
		// A sink taking over from another (the Iceberg Kafka Connect
		// sink) asked for offsets: a replay begins a table there.
		return &ConfigError{Setting: SettingStart, Value: string(c.Start), Want: "earliest or latest; to begin at given offsets (taking over from another sink), create the table with floe replay --from PARTITION=OFFSET,... and floe sink then resumes from its ledger"}
	}
	switch c.OnDataLoss {
	case "":
		c.OnDataLoss = LossFail
	case LossFail, LossRecord:
	default:
		return &ConfigError{Setting: SettingOnDataLoss, Value: string(c.OnDataLoss), Want: "fail or record"}
	}
	if c.FlushRecords < 0 || c.FlushBytes < 0 || c.FlushInterval < 0 {
		return fmt.Errorf("flush thresholds %d records, %d bytes, %s: want 0 (the default) or more", c.FlushRecords, c.FlushBytes, c.FlushInterval)
	}
	if c.FlushRecords == 0 {
		c.FlushRecords = DefaultFlushRecords
	}
	if c.FlushBytes == 0 {
		c.FlushBytes = DefaultFlushBytes
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	switch c.OnSchemaConflict {
	case "":
		c.OnSchemaConflict = ConflictDeadLetter
	case ConflictDeadLetter, ConflictFail:
	default:
		return &ConfigError{Setting: SettingConflict, Value: string(c.OnSchemaConflict), Want: "dead-letter or fail"}
	}
	switch c.OnTruncate {
	case "", TruncateDeadLetter, TruncateDeleteAll:
	default:
		return &ConfigError{Setting: SettingTruncate, Value: string(c.OnTruncate), Want: "dead-letter or delete-all"}
	}
	if c.UnavailablePlaceholder != "" {
		if _, err := mapping.ParsePlaceholder(c.UnavailablePlaceholder); err != nil {
			return &ConfigError{Setting: SettingPlaceholder, Value: c.UnavailablePlaceholder, Want: "text, or hex: and its bytes in hex, as the connector's unavailable.value.placeholder"}
		}
	}
	if err := c.checkGroup(); err != nil {
		return err
	}
	if c.PartitionCheck <= 0 {
		c.PartitionCheck = DefaultPartitionCheck
	}
	if c.RetryFor == 0 {
		c.RetryFor = DefaultRetryFor
	}
	if c.Writer == "" {
		host, _ := os.Hostname()
		c.Writer = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// checkGroup checks the group mode settings.
func (c *Config) checkGroup() error {
	switch c.GroupProtocol {
	case "":
		c.GroupProtocol = GroupClassic
	case GroupClassic, GroupConsumer:
	default:
		return &ConfigError{Setting: SettingGroupProtocol, Value: string(c.GroupProtocol), Want: "classic or consumer"}
	}
	if c.Group == "" {
		return nil
	}
	var want string
	switch {
	case c.Partitions != nil:
		want = "no group together with a fixed list of partitions: the group assigns them; give one or the other"
	case c.StopAtEnd || c.EndOffsets != nil:
		want = "no group in a bounded run (to end offsets, or a replay): a member's partitions change while it runs; run without a group (--group '' when a config file or FLOE_GROUP sets one), or as a live sink"
	case c.StartOffsets != nil:
		want = "no group in a replay from start offsets"
	default:
		return nil
	}
	return &ConfigError{Setting: SettingGroup, Value: c.Group, Want: want}
}

// NewSink checks cfg and returns a sink. The broker and table stay owned by
// the caller. A legacy state table, which floe no longer writes, is a
// *snapshot.LegacyStateError.
func NewSink(broker *Broker, tbl *snapshot.Table, cfg Config) (*Sink, error) {
	if cfg.FlushRecords == 0 && tbl.Mode() == mapping.ModeUpsert {
		cfg.FlushRecords = DefaultUpsertFlushRecords
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if err := tbl.Writable(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("topic", cfg.Topic, "table", tbl.Name())
	if b := tbl.Branch(); b != table.MainBranch {
		// A replay's commits are not main's (from a new-user run).
		log = log.With("branch", b)
	}
	s := &Sink{cfg: cfg, broker: broker, tbl: tbl, log: log, alloc: memory.NewGoAllocator(),
		spillBytes: defaultSpillBytes, caseWarned: map[[2]string]bool{}}
	s.lookForEvents = tbl.Layout().Envelope == mapping.EnvelopeNone && !cfg.EnvelopeGiven
	s.noteSchema()
	if err := CheckTable(tbl, cfg); err != nil {
		return nil, err
	}
	truncate := onTruncate(tbl, cfg.OnTruncate)
	placeholder, err := placeholderOf(tbl, cfg.UnavailablePlaceholder)
	if err != nil {
		return nil, err
	}
	if layout := tbl.Layout(); layout != mapping.RawLayout {
		s.dec = newDecoder(layout, cfg.Registry, placeholder)
		s.dec.table = tbl.Name()
		s.dec.onSchema = cfg.OnSchema
		s.dec.truncateAll = truncate == TruncateDeleteAll
		if tbl.Mode() == mapping.ModeUpsert {
			key := tbl.UpsertKey()
			s.dec.upsert = &key
		}
		if tbl.Mode() == mapping.ModeUpsert && tbl.UpsertKey().Source != mapping.KeyFromKafkaKey {
			// The key columns are read from the decoded values, which a
			// codec's fast path does not make.
			s.dec.keyFields = tbl.UpsertKey().Source == mapping.KeyFromKeyFields
			s.dec.canonical = true
		}
	}
	return s, nil
}

// registryParts names what a layout decodes with the schema registry.
func registryParts(l mapping.Layout) string {
	switch {
	case l.Value == mapping.ValueRegistry && l.Key == mapping.KeyRegistry:
		return "keys and values"
	case l.Key == mapping.KeyRegistry:
		return "keys"
	}
	return "values"
}

// Run sinks until ctx is cancelled (live mode) or every partition reached
// its end offset (bounded mode). Cancelling ctx flushes and commits what was
// consumed, then returns nil: an interrupt loses nothing and duplicates
// nothing. When another writer fences this one, Run re-reads the ledger and
// continues from it. A transient storage, catalog or broker error
// (catalog.IsTransient) ends the session too, and Run starts the next one
// after a backoff, until it has kept failing for Config.RetryFor: the
// time and the backoff count from the first failure since the sink's last
// commit or since a session last caught up with the log with nothing to
// commit. What the failed session consumed and did not commit is read
// again.
func (s *Sink) Run(ctx context.Context) (Stats, error) {
	wctx, stop := s.watchAuth(ctx)
	defer stop()
	stats, err := s.run(wctx)
	if cause := context.Cause(wctx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return stats, cause
	}
	return stats, err
}

// maxRetryWait bounds the pause before a session after a failure.
const maxRetryWait = 15 * time.Second

// brokersHung names the brokers that do not answer, when err, which ended
// a session, is a request to one of them timing out: nil otherwise.
func (s *Sink) brokersHung(err error) (addrs []string, why string) {
	addrs, since, waited := s.broker.hangs.hungOn(err, s.broker.hangWindow())
	if len(addrs) == 0 {
		return nil, ""
	}
	return addrs, notAnswering(since, waited)
}

// brokersDown reports whether err, which ended a session, is a failed
// dial to a broker while no broker takes a connection: the brokers, not
// the storage or the catalog, are out of reach.
func (s *Sink) brokersDown(err error) bool {
	return !s.broker.auth.unreachableSince(err).IsZero()
}

// truncateRefused is the refusal of --on-truncate delete-all on a table
// that cannot take a truncate, err saying why (snapshot.Table.CanTruncate).
func truncateRefused(err error) *ConfigError {
	return &ConfigError{Setting: SettingTruncate, Value: string(TruncateDeleteAll), Want: "dead-letter: " + err.Error()}
}

// CheckTable refuses the settings of cfg that the existing table tbl
// cannot take, as NewSink does: --on-truncate delete-all or
// --unavailable-placeholder for a table without the Debezium envelope,
// no schema registry for a table that decodes with one, and a truncate
// on a table that cannot take one. floe sink and floe
// replay call it before they create anything for tbl (its dead-letter
// table, a branch) or change its partition spec.
func CheckTable(tbl *snapshot.Table, cfg Config) error {
	debezium := tbl.Layout().Envelope == mapping.EnvelopeDebezium
	if debezium && tbl.Mode() != mapping.ModeUpsert {
		return fmt.Errorf("table %s holds Debezium change events (--envelope debezium) and is of mode %s: a Debezium table is an upsert table; sink into a new table", tbl.Name(), tbl.Mode())
	}
	if err := checkDebeziumSettings(tbl.Name(), debezium, cfg); err != nil {
		return err
	}
	if layout := tbl.Layout(); layout.UsesRegistry() && cfg.Registry == nil {
		return &ConfigError{Setting: SettingRegistry,
			Want: fmt.Sprintf("a schema registry: table %s decodes %s in the registry's wire format", tbl.Name(), registryParts(layout))}
	}
	if debezium && onTruncate(tbl, cfg.OnTruncate) == TruncateDeleteAll {
		if err := tbl.CanTruncate(); err != nil {
			return truncateRefused(err)
		}
	}
	return nil
}

// checkDebeziumSettings refuses the Debezium settings of cfg
// (--on-truncate delete-all, --unavailable-placeholder) for the table
// named name when it does not hold Debezium change events.
func checkDebeziumSettings(name string, debezium bool, cfg Config) error {
	switch {
	case debezium:
	case cfg.OnTruncate == TruncateDeleteAll:
		return &ConfigError{Setting: SettingTruncate, Value: string(cfg.OnTruncate),
			Want: fmt.Sprintf("it only for a table of Debezium change events (--envelope debezium), whose truncate events it applies; %s holds none", name)}
	case cfg.UnavailablePlaceholder != "":
		return &ConfigError{Setting: SettingPlaceholder, Value: cfg.UnavailablePlaceholder,
			Want: fmt.Sprintf("it only for a table of Debezium change events (--envelope debezium); %s holds none", name)}
	}
	return nil
}

// CheckNewTable refuses, before the table named name is created with
// layout and properties props, the settings of cfg that NewSink would
// refuse once it exists: --on-truncate delete-all or
// --unavailable-placeholder for a table without the Debezium envelope,
// and --on-truncate delete-all for a Debezium table of format version 3,
// which cannot take a truncate (snapshot.ErrTruncateFormat). floe sink and
// floe replay call it, so that nothing is left behind.
func CheckNewTable(name string, cfg Config, layout mapping.Layout, props map[string]string) error {
	debezium := layout.Envelope == mapping.EnvelopeDebezium
	if err := checkDebeziumSettings(name, debezium, cfg); err != nil {
		return err
	}
	if cfg.OnTruncate == TruncateDeleteAll && debezium && props[table.PropertyFormatVersion] == "3" {
		return truncateRefused(fmt.Errorf("table %s: %w", name, snapshot.ErrTruncateFormat))
	}
	return nil
}

// onTruncate is what a sink given setting does with a truncate event in
// tbl: setting, or the table's (mapping.PropOnTruncate) when it is empty.
func onTruncate(tbl *snapshot.Table, setting OnTruncate) OnTruncate {
	if setting == "" {
		setting = OnTruncate(tbl.Iceberg().Properties()[mapping.PropOnTruncate])
	}
	if setting == "" {
		return TruncateDeadLetter
	}
	return setting
}

// placeholderOf is the Debezium placeholder a sink given setting
// recognises in tbl: setting, or the table's (mapping.PropPlaceholder)
// when it is empty.
func placeholderOf(tbl *snapshot.Table, setting string) (*mapping.Placeholder, error) {
	if setting != "" {
		return mapping.ParsePlaceholder(setting)
	}
	p, err := mapping.PlaceholderOf(tbl.Iceberg().Properties())
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", tbl.Name(), err)
	}
	return p, nil
}

// recordDebezium records the sink's Debezium settings in its table
// (RecordDebezium). Only a sink of main records them: the properties are
// the table's, and a writer of a branch (a replay) that did would change
// what main's sink does at its next start; a replay records them when it
// publishes the branch.
func (s *Sink) recordDebezium(ctx context.Context) error {
	if s.tbl.Branch() != table.MainBranch {
		return nil
	}
	return RecordDebezium(ctx, s.tbl, s.cfg)
}

// RecordDebezium records in tbl, a table of Debezium change events, the
// OnTruncate and the UnavailablePlaceholder cfg gives where the table's
// differ, so that a sink given none (a restart without the flags) does
// the same, and the content audit decodes as the sink did. It does nothing
// for a table of another envelope.
func RecordDebezium(ctx context.Context, tbl *snapshot.Table, cfg Config) error {
	if tbl.Layout().Envelope != mapping.EnvelopeDebezium {
		return nil
	}
	props := map[string]string{}
	if cfg.OnTruncate != "" && onTruncate(tbl, "") != cfg.OnTruncate {
		props[mapping.PropOnTruncate] = string(cfg.OnTruncate)
	}
	if p, err := placeholderOf(tbl, ""); err != nil || cfg.UnavailablePlaceholder != "" && p.Setting() != cfg.UnavailablePlaceholder {
		props[mapping.PropPlaceholder] = cfg.UnavailablePlaceholder
		if cfg.UnavailablePlaceholder == mapping.UnavailableValue {
			props[mapping.PropPlaceholder] = ""
		}
	}
	if len(props) == 0 {
		return nil
	}
	if err := tbl.SetProperties(ctx, props); err != nil {
		return fmt.Errorf("record --on-truncate and --unavailable-placeholder in %s: %w", tbl.Name(), err)
	}
	return nil
}

// warnTruncateAcrossPartitions warns when a truncate event deletes every
// row of the table (--on-truncate delete-all) and the topic has several
// partitions: the rows of other partitions' records that the source wrote
// before the truncate stay when the sink reads them after it, and rows
// written after it go when read before, so the table can differ from the
// source (Debezium writes a table's events to one partition by default).
func (s *Sink) warnTruncateAcrossPartitions(ctx context.Context) {
	if s.tbl.Layout().Envelope != mapping.EnvelopeDebezium || onTruncate(s.tbl, s.cfg.OnTruncate) != TruncateDeleteAll {
		return
	}
	if t, err := s.broker.Topic(ctx, s.cfg.Topic); err == nil && len(t.Partitions) > 1 {
		s.log.Warn("--on-truncate delete-all on a topic of several partitions: a truncate deletes the rows of every partition as the sink has read them, not as the source wrote them, so the table can differ from the source; use it on topics of one partition (Debezium's default), or --on-truncate dead-letter",
			"partitions", len(t.Partitions))
	}
}

// interruptedOnly reports whether err says only that its context was
// cancelled: every error it wraps or joins ends in context.Canceled, or is
// a catalog call the cancellation cut short. An interrupt that met a real
// failure (a flush whose files could not be written) is not a clean stop.
func interruptedOnly(err error) bool {
	if ie, ok := err.(*catalog.InterruptedError); ok {
		return errors.Is(ie.Cause, context.Canceled)
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !interruptedOnly(e) {
				return false
			}
		}
		return true
	}
	if u := errors.Unwrap(err); u != nil {
		return interruptedOnly(u)
	}
	return errors.Is(err, context.Canceled)
}

// interruptedRestart returns errLedgerBack or errPartitionsChanged when
// err joins one of them with errors of an interrupt only (interruptedOnly),
// else nil.
func interruptedRestart(err error) error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	var restart error
	for _, e := range j.Unwrap() {
		switch {
		case restarts(e):
			restart = e
		case !interruptedOnly(e):
			return nil
		}
	}
	return restart
}

// run is Run until ctx ends.
func (s *Sink) run(ctx context.Context) (Stats, error) {
	s.warnTruncateAcrossPartitions(ctx)
	s.heldRows = s.lookForEvents && s.tbl.HoldsRows() && heldOtherRows(ctx, s.tbl, s.cfg.Topic)
	s.stats = Stats{Upsert: s.tbl.Mode() == mapping.ModeUpsert}
	if s.cfg.DeadLetters != nil {
		s.stats.DeadLetterTable = s.cfg.DeadLetters.Name()
	}
	s.known = nil
	s.failing = failureRun{}
	// schemaRaced is set when a session ended because another writer
	// changed the schema under its flush, and no commit came since.
	schemaRaced := false
	// moved counts sessions in a row, without a commit, whose streamed
	// files another writer's schema change gave other field IDs; gone
	// those whose flush found a file it wrote deleted.
	moved, gone := 0, 0
	wait := backoff.NewExponentialBackOff()
	wait.InitialInterval, wait.MaxInterval = 250*time.Millisecond, maxRetryWait
	for {
		commits := s.stats.Commits
		s.caughtUp = false
		err := s.session(ctx)
		if restart := interruptedRestart(err); restart != nil && ctx.Err() != nil {
			// The interrupt cut a check short while the last flush found
			// the ledger back (or the partitions changed): that flush is
			// in, and the run stops as at any restart (a stop failed the
			// run, found by a test of the review's).
			err = restart
		}
		if s.stats.Commits > commits || s.caughtUp {
			// The sink was healthy since the last failure: a failure now
			// begins a new run of them. Counted from the last commit
			// alone, a quiet topic's sink that ran for longer than
			// RetryFor with nothing to commit gave up on its first blip.
			s.failing = failureRun{}
			wait.Reset()
		}
		if s.stats.Commits > commits {
			schemaRaced, moved, gone = false, 0, 0
		}
		var behind *watermarkBehindError
		// A request to the brokers that failed their TLS or SASL check
		// (an expired certificate after a broker restart, rotated
		// credentials) is retried as the watch of the connections does
		// (watchAuth): a fixed certificate or the right broker coming
		// back heals it. It is named as Dial names it (found by an
		// operator: it stopped the sink at once with the library's error).
		var refused *CheckError
		if err != nil && s.broker.auth.refusing() {
			// Only while the brokers' connections fail: the same
			// certificate error from storage is storage's.
			refused = s.broker.auth.explain(err)
			if cause := s.broker.auth.saslRefusal(); refused == nil && cause != nil && isEOF(err) {
				// A request on a connection whose SASL authentication
				// the broker answered by closing it (kfake) fails with a
				// bare EOF, which read as a storage error for the whole
				// --retry-for (from a new user's run).
				refused = s.saslRefused(cause)
			}
		}
		if err != nil && ctx.Err() == nil && s.cfg.RetryFor > 0 && (catalog.IsTransient(err) || errors.As(err, &behind) || refused != nil) {
			if refused != nil {
				err = refused
			}
			if failed := s.failing.add(err, s.stats.Commits); failed < s.cfg.RetryFor {
				d := min(wait.NextBackOff(), s.cfg.RetryFor-failed)
				s.stats.Retries++
				what := "transient storage, catalog or broker error"
				if _, down := errors.AsType[*RegistryUnavailableError](err); down {
					// Named: it read as a storage problem (from a new-user
					// run).
					what = "schema registry unreachable"
				}
				if refused != nil {
					what = "the brokers' connections fail their TLS or SASL check"
				}
				if s.brokersDown(err) {
					what = "no broker takes a connection (" + strings.Join(s.broker.Seeds, ",") + ")"
				} else if hung, why := s.brokersHung(err); hung != nil {
					// Named as a starting sink names brokers that do
					// not answer: franz-go says only "i/o timeout", or
					// "unable to dial: context deadline exceeded" (a
					// deploy walker's stopped broker).
					what = "brokers " + strings.Join(hung, ",") + " do not answer"
					err = cannotReach(hung, why, err)
				}
				s.log.Warn(what+"; starting again from the ledger after a pause",
					"err", err, "retry_in", d.Round(time.Millisecond), "failing_for", failed.Round(time.Millisecond), "gives_up_after", s.cfg.RetryFor)
				if s.cfg.OnRetry != nil {
					s.cfg.OnRetry(err, d)
				}
				if serr := sleepCtx(ctx, d); serr != nil {
					return s.stats, fmt.Errorf("interrupted while waiting to retry (nothing uncommitted was kept): %w", err)
				}
				continue
			}
			if refused != nil {
				return s.stats, refusedFor(s.broker.Seeds, s.cfg.RetryFor, refused)
			}
			// Brokers out of reach are named as a starting sink names
			// them (a user saw only franz-go's "unable to dial", a deploy
			// walker only "i/o timeout").
			var unreached error
			if s.brokersDown(err) {
				unreached = cannotReach(s.broker.Seeds, fmt.Sprintf("none has taken a connection since %s; is Kafka running there?",
					s.broker.auth.unreachableSince(err).Format(time.TimeOnly)), err)
			} else if hung, why := s.brokersHung(err); hung != nil {
				unreached = cannotReach(hung, why, err)
			}
			if unreached != nil {
				return s.stats, &CheckError{Settings: []Setting{SettingBrokers},
					Err: fmt.Errorf("gave up after retrying for %s without a commit or catching up with the log: %w", s.cfg.RetryFor, unreached)}
			}
			return s.stats, fmt.Errorf("gave up after retrying for %s without a commit or catching up with the log: %w", s.cfg.RetryFor, err)
		}
		if refused != nil && ctx.Err() == nil {
			// A negative Config.RetryFor: at once, named.
			return s.stats, refusedFor(s.broker.Seeds, s.cfg.RetryFor, refused)
		}
		if err != nil && ctx.Err() != nil && interruptedOnly(err) {
			// Interrupted while the session started (reading the ledger or
			// the watermarks): this session consumed nothing. After a
			// failure, what the earlier one consumed was not committed:
			// not a clean stop.
			if s.failing.last != nil {
				return s.stats, fmt.Errorf("interrupted while starting again after a failure (nothing uncommitted was kept; the next run reads it again): %w", s.failing.last)
			}
			s.recordUnfinished(ctx)
			return s.stats, nil
		}
		restart := restarts(err)
		if errors.Is(err, snapshot.ErrSchemaMoved) && moved < maxSchemaMoved {
			// Another writer's schema change gave the streamed files'
			// columns other field IDs: the next session reads those
			// records again for the new schema. Writers evolving one table
			// at once may each see this a few times; without end, something
			// else is wrong.
			moved++
			restart, s.reserveSchema = true, true
			s.log.Warn("another writer changed the schema under this flush's files; reading them again for the new schema, whose columns each flush now commits before writing its files", "err", err)
		}
		if _, lost := errors.AsType[*snapshot.FlushFilesGoneError](err); lost && gone < maxFlushFilesGone {
			// An orphan cleanup deleted a file of a long flush before its
			// commit: nothing was committed, and the next session reads
			// those records again. Again and again, the flush is longer
			// than the cleanup's age: stop, saying so.
			gone++
			restart = true
			s.log.Warn("a file of this flush was deleted before its commit; reading its records again", "err", err)
		}
		if _, raced := errors.AsType[*snapshot.SchemaChangedError](err); raced && !schemaRaced {
			// Another writer's schema change no longer fits this flush:
			// the next session starts from the new schema, where those
			// records fit or are dead letters. Twice without a commit, the
			// flush's own schema is what fails: stop.
			schemaRaced, restart = true, true
			s.log.Warn("another writer changed the schema under this flush; starting again from the table's schema", "err", err)
		}
		if errors.Is(err, snapshot.ErrFenced) {
			restart = true
			if !errors.Is(err, errSpillLost) {
				s.fenced(err)
			}
			fe, ok := errors.AsType[*snapshot.FencedError](err)
			switch {
			case ok && fe.Failed == nil:
				// A fenced session wrote its files and its commit
				// reached the catalog, where another writer had moved
				// its partitions on: not a run of failures. Counted on,
				// a blip after it gave up at once and an interrupt as it
				// restarted exited 2 (TestFencedSessionEndsARunOfFailures).
				s.failing = failureRun{}
				wait.Reset()
			case ok && ctx.Err() == nil && s.failedFence(fe):
				return s.stats, fmt.Errorf("gave up after retrying for %s without a commit or catching up with the log (fenced by another writer of its partitions meanwhile): %w", s.cfg.RetryFor, fe.Failed)
			}
		}
		if restart {
			if ctx.Err() != nil {
				// Interrupted while restarting: what was consumed is
				// committed or, when fenced, the other writer's, whose
				// positions the run reports. A bounded run stopped short
				// of its end says so (it read as done: from a review).
				s.tablePositions(ctx)
				s.recordUnfinished(ctx)
				return s.stats, nil
			}
			continue
		}
		if err != nil {
			return s.stats, err
		}
		if s.cfg.Group != "" {
			// The other members committed their partitions after this
			// member last read the table.
			s.tablePositions(ctx)
		}
		return s.stats, nil
	}
}

// failureRun is a run of transient failures: since when the sink has
// kept failing, with no commit nor a session caught up with the log, and
// the last failure.
type failureRun struct {
	since time.Time
	last  error
	// commits is Stats.Commits when the run began: a commit since ends it.
	commits int
}

// add records failure err, the sink having made commits commits so far,
// and returns how long the sink has kept failing.
func (r *failureRun) add(err error, commits int) time.Duration {
	if r.since.IsZero() || commits > r.commits {
		*r = failureRun{since: time.Now(), commits: commits}
	}
	r.last = err
	return time.Since(r.since)
}

// failedFence records a fence met after the sink's own commit attempts
// failed (fe.Failed): its attempts failed (the catalog or the storage
// unreachable) and another writer's landed, a failure all the same: a
// sink whose commits could not land never gave up while another one
// committed (TestFenceAfterOwnFailedCommitsStillGivesUp, and in a group
// TestGroupMemberFencedAfterOwnFailedCommitsGivesUp, from reviews). It
// reports whether the sink has kept failing for Config.RetryFor.
func (s *Sink) failedFence(fe *snapshot.FencedError) bool {
	if fe.Failed == nil || s.cfg.RetryFor <= 0 {
		return false
	}
	return s.failing.add(fe.Failed, s.stats.Commits) >= s.cfg.RetryFor
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// commit commits one flush in one snapshot, recording the topic's ID;
// inLedger are the partitions the session read in the ledger
// (snapshot.CommitOptions.InLedger). A failure ends the session (in group
// mode a fence only resets it): the next one resumes from the ledger, so
// the ranges take advanced past are never lost.
func (s *Sink) commit(ctx context.Context, f snapshot.Flush, inLedger []mapping.TopicPartition) error {
	if s.cfg.CommitTurn != nil {
		s.cfg.CommitTurn.Lock()
		defer s.cfg.CommitTurn.Unlock()
	}
	if s.topicID != "" {
		f.TopicIDs = map[string]string{s.cfg.Topic: s.topicID}
	}
	if s.cfg.Group != "" || s.cfg.Partitions != nil {
		// One of several writers of the table: another's commit most
		// likely landed while this flush's files were written. Reloading
		// now makes the first attempt assert the current head instead of
		// losing the race to it and writing a metadata file for nothing
		// (BenchmarkGroupCommitConflicts). A failed reload only costs
		// that: the commit reloads on conflict.
		if err := s.tbl.Refresh(ctx); err != nil {
			s.log.Debug("could not reload the table before committing", "err", err)
		}
	}
	first := firstDeadLetter(f)
	res, err := s.tbl.Commit(ctx, f, snapshot.CommitOptions{Writer: s.cfg.Writer, Logger: s.log, InLedger: inLedger, DeadLetters: s.cfg.DeadLetters, LookForFilesAfter: s.lookForFilesAfter})
	if _, pending := errors.AsType[*snapshot.DeadLettersPendingError](err); err != nil && !pending {
		return err
	}
	// A commit whose dead letters are pending is in: it counts, and the
	// error ends the session, whose successor adds them.
	defer func() {
		if err != nil {
			s.log.Warn("committed, but the dead letters are not in the dead-letter table yet", "err", err)
		}
	}()
	s.stats.Commits++
	s.stats.Records += res.Rows
	// A run that fails later reports the offsets committed so far.
	s.finish(highs(res.Commit.Ranges))
	var dead, deletes int64
	for _, r := range res.Commit.Ranges {
		if r.Lost {
			s.stats.lost(r)
		}
		dead += r.DeadLetters
		deletes += r.Deletes
		s.stats.Upserts += r.Records
		s.stats.Skipped += r.Skipped
	}
	s.stats.DeadLetters += dead
	s.stats.Deletes += deletes
	if s.stats.FirstDeadLetter == "" {
		s.stats.FirstDeadLetter = first
	}
	if w := s.debeziumWarning.Load(); w != nil {
		s.stats.DebeziumEvents = *w
	}
	s.stats.Files += res.Files
	s.stats.DeleteFiles += res.DeleteFiles
	s.stats.DeadLetterFiles += len(res.Commit.DeadLetterFiles)
	s.log.Info("committed", "snapshot", res.Commit.SnapshotID, "rows", res.Rows, "dead_letters", dead, "files", res.Files,
		"ranges", len(res.Commit.Ranges), "attempts", res.Attempts, "write", res.WriteTime.Round(time.Millisecond), "commit", res.CommitTime.Round(time.Millisecond))
	s.warnSmallFiles(res.Rows, res.Files)
	if s.cfg.OnCommit != nil {
		s.cfg.OnCommit(res)
	}
	if dead > deletes && res.Rows == 0 {
		// A commit of dead letters only most often means records the
		// table's layout cannot decode at all, not a few bad ones. A
		// Debezium topic's tombstones decode whatever the values' format:
		// a commit of deletes only counts when they outnumber its dead
		// letters.
		s.log.Warn("every record of this commit is a dead letter: "+s.onlyDeadLettersAdvice(ctx, first),
			"dead_letters", dead, "dead_letter_table", s.stats.DeadLetterTable, "first", first)
		if s.cfg.OnOnlyDeadLetters != nil {
			s.cfg.OnOnlyDeadLetters(dead, first)
		}
	}
	s.noteSchema()
	if s.mirror != nil {
		s.mirror.add(res.Commit)
	}
	if err == nil && !s.cfg.NoMaintain {
		s.maintain(ctx)
	}
	return err
}

// maintain runs the table's maintenance when it is due. It runs in the
// commit's goroutine, after the commit and before the next flush's: a
// sink never races its own maintenance. A failure costs a warning only:
// the commit is in, and nothing depends on maintenance but the size of
// the metadata; the next commit tries again.
func (s *Sink) maintain(ctx context.Context) {
	if _, held := s.tbl.PublishHold(); held {
		// A compaction would move main under the publish: it waits for a
		// later commit.
		return
	}
	res, ran, err := s.tbl.AutoMaintain(ctx, s.log)
	if err != nil {
		s.log.Warn("table maintenance failed (the commit is in; the sink tries again after a later commit)", "err", err)
		return
	}
	if ran {
		s.stats.Maintenance++
		s.log.Info("maintained", "expired", len(res.Expired), "archived", res.Archived, "archive_segments", len(res.Segments),
			"stale_metadata", len(res.StaleMetadata), "stale_manifests", len(res.StaleManifests), "stale_archives", len(res.StaleArchives), "stale_ranges_files", len(res.StaleRangesFiles))
	}
}

// warnSmallFiles warns, once a run, when a commit's rows were split into
// many files of a few rows each: a partition spec of a column with many
// distinct values (identity(value), identity(kafka_offset)) makes a file
// per value, which every reader then opens one by one.
func (s *Sink) warnSmallFiles(rows int64, files int) {
	const manyFiles, fewRows = 100, 4
	if s.smallFilesWarned || files < manyFiles || rows >= fewRows*int64(files) {
		return
	}
	s.smallFilesWarned = true
	spec := "(the table's)"
	if pb, err := s.tbl.PartitionBy(); err == nil && pb != nil {
		spec = pb.String()
	}
	s.log.Warn(fmt.Sprintf("a commit wrote %d files for %d rows: the partition spec %s makes a partition per distinct value of a column that has many; "+
		"a transform with fewer values, such as bucket(16, COLUMN) or day(COLUMN), keeps files large", files, rows, spec))
}

// tablePositions sets the run's next offsets to the table's, reloaded:
// a run that ends fenced, or a group member, holds positions from before
// the other writers' commits. ctx has ended (a signal), so the reload gets a few seconds of
// its own; when it fails, the positions stay as last known.
func (s *Sink) tablePositions(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.tbl.Refresh(ctx); err != nil {
		s.log.Warn("cannot reload the table for its next offsets; the summary shows those last read", "err", err)
		return
	}
	l, err := s.tbl.Summary(ctx, 0)
	if err != nil {
		s.log.Warn("cannot read the table's next offsets; the summary shows those last read", "err", err)
		return
	}
	s.finish(l.Next())
}

func (s *Sink) finish(next map[mapping.TopicPartition]int64) {
	if s.stats.Next == nil {
		s.stats.Next = map[mapping.TopicPartition]int64{}
	}
	for tp, n := range next {
		// Those of this run's partitions: with --partitions, the others
		// are another process's, and read as if nothing was sunk there.
		if tp.Topic == s.cfg.Topic && (s.cfg.Partitions == nil || slices.Contains(s.cfg.Partitions, tp.Partition)) {
			s.stats.Next[tp] = n
		}
	}
}

// recordUnfinished records in the stats, for a bounded run that ctx ended
// as a session started (before it knew its end offsets), each partition
// the ledger has not taken to its end (Stats.Unfinished): the end offsets
// given, or the last stable offsets now. It asks with a short deadline of
// its own, ctx being done; when it cannot, it records nothing.
func (s *Sink) recordUnfinished(ctx context.Context) {
	if !s.cfg.StopAtEnd && s.cfg.EndOffsets == nil {
		return
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ends := s.cfg.EndOffsets
	if ends == nil {
		wm, err := s.broker.Watermarks(qctx, s.cfg.Topic)
		if err != nil {
			return
		}
		ends = map[int32]int64{}
		for p, w := range wm {
			ends[p] = w.LastStable
		}
	}
	ledger, err := s.tbl.Summary(qctx, 0)
	if err != nil {
		return
	}
	next := ledger.Next()
	s.finish(next)
	s.noteUnfinished(next, ends)
}

// noteUnfinished records in Stats.Unfinished each of the run's partitions
// whose next offset in the ledger (next) is short of its end offset.
func (s *Sink) noteUnfinished(next map[mapping.TopicPartition]int64, ends map[int32]int64) {
	for p, end := range ends {
		tp := mapping.TopicPartition{Topic: s.cfg.Topic, Partition: p}
		if s.cfg.Partitions != nil && !slices.Contains(s.cfg.Partitions, p) || next[tp] >= end {
			continue
		}
		if s.stats.Unfinished == nil {
			s.stats.Unfinished = map[mapping.TopicPartition]int64{}
		}
		s.stats.Unfinished[tp] = end
	}
}

// NoFlagDecodes reports whether reason, a dead letter's, is of a record
// no layout flag would make a row of: a Debezium truncate the sink does
// not apply, a key field the value disagrees with.
func NoFlagDecodes(reason string) bool {
	return strings.Contains(reason, "a Debezium truncate event (op t)") || strings.Contains(reason, "the table is keyed by the key's fields, and its column")
}

// OnlyDeadLettersAdvice says what to check when every record of a commit
// (or run) became a dead letter, first being the first one's position and
// reason: most often the layout cannot decode the topic's records at all,
// unless the first decoded and conflicts with the table's column type.
func OnlyDeadLettersAdvice(first string) string {
	if NoFlagDecodes(first) {
		// The layout flags are right: such records are dead letters
		// whatever they are.
		return "no --value, --key or --schema-registry makes rows of such records (a Debezium truncate without --on-truncate delete-all, a key and value that disagree on a key column): the first dead letter's reason says what to do"
	}
	if mapping.IsSchemaConflictReason(first) {
		return "the first record decoded, but the type of one of its fields conflicts with the table's column (docs/typed-tables.md, Schema evolution)"
	}
	if strings.Contains(first, "the value's columns cannot key the table") {
		return "the records decoded, but a column --id-columns names is of a type no key column can have: key by other columns"
	}
	if strings.Contains(first, ", a key column of the table (--id-columns ") {
		return "the records decoded, but lack the key columns: check that --id-columns names columns of the values, as they are spelt"
	}
	if strings.Contains(first, "named like floe's metadata column") {
		// The layout is right; a field's name is not (from a new-user run).
		return "the records decoded, but a field is named like one of floe's columns (kafka_*, in any case): rename it where the first dead letter's reason says"
	}
	return "check that --value, --key and --schema-registry match how the topic's records are written"
}

// heldOtherRows reports whether tbl's ledger counts records of a topic
// other than topic, or none at all (rows another writer made), or cannot
// be read: rows a drop of tbl would lose besides topic's.
func heldOtherRows(ctx context.Context, tbl *snapshot.Table, topic string) bool {
	sum, err := tbl.Summary(ctx, 0)
	if err != nil {
		return true
	}
	return !slices.Equal(sum.TopicsWithRecords(), []string{topic})
}
