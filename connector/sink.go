package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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

// DataLossError reports offsets that retention deleted before they were sunk.
type DataLossError struct {
	Partition mapping.TopicPartition
	Lost      mapping.Interval
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("data loss on %s: offsets %s were deleted by retention before they were sunk; "+
		"nothing after offset %d was committed. Rerun with --on-data-loss record to record the lost range in the ledger and continue",
		e.Partition, e.Lost, e.Lost.Low)
}

// Defaults of the flush policy.
const (
	DefaultFlushRecords  = 500_000
	DefaultFlushBytes    = 128 << 20
	DefaultFlushInterval = 30 * time.Second
	// DefaultPartitionCheck is how often a live sink looks for new partitions.
	DefaultPartitionCheck = time.Minute
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
	// RecordHeadLoss records [0, logStart) as lost when a partition starts
	// at its log start above offset 0, so the ledger shows that the
	// beginning of the log was gone before the table was built.
	RecordHeadLoss bool
	// EndOffsets bound the job: each partition is sunk up to its end offset,
	// then the run returns. Nil with StopAtEnd means the last stable offsets
	// at start.
	EndOffsets map[int32]int64
	StopAtEnd  bool

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
	// session and the sink waits before it starts the next one.
	OnRetry func(err error, wait time.Duration)

	// RetryFor is how long transient storage, catalog and broker errors
	// (catalog.IsTransient) are retried, counted from the first failure
	// since the last commit; zero means DefaultRetryFor, negative never
	// retries. Each retry starts a new session from the ledger, so what
	// was consumed but not committed is read again, never lost.
	RetryFor time.Duration

	// Group, when set, receives each commit's next offsets as consumer
	// group offsets, for lag tooling only; resuming never reads them.
	Group string

	// PartitionCheck is how often a live sink of a whole topic looks for
	// partitions added to it; zero means DefaultPartitionCheck.
	PartitionCheck time.Duration

	// Partitions restricts the sink to these partitions of the topic; nil
	// means every partition. Processes with disjoint Partitions share one
	// table without fencing each other.
	Partitions []int32
}

// Stats summarises a run.
type Stats struct {
	Records int64 // rows committed
	Commits int
	Files   int
	Fenced  int // times another writer fenced this one
	Retries int // sessions started again after a transient error
	// Next is each partition's next offset in the ledger when the run ended.
	Next map[mapping.TopicPartition]int64
	// HeadLost lists partitions whose log began above offset 0.
	HeadLost map[int32]int64
}

// Sink consumes one topic into one table.
type Sink struct {
	cfg    Config
	broker *Broker
	tbl    *snapshot.Table
	log    *slog.Logger
	alloc  memory.Allocator
	stats  Stats
	// known are the topic's partitions when the run's first session began:
	// a partition the ledger does not have and that is not among them was
	// added to the topic while the sink ran, and all of it is new data.
	known map[int32]bool
	// topicID is the topic's ID as the broker reported it when the session
	// began ("" without topic IDs); every commit records it.
	topicID string
	// inLedger are the session's partitions once its start commit is in:
	// one missing from the ledger at a commit fences the sink.
	inLedger []mapping.TopicPartition
}

// Validate reports the first invalid setting of c, with the flag to fix.
func (c Config) Validate() error { return c.normalize() }

