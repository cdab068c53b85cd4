package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// commitTimeout bounds one commit, Parquet writes included: generous
// enough for a large flush to slow storage.
const commitTimeout = 10 * time.Minute

// idleCheck is how long a poll waits before the loop looks around, and how
// often the retention check runs.
const idleCheck = 2 * time.Second

// maxSchemaMoved bounds the sessions in a row that end without a commit
// because another writer's schema change moved under their files.
const maxSchemaMoved = 20

// maxFlushFilesGone bounds the sessions in a row that end without a commit
// because a file of their flush was deleted before it
// (snapshot.FlushFilesGoneError).
const maxFlushFilesGone = 3

// errPartitionsChanged ends a live session so that the next one consumes
// partitions added to the topic.
var errPartitionsChanged = errors.New("partitions were added to the topic")

// errLedgerBack ends a live session whose table's ledger went back below
// what it committed (a published replay, a rollback), so that the next one
// reads those offsets again from the ledger.
var errLedgerBack = errors.New("the table's ledger went back")

// ledgerCheck is how often a live session idle at the end of the log
// reads its table's ledger for a publish or a rollback that moved it back.
const ledgerCheck = 10 * time.Second

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

// session is one pass of a sink from the ledger: the partitions it reads,
// the consumer that reads them, and the flush being built and committed.
// Each round polls, feeds the records to the partitions' accounting
// (partition.observe), runs the periodic checks and flushes when a
// threshold is reached.
//
// Rows are streamed into data files as they are consumed: when a
// partition's rows reach a batch's worth (streamBatchRows, or
// streamBatchBytes) they go to that partition's open stream
// (snapshot.Stream), which encodes Parquet in a goroutine of its own, so
// that decoding and encoding use two cores and a flush's rows are never
// all in memory. A flush closes the streams and commits their files in the
// background while the loop consumes into new ones; at most one flush is
// in flight. State tables (--fold), whose commits rewrite files, get their
// rows as batches at the flush instead.
type session struct {
	s *Sink
	// ledgerChecked is when the session last read its table's ledger
	// while idle (checkLedgerBack).
	ledgerChecked time.Time
	// debeziumChecks counts the records it looked at for Debezium change
	// events (lookForEvents), up to maxDebeziumChecks.
	debeziumChecks int
	cl             *kgo.Client
	parts          map[int32]*partition
	bounded        bool
	// ends are the end offsets of a bounded run's partitions, those the
	// ledger held to their end when the session began (not in parts) too.
	ends map[int32]int64
	// gm is the session's group membership in group mode (Config.Group),
	// nil otherwise.
	gm *groupMember

	pending      int
	pendingBytes int64
	deadline     time.Time  // flush deadline, set by the first unflushed offset
	inflight     *commitRun // the flush committing in the background, if any

	// rowSchema is the Arrow schema the partitions' rows are built for, and
	// writerSchema its Iceberg schema when the table's columns evolve with
	// the records (typed values or keys; nil otherwise). builtAt is the
	// decoder version they were made for.
	rowSchema    *arrow.Schema
	writerSchema *iceberg.Schema
	builtAt      int
	// deadLetters is the Arrow schema of the dead-letter table's rows; nil
	// without one.
	deadLetters *arrow.Schema

	// streaming is set for append tables: the other modes' commits read
	// the flush's rows (folds rewrite files, upserts pick each key's
	// latest row). base is the table as loaded
	// when no commit was in flight, which the writers of a flush stage on;
	// writer is the current flush's (made at its first stream), streams
	// its open streams by partition, and files the files of ranges it
	// already closed (a lost or aborted range cut a partition's rows).
	streaming bool
	base      *table.Table
	writer    *snapshot.Writer
	streams   map[int32]*snapshot.Stream
	files     map[int32][]iceberg.DataFile
	// held counts the record bytes of the rows that partitions without a
	// stream of their own hold; at the sink's spill bytes they move to
	// spill, the flush's spill lane (spillRows), which laned names the
	// partitions of. spillLost is set when a group member gave up a laned
	// partition: the lane is gone with its rows, so the flush must not be
	// committed, and the member reads its partitions again (errSpillLost).
	held      int64
	spill     *lane
	laned     map[int32]bool
	spillLost bool
	// carry is the rest of a poll that stopped (poll: a new column, or a
	// reservation due), read by the next poll, after the loop flushed or
	// reserved, before it fetches more. Fetched again instead, the records
	// could be gone meanwhile (retention), and the sink would report the
	// loss of records it had read.
	carry *carried
	// reserved is the last reservation of the writer schema's columns
	// (Sink.reserveSchema; reserve).
	reserved reservation
}

// carried is what a stopped poll left to read (session.carry): the
// records of parts (the first cut to those after the stop), fetched by the
// poll whose fetches it holds (recycled once read) when the group had made
// polledAt adoptions.
type carried struct {
	fetches  kgo.Fetches
	parts    []kgo.FetchTopicPartition
	polledAt uint64
	// assigned is the group's assignments to this member by then.
	assigned uint64
	// reserve is set when the poll stopped for the loop to reserve the
	// flush's columns (errSchemaReserve), not to flush (errSchemaFlush).
	reserve bool
}

// deadHeld is the record bytes and reasons of the dead letters the
// partitions hold, which wait for the flush's commit: at the sink's spill
// bytes an append table's flush ends (after the poll that reached them),
// so that bad records are held no longer than the rows of a wide topic.
func (ss *session) deadHeld() int64 {
	var n int64
	for _, pt := range ss.parts {
		n += pt.deadBytes
	}
	return n
}

// A partition's rows go to its stream in batches of this many rows or
// record bytes, whichever comes first: the rows a session holds per
// partition, besides the encoders' row groups.
const (
	streamBatchRows  = 8 * 1024
	streamBatchBytes = 4 << 20
)

// defaultSpillBytes is the most record bytes that partitions without a
// stream of their own hold before their rows move to the flush's spill
// lane. A flush of 1,000 quiet partitions holds them, not its 128 MiB of
// records: with a flush committing in the background while the next is
// read, the sink's peak stays under 300 MiB (BenchmarkSinkProcess with
// FLOE_BENCH_PARTITIONS=1000).
const defaultSpillBytes = 16 << 20

// maxOwnStreams is the most streams of their own that partitions of a
// flush have open at once: each holds a stream batch and a row group's
// pages while it encodes (up to streamBatchBytes and streamRowGroupBytes),
// so 100 busy partitions each with its own would hold several hundred MiB.
// The rows of busy partitions past them go to the spill lane, whose files
// they share. Eight keep both cores encoding. A partition that has files
// of its own in the flush (a loss ended its stream) opens another when it
// needs one, whatever the count: its rows cannot join the lane.
const maxOwnStreams = 8

// A fetch holds at most fetchMaxBytes (it waits decoded in the client
// until it is polled: its size is part of the sink's memory), and at most
// fetchMaxPartitionBytes of one partition: a fetch spans several
// partitions, so that their streams encode in parallel. Otherwise one
// partition's well-compressed records fill a whole fetch (tens of
// thousands of records), its stream alone encodes them, and the loop
// waits for it while the others idle.
const (
	fetchMaxBytes          = 1 << 20
	fetchMaxPartitionBytes = fetchMaxBytes / 4
)

// errSchemaFlush ends a flush early: a record needs columns that the
// flush's open streams do not have, so the flush is committed first and
// the record read into the next one.
var errSchemaFlush = errors.New("the writer schema changed while the flush's files are open")

// errSchemaReserve stops a poll at a row that would open the flush's
// first file, whose columns the sink commits ahead of it
// (Sink.reserveSchema): the row is counted, but its partition's rows move
// on (place) after the loop has committed the columns (session.reserve).
var errSchemaReserve = errors.New("the flush's first file waits for its columns to be committed")

// errSpillLost ends a group member's flush whose spill lane went with a
// partition the group took away (session.drop): the rows that the lane's
// other partitions spilled into it went too, so their ranges must not be
// committed. Like a fence, it makes the member take its partitions on
// again from the ledger (session.reset), but it is not counted as one.
var errSpillLost = fmt.Errorf("%w: a partition given up shared the flush's spill lane, which held rows of the member's other partitions", snapshot.ErrFenced)

// brokenRowsError is a failure of the row builders with a record already
// counted in its partition's open range, and possibly half appended: the
// session ends without its final flush (which would commit the record's
// offset without its row), and the next reads those records again from
// the ledger.
type brokenRowsError struct{ err error }

func (e *brokenRowsError) Error() string { return e.err.Error() }
func (e *brokenRowsError) Unwrap() error { return e.err }

// session reads the ledger, seeks every partition and consumes until done,
// cancelled, fenced or failed.
func (s *Sink) session(ctx context.Context) error {
	ss, err := s.open(ctx)
	if ss != nil {
		defer ss.close()
	}
	if err != nil || ss == nil {
		return err
	}
	return ss.consume(ctx)
}

