package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// PropReplayOf marks a table created by a replay: its value is the topic
// replayed. Only such a table (or an empty one) accepts a replay without
// --branch, so a replay never writes into someone else's table, and running
// the same replay again resumes it.
const PropReplayOf = "floe.replay.of"

// PropReplayUntil records the end offsets a replay runs to, as an --until
// value (P=OFFSET,...), so that the replay is a finite job: written before
// its first record is read, and used by a later run of the same replay with
// the default --until, which therefore continues to the same end instead of
// the log's end at that run. A replay onto a branch keeps it under
// PropReplayUntil + "." + BRANCH.
const PropReplayUntil = "floe.replay.until"

// replayUntilKey is the table property holding the end of a replay onto
// branch ("" for a replay into its own table).
func replayUntilKey(branch string) string {
	if branch == "" {
		return PropReplayUntil
	}
	return PropReplayUntil + "." + branch
}

// formatUntil writes end offsets as an --until value.
func formatUntil(end map[int32]int64) string {
	parts := make([]string, 0, len(end))
	for _, p := range slices.Sorted(maps.Keys(end)) {
		parts = append(parts, fmt.Sprintf("%d=%d", p, end[p]))
	}
	return strings.Join(parts, ",")
}

// ErrBadBound is matched (errors.Is) by every error about a replay's --from
// or --until: malformed, in the future, out of the log, or until before from.
var ErrBadBound = errors.New("bad replay bound")

// BoundError reports a --from or --until that cannot be replayed.
type BoundError struct {
	Flag, Value string
	Reason      string
}

func (e *BoundError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Flag, e.Value, e.Reason)
}

func (e *BoundError) Is(target error) bool { return target == ErrBadBound }

// Bound is where a replay starts (--from) or ends (--until). Exactly one of
// its forms is set; the zero Bound is the log's edge: earliest for --from,
// the end offsets at start for --until.
type Bound struct {
	// Spec is the text the bound was parsed from, for messages.
	Spec string
	// Time: per partition, the first offset whose record timestamp is at or
	// after Time (ListOffsets by timestamp), or the end offset where none is.
	Time time.Time
	// Offsets per partition; partitions not named start at their log start
	// (--from) or end at their end offset (--until).
	Offsets map[int32]int64
	// Snapshot (--from only): the positions a floe table's snapshot had
	// reached; Replay resolves it into Offsets.
	Snapshot int64
}

// IsEdge reports whether b is the log's edge (earliest or end).
func (b Bound) IsEdge() bool { return b.Time.IsZero() && b.Offsets == nil && b.Snapshot == 0 }

// ParseBound parses a --from (from true) or --until value for topic:
// "earliest" (from) or "end" (until), an RFC 3339 time, "snapshot:ID"
// (from), or offsets "P=OFFSET[,P=OFFSET]" (TOPIC/P=OFFSET also accepted).
func ParseBound(s, topic string, from bool) (Bound, error) {
	flag, edge := "--until", "end"
	if from {
		flag, edge = "--from", "earliest"
	}
	bad := func(reason string) (Bound, error) {
		return Bound{}, &BoundError{Flag: flag, Value: s, Reason: reason}
	}
	s = strings.TrimSpace(s)
	b := Bound{Spec: s}
	switch {
	case s == "" || s == edge:
		b.Spec = edge
		return b, nil
	case from && strings.HasPrefix(s, "snapshot:"):
		id, err := strconv.ParseInt(strings.TrimPrefix(s, "snapshot:"), 10, 64)
		if err != nil || id <= 0 {
			return bad("want snapshot:ID with a snapshot id of a floe table")
		}
		b.Snapshot = id
		return b, nil
	case strings.Contains(s, "="):
		cut, err := mapping.ParseCut(s, topic)
		if err != nil {
			return bad(err.Error())
		}
		b.Offsets = map[int32]int64{}
		for tp, o := range cut {
			if tp.Topic != topic {
				return bad(fmt.Sprintf("names topic %s, but the replay reads %s", tp.Topic, topic))
			}
			b.Offsets[tp.Partition] = o
		}
		return b, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		forms := "end, an RFC 3339 time (2024-05-01T09:00:00Z) or offsets P=OFFSET[,P=OFFSET]"
		if from {
			forms = "earliest, an RFC 3339 time (2024-05-01T09:00:00Z), offsets P=OFFSET[,P=OFFSET] or snapshot:ID"
		}
		return bad("want " + forms)
	}
	b.Time = t
	return b, nil
}