// normalize checks c and fills in defaults.
func (c *Config) normalize() error {
	if c.Topic == "" {
		return errors.New("no topic: pass --topic NAME")
	}
	switch c.Start {
	case "":
		c.Start = StartEarliest
	case StartEarliest, StartLatest:
	default:
		return fmt.Errorf("--start %q: want earliest or latest", c.Start)
	}
	switch c.OnDataLoss {
	case "":
		c.OnDataLoss = LossFail
	case LossFail, LossRecord:
	default:
		return fmt.Errorf("--on-data-loss %q: want fail or record", c.OnDataLoss)
	}
	if c.FlushRecords <= 0 {
		c.FlushRecords = DefaultFlushRecords
	}
	if c.FlushBytes <= 0 {
		c.FlushBytes = DefaultFlushBytes
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
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

// NewSink checks cfg and returns a sink. The broker and table stay owned by
// the caller.
func NewSink(broker *Broker, tbl *snapshot.Table, cfg Config) (*Sink, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	return &Sink{cfg: cfg, broker: broker, tbl: tbl, log: cfg.Logger.With("topic", cfg.Topic, "table", tbl.Name()), alloc: memory.NewGoAllocator()}, nil
}

// Run sinks until ctx is cancelled (live mode) or every partition reached
// its end offset (bounded mode). Cancelling ctx flushes and commits what was
// consumed, then returns nil: an interrupt loses nothing and duplicates
// nothing. When another writer fences this one, Run re-reads the ledger and
// continues from it. A transient storage, catalog or broker error
// (catalog.IsTransient) ends the session too, and Run starts the next one
// after a backoff, for up to Config.RetryFor without a commit; what the
// failed session consumed and did not commit is read again.
func (s *Sink) Run(ctx context.Context) (Stats, error) {
	s.stats = Stats{}
	s.known = nil
	var failingSince time.Time
	wait := backoff.NewExponentialBackOff()
	wait.InitialInterval, wait.MaxInterval = 250*time.Millisecond, 15*time.Second
	for {
		commits := s.stats.Commits
		err := s.session(ctx)
		if s.stats.Commits > commits {
			failingSince = time.Time{}
			wait.Reset()
		}
		var behind *watermarkBehindError
		if err != nil && ctx.Err() == nil && s.cfg.RetryFor > 0 && (catalog.IsTransient(err) || errors.As(err, &behind)) {
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if failed := time.Since(failingSince); failed < s.cfg.RetryFor {
				d := min(wait.NextBackOff(), s.cfg.RetryFor-failed)
				s.stats.Retries++
				s.log.Warn("transient storage, catalog or broker error; starting again from the ledger after a pause",
					"err", err, "retry_in", d.Round(time.Millisecond), "failing_for", failed.Round(time.Millisecond), "gives_up_after", s.cfg.RetryFor)
				if s.cfg.OnRetry != nil {
					s.cfg.OnRetry(err, d)
				}
				if serr := sleepCtx(ctx, d); serr != nil {
					return s.stats, fmt.Errorf("interrupted while waiting to retry (nothing uncommitted was kept): %w", err)
				}
				continue
			}
			return s.stats, fmt.Errorf("gave up after retrying for %s without a commit: %w", s.cfg.RetryFor, err)
		}
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Interrupted while the session started (reading the ledger or
			// the watermarks): nothing was consumed, nothing is lost.
			return s.stats, nil
		}
		restart := err == errPartitionsChanged
		if errors.Is(err, snapshot.ErrFenced) {
			restart = true
			s.stats.Fenced++
			if s.cfg.OnFenced != nil {
				s.cfg.OnFenced(err)
			}
			s.log.Warn("fenced by another writer; re-reading the ledger and re-seeking", "err", err)
		}
		if restart {
			if ctx.Err() != nil {
				// Interrupted while restarting: what was consumed is
				// committed or, when fenced, the other writer's.
				return s.stats, nil
			}
			continue
		}
		if err != nil {
			return s.stats, err
		}
		return s.stats, nil
	}
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

// partState is one partition's progress within a session.
type partState struct {
	tp mapping.TopicPartition
	// low is where the open range starts, next the expected next offset.
	low, next int64
	records   int64
	// closed are ranges finished within this flush (before a loss).
	closed []mapping.Range
	rows   *mapping.RowBuilder
	// batches hold the rows of closed ranges, cut from rows when a range
	// closes, so that every data file lies inside one range.
	batches []arrow.RecordBatch
	end     int64 // bounded mode: stop at this offset; -1 when unbounded
	// lost is the last lost or aborted range: records inside it were
	// fetched before it was declared and stay out of the table.
	lost mapping.Interval
	// checked is next as of the last retention check.
	checked int64
	paused  bool
}

func (p *partState) done() bool { return p.end >= 0 && p.next >= p.end }

// closeRange closes the open range [low, next), when it is not empty, with
// its rows cut into a batch of their own.
func (p *partState) closeRange() {
	if p.next > p.low {
		p.closed = append(p.closed, mapping.Range{TopicPartition: p.tp, Interval: mapping.Interval{Low: p.low, High: p.next}, Records: p.records})
		if p.rows.Rows() > 0 {
			p.batches = append(p.batches, p.rows.NewBatch())
		}
	}
	p.low, p.records = p.next, 0
}

// deleted records r, a lost or aborted range starting at next: the open
// range closes before it (its rows in a batch of their own, so that no
// data file spans r), and the partition goes on after it. Records inside r
// that the client fetched before it was declared stay out of the table.
func (p *partState) deleted(r mapping.Range) {
	p.closeRange()
	p.closed = append(p.closed, r)
	p.low, p.next, p.lost = r.High, r.High, r.Interval
}

// release frees the rows the partition holds.
func (p *partState) release() {
	for _, b := range p.batches {
		b.Release()
	}
	p.batches = nil
	if p.rows != nil {
		p.rows.Release()
	}
}

// capped limits an offset to the partition's end in bounded mode.
func (p *partState) capped(offset int64) int64 {
	if p.end >= 0 {
		return max(p.next, min(offset, p.end))
	}
	return offset
}

// session reads the ledger, seeks every partition and consumes until done,
// cancelled, fenced or failed. Partitions the ledger does not have yet are
// started first: one commit records where each begins (a start range, or
// the head of the log lost before it), before anything of them is read, so
// that a restart resumes them there instead of evaluating --start again.
func (s *Sink) session(ctx context.Context) error {
	if err := s.tbl.Refresh(ctx); err != nil {
		return err
	}
	ledger, err := s.tbl.Ledger()
	if err != nil {
		return fmt.Errorf("read ledger of %s: %w", s.tbl.Name(), err)
	}
	next := ledger.Next()
	// Partitions with nothing to do this session still report where they are.
	s.finish(next)
	topic, err := s.broker.Topic(ctx, s.cfg.Topic)
	if err != nil {
		return err
	}
	if err := snapshot.CheckTopicID(s.tbl.Name(), ledger, s.cfg.Topic, topic.ID); err != nil {
		return err
	}
	s.topicID = topic.ID
	wm, err := s.broker.Watermarks(ctx, s.cfg.Topic)
	if err != nil {
		return err
	}
	parts := slices.Sorted(maps.Keys(wm))
	if s.known == nil {
		s.known = map[int32]bool{}
		for _, p := range parts {
			s.known[p] = true
		}
	}
	states := map[int32]*partState{}
	defer func() {
		for _, p := range states {
			p.release()
		}
	}()
	for _, p := range s.cfg.Partitions {
		if !slices.Contains(parts, p) {
			return fmt.Errorf("topic %s has no partition %d (it has %d partitions)", s.cfg.Topic, p, len(parts))
		}
	}
	// The table began the topic in an earlier session when the ledger
	// holds any of its partitions: every record of a partition it does
	// not hold yet was written since (the partition was added while no
	// sink ran, or an older floe never recorded its start).
	begun := slices.ContainsFunc(ledger.Partitions(), func(tp mapping.TopicPartition) bool { return tp.Topic == s.cfg.Topic })
	var starts []mapping.Range
	assign := map[int32]kgo.Offset{}
	for _, p := range parts {
		tp := mapping.TopicPartition{Topic: s.cfg.Topic, Partition: p}
		w := wm[p]
		if s.cfg.Partitions != nil && !slices.Contains(s.cfg.Partitions, p) {
			if _, ok := next[tp]; !ok && !begun && s.cfg.StartOffsets == nil && s.cfg.EndOffsets == nil {
				// --start is evaluated once for the whole topic: the
				// writers of the other partitions resume from here.
				start, _ := s.startOf(p, w, begun)
				starts = append(starts, start...)
			}
			continue
		}
		st := &partState{tp: tp, end: -1}
		if s.cfg.EndOffsets != nil {
			e, ok := s.cfg.EndOffsets[p]
			if !ok {
				continue
			}
			st.end = e
		} else if s.cfg.StopAtEnd {
			st.end = w.LastStable
		}
		pos, resumed := next[tp]
		if !resumed {
			start, ok := s.startOf(p, w, begun)
			if !ok {
				continue
			}
			pos = start[len(start)-1].High
			starts = append(starts, start...)
		}
		st.low, st.next = pos, pos
		if resumed && pos > w.HighWatermark {
			if topic.ID != "" && ledger.TopicID(s.cfg.Topic) == topic.ID {
				// The same topic (its ID says so): a high watermark behind
				// the ledger is a broker catching up after a leader change.
				return &watermarkBehindError{tp: tp, next: pos, high: w.HighWatermark}
			}
			return fmt.Errorf("the ledger of %s is at offset %d of %s, but the partition ends at %d: the topic was deleted and recreated, or its log truncated; "+
				"sink it into a new table (floe will not guess which records are new)", s.tbl.Name(), pos, tp, w.HighWatermark)
		}
		if pos < w.LogStart && !st.done() {
			// Offsets this table should hold were deleted (a resumed
			// partition, or one that began after the table did). Nothing
			// was consumed in this session: a loss fails before reading.
			// Undecided, the partition is read from pos and the fetch
			// decides once the transaction holding it ends.
			if _, err := s.skipDeleted(ctx, st, st.capped(w.LogStart), true); err != nil {
				return err
			}
		}
		if st.done() && len(st.closed) == 0 && st.next == st.low {
			continue
		}
		rb, err := mapping.NewRowBuilder(s.alloc, s.tbl.ArrowSchema())
		if err != nil {
			return err
		}
		st.rows = rb
		states[p] = st
		if !st.done() {
			assign[p] = kgo.NewOffset().At(st.next)
		}
	}
	s.inLedger = nil
	if len(starts) > 0 {
		// A fenced start (another writer started a partition elsewhere)
		// ends the session: the next one resumes from that writer's ledger.
		// An interrupt does not cut it short: it is one small commit.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		err := s.commit(cctx, snapshot.Flush{Ranges: starts})
		cancel()
		if err != nil {
			return err
		}
	}
	for _, st := range states {
		s.inLedger = append(s.inLedger, st.tp)
	}
	if len(states) == 0 {
		return nil
	}
	s.log.Info("sink session started", "partitions", len(states), "consuming", len(assign))

	opts := append(slices.Clone(s.broker.opts),
		kgo.SeedBrokers(s.broker.Seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.cfg.Topic: assign}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records occupy offsets; seeing them lets a range end
		// exactly at a commit marker.
		kgo.KeepControlRecords(),
		// A fetch position below the log start (retention ran) resets to
		// the log start; the offset check below turns the jump into a loss.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	defer cl.Close()
	return s.consume(ctx, cl, states)
}

// startOf returns the ranges that record where partition p, which the
// ledger does not have, begins: a start range at its first offset, or,
// when a replay from the log start finds the head of the log deleted, that
// head as a lost range. ok is false when the run does not sink p (a replay
// whose start offsets do not name it).
//
// --start applies once per topic, when the table begins it (begun false):
// a partition that appears later, while the sink runs or while it was
// stopped, holds only records written since, and starts at offset 0 (its
// first offset, what retention already deleted of it being a loss).
func (s *Sink) startOf(p int32, w Watermarks, begun bool) (start []mapping.Range, ok bool) {
	tp := mapping.TopicPartition{Topic: s.cfg.Topic, Partition: p}
	var pos int64
	switch {
	case (begun || !s.known[p]) && s.cfg.StartOffsets == nil && s.cfg.EndOffsets == nil:
		// Not in a replay, whose end offsets fix the partitions it reads.
		pos = 0
	case s.cfg.StartOffsets != nil:
		if pos, ok = s.cfg.StartOffsets[p]; !ok {
			return nil, false
		}
	case s.cfg.Start == StartLatest:
		pos = w.LastStable
	default:
		pos = w.LogStart
		if pos > 0 {
			if s.stats.HeadLost == nil {
				s.stats.HeadLost = map[int32]int64{}
			}
			s.stats.HeadLost[p] = pos
			if s.cfg.RecordHeadLoss {
				return []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: pos}, Lost: true}}, true
			}
			s.log.Warn("log starts above offset 0: retention deleted the beginning before this table existed",
				"partition", p, "log_start", pos)
		}
	}
	return []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: pos, High: pos}}}, true
}