// open reads the ledger and the topic, and returns the session that reads
// the partitions with something to do (nil when none has). Partitions the
// ledger does not have yet are started first: one commit records where
// each begins (a start range, or the head of the log lost before it),
// before anything of them is read, so that a restart resumes them there
// instead of evaluating --start again.
//
// In group mode the session starts with no partition: the group's
// coordinator assigns them, and each assignment reads the ledger again
// (session.adopt).
func (s *Sink) open(ctx context.Context) (*session, error) {
	// Recorded before anything is committed, at every session's start: a
	// catalog away for it is retried as the session's other steps are
	// (it stopped the sink at once, found by review); once recorded, the
	// table's settings equal the sink's and nothing is written.
	if err := s.recordDebezium(ctx); err != nil {
		return nil, err
	}
	ss := &session{s: s, parts: map[int32]*partition{}, ends: map[int32]int64{}, streaming: s.tbl.Mode() == mapping.ModeAppend,
		streams: map[int32]*snapshot.Stream{}, files: map[int32][]iceberg.DataFile{}}
	if s.cfg.Group != "" {
		return ss, ss.joinGroup(ctx)
	}
	if err := s.tbl.Refresh(ctx); err != nil {
		return nil, err
	}
	if err := s.reconcileDeadLetters(ctx); err != nil {
		return nil, err
	}
	ss.base = s.tbl.Iceberg()
	fail := func(err error) (*session, error) {
		ss.close()
		return nil, err
	}
	if err := ss.startWriter(); err != nil {
		return nil, err
	}
	st, err := s.readStart(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkPartitions(st.topic, s.cfg.Partitions); err != nil {
		return nil, err
	}
	var starts []mapping.Range
	assign := map[int32]kgo.Offset{}
	covered := 0 // the partitions the run reads, those at their end too
	for _, p := range slices.Sorted(maps.Keys(st.wm)) {
		if s.cfg.Partitions != nil && !slices.Contains(s.cfg.Partitions, p) {
			starts = append(starts, st.startElsewhere(s, p)...)
			continue
		}
		if _, ok := s.cfg.EndOffsets[p]; ok || s.cfg.EndOffsets == nil {
			covered++
		}
		pt, start, err := ss.newPart(ctx, st, p)
		starts = append(starts, start...)
		if err != nil {
			return fail(err)
		}
		if pt == nil {
			continue
		}
		ss.parts[p] = pt
		if !pt.done() {
			assign[p] = kgo.NewOffset().At(pt.next)
			ss.bounded = ss.bounded || pt.end >= 0
		}
	}
	s.inLedger = nil
	if len(starts) > 0 {
		// A fenced start (another writer started a partition elsewhere)
		// ends the session: the next one resumes from that writer's ledger.
		if err := s.commitStarts(ctx, starts); err != nil {
			return fail(err)
		}
	}
	for _, pt := range ss.parts {
		s.inLedger = append(s.inLedger, pt.tp)
	}
	if len(ss.parts) == 0 {
		return fail(nil)
	}
	// Every partition the session covers, and those with records to read:
	// partitions counting only the latter, a new user took the others for
	// missing.
	s.log.Info("sink session started", "partitions", covered, "to_read", len(assign), "flush_records", s.cfg.FlushRecords)
	if s.cfg.OnSession != nil {
		s.cfg.OnSession()
	}
	if ss.cl, err = kgo.NewClient(s.consumerOpts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.cfg.Topic: assign}))...); err != nil {
		return fail(fmt.Errorf("create consumer: %w", err))
	}
	return ss, nil
}