// ReplayPlan is a replay resolved against the broker: a finite job with a
// known start and end per partition.
type ReplayPlan struct {
	Topic      string
	Partitions []int32
	// Start is each partition's first offset to read, End the offset it
	// stops before (the last stable offset at most).
	Start, End map[int32]int64
	// Earliest is set when the replay starts at the log start; HeadLost
	// then names partitions whose log start is above 0: retention deleted
	// [0, log start) before the replay, and the ledger records it as lost.
	Earliest bool
	HeadLost map[int32]int64
}

// Plan resolves from and until into offsets per partition and checks them,
// so that a bad bound fails before anything is written: --from in the
// future, offsets outside the retained log or of unknown partitions, and
// --until before --from are *BoundError. A from.Snapshot must have been
// resolved into Offsets. now is the wall clock.
func (b *Broker) Plan(ctx context.Context, topic string, from, until Bound, now time.Time) (ReplayPlan, error) {
	p := ReplayPlan{Topic: topic, Start: map[int32]int64{}, End: map[int32]int64{}}
	if from.Snapshot != 0 && from.Offsets == nil {
		return p, fmt.Errorf("plan replay of %s: --from %s is not resolved to offsets", topic, from.Spec)
	}
	if !from.Time.IsZero() && from.Time.After(now) {
		return p, &BoundError{Flag: "--from", Value: from.Spec,
			Reason: fmt.Sprintf("is in the future (now is %s): no record can be at or after it", now.UTC().Format(time.RFC3339))}
	}
	if !from.Time.IsZero() && !until.Time.IsZero() && until.Time.Before(from.Time) {
		return p, &BoundError{Flag: "--until", Value: until.Spec, Reason: "is before --from " + from.Spec}
	}
	parts, err := b.Partitions(ctx, topic)
	if err != nil {
		return p, err
	}
	p.Partitions = parts
	wm, err := b.Watermarks(ctx, topic)
	if err != nil {
		return p, err
	}
	for _, bd := range []struct {
		flag string
		b    Bound
	}{{"--from", from}, {"--until", until}} {
		for _, part := range slices.Sorted(maps.Keys(bd.b.Offsets)) {
			if _, ok := wm[part]; !ok {
				return p, &BoundError{Flag: bd.flag, Value: bd.b.Spec,
					Reason: fmt.Sprintf("topic %s has no partition %d (it has %d partitions)", topic, part, len(parts))}
			}
		}
	}
	byTime := func(t time.Time) (map[int32]int64, error) {
		if t.IsZero() {
			return nil, nil
		}
		return b.OffsetsForTime(ctx, topic, t)
	}
	fromTime, err := byTime(from.Time)
	if err != nil {
		return p, err
	}
	untilTime, err := byTime(until.Time)
	if err != nil {
		return p, err
	}
	p.Earliest = from.IsEdge()
	for _, part := range parts {
		w := wm[part]
		start, end := w.LogStart, w.LastStable
		switch {
		case fromTime != nil:
			// The end offset where no record is at or after the time; an
			// open transaction's records past the last stable offset are
			// not readable yet.
			start = min(fromTime[part], w.LastStable)
		case from.Offsets != nil:
			if o, ok := from.Offsets[part]; ok {
				start = o
			}
		}
		switch {
		case untilTime != nil:
			end = min(untilTime[part], w.LastStable)
		case until.Offsets != nil:
			if o, ok := until.Offsets[part]; ok {
				end = o
			}
		}
		if start < w.LogStart {
			return p, &BoundError{Flag: "--from", Value: from.Spec,
				Reason: fmt.Sprintf("partition %d starts at offset %d, but retention deleted everything below %d; replay from offset %d or later, or --from earliest",
					part, start, w.LogStart, w.LogStart)}
		}
		if start > w.LastStable {
			return p, &BoundError{Flag: "--from", Value: from.Spec,
				Reason: fmt.Sprintf("partition %d starts at offset %d, past its end offset %d", part, start, w.LastStable)}
		}
		if end > w.LastStable {
			return p, &BoundError{Flag: "--until", Value: until.Spec,
				Reason: fmt.Sprintf("partition %d ends at offset %d, past its end offset %d: a replay reads only what the log holds at start", part, end, w.LastStable)}
		}
		if end < start {
			return p, &BoundError{Flag: "--until", Value: until.Spec,
				Reason: fmt.Sprintf("is before --from %s on partition %d (from offset %d, until offset %d)", from.Spec, part, start, end)}
		}
		p.Start[part], p.End[part] = start, end
		if p.Earliest && w.LogStart > 0 {
			if p.HeadLost == nil {
				p.HeadLost = map[int32]int64{}
			}
			p.HeadLost[part] = w.LogStart
		}
	}
	return p, nil
}