// skipDeleted handles offsets [p.next, logStart) of a partition that
// retention deleted before they were read. When the broker shows that they
// held only aborted records (ClassifyDeleted), they become an aborted range
// of the ledger, with no row and no loss; otherwise they are a loss (lose).
// mayWait lets an undecided answer (an open transaction holds the log
// start) leave the partition as it is, for a later check; without it,
// undecided is a loss. decided reports whether p moved or the loss was
// recorded. When the broker cannot be asked, the error is returned: a
// failed question is not a loss.
func (s *Sink) skipDeleted(ctx context.Context, p *partState, logStart int64, mayWait bool) (decided bool, err error) {
	v, err := s.broker.ClassifyDeleted(ctx, p.tp.Topic, p.tp.Partition, p.next, logStart)
	if err != nil {
		return false, err
	}
	switch {
	case v.Deleted == DeletedAborted:
		s.log.Info("retention deleted offsets before they were sunk, but only aborted records: nothing was lost",
			"partition", p.tp.Partition, "offsets", mapping.Interval{Low: p.next, High: logStart}.String(), "evidence", v.Evidence)
		p.deleted(mapping.Range{TopicPartition: p.tp, Interval: mapping.Interval{Low: p.next, High: logStart}, Aborted: true})
		return true, nil
	case v.Deleted == DeletedUndecided && mayWait:
		s.log.Info("retention deleted offsets before they were sunk; whether they were committed is known when the open transaction ends",
			"partition", p.tp.Partition, "offsets", mapping.Interval{Low: p.next, High: logStart}.String(), "evidence", v.Evidence)
		return false, nil
	}
	return true, s.lose(p, logStart)
}

