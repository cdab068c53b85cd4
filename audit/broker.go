package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// brokerLevel compares each partition's retained log [logStart,
// highWatermark) with the ledger: lag, offsets lost to retention before
// they were sunk, and partitions the table has never seen.
func (a *auditor) brokerLevel(ctx context.Context) error {
	a.addLevel(LevelBroker)
	a.rep.Brokers, a.rep.ClusterID = a.opts.Broker.Seeds, a.opts.Broker.ClusterID
	for _, topic := range a.selectedTopics() {
		wm, err := a.opts.Broker.Watermarks(ctx, topic)
		if errors.Is(err, connector.ErrUnknownTopic) {
			wm = nil
		} else if err != nil {
			return fmt.Errorf("broker level: %w", err)
		}
		inLedger := map[int32]bool{}
		for tp := range a.cover {
			if tp.Topic == topic {
				inLedger[tp.Partition] = true
			}
		}
		if wm != nil {
			// Another log's (a recreated topic, another cluster) is still
			// compared, as a mirror's may be the same records; the finding
			// keeps each partition from reading complete.
			if err := a.compareTopicID(ctx, topic, slices.Sorted(maps.Keys(inLedger))); err != nil {
				return err
			}
		}
		for _, p := range slices.Sorted(maps.Keys(inLedger)) {
			tp := mapping.TopicPartition{Topic: topic, Partition: p}
			w, ok := wm[p]
			if !ok {
				what := "the broker has no such partition"
				if wm == nil {
					what = "the topic does not exist on the broker"
				}
				a.find(Finding{Level: LevelBroker, Kind: KindMissingPartition, Partition: tp, HasPartition: true,
					Detail: what + " (deleted, or another cluster): the ledger cannot be checked against the log"})
				continue
			}
			if err := a.comparePartition(ctx, tp, w); err != nil {
				return err
			}
		}
		for _, p := range slices.Sorted(maps.Keys(wm)) {
			if inLedger[p] {
				continue
			}
			tp := mapping.TopicPartition{Topic: topic, Partition: p}
			w := wm[p]
			rep := a.part(tp)
			rep.Broker = &BrokerState{LogStart: w.LogStart, LastStable: w.LastStable, HighWatermark: w.HighWatermark,
				Lag: w.Lag(w.LogStart)}
			if w.HighWatermark == 0 {
				continue // an empty partition: nothing to sink yet
			}
			iv := mapping.Interval{Low: w.LogStart, High: w.HighWatermark}
			detail := fmt.Sprintf("the table has never seen this partition: offsets %s are retained and not sunk", iv)
			if w.LogStart > 0 {
				detail += fmt.Sprintf(", and offsets [0, %d) are already deleted", w.LogStart)
			}
			a.find(Finding{Level: LevelBroker, Kind: KindUnseenPartition, Partition: tp, HasPartition: true,
				Offsets: mapping.Interval{Low: 0, High: w.HighWatermark}, HasOffsets: true, Detail: detail})
		}
	}
	return nil
}

// compareTopicID checks that the ledger's ranges of topic were read from
// the topic the broker has under that name; when they were not (the topic
// was recreated), the finding concerns each of the ledger's partitions of
// it.
func (a *auditor) compareTopicID(ctx context.Context, topic string, partitions []int32) error {
	t, err := a.opts.Broker.Topic(ctx, topic)
	if err != nil {
		return fmt.Errorf("broker level: %w", err)
	}
	recorded := a.sum.TopicID(topic)
	switch {
	case recorded == "" || t.ID == "":
		a.note("%s: the ledger records no topic ID (written before floe recorded them) or the brokers have none: a recreated topic is noticed only when the ledger is past its end", topic)
	case recorded == t.ID && a.sum.Unidentified[topic]:
		a.note("%s: the ledger's first commits of the topic record no topic ID (written before floe recorded them, or through brokers without IDs): a deletion and recreation of the topic before the first recorded ID cannot be seen from the IDs; --verify-content compares what the log still retains", topic)
	case recorded != t.ID:
		var others []mapping.TopicPartition
		for _, p := range partitions {
			others = append(others, mapping.TopicPartition{Topic: topic, Partition: p})
		}
		a.find(Finding{Level: LevelBroker, Kind: KindTopicRecreated, Others: others,
			Detail: fmt.Sprintf("topic %s has ID %s on the brokers, but the ledger's ranges were read from topic ID %s: the topic was deleted and recreated (or this is another cluster), so the ledger cannot be checked against this log",
				topic, t.ID, recorded)})
	}
	return nil
}