// consumerOpts are the options of the session's consumer, with how it
// gets its partitions.
func (s *Sink) consumerOpts(which ...kgo.Opt) []kgo.Opt {
	// The fetch sizes come first: the broker connection's own options
	// (Dial) may set others.
	opts := append([]kgo.Opt{kgo.FetchMaxBytes(fetchMaxBytes), kgo.FetchMaxPartitionBytes(fetchMaxPartitionBytes)}, s.broker.opts...)
	return append(append(opts,
		kgo.SeedBrokers(s.broker.Seeds...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records occupy offsets; seeing them lets a range end
		// exactly at a commit marker.
		kgo.KeepControlRecords(),
		// A fetch position below the log start (retention ran) resets to
		// the log start; partition.observe turns the jump into a deletion.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithPools(&s.fetchPool),
	), which...)
}

// commitStarts commits the start ranges of partitions the ledger did not
// have. An interrupt does not cut it short: it is one small commit.
func (s *Sink) commitStarts(ctx context.Context, starts []mapping.Range) error {
	// After the hold, which may last as long as a commit's timeout.
	s.tbl.AwaitPublish(ctx, s.log)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := s.commit(cctx, snapshot.Flush{Ranges: starts}, s.inLedger); err != nil {
		return err
	}
	// The run's next offsets include the partitions begun: a run that
	// reads nothing after them reports where they start.
	s.finish(highs(starts))
	return nil
}

// highs returns each partition's highest offset past ranges.
func highs(ranges []mapping.Range) map[mapping.TopicPartition]int64 {
	next := make(map[mapping.TopicPartition]int64, len(ranges))
	for _, r := range ranges {
		next[r.TopicPartition] = max(next[r.TopicPartition], r.High)
	}
	return next
}

// startState is what the ledger and the brokers say when partitions are
// taken on: the ledger's next offsets, the topic and its watermarks.
type startState struct {
	ledger mapping.Summary
	next   map[mapping.TopicPartition]int64
	topic  Topic
	wm     map[int32]Watermarks
	// begun is set when the ledger holds any partition of the topic: the
	// table began the topic in an earlier session, and every record of a
	// partition it does not hold yet was written since (the partition was
	// added while no sink ran, or an older floe never recorded its start).
	// It is set too for a topic created while this process watched
	// (Config.NewTopic).
	begun  bool
	policy startPolicy
}

// readStart reads the ledger (of the table as last loaded) and the topic.
func (s *Sink) readStart(ctx context.Context) (startState, error) {
	ledger, err := s.tbl.Summary(ctx, 0)
	if err != nil {
		return startState{}, fmt.Errorf("read ledger of %s: %w", s.tbl.Name(), err)
	}
	st := startState{ledger: ledger, next: ledger.Next(),
		policy: startPolicy{start: s.cfg.Start, offsets: s.cfg.StartOffsets, replay: s.cfg.EndOffsets != nil, recordHeadLoss: s.cfg.RecordHeadLoss}}
	// Partitions with nothing to do this session still report where they are.
	s.finish(st.next)
	if st.topic, err = s.broker.Topic(ctx, s.cfg.Topic); err != nil {
		return startState{}, err
	}
	if err := snapshot.CheckTopicID(s.tbl.Name(), ledger, s.cfg.Topic, st.topic.ID); err != nil {
		return startState{}, err
	}
	s.topicID = st.topic.ID
	if st.wm, err = s.broker.Watermarks(ctx, s.cfg.Topic); err != nil {
		return startState{}, err
	}
	if s.known == nil {
		s.known = map[int32]bool{}
		for p := range st.wm {
			s.known[p] = true
		}
	}
	st.begun = s.cfg.NewTopic || slices.ContainsFunc(ledger.Partitions(), func(tp mapping.TopicPartition) bool { return tp.Topic == s.cfg.Topic })
	return st, nil
}

// startElsewhere returns the start of partition p, which another process
// sinks, when the table begins the topic now: --start is evaluated once
// for the whole topic, and the other writers resume from here.
func (st startState) startElsewhere(s *Sink, p int32) []mapping.Range {
	tp := mapping.TopicPartition{Topic: s.cfg.Topic, Partition: p}
	if _, resumed := st.next[tp]; resumed || st.begun || s.cfg.StartOffsets != nil || s.cfg.EndOffsets != nil {
		return nil
	}
	start, _ := s.begin(st.policy, tp, st.wm[p], false)
	return start
}

// newPart returns the accounting of partition p, resumed at the ledger's
// next offset or, when the ledger does not have it, begun where the start
// policy says (start holds the ranges that record that, to commit before
// anything of p is read). pt is nil when the run does not read p or p has
// nothing to do.
func (ss *session) newPart(ctx context.Context, st startState, p int32) (pt *partition, start []mapping.Range, err error) {
	s := ss.s
	tp := mapping.TopicPartition{Topic: s.cfg.Topic, Partition: p}
	w := st.wm[p]
	end := int64(-1)
	if s.cfg.EndOffsets != nil {
		e, ok := s.cfg.EndOffsets[p]
		if !ok {
			return nil, nil, nil
		}
		end = e
	} else if s.cfg.StopAtEnd {
		end = w.LastStable
	}
	pos, resumed := st.next[tp]
	if !resumed {
		var ok bool
		if start, ok = s.begin(st.policy, tp, w, st.begun || !s.known[p]); !ok {
			return nil, nil, nil
		}
		pos = start[len(start)-1].High
	}
	if resumed && pos > w.HighWatermark {
		if st.topic.ID != "" && st.ledger.TopicID(s.cfg.Topic) == st.topic.ID {
			// The same topic (its ID says so): a high watermark behind
			// the ledger is a broker catching up after a leader change.
			return nil, nil, &watermarkBehindError{tp: tp, next: pos, high: w.HighWatermark}
		}
		return nil, nil, fmt.Errorf("the ledger of %s is at offset %d of %s, but the partition ends at %d: the topic was deleted and recreated, or its log truncated; "+
			"sink it into a new table (floe will not guess which records are new)", s.tbl.Name(), pos, tp, w.HighWatermark)
	}
	pt = newPartition(tp, pos, end)
	if end >= 0 {
		ss.ends[p] = end
	}
	if pos < w.LogStart && !pt.done() {
		// Offsets this table should hold were deleted (a resumed
		// partition, or one that began after the table did). Nothing
		// was consumed in this session: a loss fails before reading.
		// Undecided, the partition is read from pos and the fetch
		// decides once the transaction holding it ends.
		if _, err := s.skipDeleted(ctx, pt, pt.capped(w.LogStart), true); err != nil {
			return nil, start, err
		}
	}
	if pt.done() && !pt.dirty() {
		return nil, start, nil
	}
	if pt.rows, err = ss.newRows(); err != nil {
		return nil, start, err
	}
	if ss.deadLetters != nil {
		if pt.deadLetters, err = mapping.NewDeadLetterBuilder(s.alloc, ss.deadLetters); err != nil {
			pt.release()
			return nil, start, err
		}
	}
	return pt, start, nil
}

// begin is startPolicy.begin for the sink: it reports a head of the log
// deleted before the table existed (Stats.HeadLost, and a warning when it
// is not recorded as lost).
func (s *Sink) begin(policy startPolicy, tp mapping.TopicPartition, w Watermarks, fresh bool) ([]mapping.Range, bool) {
	start, headDeleted, ok := policy.begin(tp, w, fresh)
	if headDeleted > 0 {
		if s.stats.HeadLost == nil {
			s.stats.HeadLost = map[int32]int64{}
		}
		s.stats.HeadLost[tp.Partition] = headDeleted
		if !policy.recordHeadLoss {
			s.log.Warn("log starts above offset 0: retention deleted the beginning before this table existed",
				"partition", tp.Partition, "log_start", headDeleted)
		}
	}
	return start, ok
}

// close stops the consumer, frees the rows the session holds, and removes
// the files of a flush that was not handed to a commit.
func (ss *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if gm := ss.gm; gm != nil {
		// Leaving the group revokes every partition: what was consumed is
		// committed already, or is not to be.
		gm.mu.Lock()
		gm.closing = true
		gm.mu.Unlock()
		if gm.stopContact != nil {
			gm.stopContact()
		}
		// The member leaves the group: it owns nothing now. Stats.Owned
		// keeps what it owned, for the summary.
		if f := ss.s.cfg.OnOwned; f != nil {
			f(nil)
		}
		// The flush in flight hands its offsets to the mirror when it
		// commits: the mirror closes after it.
		_ = ss.wait()
		if m := ss.s.mirror; m != nil {
			m.close()
			ss.s.mirror = nil
		}
	}
	if ss.cl != nil {
		ss.cl.Close()
	}
	_ = ss.wait()
	ss.removeDoomed(ctx)
	for _, st := range ss.streams {
		st.Abort(ctx, ss.s.log)
	}
	if ss.spill != nil {
		ss.spill.st.Abort(ctx, ss.s.log)
	}
	for _, fs := range ss.files {
		ss.s.tbl.RemoveFiles(ctx, ss.s.log, fs)
	}
	ss.streams, ss.files, ss.spill = nil, nil, nil
	for _, pt := range ss.parts {
		pt.release()
	}
}

func (ss *session) allDone() bool {
	if ss.gm != nil {
		// A member's partitions come and go; it runs until stopped.
		return false
	}
	for _, pt := range ss.parts {
		if !pt.done() {
			return false
		}
	}
	return true
}

// holdsRows reports rows held for the flush: one that commits only
// ranges or dead letters writes no data file, and needs no reservation.
func (ss *session) holdsRows() bool {
	for _, pt := range ss.parts {
		if pt.holdsRows() {
			return true
		}
	}
	return false
}

func (ss *session) dirty() bool {
	for _, pt := range ss.parts {
		if pt.dirty() {
			return true
		}
	}
	return false
}

// consume polls, accounts and flushes until every partition is done (a
// bounded run), ctx ends (what was consumed is flushed and committed), a
// commit fails, or a check ends the session.
func (ss *session) consume(ctx context.Context) error {
	s := ss.s
	if ss.gm != nil {
		// Rebalance callbacks run only while the loop waits in a poll.
		ss.gm.mu.Lock()
		defer ss.gm.mu.Unlock()
	}
	defer func() { _ = ss.wait() }()
	if ss.dirty() {
		// The session began with something to commit (a loss, or offsets
		// deleted after aborted records): commit it on time even when no
		// record follows.
		ss.deadline = time.Now().Add(s.cfg.FlushInterval)
	}
	var failure error
	lastCheck, lastPartitionCheck := time.Now(), time.Now()
	for !ss.allDone() && ctx.Err() == nil {
		if run := ss.inflight; run != nil && run.finished() {
			// A background commit failed (or finished): learn it now, not
			// at the next flush, so as not to consume for nothing.
			ss.inflight = nil
			if err := ss.survive(ctx, run.err); err != nil {
				return err
			}
		}
		ss.removeDoomed(ctx)
		if failure = ss.poll(ctx); failure != nil {
			break
		}
		if c := ss.carry; c != nil && c.reserve {
			if err := ss.survive(ctx, ss.reserve(ctx, ss.base, true)); err != nil {
				return err
			}
		}
		// The checks run on a timer, not only when polls come back empty
		// (a busy partition must not starve them), and after this poll's
		// records are counted.
		if time.Since(lastCheck) >= idleCheck && ctx.Err() == nil {
			lastCheck = time.Now()
			failure = ss.checkRetention(ctx)
			if failure == nil && !ss.bounded && time.Since(lastPartitionCheck) >= s.cfg.PartitionCheck {
				lastPartitionCheck = time.Now()
				failure = s.checkTopic(ctx)
			}
			if failure != nil {
				break
			}
		}
		if ss.pending >= s.cfg.FlushRecords || ss.pendingBytes >= s.cfg.FlushBytes ||
			(ss.streaming && ss.deadHeld() >= s.spillBytes) || ss.schemaMoved() ||
			(!ss.deadline.IsZero() && !time.Now().Before(ss.deadline)) {
			err := ss.waitReleased()
			if err == nil && ss.reserveDue(ss.s.tbl.Iceberg()) && ss.holdsRows() {
				// The writer that the flush's lane may open stages on the
				// table as it is now (flush).
				err = ss.reserve(ctx, ss.s.tbl.Iceberg(), true)
			}
			if err == nil {
				err = ss.flush(ctx)
			}
			if err := ss.survive(ctx, err); err != nil {
				return err
			}
		}
	}
	if _, broken := errors.AsType[*brokenRowsError](failure); broken {
		if err := ss.wait(); err != nil {
			return withFailure(failure, err)
		}
		return failure
	}
	if err := ss.flush(ctx); err != nil {
		return withFailure(failure, err)
	}
	if err := ss.wait(); err != nil {
		return withFailure(failure, err)
	}
	if failure != nil {
		return failure
	}
	// The table's positions, not this session's: a writer fenced by its
	// last commit holds positions the table never took.
	ledger, err := s.tbl.Summary(ctx, 0)
	if err != nil {
		return fmt.Errorf("read ledger of %s: %w", s.tbl.Name(), err)
	}
	next := ledger.Next()
	s.finish(next)
	if ss.bounded && ctx.Err() != nil {
		// Interrupted: a batch job that stopped short must not read as
		// done, whether in a partition of the session or in one the
		// ledger held to its end when it began.
		s.noteUnfinished(next, ss.ends)
	} else if ss.bounded {
		// Every partition reached its end: one the ledger holds below it
		// now went back during the run (a rollback, a published replay),
		// and a partition done when the session began has no commit to
		// notice it (from a review: the run ended as done).
		for _, p := range slices.Sorted(maps.Keys(ss.ends)) {
			if n := next[ss.tp(p)]; n < ss.ends[p] {
				s.log.Info("the table's ledger went back under the sink (a published replay, or a rollback): starting a session from the ledger, which reads those offsets again",
					"partition", p, "to", n, "end", ss.ends[p])
				return errLedgerBack
			}
		}
	}
	return nil
}

// poll waits for records (until the flush deadline, and never longer than
// idleCheck, so that the loop flushes on time and runs its checks) and
// feeds them to the partitions. It returns what ends the session: a fetch
// error, a log that went back, or a data loss.
func (ss *session) poll(ctx context.Context) error {
	s := ss.s
	carry := ss.carry
	ss.carry = nil
	var (
		fetches  kgo.Fetches
		polledAt uint64
		assigned uint64
	)
	if carry != nil {
		// What a stop left: read on, now that the loop flushed or
		// reserved, before fetching more.
		fetches, polledAt, assigned = carry.fetches, carry.polledAt, carry.assigned
	} else {
		wake := time.Now().Add(idleCheck)
		if !ss.deadline.IsZero() && ss.deadline.Before(wake) {
			wake = ss.deadline
		}
		pctx, cancel := context.WithDeadline(ctx, wake)
		if ss.gm != nil {
			polledAt, assigned = ss.gm.adoptions, ss.gm.assignments
			ss.gm.mu.Unlock()
		}
		fetches = ss.cl.PollRecords(pctx, min(10_000, max(1, s.cfg.FlushRecords-ss.pending)))
		cancel()
		// franz-go's time of a timestamp outside 1677..2262 overflowed.
		fetches.EachRecord(func(r *kgo.Record) { r.Timestamp = mapping.RecordTime(r.Timestamp) })
		if ss.gm != nil {
			ss.gm.mu.Lock()
		}
	}
	// Every record kept is copied into rows by the time poll returns: the
	// fetch's memory goes back to the pool (fetchPool), unless a stop
	// carries some of it to the next poll.
	defer func() {
		if ss.carry == nil {
			fetches.EachRecord(func(r *kgo.Record) { r.Recycle() })
		}
	}()
	var reseek map[int32]kgo.EpochOffset
	if ss.gm != nil {
		// What a rebalance callback met while the loop waited.
		if err := ss.gm.failed; err != nil {
			ss.gm.failed = nil
			// A reset seeks every partition again: the records in hand
			// were fetched for positions it abandoned.
			return ss.survive(ctx, err)
		}
		reseek = map[int32]kgo.EpochOffset{}
		defer func() {
			if len(reseek) > 0 {
				ss.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{s.cfg.Topic: reseek})
			}
		}()
	}
	var (
		failure     error
		advanced    int64
		polled      int
		polledBytes int64
		// stop is set when a record needs columns the flush's open files
		// lack (errSchemaFlush: it and the records after it wait in
		// ss.carry while the loop commits the files, schemaMoved), or
		// when a row would open the flush's first file before its
		// columns are reserved (errSchemaReserve: the records after it
		// wait while the loop reserves them). The poll commits nothing
		// itself: it would wait for the catalog holding the group lock,
		// and take a failed commit for the session's.
		stop *carried
	)
	// stopAt stops the poll at record i of fp: what is left waits in
	// ss.carry.
	stopAt := func(fp kgo.FetchTopicPartition, i int, reserve bool) {
		fp.Records = fp.Records[i:]
		stop = &carried{fetches: fetches, parts: []kgo.FetchTopicPartition{fp}, polledAt: polledAt, assigned: assigned, reserve: reserve}
	}
	feed := func(fp kgo.FetchTopicPartition) {
		if stop != nil {
			stop.parts = append(stop.parts, fp)
			return
		}
		if failure != nil {
			return
		}
		if fp.Err != nil {
			err := s.broker.authorization(fp.Err, "Read", s.cfg.Topic, s.cfg.Group)
			_, denied := errors.AsType[*AuthorizationError](err)
			// A missing ACL is no reason to rejoin: it stays missing.
			if refused := groupRefused(fp.Err, s.cfg.Group, s.cfg.SessionTimeout); refused != nil {
				failure = refused
				return
			}
			if _, kicked := errors.AsType[*kgo.ErrGroupSession](fp.Err); kicked && ss.gm != nil && !denied {
				// The group dropped this member (paused or cut off past the
				// session timeout): franz-go has called the lost callback,
				// which dropped its partitions, and rejoins on its own.
				msg := "the consumer group dropped this member; its partitions were given up, rejoining"
				if brokersUnreachable(fp.Err) {
					// franz-go ends the member's session when its requests
					// to the coordinator fail: the group has not answered
					// anything (found by an operator).
					msg = unreachableMessage(len(ss.gm.owned) > 0, ss.gm.sessionTimeout)
				} else if errors.Is(fp.Err, kerr.GroupIDNotFound) || errors.Is(fp.Err, kerr.UnknownMemberID) {
					// What a member of the other protocol gets, at every
					// rejoin (found by an operator).
					msg += "; if this repeats, the group's members may use the other --group-protocol: give them all the same"
				}
				s.log.Warn(msg, "group", s.cfg.Group, "err", fp.Err)
				// Not when the group assigned this member again since the
				// poll began and it holds what it was assigned: the notice
				// is of the drop before. One assigned partitions that
				// holds none was dropped again: a member of the other
				// --group-protocol is assigned and dropped at every
				// rejoin, and read as ready throughout (a user's run). A
				// standby, assigned none, holds none either way.
				again := len(ss.gm.owned)+len(ss.gm.taking) == 0 && !ss.gm.emptyAssigned
				if s.cfg.OnGroupDropped != nil && (ss.gm.assignments == assigned || again) {
					s.cfg.OnGroupDropped(fmt.Errorf("%s: %w", msg, fp.Err))
				}
				return
			}
			if !errors.Is(fp.Err, context.Canceled) && !errors.Is(fp.Err, context.DeadlineExceeded) {
				if fp.Topic == "" { // franz-go's notice of a group error
					failure = fmt.Errorf("consumer group %s: %w", s.cfg.Group, err)
				} else {
					failure = fmt.Errorf("fetch %s/%d: %w", fp.Topic, fp.Partition, err)
				}
			}
			return
		}
		pt := ss.parts[fp.Partition]
		if pt == nil {
			return
		}
		if ss.gm != nil && pt.adopted > polledAt {
			// Taken on while this poll waited (or the flush that a stop
			// waited for): what it returned may have been fetched before,
			// for an earlier ownership. Fetch again from the ledger's
			// position.
			reseek[fp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: pt.next}
			return
		}
		for i := 0; i < len(fp.Records); i++ {
			r := fp.Records[i]
			st, n, deleted := pt.observe(r.Offset, r.Attrs.IsControl(), fp.LogStartOffset)
			if st == stepDeleted {
				// The transaction that may hold the log start has ended (a
				// record past it arrived), so the broker can tell whether
				// only aborted records were deleted.
				before := pt.next
				if err := ss.endRange(ctx, pt); err != nil {
					failure = err
					return
				}
				if _, err := s.skipDeleted(ctx, pt, deleted.High, false); err != nil {
					failure = err
					return
				}
				advanced += pt.next - before
				st, n, _ = pt.observe(r.Offset, r.Attrs.IsControl(), fp.LogStartOffset)
			}
			advanced += n
			switch st {
			case stepBack:
				failure = fmt.Errorf("%s went back from offset %d to %d: the topic was recreated or its log truncated; sink it into a new table", pt.tp, pt.next, r.Offset)
				return
			case stepRow:
				ss.lookForEvents(r)
				row, err := true, error(nil)
				if s.dec == nil {
					if err = ss.appendRaw(pt, r); err != nil {
						failure = err
						return
					}
				} else if row, err = ss.appendDecoded(ctx, pt, r); err != nil {
					advanced--
					if err == errSchemaFlush {
						stopAt(fp, i, false)
						return
					}
					failure = err
					return
				}
				size := mapping.RecordSize(r)
				pt.bytes += size
				// A dead letter waits for the commit (deadHeld), whatever
				// the spill does with the rows.
				reserve := false
				if ss.streaming && row {
					err := ss.place(ctx, pt, size)
					reserve = err == errSchemaReserve
					if err != nil && !reserve {
						failure = err
						return
					}
				}
				ss.pending++
				ss.pendingBytes += size
				polled++
				polledBytes += size
				if reserve {
					stopAt(fp, i+1, true)
					return
				}
			}
			if st == stepDone {
				break
			}
		}
		if pt.done() && !pt.paused {
			// Records past the end would keep arriving and be dropped.
			ss.cl.PauseFetchPartitions(map[string][]int32{s.cfg.Topic: {pt.tp.Partition}})
			pt.paused = true
		}
	}
	if carry != nil {
		for _, fp := range carry.parts {
			feed(fp)
		}
	} else {
		fetches.EachPartition(feed)
	}
	ss.carry = stop
	ss.advanced(advanced)
	if polled > 0 && s.cfg.OnConsumed != nil {
		s.cfg.OnConsumed(polled, polledBytes)
	}
	return failure
}