// commitTimeout bounds one commit, Parquet writes included: generous
// enough for a large flush to slow storage.
const commitTimeout = 10 * time.Minute

// idleCheck is how long a poll waits before the loop looks around.
const idleCheck = 2 * time.Second

// watermarkBehindError reports a partition whose high watermark is below
// the ledger's next offset although the topic is the one the ledger
// recorded: a new leader that has not caught up yet. It passes on its own,
// so Run retries it like a transient error.
type watermarkBehindError struct {
	tp         mapping.TopicPartition
	next, high int64
}

func (e *watermarkBehindError) Error() string {
	return fmt.Sprintf("%s ends at offset %d on the brokers, below the ledger's next offset %d, although it is the same topic (same topic ID): a leader that has not caught up yet; waiting for it",
		e.tp, e.high, e.next)
}

// errPartitionsChanged ends a live session so that the next one consumes
// partitions added to the topic.
var errPartitionsChanged = errors.New("partitions were added to the topic")

// checkRetention re-reads the watermarks and handles, in every partition
// that made no progress since the previous check, offsets that retention
// deleted before they were read (skipDeleted). An idle partition needs it:
// when everything after its position was deleted, no record arrives to
// reveal the jump, and a live sink would not notice the loss until the
// next record. Only a partition stalled over a whole check period
// qualifies, and only while the client holds no fetched record it has not
// polled, so that records in hand are never declared lost.
// It returns the number of offsets the partitions advanced by.
func (s *Sink) checkRetention(ctx context.Context, cl *kgo.Client, states map[int32]*partState) (int64, error) {
	wm, err := s.broker.Watermarks(ctx, s.cfg.Topic)
	if err != nil {
		return 0, err
	}
	if cl.BufferedFetchRecords() > 0 {
		// The client holds fetched records not polled yet (a poll returns
		// at most its limit, and a flush can hold the loop up): a
		// partition may look stalled with its records in hand. The next
		// check decides.
		for _, st := range states {
			st.checked = -1
		}
		return 0, nil
	}
	var advanced int64
	for _, p := range slices.Sorted(maps.Keys(states)) {
		st := states[p]
		stalled := st.next == st.checked
		if !st.done() && stalled && wm[p].LogStart > st.next {
			before := st.next
			if _, err := s.skipDeleted(ctx, st, st.capped(wm[p].LogStart), true); err != nil {
				return advanced, err
			}
			advanced += st.next - before
		}
		st.checked = st.next
	}
	return advanced, nil
}

