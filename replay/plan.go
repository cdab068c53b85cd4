package replay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// Plan is a replay resolved against the broker: a finite job with a known
// start and end per partition.
type Plan struct {
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
	// TrustedRetention names, for a replay from a time, the partitions
	// that start at their log start (above 0) because the topic's time
	// retention says the records deleted below were stamped before the
	// time: records deleted by hand (DeleteRecords) would not be seen, so
	// the replay says so.
	TrustedRetention map[int32]int64
	// StampedBefore names, for a replay from a time, the partitions that
	// start past their log start (above 0) while the topic's retention does
	// not say the records deleted below it were stamped before the time,
	// with the retained offsets [log start, start) left out: stamped before
	// the time, they would belong to the replay had a deleted record been
	// stamped at or after it (a producer's clock ahead), which no broker
	// can tell any more, so the replay says so.
	StampedBefore map[int32]mapping.Interval
	// Emptied names, for a replay from a time, the partitions retention
	// emptied whole (log start = end, above 0) while the topic's retention
	// does not say the deleted records were stamped before the time: the
	// replay starts them at their end, there being no record left to start
	// at, and says that records stamped at or after the time may have been
	// among those deleted.
	Emptied map[int32]int64
}

// NewPlan resolves from and until into offsets per partition of topic, as
// broker reports them now, and checks them, so that a bad bound fails
// before anything is written: --from in the future (unless a record is
// stamped at or after it), offsets outside the
// retained log or of unknown partitions, and --until before --from are
// *BoundError. A from.Snapshot must have been resolved into Offsets; a
// partition they lack starts at 0, below the retained log maybe: the sink
// then meets the deleted offsets as a data loss. now is the wall clock.
func NewPlan(ctx context.Context, broker *connector.Broker, topic string, from, until Bound, now time.Time) (Plan, error) {
	return newPlan(ctx, broker, topic, from, until, now, nil, false)
}