// Config returns the sink configuration that runs the plan: base (flush
// policy, logger, callbacks) with the plan's start and end offsets. A replay
// from earliest records [0, log start) as lost where retention deleted it.
func (p ReplayPlan) Config(base Config) Config {
	c := base
	c.Topic = p.Topic
	c.StopAtEnd = true
	c.EndOffsets = maps.Clone(p.End)
	if p.Earliest {
		c.Start, c.StartOffsets, c.RecordHeadLoss = StartEarliest, nil, true
	} else {
		c.StartOffsets = maps.Clone(p.Start)
	}
	return c
}

// Remaining is the number of offsets left to replay given the target's
// ledger: per partition, from where the ledger ends (or the plan's start) to
// the plan's end.
func (p ReplayPlan) Remaining(l mapping.Ledger) int64 {
	next := l.Next()
	var n int64
	for _, part := range p.Partitions {
		from := p.Start[part]
		if o, ok := next[mapping.TopicPartition{Topic: p.Topic, Partition: part}]; ok {
			from = max(from, o)
		}
		n += max(0, p.End[part]-from)
	}
	return n
}

// Complete reports whether the ledger reaches the plan's end on every
// partition.
func (p ReplayPlan) Complete(l mapping.Ledger) bool {
	next := l.Next()
	for _, part := range p.Partitions {
		if p.End[part] > p.Start[part] && next[mapping.TopicPartition{Topic: p.Topic, Partition: part}] < p.End[part] {
			return false
		}
	}
	return true
}

// CheckResume checks that a non-empty target ledger is this plan's own
// earlier run, so that running a replay again continues it: the ledger holds
// only the plan's topic, and every partition begins where the plan begins
// (offset 0 for a replay from earliest, which records the head lost).
func (p ReplayPlan) CheckResume(target string, l mapping.Ledger) error {
	for _, tp := range l.Partitions() {
		if tp.Topic != p.Topic {
			return fmt.Errorf("%s holds topic %s, not %s: it is not this replay's target; replay into a new table or another --branch", target, tp.Topic, p.Topic)
		}
		want, ok := p.Start[tp.Partition]
		if p.Earliest {
			want = 0
		}
		first := mapping.Cover(l.Ranges(tp)).First
		if !ok || first != want {
			return fmt.Errorf("%s holds %s from offset %d, but this replay starts it at %d: it is another replay's target; replay into a new table or another --branch",
				target, tp, first, want)
		}
	}
	return nil
}

// ReplayOptions configure Replay.
type ReplayOptions struct {
	Topic       string
	From, Until Bound
	// Branch, when set, writes onto that branch of an existing table,
	// created empty when missing; Publish then makes it main's head.
	Branch  string
	Publish bool
	// Fold is "" (every record a row) or snapshot.FoldLatest (a state
	// table; see snapshot.PropFold).
	Fold string
	// Sink carries the flush policy, writer identity, logger and the
	// OnRecords/OnCommit callbacks; Replay sets its topic and bounds.
	Sink Config
	// OnStart, when set, is called once the target is open, before the
	// first record is read.
	OnStart func(ReplayStart)
}

// ReplayStart describes a replay about to run.
type ReplayStart struct {
	Plan ReplayPlan
	// Target names the table (and branch) written.
	Target string
	// Resumed is set when the target already held part of this replay.
	Resumed bool
	// FixedEnd is set when the default --until was taken from the end this
	// replay recorded when it started (PropReplayUntil), not from the log's
	// end offsets now.
	FixedEnd bool
	// Remaining is the number of offsets left to read.
	Remaining int64
	// SourceTable is the table a --from snapshot:ID was found in.
	SourceTable string
}

// ReplayResult describes a finished (or interrupted) replay.
type ReplayResult struct {
	ReplayStart
	Stats Stats
	// Complete is set when every partition reached its end offset; an
	// interrupted replay is not complete, and running it again resumes it.
	Complete bool
	// Published is set when Publish moved main: from its previous head to
	// the branch's.
	Published        bool
	MainFrom, MainTo int64
	// Head is the target's head snapshot when the run ended (0: none), and
	// Next each partition's next offset in its ledger then (absent: none).
	Head int64
	Next map[int32]int64
}