// lose handles offsets [p.next, logStart) deleted before they were sunk:
// with --on-data-loss record, the open range closes before them (its rows
// in a batch of their own, so that no data file spans the loss) and they
// become a lost range.
func (s *Sink) lose(p *partState, logStart int64) error {
	lost := mapping.Interval{Low: p.next, High: logStart}
	if lost.Len() <= 0 {
		return nil
	}
	if s.cfg.OnDataLoss != LossRecord {
		return &DataLossError{Partition: p.tp, Lost: lost}
	}
	s.log.Warn("data loss recorded in the ledger: retention deleted offsets before they were sunk",
		"partition", p.tp.Partition, "lost", lost.String())
	p.deleted(mapping.Range{TopicPartition: p.tp, Interval: lost, Lost: true})
	return nil
}

func (s *Sink) consume(ctx context.Context, cl *kgo.Client, states map[int32]*partState) error {
	var (
		pending      int
		pendingBytes int64
		deadline     time.Time // flush deadline, set by the first unflushed offset
		failure      error
	)
	allDone := func() bool {
		for _, p := range states {
			if !p.done() {
				return false
			}
		}
		return true
	}
	dirty := func() bool {
		for _, p := range states {
			if p.next > p.low || len(p.closed) > 0 {
				return true
			}
		}
		return false
	}
	// One flush commits in the background while the loop goes on consuming
	// into fresh builders, so building rows overlaps writing Parquet. At most
	// one flush is in flight: memory stays within twice the flush thresholds.
	var inflight chan error
	wait := func() error {
		if inflight == nil {
			return nil
		}
		err := <-inflight
		inflight = nil
		return err
	}
	flush := func() error {
		if err := wait(); err != nil {
			return err
		}
		if !dirty() {
			return nil
		}
		f := s.take(states)
		pending, pendingBytes, deadline = 0, 0, time.Time{}
		inflight = make(chan error, 1)
		go func() {
			// Commit even when ctx was cancelled: an interrupt flushes what
			// was consumed.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
			defer cancel()
			inflight <- s.commit(cctx, f)
		}()
		return nil
	}
	defer func() { _ = wait() }()

	if dirty() {
		// The session began with something to commit (a loss, or offsets
		// deleted after aborted records): commit it on time even when no
		// record follows.
		deadline = time.Now().Add(s.cfg.FlushInterval)
	}
	bounded := !allDone() && slices.ContainsFunc(slices.Collect(maps.Values(states)), func(p *partState) bool { return p.end >= 0 })
	lastCheck, lastPartitionCheck := time.Now(), time.Now()
	for !allDone() {
		if ctx.Err() != nil {
			break
		}
		select {
		case err := <-inflight:
			// A background commit failed (or finished): learn it now, not
			// at the next flush, so as not to consume for nothing.
			inflight = nil
			if err != nil {
				return errors.Join(err, failure)
			}
		default:
		}
		// Polls wake up regularly even when nothing arrives, to flush on
		// time and to run the checks below.
		wake := time.Now().Add(idleCheck)
		if !deadline.IsZero() && deadline.Before(wake) {
			wake = deadline
		}
		pctx, cancel := context.WithDeadline(ctx, wake)
		fetches := cl.PollRecords(pctx, min(10_000, max(1, s.cfg.FlushRecords-pending)))
		cancel()
		var (
			consumed    int64
			polled      int
			polledBytes int64
		)
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if failure != nil {
				return
			}
			if fp.Err != nil {
				if errors.Is(fp.Err, context.Canceled) || errors.Is(fp.Err, context.DeadlineExceeded) {
					return
				}
				failure = fmt.Errorf("fetch %s/%d: %w", fp.Topic, fp.Partition, fp.Err)
				return
			}
			p := states[fp.Partition]
			if p == nil {
				return
			}
			for _, r := range fp.Records {
				if p.done() {
					break
				}
				if r.Offset < p.next {
					if p.lost.Contains(r.Offset) {
						// Fetched before the watermark check declared
						// these offsets deleted: the ledger says so, and
						// they stay out of the table.
						continue
					}
					// franz-go never returns offsets below the fetch
					// position unless it was reset to the log start
					// because the position was past the log end.
					failure = fmt.Errorf("%s went back from offset %d to %d: the topic was recreated or its log truncated; sink it into a new table", p.tp, p.next, r.Offset)
					return
				}
				if r.Offset > p.next && fp.LogStartOffset > p.next {
					// The jump crosses the log start: retention deleted
					// offsets we had not sunk. Jumps inside the retained
					// log (aborted records, compaction) are normal. The
					// transaction that may hold the log start has ended
					// (a record past it arrived), so the broker can tell
					// whether only aborted records were deleted.
					before := p.next
					if _, err := s.skipDeleted(ctx, p, p.capped(min(fp.LogStartOffset, r.Offset)), false); err != nil {
						failure = err
						return
					}
					consumed += p.next - before
				}
				if p.end >= 0 && r.Offset >= p.end {
					// Offsets up to the end that yielded nothing were
					// aborted records; a record past the end proves the
					// consumer passed them.
					consumed += p.end - p.next
					p.next = p.end
					continue
				}
				consumed += r.Offset + 1 - p.next
				p.next = r.Offset + 1
				if r.Attrs.IsControl() {
					continue
				}
				p.rows.Append(r)
				p.records++
				pending++
				size := mapping.RecordSize(r)
				pendingBytes += size
				polled++
				polledBytes += size
			}
			if p.done() && !p.paused {
				// Records past the end would keep arriving and be dropped.
				cl.PauseFetchPartitions(map[string][]int32{s.cfg.Topic: {p.tp.Partition}})
				p.paused = true
			}
		})
		if consumed > 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(s.cfg.FlushInterval)
			}
			if s.cfg.OnRecords != nil {
				s.cfg.OnRecords(consumed)
			}
		}
		if polled > 0 && s.cfg.OnConsumed != nil {
			s.cfg.OnConsumed(polled, polledBytes)
		}
		if failure != nil {
			break
		}
		// The checks run on a timer, not only when polls come back empty
		// (a busy partition must not starve them), and after this poll's
		// records are counted.
		if time.Since(lastCheck) >= idleCheck && ctx.Err() == nil {
			lastCheck = time.Now()
			var advanced int64
			advanced, failure = s.checkRetention(ctx, cl, states)
			if advanced > 0 {
				if deadline.IsZero() {
					deadline = time.Now().Add(s.cfg.FlushInterval)
				}
				if s.cfg.OnRecords != nil {
					s.cfg.OnRecords(advanced)
				}
			}
			if failure == nil && !bounded && time.Since(lastPartitionCheck) >= s.cfg.PartitionCheck {
				lastPartitionCheck = time.Now()
				failure = s.checkTopic(ctx)
			}
		}
		if failure != nil {
			break
		}
		if pending >= s.cfg.FlushRecords || pendingBytes >= s.cfg.FlushBytes ||
			(!deadline.IsZero() && !time.Now().Before(deadline)) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return errors.Join(failure, err)
	}
	if err := wait(); err != nil {
		return errors.Join(failure, err)
	}
	if failure != nil {
		return failure
	}
	next := map[mapping.TopicPartition]int64{}
	for _, p := range states {
		next[p.tp] = p.next
	}
	s.finish(next)
	return nil
}