// newPlan is NewPlan for a target whose ledger already holds prior (each
// partition's summary; nil: none): a replay run again. A partition the
// target already started keeps the start it has there when retention
// has deleted that start since (the replay continues from its next
// offset, so the start's records are not needed again), and a replay
// from earliest starts it where the ledger does (it recorded any head
// loss itself, so HeadLost does not name it).
// sameTime says that the target's replay began with from's time
// (PropFromTime): only then does a time that resolves to the log start
// keep the target's start.
func newPlan(ctx context.Context, broker *connector.Broker, topic string, from, until Bound, now time.Time, prior map[int32]mapping.PartitionSummary, sameTime bool) (Plan, error) {
	p := Plan{Topic: topic, Start: map[int32]int64{}, End: map[int32]int64{}}
	if from.Snapshot != 0 && from.Offsets == nil {
		return p, fmt.Errorf("plan replay of %s: start bound %s is a snapshot not resolved to offsets", topic, from.Spec)
	}
	if !from.Time.IsZero() && !until.Time.IsZero() && until.Time.Before(from.Time) {
		return p, &BoundError{Setting: SettingUntil, Value: until.Spec, From: from.Spec}
	}
	parts, err := broker.Partitions(ctx, topic)
	if err != nil {
		return p, err
	}
	p.Partitions = parts
	wm, err := broker.Watermarks(ctx, topic)
	if err != nil {
		return p, err
	}
	for _, bd := range []struct {
		setting Setting
		b       Bound
	}{{SettingFrom, from}, {SettingUntil, until}} {
		for _, part := range slices.Sorted(maps.Keys(bd.b.Offsets)) {
			if _, ok := wm[part]; !ok {
				return p, &BoundError{Setting: bd.setting, Value: bd.b.Spec,
					Reason: fmt.Sprintf("topic %s has no partition %d (it has %d partitions)", topic, part, len(parts))}
			}
		}
	}
	byTime := func(t time.Time) (map[int32]int64, error) {
		if t.IsZero() {
			return nil, nil
		}
		return broker.OffsetsForTime(ctx, topic, t)
	}
	fromTime, err := byTime(from.Time)
	if err != nil {
		return p, err
	}
	// A time in the future is most likely a mistake (a wrong year): it is
	// refused unless a record is stamped at or after it (a producer whose
	// clock is ahead).
	if fromTime != nil && from.Time.After(now) && !slices.ContainsFunc(parts, func(part int32) bool { return fromTime[part] < wm[part].HighWatermark }) {
		return p, &BoundError{Setting: SettingFrom, Value: from.Spec,
			Reason: fmt.Sprintf("is in the future (now is %s), and no record of the log is stamped at or after it", now.UTC().Format(time.RFC3339))}
	}
	untilTime, err := byTime(until.Time)
	if err != nil {
		return p, err
	}
	p.Earliest = from.IsEdge()
	// With a time, how old the records retention deleted were
	// (Broker.DeletedBefore); zero: unbounded.
	var deletedBefore time.Time
	if fromTime != nil {
		if before, ok, err := broker.DeletedBefore(ctx, topic, now); err != nil {
			return p, err
		} else if ok {
			deletedBefore = before
		}
	}
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
			} else if from.Snapshot != 0 {
				// The snapshot's table held nothing of the partition
				// (added to the topic since, or not read yet): every
				// record of it is since, so it starts at 0, as a sink
				// starts a partition added after it began the topic, and
				// what retention deleted of it is a loss (--on-data-loss).
				start = 0
			}
		}
		switch {
		case untilTime != nil:
			if untilTime[part] > w.LastStable {
				// Records before the time lie past an open transaction:
				// cutting at it would leave out committed ones unsaid.
				return p, &BoundError{Setting: SettingUntil, Value: until.Spec,
					Reason: fmt.Sprintf("partition %d: records stamped before it lie up to offset %d, past a transaction still open at offset %d (the last stable offset), which a replay cannot read yet; run the replay again once the transaction has ended, or replay --until end (the last stable offsets) or until offsets",
						part, untilTime[part], w.LastStable)}
			}
			end = untilTime[part]
		case until.Offsets != nil:
			if o, ok := until.Offsets[part]; ok {
				end = o
			}
		}
		pr, resumed := prior[part]
		_, named := from.Offsets[part]
		switch {
		case !resumed:
		case from.IsEdge():
			start = pr.First()
		case fromTime != nil && sameTime && start == w.LogStart && pr.First() < start:
			// Retention deleted the records at or after the time that
			// the replay began with.
			start = pr.First()
		case fromTime != nil && sameTime && start > pr.First() && until.fixed && start > end:
			// The time resolves past the end this replay fixed when it
			// began (a transaction open then, its start the last stable
			// offset, has ended; or records were added since): no record
			// before that end is stamped at or after it.
			start = pr.First()
		case fromTime != nil && sameTime && pr.Next() > pr.First() && start > pr.First():
			// The replay read records from where it began, so the time
			// resolved to a record then: it resolves past them now only
			// because the topic's compaction or retention deleted the
			// record it began at.
			start = pr.First()
		case from.Offsets != nil && !named && start > pr.First():
			// A partition --from does not name begins at its log start:
			// it keeps where it began, once retention deleted it since.
			start = pr.First()
		case fromTime != nil && sameTime && start != pr.First():
			return p, &BoundError{Setting: SettingFrom, Value: from.Spec,
				Reason: fmt.Sprintf("partition %d: this replay began it at offset %d, and the time resolves to offset %d now (a transaction open then, where it stopped, has ended, or records were added since); run it again with --until end to finish it as it began, or replay into a new table",
					part, pr.First(), start)}
		}
		// headUnruled: a replay from a time of a partition whose
		// beginning retention deleted, where the topic's time retention
		// does not say that the deleted records were stamped before it.
		headUnruled := fromTime != nil && !resumed && w.LogStart > 0 && (deletedBefore.IsZero() || from.Time.Before(deletedBefore))
		if fromTime != nil && !resumed && fromTime[part] == w.LogStart && w.LogStart > 0 && w.LogStart < w.LastStable {
			// The first record retention kept is at or after the time:
			// those it deleted before it may have been too, and a
			// replay "since then" must not skip them unsaid, unless the
			// topic's time retention says they were older.
			if headUnruled {
				return p, &BoundError{Setting: SettingFrom, Value: from.Spec,
					Reason: fmt.Sprintf("partition %d: the first record the log still holds (offset %d) is stamped at or after it, and retention deleted everything below %d, records stamped since then among them maybe (the topic's retention does not rule it out: size retention, or a retention.ms reaching past the time); replay from earliest (which records [0, %d) as lost), or from offsets to start at the log start knowingly",
						part, w.LogStart, w.LogStart, w.LogStart)}
			}
			if p.TrustedRetention == nil {
				p.TrustedRetention = map[int32]int64{}
			}
			p.TrustedRetention[part] = w.LogStart
		}
		if headUnruled && fromTime[part] > w.LogStart {
			if p.StampedBefore == nil {
				p.StampedBefore = map[int32]mapping.Interval{}
			}
			p.StampedBefore[part] = mapping.Interval{Low: w.LogStart, High: start}
		}
		if headUnruled && w.LogStart == w.HighWatermark {
			if p.Emptied == nil {
				p.Emptied = map[int32]int64{}
			}
			p.Emptied[part] = w.LogStart
		}
		if start < w.LogStart && !(resumed && pr.First() == start) && !(from.Snapshot != 0 && !named) {
			return p, &BoundError{Setting: SettingFrom, Value: from.Spec,
				Reason: fmt.Sprintf("partition %d starts at offset %d, but retention deleted everything below %d; replay from offset %d or later, or from earliest",
					part, start, w.LogStart, w.LogStart)}
		}
		if start > w.LastStable {
			return p, &BoundError{Setting: SettingFrom, Value: from.Spec,
				Reason: fmt.Sprintf("partition %d starts at offset %d, past its end offset %d%s", part, start, w.LastStable, openTxn(w, start))}
		}
		if end > w.LastStable {
			return p, &BoundError{Setting: SettingUntil, Value: until.Spec,
				Reason: fmt.Sprintf("partition %d ends at offset %d, past its end offset %d: a replay reads only what the log holds at start%s", part, end, w.LastStable, openTxn(w, end))}
		}
		if end < start {
			return p, &BoundError{Setting: SettingUntil, Value: until.Spec, From: from.Spec,
				Reason: fmt.Sprintf(" on partition %d (from offset %d, until offset %d)", part, start, end)}
		}
		p.Start[part], p.End[part] = start, end
		if p.Earliest && w.LogStart > 0 && !resumed {
			if p.HeadLost == nil {
				p.HeadLost = map[int32]int64{}
			}
			p.HeadLost[part] = w.LogStart
		}
	}
	return p, nil
}