// advanced accounts for offsets the partitions moved by: the first sets
// the flush deadline.
func (ss *session) advanced(n int64) {
	if n <= 0 {
		return
	}
	if ss.deadline.IsZero() {
		ss.deadline = time.Now().Add(ss.s.cfg.FlushInterval)
	}
	if ss.s.cfg.OnRecords != nil {
		ss.s.cfg.OnRecords(n)
	}
}

// checkRetention re-reads the watermarks and handles, in every partition
// that made no progress since the previous check, offsets that retention
// deleted before they were read (skipDeleted). An idle partition needs it:
// when everything after its position was deleted, no record arrives to
// reveal the jump, and a live sink would not notice the loss until the
// next record. Only a partition stalled over a whole check period
// qualifies (partition.stalledBehind), and only while the client holds no
// fetched record it has not polled, so that records in hand are never
// declared lost.
func (ss *session) checkRetention(ctx context.Context) error {
	s := ss.s
	wm, err := s.broker.Watermarks(ctx, s.cfg.Topic)
	if err != nil {
		return err
	}
	if ss.carry != nil || ss.cl.BufferedFetchRecords() > 0 {
		// The client holds fetched records not polled yet (a poll returns
		// at most its limit, and a flush can hold the loop up), or a
		// stopped poll carries some: a partition may look stalled with its
		// records in hand. The next check decides.
		for _, pt := range ss.parts {
			pt.checked = -1
		}
		return nil
	}
	var advanced int64
	for _, p := range slices.Sorted(maps.Keys(ss.parts)) {
		pt := ss.parts[p]
		if !pt.stalledBehind(wm[p].LogStart) {
			continue
		}
		before := pt.next
		if err := ss.endRange(ctx, pt); err != nil {
			return err
		}
		if _, err := s.skipDeleted(ctx, pt, pt.capped(wm[p].LogStart), true); err != nil {
			return err
		}
		advanced += pt.next - before
	}
	ss.advanced(advanced)
	if ss.atEnd(wm) {
		s.caughtUp = true
		if !ss.bounded && time.Since(ss.ledgerChecked) >= ledgerCheck {
			ss.ledgerChecked = time.Now()
			return ss.checkLedgerBack(ctx)
		}
	}
	return nil
}