// checkTopic looks at the topic again in a live sink: a topic deleted and
// recreated under the sink ends the run (its ledger belongs to the old
// topic), and partitions added to it end the session, so that the next one
// includes them.
func (s *Sink) checkTopic(ctx context.Context) error {
	t, err := s.broker.Topic(ctx, s.cfg.Topic)
	if err != nil {
		// A failed look is tried again at the next check; fetching reports
		// a topic that is gone.
		return nil
	}
	if t.ID != "" && s.topicID != "" && t.ID != s.topicID {
		return &snapshot.TopicIDError{Table: s.tbl.Name(), Topic: s.cfg.Topic, Ledger: s.topicID, Broker: t.ID}
	}
	if s.cfg.Partitions != nil {
		return nil
	}
	for _, p := range t.Partitions {
		if !s.known[p] {
			s.log.Info("partitions were added to the topic; committing and starting a session that includes them", "partitions", len(t.Partitions))
			return errPartitionsChanged
		}
	}
	return nil
}

// take moves every partition's rows and ranges since the last flush into a
// Flush and starts the next ranges where these end.
func (s *Sink) take(states map[int32]*partState) snapshot.Flush {
	f := snapshot.Flush{Batches: map[mapping.TopicPartition][]arrow.RecordBatch{}}
	for _, p := range slices.Sorted(maps.Keys(states)) {
		st := states[p]
		st.closeRange()
		f.Ranges = append(f.Ranges, st.closed...)
		if len(st.batches) > 0 {
			f.Batches[st.tp] = st.batches
		}
		st.closed, st.batches = nil, nil
	}
	return f
}