// Config returns the sink configuration that runs the plan: base (flush
// policy, logger, callbacks) with the plan's start and end offsets. This is
// how a replay stays the live sink's pipeline: the same connector.Sink,
// bounded. A replay from earliest records [0, log start) as lost where
// retention deleted it.
func (p Plan) Config(base connector.Config) connector.Config {
	c := base
	c.Topic = p.Topic
	c.StopAtEnd = true
	c.EndOffsets = maps.Clone(p.End)
	if p.Earliest {
		c.Start, c.StartOffsets, c.RecordHeadLoss = connector.StartEarliest, nil, true
	} else {
		c.StartOffsets = maps.Clone(p.Start)
	}
	return c
}

// Remaining is the number of offsets left to replay given the target's
// ledger: per partition, from where the ledger ends (or the plan's start) to
// the plan's end.
func (p Plan) Remaining(l mapping.Summary) int64 {
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
func (p Plan) Complete(l mapping.Summary) bool {
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
func (p Plan) CheckResume(target string, l mapping.Summary) error {
	for _, tp := range l.Partitions() {
		if tp.Topic != p.Topic {
			return &CheckError{Settings: []Setting{SettingTable, SettingBranch},
				Err: fmt.Errorf("%s holds topic %s, not %s: it is not this replay's target", target, tp.Topic, p.Topic)}
		}
		want, ok := p.Start[tp.Partition]
		if p.Earliest {
			want = 0
		}
		ps, _ := l.Partition(tp)
		first := ps.First()
		if !ok || first != want {
			return &CheckError{Settings: []Setting{SettingTable, SettingBranch},
				Err: fmt.Errorf("%s holds %s from offset %d, but this replay starts it at %d: it is another replay's target", target, tp, first, want)}
		}
	}
	return nil
}

// againFrom names, in a refusal of CheckResume, the --from that continues
// the replay the target holds (ce.Again): the time it began with when the
// target records one (PropFromTime) and this run gave
// another --from, else the offsets its ledger begins at. A new user ran
// the same replay again without its --from time and was told the table
// was another replay's target.
func againFrom(ce *CheckError, props map[string]string, branch string, from Bound, p Plan, l mapping.Summary) {
	key := FromTimeKey(branch)
	if recorded := props[key]; recorded != "" && formatFromTime(from.Time) != recorded {
		// Not another replay's: this one, begun at another time.
		ce.Again = recorded
		ce.Err = fmt.Errorf("%s: it is the target of the replay --from %s (recorded in table property %s), and this one is --from %s",
			strings.TrimSuffix(ce.Err.Error(), ": it is another replay's target"), recorded, key, from.Spec)
		return
	}
	starts := map[int32]int64{}
	for _, tp := range l.Partitions() {
		if tp.Topic != p.Topic {
			return
		}
		ps, _ := l.Partition(tp)
		starts[tp.Partition] = ps.First()
	}
	again := formatUntil(starts)
	if !slices.ContainsFunc(slices.Collect(maps.Values(starts)), func(o int64) bool { return o != 0 }) {
		again = "earliest"
	}
	if again != from.Spec && len(starts) > 0 {
		ce.Again = again
	}
}

// checkEnd refuses an end below what the target's ledger l already holds:
// the replay would claim a range its target exceeds.
func (p Plan) checkEnd(until Bound, target string, l mapping.Summary) error {
	next := l.Next()
	for _, part := range p.Partitions {
		if n, ok := next[mapping.TopicPartition{Topic: p.Topic, Partition: part}]; ok && n > p.End[part] {
			return &BoundError{Setting: SettingUntil, Value: until.Spec,
				Reason: fmt.Sprintf("partition %d ends at offset %d, but %s already holds it up to offset %d: a replay does not take back what it wrote; pass --until at or past %d, or replay into a new table",
					part, p.End[part], target, n, n)}
		}
	}
	return nil
}

// openTxn says, for an offset past w's last stable offset that the log
// holds, that an open transaction is what ends the replay there: the fix
// is to wait for it, not to give a lower offset (from a review).
func openTxn(w connector.Watermarks, offset int64) string {
	if offset > w.HighWatermark || w.LastStable == w.HighWatermark {
		return ""
	}
	return fmt.Sprintf(" (the log holds offsets up to %d, but a transaction open at offset %d holds its readable end there: run again once it commits or aborts)", w.HighWatermark, w.LastStable)
}