// withFailure joins the last flush's error err to the failure that ended
// the loop, if any; alone, err is returned as it is, so that Sink.run
// tells errLedgerBack and errPartitionsChanged (compared with ==). Both
// restarts, err alone is returned too: the next session reads the ledger
// and the topic again either way (joined, they failed a group member
// whose rebalance callback took the first errLedgerBack, and a sink that
// found partitions added as main went back: from a review).
func withFailure(failure, err error) error {
	if failure == nil || restarts(failure) && restarts(err) {
		return err
	}
	return errors.Join(failure, err)
}

// restarts reports whether err ends a session only for the next one to
// start from the ledger and the topic.
func restarts(err error) bool {
	return err == errLedgerBack || err == errPartitionsChanged
}

// checkLedgerBack reads the table's ledger, on a handle of its own, while
// the session is idle at the end of the log with nothing uncommitted: a
// partition whose ledger now ends below where the session's next range
// starts was moved back under it (floe replay --publish of a branch that
// ended earlier, a rollback), and ends the session (errLedgerBack), so
// that the next one reads those offsets again. A busy sink learns it from
// its next commit's fence; an idle one waited for a record (from a new
// user: a quiet table lagged after a publish). A failed read waits for the
// next check.
func (ss *session) checkLedgerBack(ctx context.Context) error {
	s := ss.s
	// Reopen: it shares the sink's archive indexes, so a long ledger is
	// not read again every check (found by review).
	t, err := s.tbl.Reopen(ctx)
	if err != nil {
		return nil
	}
	starts := make(map[mapping.TopicPartition]int64, len(ss.parts))
	for _, pt := range ss.parts {
		starts[pt.tp] = pt.low
	}
	return s.ledgerBack(ctx, t, starts, s.inLedger)
}

// ledgerBack returns errLedgerBack when t's ledger ends below starts, where
// the session's next range of each partition starts, or lacks a partition
// of inLedger (those the session read in it). A failed read returns nil:
// the next check decides.
func (s *Sink) ledgerBack(ctx context.Context, t *snapshot.Table, starts map[mapping.TopicPartition]int64, inLedger []mapping.TopicPartition) error {
	l, err := t.Summary(ctx, 0)
	if err != nil {
		return nil
	}
	next := l.Next()
	for _, tp := range slices.SortedFunc(maps.Keys(starts), mapping.TopicPartition.Compare) {
		n, ok := next[tp]
		if ok && n < starts[tp] || !ok && slices.Contains(inLedger, tp) {
			s.log.Info("the table's ledger went back under the sink (a published replay, or a rollback): starting a session from the ledger, which reads those offsets again",
				"partition", tp.Partition, "from", starts[tp], "to", n)
			return errLedgerBack
		}
	}
	return nil
}

// atEnd reports whether the session is where a healthy sink of a quiet
// topic idles, by the watermarks wm just read: every partition read to
// its last stable offset, nothing consumed that is not committed, no
// commit in flight, and in a group, every partition assigned taken on.
// Records that a failed session left uncommitted keep the next one away
// from it until they are committed, so a sink whose every flush fails
// still gives up after Config.RetryFor, however long each session runs.
// The caller has checked that nothing fetched waits to be polled.
func (ss *session) atEnd(wm map[int32]Watermarks) bool {
	if ss.inflight != nil {
		return false
	}
	if gm := ss.gm; gm != nil && (gm.assignments == 0 || len(gm.taking) > 0) {
		return false
	}
	for p, pt := range ss.parts {
		if pt.dirty() || !pt.done() && pt.next < wm[p].LastStable {
			return false
		}
	}
	return true
}

// commitRun is a flush committing in the background. done is closed when
// it ends, with err its outcome. The loop and a rebalance callback may both
// wait for it; whichever takes the outcome clears session.inflight.
type commitRun struct {
	done chan struct{}
	err  error
}

func (r *commitRun) finish(err error) {
	r.err = err
	close(r.done)
}

func (r *commitRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wait waits for the flush in flight, if any, and returns its error.
func (ss *session) wait() error {
	run := ss.inflight
	if run == nil {
		return nil
	}
	<-run.done
	ss.inflight = nil
	return run.err
}

// waitReleased is the loop's wait for the flush in flight before it
// flushes again. In group mode it waits with the group lock released, as
// a poll does, so that rebalance callbacks run meanwhile: a revocation
// must give its partitions up within its deadline, not after a slow
// commit. It returns what a callback met meanwhile too, for the loop to
// handle (unlocked).
func (ss *session) waitReleased() error {
	gm, run := ss.gm, ss.inflight
	if gm == nil || run == nil {
		return ss.wait()
	}
	failed := ss.unlocked(func() { <-run.done })
	var err error
	if ss.inflight == run {
		ss.inflight = nil
		err = run.err
	}
	return decisive(failed, err)
}

// unlocked runs fn, in group mode with the group lock released so that
// rebalance callbacks run meanwhile, and returns what a callback failed
// with. It re-seeks the partitions a callback took on meanwhile: what the
// client buffered for them may be of an earlier ownership.
func (ss *session) unlocked(fn func()) error {
	gm := ss.gm
	if gm == nil {
		fn()
		return nil
	}
	adoptions := gm.adoptions
	gm.mu.Unlock()
	fn()
	gm.mu.Lock()
	failed := gm.failed
	gm.failed = nil
	seek := map[int32]kgo.EpochOffset{}
	for p, pt := range ss.parts {
		if pt.adopted > adoptions {
			seek[p] = kgo.EpochOffset{Epoch: -1, Offset: pt.next}
		}
	}
	if len(seek) > 0 {
		ss.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{ss.s.cfg.Topic: seek})
	}
	return failed
}

// decisive returns the error among errs that decides what the loop does:
// a fence resets the session and anything else ends it, so another error
// must not hide behind a fence.
func decisive(errs ...error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, snapshot.ErrFenced) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// reservation is the table that snapshot.Table.ReserveSchema returned for
// the writer schema of decoder version at on base from (Sink.reserveSchema):
// a flush's writer made on from stages on table.
type reservation struct {
	from, table *table.Table
	at          int
}

// reserveDue reports that a writer made on base now would first commit
// the writer schema's new columns (Sink.reserveSchema), for want of a
// reservation: a catalog commit, which the loop makes with the group lock
// released (reserve), not the poll or the flush with it held.
func (ss *session) reserveDue(base *table.Table) bool {
	return ss.s.reserveSchema && ss.streaming && ss.writer == nil && ss.writerSchema != nil &&
		(ss.reserved.from != base || ss.reserved.at != ss.builtAt)
}