// Replay rebuilds a table from the log with the same sink that sinks live
// data: a bounded run from opts.From to opts.Until into a new table ident
// (refusing a table that holds anything but this replay), or onto a branch
// of an existing one. The sink's settings, and every bound against the
// broker, are checked before anything is written. Interrupting it
// (cancelling ctx) commits what was read; running the same replay again
// resumes from the target's ledger.
//
// A replay is a finite job: the default --until (opts.Until is the edge)
// is the log's end offsets when the replay starts, recorded in the target
// (PropReplayUntil). Running the same replay again continues to that end,
// never past it, so a complete replay run again reads and writes nothing
// even when the log has grown since. An explicit --until replaces the
// recorded end.
func Replay(ctx context.Context, broker *Broker, cat catalog.Catalog, ident table.Identifier, opts ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	name := strings.Join(ident, ".")
	switch {
	case opts.Topic == "":
		return res, errors.New("no topic: pass --topic NAME")
	case opts.Fold != "" && opts.Fold != snapshot.FoldLatest:
		return res, fmt.Errorf("--fold %q: want %s", opts.Fold, snapshot.FoldLatest)
	case opts.Publish && opts.Branch == "":
		return res, errors.New("--publish needs --branch: a replay into a new table has nothing to publish")
	case opts.Branch == table.MainBranch:
		return res, fmt.Errorf("--branch %s: replay onto a branch other than main, then --publish it", table.MainBranch)
	case opts.Until.Snapshot != 0:
		return res, &BoundError{Flag: "--until", Value: opts.Until.Spec, Reason: "a snapshot is a start position; want end, a time or offsets"}
	}
	// The sink's settings (--on-data-loss, --start) are checked before
	// anything is written: NewSink would check them only once the target
	// table or branch exists.
	sinkCfg := opts.Sink
	sinkCfg.Topic = opts.Topic
	if err := sinkCfg.Validate(); err != nil {
		return res, err
	}
	from := opts.From
	if from.Snapshot != 0 {
		src, offsets, err := snapshotPositions(ctx, cat, ident, opts.Topic, from.Snapshot)
		if err != nil {
			return res, err
		}
		from.Offsets, res.SourceTable = offsets, src
	}
	until := opts.Until
	if until.IsEdge() {
		fixed, ok, err := recordedUntil(ctx, cat, ident, opts)
		if err != nil {
			return res, err
		}
		if ok {
			until, res.FixedEnd = fixed, true
		}
	}
	plan, err := broker.Plan(ctx, opts.Topic, from, until, time.Now())
	if err != nil {
		return res, err
	}
	if res.FixedEnd {
		// A partition added to the topic after the replay started has
		// nothing to replay: its end offset at start did not exist.
		for _, part := range plan.Partitions {
			if _, ok := until.Offsets[part]; !ok {
				plan.End[part] = plan.Start[part]
			}
		}
	}
	res.Plan = plan

	tbl, err := openTarget(ctx, cat, ident, opts)
	if err != nil {
		return res, err
	}
	res.Target = name
	if opts.Branch != "" {
		res.Target = name + " branch " + opts.Branch
	}
	ledger, err := tbl.Ledger()
	if err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", res.Target, err)
	}
	if len(ledger.Commits) > 0 {
		if err := plan.CheckResume(res.Target, ledger); err != nil {
			return res, err
		}
		res.Resumed = true
	}
	// Record the replay's end before reading anything, so that an
	// interrupted run continues to it.
	if key, v := replayUntilKey(opts.Branch), formatUntil(plan.End); tbl.Iceberg().Properties()[key] != v {
		if err := setProperty(ctx, tbl, key, v); err != nil {
			return res, err
		}
	}
	res.Remaining = plan.Remaining(ledger)
	if opts.OnStart != nil {
		opts.OnStart(res.ReplayStart)
	}

	sink, err := NewSink(broker, tbl, plan.Config(opts.Sink))
	if err != nil {
		return res, err
	}
	res.Stats, err = sink.Run(ctx)
	if err != nil {
		return res, err
	}
	if err := tbl.Refresh(context.WithoutCancel(ctx)); err != nil {
		return res, err
	}
	if ledger, err = tbl.Ledger(); err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", res.Target, err)
	}
	res.Complete = plan.Complete(ledger)
	res.Next = map[int32]int64{}
	for tp, n := range ledger.Next() {
		if tp.Topic == plan.Topic {
			res.Next[tp.Partition] = n
		}
	}
	if h := tbl.Head(); h != nil {
		res.Head = h.SnapshotID
	}
	if res.Complete && opts.Publish && ctx.Err() == nil {
		res.MainFrom, res.MainTo, err = tbl.Publish(ctx)
		if err != nil {
			return res, err
		}
		res.Published = true
	}
	return res, nil
}