// commit commits one flush in one snapshot, recording the topic's ID. A
// failure ends the session: the next one resumes from the ledger, so the
// ranges take advanced past are never lost.
func (s *Sink) commit(ctx context.Context, f snapshot.Flush) error {
	if s.topicID != "" {
		f.TopicIDs = map[string]string{s.cfg.Topic: s.topicID}
	}
	res, err := s.tbl.Commit(ctx, f, snapshot.CommitOptions{Writer: s.cfg.Writer, Logger: s.log, InLedger: s.inLedger})
	if err != nil {
		return err
	}
	s.stats.Commits++
	s.stats.Records += res.Rows
	s.stats.Files += res.Files
	s.log.Info("committed", "snapshot", res.Commit.SnapshotID, "rows", res.Rows, "files", res.Files,
		"ranges", len(res.Commit.Ranges), "attempts", res.Attempts, "write", res.WriteTime.Round(time.Millisecond), "commit", res.CommitTime.Round(time.Millisecond))
	if s.cfg.OnCommit != nil {
		s.cfg.OnCommit(res)
	}
	s.commitGroupOffsets(ctx, res.Commit.Ranges)
	return nil
}

// commitGroupOffsets mirrors the committed ranges into the consumer group,
// so that standard lag tooling (kafka-consumer-groups, Burrow, exporters)
// sees the sink's progress. The group is never read back: the ledger alone
// says where to resume, so a failure here only costs a warning.
func (s *Sink) commitGroupOffsets(ctx context.Context, ranges []mapping.Range) {
	if s.cfg.Group == "" {
		return
	}
	var offs kadm.Offsets
	for _, r := range ranges {
		if o, ok := offs.Lookup(r.Topic, r.Partition); !ok || r.High > o.At {
			offs.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.High, LeaderEpoch: -1})
		}
	}
	resp, err := s.broker.adm.CommitOffsets(ctx, s.cfg.Group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		s.log.Warn("could not mirror committed offsets into the consumer group (resuming does not depend on it)", "group", s.cfg.Group, "err", err)
	}
}

func (s *Sink) finish(next map[mapping.TopicPartition]int64) {
	if s.stats.Next == nil {
		s.stats.Next = map[mapping.TopicPartition]int64{}
	}
	for tp, n := range next {
		if tp.Topic == s.cfg.Topic {
			s.stats.Next[tp] = n
		}
	}
}