// comparePartition checks one ledger partition against its watermarks.
func (a *auditor) comparePartition(ctx context.Context, tp mapping.TopicPartition, w connector.Watermarks) error {
	p := a.part(tp)
	p.Broker = &BrokerState{LogStart: w.LogStart, LastStable: w.LastStable, HighWatermark: w.HighWatermark,
		Lag: w.Lag(p.Next)}
	if end, ok := a.replayEnd[tp]; ok {
		// A replay never takes the log past its end: that is no lag (a
		// new user read "30 offsets not sunk yet" of one that had
		// reached it).
		p.Broker.PastReplayEnd = w.Lag(max(p.Next, end))
		p.Broker.Lag -= p.Broker.PastReplayEnd
	}
	if p.Next < w.LogStart {
		iv := mapping.Interval{Low: p.Next, High: w.LogStart}
		// The sink's own test: only aborted records deleted is no loss.
		v, err := a.opts.Broker.ClassifyDeleted(ctx, tp.Topic, tp.Partition, iv.Low, iv.High)
		if err != nil {
			return fmt.Errorf("broker level: %w", err)
		}
		switch v.Deleted {
		case connector.DeletedAborted:
			a.note("%s: retention deleted offsets %s before they were sunk, but the broker's evidence shows they held only aborted records (%s; evidence, not proof: a committed record of another producer among the deleted offsets would have left no trace): the next sink run records them as aborted, not lost",
				tp, iv, v.Evidence)
		case connector.DeletedUndecided:
			a.note("%s: retention deleted offsets %s before they were sunk; whether they held committed records is known when the open transaction at the log start ends (%s)",
				tp, iv, v.Evidence)
		default:
			a.find(Finding{Level: LevelBroker, Kind: KindUnrecordedLoss, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
				Detail: fmt.Sprintf("retention deleted offsets %s before they were sunk, and the ledger does not record it (the next sink run fails on it, or records it as lost with --on-data-loss record)", iv)})
		}
	}
	for _, iv := range slices.Concat(p.Lost, p.Aborted) {
		if iv.High <= w.LogStart {
			continue
		}
		retained := mapping.Interval{Low: max(iv.Low, w.LogStart), High: iv.High}
		a.find(Finding{Level: LevelBroker, Kind: KindRetainedLoss, Partition: tp, HasPartition: true, Offsets: retained, HasOffsets: true,
			Detail: fmt.Sprintf("the ledger records offsets %s as deleted by retention before they were sunk, but the log retains %s (log start %d): floe records such a range only below the log start, so the ledger was written by something else or the topic was recreated, and those records are not in the table (floe replay rebuilds it)",
				iv, retained, w.LogStart)})
	}
	if p.Next > w.HighWatermark {
		iv := mapping.Interval{Low: w.HighWatermark, High: p.Next}
		a.find(Finding{Level: LevelBroker, Kind: KindBeyondEnd, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
			Detail: fmt.Sprintf("the ledger covers offsets %s at or above the high watermark %d: the topic was recreated, or this is another cluster", iv, w.HighWatermark)})
	}
	// A start at the high watermark (a sink started at the latest offset
	// with nothing produced since) leaves [logStart, First) as unsunk as a
	// start below it; a start above it is the beyond-end finding's.
	switch {
	case p.First <= w.LogStart || p.First > w.HighWatermark:
	case p.Started:
		// Said in the note of where the partitions began (noteBegan).
		if a.retained == nil {
			a.retained = map[mapping.TopicPartition]mapping.Interval{}
		}
		a.retained[tp] = mapping.Interval{Low: w.LogStart, High: p.First}
	default:
		iv := mapping.Interval{Low: w.LogStart, High: p.First}
		a.find(Finding{Level: LevelBroker, Kind: KindUnrecordedStart, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
			Detail: fmt.Sprintf("offsets %s are retained on the broker but were never sunk, and the ledger does not record that a sink started the partition at %d: a sink started at the latest offset that restarted before floe recorded start positions may have skipped them (floe replay rebuilds the table from the log)",
				iv, p.First)})
	}
	return nil
}