// recordedUntil returns the end an earlier run of this replay recorded in
// its target (PropReplayUntil) as an --until bound. ok is false when there
// is none to continue: no target yet (or not loadable: opening the target
// reports why), an empty ledger, a ledger of another topic, or no recorded
// end.
func recordedUntil(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts ReplayOptions) (b Bound, ok bool, err error) {
	t, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Branch: opts.Branch})
	if err != nil {
		return Bound{}, false, nil
	}
	v := t.Iceberg().Properties()[replayUntilKey(opts.Branch)]
	if v == "" {
		return Bound{}, false, nil
	}
	l, err := t.Ledger()
	if err != nil || len(l.Commits) == 0 {
		return Bound{}, false, nil
	}
	for _, tp := range l.Partitions() {
		if tp.Topic != opts.Topic {
			return Bound{}, false, nil
		}
	}
	b, err = ParseBound(v, opts.Topic, false)
	if err != nil || b.Offsets == nil {
		return Bound{}, false, fmt.Errorf("table %s: property %s=%q is not the end offsets of a replay (P=OFFSET,...): %v",
			t.Name(), replayUntilKey(opts.Branch), v, err)
	}
	b.Spec = "end (fixed when this replay started: " + v + ")"
	return b, true, nil
}

// setProperty sets one table property, reloading and trying again when
// another writer (a live sink on main) committed in between.
func setProperty(ctx context.Context, tbl *snapshot.Table, key, value string) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			if err := tbl.Refresh(ctx); err != nil {
				return err
			}
		}
		if err = tbl.SetProperties(ctx, map[string]string{key: value}); err == nil {
			return nil
		}
	}
	return err
}

// snapshotPositions returns the next offset per partition of topic that
// snapshot id of a floe table had reached, and the table's name.
func snapshotPositions(ctx context.Context, cat catalog.Catalog, target table.Identifier, topic string, id int64) (string, map[int32]int64, error) {
	src, err := snapshot.FindSnapshot(ctx, cat, id, target)
	if err != nil {
		return "", nil, fmt.Errorf("--from snapshot:%d: %w", id, err)
	}
	l, err := src.LedgerAt(id)
	if err != nil {
		return "", nil, fmt.Errorf("--from snapshot:%d: ledger of %s: %w", id, src.Name(), err)
	}
	out := map[int32]int64{}
	for tp, next := range l.Next() {
		if tp.Topic == topic {
			out[tp.Partition] = next
		}
	}
	if len(out) == 0 {
		return "", nil, &BoundError{Flag: "--from", Value: fmt.Sprintf("snapshot:%d", id),
			Reason: fmt.Sprintf("snapshot of %s has no positions of topic %s", src.Name(), topic)}
	}
	return src.Name(), out, nil
}

// openTarget opens the table a replay writes: a new table (created with the
// replay marker), an empty one, or this replay's own earlier target; or,
// with a branch, that branch of an existing table, created empty.
func openTarget(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts ReplayOptions) (*snapshot.Table, error) {
	name := strings.Join(ident, ".")
	checkFold := func(t *snapshot.Table) error {
		switch {
		case t.Fold() == opts.Fold:
			return nil
		case opts.Fold == "":
			return fmt.Errorf("table %s is a state table (%s=%s); pass --fold %s, or replay into another table", name, snapshot.PropFold, t.Fold(), t.Fold())
		default:
			return fmt.Errorf("table %s is not a state table; --fold %s needs a new table or a state table", name, opts.Fold)
		}
	}
	if opts.Branch == "" {
		props := map[string]string{PropReplayOf: opts.Topic}
		if opts.Fold != "" {
			props[snapshot.PropFold] = opts.Fold
		}
		t, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Create: true, Properties: props})
		if err != nil {
			return nil, err
		}
		if t.Head() != nil && t.Iceberg().Properties()[PropReplayOf] != opts.Topic {
			return nil, fmt.Errorf("table %s exists and is not empty: a replay writes a new table; pick another --table, or pass --branch NAME to rebuild it on a branch", name)
		}
		if err := checkFold(t); err != nil {
			return nil, err
		}
		if t.Iceberg().Properties()[PropReplayOf] != opts.Topic {
			// An empty table someone created: mark it, so that running
			// this replay again resumes.
			if err := t.SetProperties(ctx, props); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
	t, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil {
		return nil, fmt.Errorf("--branch writes onto a branch of an existing table: %w", err)
	}
	if err := checkFold(t); err != nil {
		return nil, err
	}
	if !t.HasBranch(opts.Branch) {
		if err := t.CreateEmptyBranch(ctx, opts.Branch); err != nil {
			return nil, err
		}
	}
	return snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Branch: opts.Branch})
}