// reserve commits the writer schema's new columns on base when due
// (reserveDue), with the group lock released (unlocked) when released is
// set: the next writer made on base stages on the table as reserved
// (newStream).
func (ss *session) reserve(ctx context.Context, base *table.Table, released bool) error {
	if !ss.reserveDue(base) {
		return nil
	}
	var (
		o      reserveOutcome
		failed error
	)
	if released {
		failed = ss.unlocked(func() { o = <-ss.reserving(ctx, base) })
	} else {
		o = <-ss.reserving(ctx, base)
	}
	return decisive(failed, ss.reserved.adopt(o))
}

// reserveUntil is reserve for a revocation's flush (the lock is held: a
// rebalance callback runs), waiting until deadline at most: done is false
// when the catalog has not answered by then, and the reservation goes on
// without the revocation.
func (ss *session) reserveUntil(ctx context.Context, deadline time.Time) (done bool, err error) {
	base := ss.s.tbl.Iceberg()
	if !ss.reserveDue(base) || !ss.holdsRows() {
		return true, nil
	}
	outcome := ss.reserving(ctx, base)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case o := <-outcome:
		return true, ss.reserved.adopt(o)
	case <-t.C:
		return false, nil
	}
}

// reserveOutcome is the outcome of a reservation (reserving).
type reserveOutcome struct {
	r   reservation
	err error
}

// reserving commits the writer schema's new columns on base in the
// background (snapshot.Table.ReserveSchema, which leaves the table handle
// as it is) and returns where the outcome arrives.
func (ss *session) reserving(ctx context.Context, base *table.Table) <-chan reserveOutcome {
	want, at := ss.writerSchema, ss.builtAt
	out := make(chan reserveOutcome, 1)
	go func() {
		// Like the commit it precedes, not cut short by an interrupt.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		defer cancel()
		reserved, err := ss.s.tbl.ReserveSchema(rctx, base, want)
		out <- reserveOutcome{reservation{from: base, table: reserved, at: at}, err}
	}()
	return out
}

// adopt makes o's reservation the last one when it succeeded, and returns
// its error.
func (r *reservation) adopt(o reserveOutcome) error {
	if o.err == nil {
		*r = o.r
	}
	return o.err
}

// flush waits for the flush in flight, then takes every partition's ranges
// and rows since the last flush and commits them in the background.
func (ss *session) flush(ctx context.Context) error {
	if err := ss.wait(); err != nil {
		return err
	}
	if ss.spillLost {
		return errSpillLost
	}
	if !ss.dirty() {
		// What set the counters and the deadline may be gone (partitions
		// given up with records in hand): a deadline left behind would
		// make every poll return at once, and the loop spin.
		ss.pending, ss.pendingBytes, ss.deadline = 0, 0, time.Time{}
		if len(ss.streams) == 0 && len(ss.files) == 0 && ss.spill == nil {
			// Its streams went with the partitions given up: a writer
			// left open would keep its columns (schemaMoved) for good.
			ss.writer, ss.base = nil, ss.s.tbl.Iceberg()
		}
		return nil
	}
	// The next flush's writers stage on the table as it is now, with
	// every earlier commit of this session in.
	ss.base = ss.s.tbl.Iceberg()
	f := snapshot.Flush{Batches: map[mapping.TopicPartition][]arrow.RecordBatch{}, Schema: ss.writerSchema}
	var (
		conformErr error
		small      []smallPartition
	)
	for _, p := range slices.Sorted(maps.Keys(ss.parts)) {
		pt := ss.parts[p]
		tk := pt.take()
		// A partition that reached a stream batch in this flush keeps its
		// own stream: its files hold its rows only. The others go to the
		// flush's lane.
		own := ss.streams[p] != nil || len(ss.files[p]) > 0
		laned := ss.laned[p]
		var laneRows []arrow.RecordBatch
		f.Ranges = append(f.Ranges, tk.ranges...)
		if len(tk.deleted) > 0 {
			if f.Deletes == nil {
				f.Deletes = map[mapping.TopicPartition][]int64{}
			}
			f.Deletes[pt.tp] = tk.deleted
		}
		if tk.truncated >= 0 {
			if f.Truncated == nil {
				f.Truncated = map[mapping.TopicPartition]int64{}
			}
			f.Truncated[pt.tp] = tk.truncated
		}
		for i, g := range tk.groups {
			b, err := ss.join(g)
			if err != nil {
				conformErr = errors.Join(conformErr, err)
				continue
			}
			switch {
			case !ss.streaming:
				f.Batches[pt.tp] = append(f.Batches[pt.tp], b)
			case !own:
				laneRows = append(laneRows, b)
			case i != tk.open:
				// A range a loss closed before the partition had a stream
				// (endRange had none to end): a file of its own, not the
				// stream of the rows after the loss.
				conformErr = errors.Join(conformErr, ss.writeFile(ctx, pt, b))
			default:
				st, err := ss.stream(ctx, pt)
				if err == nil {
					err = st.Write(b)
				} else {
					b.Release()
				}
				conformErr = errors.Join(conformErr, err)
			}
		}
		if len(laneRows) > 0 || laned {
			small = append(small, newSmallPartition(p, laneRows, tk.ranges))
		}
		if len(tk.dead) > 0 {
			if f.DeadLetters == nil {
				f.DeadLetters = map[mapping.TopicPartition][]arrow.RecordBatch{}
			}
			f.DeadLetters[pt.tp] = tk.dead
		}
	}
	ln := ss.spill
	ss.held, ss.spill, ss.laned = 0, nil, nil
	switch {
	case conformErr != nil:
		for _, sp := range small {
			releaseAll(sp.batches)
		}
		if ln != nil {
			ln.st.Abort(ctx, ss.s.log)
		}
	case ln != nil:
		ln.parts = small
	default:
		ln, conformErr = ss.lane(ctx, small)
	}
	if conformErr != nil {
		releaseFlush(f)
		return fmt.Errorf("write the flush's rows: %w", conformErr)
	}
	// The flush's streams and files go to the commit; the next flush opens
	// its own.
	writer, streams, files := ss.writer, ss.streams, ss.files
	ss.writer, ss.streams, ss.files = nil, map[int32]*snapshot.Stream{}, map[int32][]iceberg.DataFile{}
	if writer != nil {
		f.Writer = writer
		f.Files = map[mapping.TopicPartition][]iceberg.DataFile{}
		for p, fs := range files {
			f.Files[ss.tp(p)] = fs
		}
	}
	ss.pending, ss.pendingBytes, ss.deadline = 0, 0, time.Time{}
	// Rebalances change the partitions in the ledger while the commit runs.
	inLedger := slices.Clone(ss.s.inLedger)
	// Where each partition's ledger ends once the flush is in: every
	// partition gave the flush all it had.
	ends := make(map[mapping.TopicPartition]int64, len(ss.parts))
	for _, pt := range ss.parts {
		ends[pt.tp] = pt.low
	}
	// The lane is written in the background, for the flush's schema.
	schema := ss.rowSchema
	run := &commitRun{done: make(chan struct{})}
	ss.inflight = run
	go func() {
		// Commit even when ctx was cancelled: an interrupt flushes what
		// was consumed.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		defer cancel()
		// The lane encodes in parallel with the partitions' streams, which
		// are ending meanwhile.
		var (
			group   snapshot.WrittenGroup
			laneErr error
			wg      sync.WaitGroup
		)
		if ln != nil {
			wg.Go(func() { group, laneErr = ln.write(cctx, ss, ss.s.alloc, schema) })
		}
		var closeErr error
		finishing := time.Now()
		for p, st := range streams {
			fs, err := st.Close()
			f.Files[ss.tp(p)] = append(f.Files[ss.tp(p)], fs...)
			closeErr = errors.Join(closeErr, err)
		}
		wg.Wait()
		f.Finished = time.Since(finishing)
		closeErr = errors.Join(closeErr, laneErr)
		if ln != nil {
			f.Groups = []snapshot.WrittenGroup{group}
		}
		if closeErr != nil {
			// The flush is not committed: its files are orphans now.
			ss.s.tbl.RemoveFiles(cctx, ss.s.log, f.DataFiles())
			releaseFlush(f)
			run.finish(closeErr)
			return
		}
		// A publish's hold ends at an interrupt: what was consumed is
		// committed at once. A hold may last as long as commitTimeout,
		// which began before the files were written: the commit gets a
		// timeout of its own after it (a commit held that long failed,
		// and its session read the flush again: from a review).
		if held := ss.s.tbl.AwaitPublish(ctx, ss.s.log); held > 0 {
			var cancelHeld context.CancelFunc
			cctx, cancelHeld = context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
			defer cancelHeld()
		}
		err := ss.s.commit(cctx, f, inLedger)
		if err == nil {
			// A publish or a rollback that moved main back on a partition
			// this flush did not carry fenced nothing: a busy sink learns it
			// here, not only when idle (from a review: a quiet partition
			// stayed behind while another was busy).
			err = ss.s.ledgerBack(cctx, ss.s.tbl, ends, inLedger)
		}
		if fenced, ok := errors.AsType[*snapshot.FencedError](err); errors.Is(err, snapshot.ErrFenced) && (!ok || fenced.Kept == 0) {
			// A commit fenced before its first attempt leaves the streamed
			// files to the caller; removing is idempotent. One that landed
			// unanswered and was then rolled back or published over keeps
			// them: its snapshot names them (FencedError.Kept).
			ss.s.tbl.RemoveFiles(cctx, ss.s.log, f.DataFiles())
		}
		run.finish(err)
	}()
	return nil
}

// tp names partition p of the session's topic. The flush's goroutine uses
// it rather than the partitions map, which rebalances change meanwhile.
func (ss *session) tp(p int32) mapping.TopicPartition {
	return mapping.TopicPartition{Topic: ss.s.cfg.Topic, Partition: p}
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
func (s *Sink) skipDeleted(ctx context.Context, p *partition, logStart int64, mayWait bool) (decided bool, err error) {
	deleted := mapping.Interval{Low: p.next, High: logStart}
	if deleted.Len() <= 0 {
		return true, nil
	}
	v, err := s.broker.ClassifyDeleted(ctx, p.tp.Topic, p.tp.Partition, deleted.Low, deleted.High)
	if err != nil {
		return false, err
	}
	switch {
	case v.Deleted == DeletedAborted:
		s.log.Info("retention deleted offsets before they were sunk, but the broker's evidence shows only aborted records: recorded as aborted, not lost (evidence, not proof: a committed record of another producer among the deleted offsets would have left no trace)",
			"partition", p.tp.Partition, "offsets", deleted.String(), "evidence", v.Evidence)
		p.skip(mapping.Range{TopicPartition: p.tp, Interval: deleted, Aborted: true})
		return true, nil
	case v.Deleted == DeletedUndecided && mayWait:
		s.log.Info("retention deleted offsets before they were sunk; whether they were committed is known when the open transaction ends",
			"partition", p.tp.Partition, "offsets", deleted.String(), "evidence", v.Evidence)
		return false, nil
	}
	if s.cfg.OnDataLoss != LossRecord {
		return true, &DataLossError{Partition: p.tp, Lost: deleted}
	}
	s.log.Warn("data loss recorded in the ledger: retention deleted offsets before they were sunk",
		"partition", p.tp.Partition, "lost", deleted.String())
	p.skip(mapping.Range{TopicPartition: p.tp, Interval: deleted, Lost: true})
	return true, nil
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
	if s.cfg.Partitions != nil || s.cfg.Group != "" {
		// A member's partitions, added ones too, come from the group.
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

// startWriter sets the schemas the session builds rows for: the table's
// (the decoder reset to it), and the dead-letter table's.
func (ss *session) startWriter() error {
	s := ss.s
	ss.rowSchema, ss.writerSchema = s.tbl.ArrowSchema(), nil
	if s.dec != nil {
		s.dec.reset(s.tbl.Iceberg().Schema())
		if s.tbl.Mode() == mapping.ModeUpsert {
			// The key as the table has it now (another writer's commit
			// may have named its columns): the decoder tells records
			// without a usable key from rows with it.
			key := s.tbl.UpsertKey()
			s.dec.upsert = &key
		}
		if err := ss.evolveWriter(); err != nil {
			return err
		}
	}
	if s.cfg.DeadLetters != nil {
		sc, err := mapping.DeadLetterArrowSchema(s.cfg.DeadLetters.Iceberg().Schema())
		if err != nil {
			return fmt.Errorf("dead-letter table %s: %w", s.cfg.DeadLetters.Name(), err)
		}
		ss.deadLetters = sc
	}
	return nil
}

// evolveWriter makes the decoder's current columns the writer schema.
// Layouts whose columns never change (a string key beside raw values)
// keep building rows for the table's schema.
func (ss *session) evolveWriter() error {
	d := ss.s.dec
	ss.builtAt = d.version
	if !d.layout.Typed() && !d.layout.TypedKey() {
		return nil
	}
	ws := d.writerSchema()
	sc, err := mapping.WriterArrowSchema(ws)
	if err != nil {
		return err
	}
	ss.rowSchema, ss.writerSchema = sc, ws
	return nil
}

// schemaMoved reports a record taken back (errSchemaFlush) because it
// needs columns that the flush's open files lack: the flush commits them
// before the next poll reads the record again (session.carry).
func (ss *session) schemaMoved() bool {
	return ss.writer != nil && ss.s.dec != nil && ss.s.dec.version != ss.builtAt
}

// newRows returns a row builder for the writer schema.
func (ss *session) newRows() (*mapping.RowBuilder, error) {
	if ss.s.dec == nil {
		return mapping.NewRowBuilder(ss.s.alloc, ss.rowSchema)
	}
	return ss.s.dec.layout.NewRowBuilder(ss.s.alloc, ss.rowSchema)
}

// appendDecoded decodes r, which observe just made a row of pt, and
// appends it: as a row (rebuilding every partition's builder first when r
// changed the columns), or as a dead letter. row reports a row appended.
// A record that may not be a dead letter, or that cannot be decoded now
// (the registry is down), is taken back (partition.unread) and ends the
// session before it.
func (ss *session) appendDecoded(ctx context.Context, pt *partition, r *kgo.Record) (row bool, err error) {
	s := ss.s
	out, err := s.dec.decode(ctx, r)
	if err != nil {
		pt.unread()
		return false, fmt.Errorf("decode %s offset %d: %w", pt.tp, r.Offset, err)
	}
	if out.dead != nil {
		return false, ss.deadLetter(pt, r, out.dead, out.schemaID)
	}
	pt.change(r.Offset, out.change)
	if out.change == mapping.ChangeSkip || out.change == mapping.ChangeTruncate {
		return false, nil
	}
	if s.dec.version != ss.builtAt {
		if ss.writer != nil {
			// The flush's files are open for the old columns.
			pt.unread()
			return false, errSchemaFlush
		}
		if err := ss.rebuild(); err != nil {
			return false, &brokenRowsError{fmt.Errorf("rebuild rows for schema version %d: %w", s.dec.version, err)}
		}
	}
	if err := s.dec.appendRow(pt.rows, r, out); err != nil {
		return false, &brokenRowsError{fmt.Errorf("row of %s offset %d: %w", pt.tp, r.Offset, err)}
	}
	return true, nil
}

// maxDebeziumChecks bounds the records a session parses to tell whether
// they are Debezium change events sunk without the envelope: a topic of
// them is one from its first record.
const maxDebeziumChecks = 10

// lookForEvents warns when r, one of the session's first records with a
// value, is a Debezium change event in JSON (Kafka Connect's
// JsonConverter) and the sink was not told the envelope: whatever
// --value is, the table gets the events, not the rows they carry (raw
// values were sunk without a word: a new user's report). Values of the
// registry's wire format are no JSON; their columns tell (noteSchema).
func (ss *session) lookForEvents(r *kgo.Record) {
	if ss.debeziumChecks >= maxDebeziumChecks || len(r.Value) == 0 || !ss.s.eventsUnwarned() {
		return
	}
	ss.debeziumChecks++
	if at, ok := mapping.DebeziumEventJSON(r.Value); ok {
		ss.s.warnDebeziumEvents("the records", at, mapping.ValueJSON)
	}
}

// deadLetter makes r, which observe just made a row of pt, a dead letter
// for reason (schemaID: the registry schema it named, 0: none). A record
// that may not be one (no dead-letter table, or a schema conflict with
// ConflictFail) is taken back (partition.unread) and stops the sink before
// it with a *BadRecordError.
func (ss *session) deadLetter(pt *partition, r *kgo.Record, reason error, schemaID int) error {
	_, conflict := errors.AsType[*mapping.SchemaConflictError](reason)
	if pt.deadLetters == nil || (conflict && ss.s.cfg.OnSchemaConflict == ConflictFail) {
		pt.unread()
		return &BadRecordError{Partition: pt.tp, Offset: r.Offset, Reason: reason}
	}
	pt.deadLetter()
	why := reason.Error()
	if err := pt.deadLetters.AppendDeadLetter(r, why, schemaID); err != nil {
		return &brokenRowsError{fmt.Errorf("dead letter %s offset %d: %w", pt.tp, r.Offset, err)}
	}
	pt.deadBytes += mapping.RecordSize(r) + int64(len(why))
	return nil
}

// appendRaw appends r, which observe just made a row of pt, to a table of
// the raw layout (no decoder): as a row, or, in an upsert table, as what
// upsertChange makes of it.
func (ss *session) appendRaw(pt *partition, r *kgo.Record) error {
	if ss.s.tbl.Mode() != mapping.ModeUpsert {
		pt.rows.Append(r)
		return nil
	}
	c, dead := upsertChange(ss.s.tbl.UpsertKey(), r, decoded{key: r.Key}, mapping.EnvelopeNone)
	if dead != nil {
		return ss.deadLetter(pt, r, dead, 0)
	}
	pt.change(r.Offset, c)
	if c != mapping.ChangeSkip {
		pt.rows.Append(r)
	}
	return nil
}

// rebuild starts every partition's rows again for the decoder's new
// columns; the rows built so far are kept as pieces that the flush joins
// (join).
func (ss *session) rebuild() error {
	if err := ss.evolveWriter(); err != nil {
		return err
	}
	for _, pt := range ss.parts {
		rows, err := ss.newRows()
		if err != nil {
			return err
		}
		pt.cutRows(rows)
	}
	return nil
}

// join returns the rows of one range, built in pieces for the schemas the
// writer schema evolved through, as one batch of the writer schema. It
// releases the pieces.
func (ss *session) join(pieces []arrow.RecordBatch) (arrow.RecordBatch, error) {
	return joinPieces(ss.s.alloc, ss.rowSchema, pieces)
}

// joinPieces returns pieces, in order, as one batch of schema, releasing
// them: the one piece itself when it has the schema already.
func joinPieces(mem memory.Allocator, schema *arrow.Schema, pieces []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(pieces) == 1 && pieces[0].Schema().Equal(schema) {
		return pieces[0], nil
	}
	defer releaseAll(pieces)
	return mapping.Conform(mem, schema, pieces)
}

// reconcileDeadLetters reconciles every dead-letter table of the table
// (snapshot.Table.DeadLetterTables) and the sink's own with the ledgers
// (snapshot.Table.ReconcileDeadLetters): a writer that stopped between a
// commit and adding its dead letters left them to the next session, even
// one that runs with another dead-letter table or none, and a rollback
// left dead letters of commits the ledger no longer has. A commit whose
// dead letters differ in number from its rows, or whose files are gone,
// and a dead-letter table whose storage lost files (damage reconciling
// cannot repair, snapshot.IsDeadLetterDamage: the dead-letter table was
// changed outside floe) are said at WARN and do not stop the sink: its
// data table is not at fault, and the audit and floe maintain report it.
func (s *Sink) reconcileDeadLetters(ctx context.Context) error {
	dlqs, err := s.tbl.DeadLetterTables(ctx)
	if err != nil {
		return err
	}
	if d := s.cfg.DeadLetters; d != nil && !slices.ContainsFunc(dlqs, func(t *snapshot.Table) bool { return t.Name() == d.Name() }) {
		dlqs = append(dlqs, d)
	}
	for _, dlq := range dlqs {
		res, err := s.tbl.ReconcileDeadLetters(ctx, dlq, s.log)
		if snapshot.IsDeadLetterDamage(err) {
			attrs := []any{"dead_letter_table", dlq.Name(), "err", err}
			if count, ok := errors.AsType[*snapshot.DeadLetterCountError](err); ok {
				attrs = append(attrs, "commit", count.Commit.ID, "snapshot", count.Commit.SnapshotID)
			}
			s.log.Warn("the dead-letter table does not match the ledger and reconciling cannot repair it; sinking goes on, floe audit reports it", attrs...)
		} else if err != nil {
			return err
		}
		if res.Added > 0 || res.Removed > 0 || res.RemovedLegacy > 0 || res.RepairedLegacy > 0 || res.Refilled > 0 {
			s.log.Info("reconciled the dead-letter table with the ledger", "dead_letter_table", dlq.Name(),
				"commits_added", res.Added, "commits_removed", res.Removed, "older_rows_removed", res.RemovedLegacy,
				"older_commits_repaired", res.RepairedLegacy, "commits_refilled", res.Refilled)
		}
	}
	return nil
}

// stream returns pt's open stream in the current flush, opening it (and the
// flush's writer) when needed.
func (ss *session) stream(ctx context.Context, pt *partition) (*snapshot.Stream, error) {
	if st := ss.streams[pt.tp.Partition]; st != nil {
		return st, nil
	}
	st, err := ss.newStream(ctx)
	if err != nil {
		return nil, err
	}
	ss.streams[pt.tp.Partition] = st
	return st, nil
}

// newStream opens a stream of the current flush (a partition's, or a
// lane's), and the flush's writer when needed.
func (ss *session) newStream(ctx context.Context) (*snapshot.Stream, error) {
	if ss.writer == nil {
		base := ss.base
		if ss.s.reserveSchema && ss.writerSchema != nil {
			// The loop reserved the columns before the poll or the flush
			// that opens this stream (place, consume); one made here (a
			// rebalance callback's flush) holds the group lock.
			if err := ss.reserve(ctx, base, false); err != nil {
				return nil, err
			}
			base = ss.reserved.table
		}
		w, err := ss.s.tbl.NewWriter(base, ss.writerSchema)
		if err != nil {
			return nil, err
		}
		ss.writer = w
	}
	// Streams outlive the poll that opened them: they end with the flush's
	// commit, which an interrupt does not cut short either.
	return ss.writer.Stream(context.WithoutCancel(ctx), ss.rowSchema), nil
}

// place moves pt's rows on after a row of size record bytes was built:
// into its own stream once they reach a stream batch (streamBatchRows or
// streamBatchBytes), unless it shares the flush's spill lane or the flush
// has maxOwnStreams streams already; otherwise they are held, until the
// flush or until the rows all partitions without a stream of their own
// hold reach the sink's spill bytes (spillRows).
func (ss *session) place(ctx context.Context, pt *partition, size int64) error {
	p := pt.tp.Partition
	batch := pt.rows.Rows() >= streamBatchRows || pt.bytes >= streamBatchBytes
	switch {
	case ss.streams[p] != nil || len(ss.files[p]) > 0:
		if batch {
			return ss.drain(ctx, pt)
		}
		return nil
	case batch && !ss.laned[p] && len(ss.streams) < maxOwnStreams:
		if ss.reserveDue(ss.base) {
			return errSchemaReserve
		}
		ss.held -= pt.held
		pt.held = 0
		return ss.drain(ctx, pt)
	}
	pt.held += size
	ss.held += size
	if ss.held >= ss.s.spillBytes {
		// The row is held and counted: the spill after the reservation
		// takes it with the others.
		if ss.reserveDue(ss.base) {
			return errSchemaReserve
		}
		return ss.spillRows(ctx)
	}
	return nil
}

// drain moves pt's rows built so far into its stream.
func (ss *session) drain(ctx context.Context, pt *partition) error {
	pieces := pt.drain(true)
	if len(pieces) == 0 {
		return nil
	}
	b, err := ss.join(pieces)
	if err != nil {
		return fmt.Errorf("join rows built for evolving schemas: %w", err)
	}
	st, err := ss.stream(ctx, pt)
	if err != nil {
		b.Release()
		return err
	}
	return st.Write(b)
}

// writeFile writes b, rows of one closed range of pt, into files of their
// own.
func (ss *session) writeFile(ctx context.Context, pt *partition, b arrow.RecordBatch) error {
	st, err := ss.newStream(ctx)
	if err != nil {
		b.Release()
		return err
	}
	err = st.Write(b)
	fs, cerr := st.Close()
	ss.files[pt.tp.Partition] = append(ss.files[pt.tp.Partition], fs...)
	return errors.Join(err, cerr)
}

// endRange ends pt's files at the end of its open range, before a lost or
// aborted range closes it: no file of its own spans a range. A partition
// without a stream keeps its rows: the range's close cuts them into a batch
// of their own (partition.skip), which the flush writes to a lane whose
// file group's spans leave the lost or aborted range out.
func (ss *session) endRange(ctx context.Context, pt *partition) error {
	st := ss.streams[pt.tp.Partition]
	if !ss.streaming || st == nil {
		return nil
	}
	if err := ss.drain(ctx, pt); err != nil {
		return err
	}
	delete(ss.streams, pt.tp.Partition)
	fs, err := st.Close()
	ss.files[pt.tp.Partition] = append(ss.files[pt.tp.Partition], fs...)
	return err
}

// firstDeadLetter names the first dead letter of f (by partition, then
// offset): its position and why it could not become a row; "" when f has
// none. It reads f's batches, so it is called before f is committed.
func firstDeadLetter(f snapshot.Flush) string {
	for _, tp := range slices.SortedFunc(maps.Keys(f.DeadLetters), mapping.TopicPartition.Compare) {
		for _, b := range f.DeadLetters[tp] {
			offset, reason := b.Schema().FieldIndices(mapping.ColOffset), b.Schema().FieldIndices(mapping.ColError)
			if b.NumRows() > 0 && len(offset) == 1 && len(reason) == 1 {
				return fmt.Sprintf("%s offset %s: %s", tp, b.Column(offset[0]).ValueStr(0), b.Column(reason[0]).ValueStr(0))
			}
		}
	}
	return ""
}

// releaseFlush frees the batches of a flush that is not committed.
func releaseFlush(f snapshot.Flush) {
	for _, bs := range f.Batches {
		releaseAll(bs)
	}
	for _, bs := range f.DeadLetters {
		releaseAll(bs)
	}
}
