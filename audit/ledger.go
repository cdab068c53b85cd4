package audit

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/internal/text"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
)

// ledgerLevel checks each partition's ranges for contiguity, from snapshot
// summaries (and their ranges files), and the dead-letter tables against
// the ledgers (deadLetterLedger). The coverage was computed as the ledger
// was read (loadLedger); the snapshots behind gaps, overlaps and losses
// are named from one more read of the ledger.
func (a *auditor) ledgerLevel(ctx context.Context) error {
	a.addLevel(LevelLedger)
	if a.tbl.IsVersion() {
		// The dead-letter tables can be read only as they are now, with
		// the dead letters of later commits, which this version's ledger
		// does not name.
		a.note("the dead-letter tables were not compared with the ledger: an earlier version of %s is audited (--metadata-location), and they are read only as they are now, holding the dead letters of commits since", a.tbl.Name())
	} else if err := a.deadLetterLedger(ctx); err != nil {
		return err
	}
	covers := map[mapping.TopicPartition]mapping.Coverage{}
	for tp, cv := range a.cover {
		if a.selected(tp.Topic) {
			covers[tp] = cv.Coverage()
		}
	}
	covering, err := a.snapshotsCovering(ctx, covers)
	if err != nil {
		return err
	}
	a.rep.ReplayFrom, a.fromTimeKey = a.replayFrom()
	a.replayEnd, a.rep.ReplayEnd = a.recordedEnd()
	for _, tp := range slices.SortedFunc(maps.Keys(covers), mapping.TopicPartition.Compare) {
		c := covers[tp]
		p := a.part(tp)
		p.InLedger = true
		p.First, p.Next, p.Ranges, p.Records, p.Started = c.First, c.Next, c.Ranges, c.Records, c.Started
		p.DeadLetters, p.Deletes, p.Skipped = c.DeadLetters, c.Deletes, c.Skipped
		p.LedgerRanges = a.ranges[tp]
		p.Gaps, p.Overlaps, p.Lost = nonNil(c.Gaps), nonNil(c.Overlaps), nonNil(c.Lost)
		if a.upsert == nil && a.fold == "" && c.Deletes+c.Skipped > 0 {
			// The files and rows levels of an event table count rows
			// against records only: such records read as accounted for
			// (found by review s66).
			a.find(Finding{Level: LevelLedger, Kind: KindCountMismatch, Partition: tp, HasPartition: true,
				Offsets: mapping.Interval{Low: c.First, High: c.Next}, HasOffsets: true,
				Detail: fmt.Sprintf("the ledger counts %d records as deletes and %d as skipped, which only an upsert table's sink makes: in an event table every committed record is a row or a dead letter, so those records are in no table (an upsert table whose table property %s was removed reads as an event table)",
					c.Deletes, c.Skipped, mapping.PropMode)})
		}
		for _, g := range c.Gaps {
			a.find(Finding{Level: LevelLedger, Kind: KindGap, Partition: tp, HasPartition: true, Offsets: g, HasOffsets: true,
				Detail: fmt.Sprintf("no commit covers offsets %s (%d offsets never sunk)", g, g.Len())})
		}
		for _, o := range c.Overlaps {
			a.find(Finding{Level: LevelLedger, Kind: KindOverlap, Partition: tp, HasPartition: true, Offsets: o, HasOffsets: true,
				Detail: fmt.Sprintf("offsets %s were committed more than once, by snapshots %s", o, joinIDs(covering[anomaly{tp, o}]))})
		}
		for _, l := range c.Lost {
			f := Finding{Level: LevelLedger, Kind: KindLost, Partition: tp, HasPartition: true, Offsets: l, HasOffsets: true,
				Detail: fmt.Sprintf("retention deleted offsets %s before they were sunk (recorded by snapshot %s)", l, joinIDs(covering[anomaly{tp, l}]))}
			if ids := covering[anomaly{tp, l}]; len(ids) == 1 {
				// The snapshot that recorded it, which the text names (it
				// was null in JSON: found by an operator).
				f.SnapshotID = ids[0]
			}
			a.find(f)
		}
		if c.Started && c.First > 0 {
			// The verdict says "from where the sink began them"; which
			// partition, and why, belongs in the report too (a new user
			// saw a replay of the same log record a loss where the sink's
			// audit said nothing): noteBegan.
			a.began = append(a.began, tp)
		}
		p.Aborted = nonNil(c.Aborted)
		for _, ab := range c.Aborted {
			a.note("%s: retention deleted offsets %s before they were sunk; the broker's evidence showed that they held only aborted records (recorded by snapshot %s), so floe judged that nothing was lost (evidence, not proof: a committed record of another producer among the deleted offsets would have left no trace)",
				tp, ab, joinIDs(covering[anomaly{tp, ab}]))
		}
	}
	for _, topic := range a.selectedTopics() {
		if ids := a.sum.TopicIDs(topic); len(ids) > 1 {
			a.find(Finding{Level: LevelLedger, Kind: KindTopicRecreated,
				Detail: fmt.Sprintf("the ledger holds ranges of topic %s read from %d different topics of that name (topic IDs %s): its offsets mix records of a deleted topic and of its successor",
					topic, len(ids), strings.Join(ids, ", "))})
		}
	}
	return nil
}

// replayFrom returns the time a replay --from a time began the audited
// branch with, and the table property that records it ("" when none
// does): that replay, not a sink, started its partitions. Main's is that
// of the replay branch published as main, when main descends from it.
func (a *auditor) replayFrom() (from, key string) {
	branch := a.tbl.Branch()
	if branch == table.MainBranch {
		branch = a.tbl.PublishedBranch(a.headID)
	}
	if branch == table.MainBranch {
		branch = ""
	}
	key = replay.FromTimeKey(branch)
	return a.tbl.Iceberg().Properties()[key], key
}

// recordedEnd returns the end offsets that the replay the audited table or
// branch is the target of recorded, and the table property holding them
// (nil and "" when it is no replay's target): a replay is a bounded job,
// whose target stops there. Main's end is taken only from a table a replay
// made (replay.PropOf): after a replay branch's publish, a sink takes main
// further.
func (a *auditor) recordedEnd() (mapping.Cut, string) {
	props := a.tbl.Iceberg().Properties()
	branch := a.tbl.Branch()
	if branch == table.MainBranch {
		if props[replay.PropOf] == "" {
			return nil, ""
		}
		branch = ""
	}
	key := replay.UntilKey(branch)
	topics := a.sum.Topics()
	if props[key] == "" || len(topics) != 1 {
		return nil, ""
	}
	end, err := mapping.ParseCut(props[key], topics[0])
	if err != nil {
		return nil, ""
	}
	return end, key
}

// noteBegan notes, in one note, where the ledger records that a sink or a
// replay began the partitions it did not begin at offset 0, and which
// offsets below those starts the broker retains (two notes a partition
// made 6 notes of a replay of 3 partitions: a new user's run).
func (a *auditor) noteBegan() {
	if len(a.began) == 0 {
		return
	}
	starts := make([]string, len(a.began))
	for i, tp := range a.began {
		starts[i] = fmt.Sprintf("%s at offset %d", tp, a.parts[tp].First)
	}
	them := "them"
	if len(a.began) == 1 {
		them = "it"
	}
	var note string
	if a.rep.ReplayFrom != "" {
		note = fmt.Sprintf("the ledger records that the replay --from %s (table property %s) began %s: the table claims nothing below %s, where a replay --from earliest records what retention deleted as lost",
			a.rep.ReplayFrom, a.fromTimeKey, text.AndList(starts), them)
	} else {
		note = fmt.Sprintf("the ledger records that the sink began %s (a new table on a log whose start retention had deleted, or --start latest): the table claims nothing below %s, where a replay --from earliest records what retention deleted as lost",
			text.AndList(starts), them)
	}
	var retained []string
	for _, tp := range a.began {
		if iv, ok := a.retained[tp]; ok {
			retained = append(retained, fmt.Sprintf("%s %s", tp, iv))
		}
	}
	if len(retained) > 0 {
		note += fmt.Sprintf("; the broker retains %s below %s, which the table does not hold", text.AndList(retained), them)
	}
	a.note("%s", note)
}

// anomaly is an interval of a partition that the ledger level names the
// snapshots of.
type anomaly struct {
	tp mapping.TopicPartition
	iv mapping.Interval
}

// snapshotsCovering lists, for every overlap, lost and aborted interval of
// the coverages, the snapshots whose ranges intersect it, in ledger order,
// from one read of the ledger. Each kind's intervals are sorted and
// disjoint, so a range finds those it meets by binary search.
func (a *auditor) snapshotsCovering(ctx context.Context, covers map[mapping.TopicPartition]mapping.Coverage) (map[anomaly][]int64, error) {
	lists := map[mapping.TopicPartition][][]mapping.Interval{}
	for tp, c := range covers {
		if len(c.Overlaps)+len(c.Lost)+len(c.Aborted) > 0 {
			lists[tp] = [][]mapping.Interval{c.Overlaps, c.Lost, c.Aborted}
		}
	}
	ids := map[anomaly][]int64{}
	if len(lists) == 0 {
		return ids, nil
	}
	err := a.eachCommit(ctx, func(c mapping.Commit) {
		seen := map[anomaly]bool{}
		for _, r := range c.Ranges {
			for _, ivs := range lists[r.TopicPartition] {
				i, _ := slices.BinarySearchFunc(ivs, r.Low, func(iv mapping.Interval, o int64) int { return cmp.Compare(iv.High, o+1) })
				for ; i < len(ivs) && ivs[i].Low < r.High; i++ {
					k := anomaly{r.TopicPartition, ivs[i]}
					if !seen[k] {
						seen[k] = true
						ids[k] = append(ids[k], c.SnapshotID)
					}
				}
			}
		}
	})
	return ids, err
}

// joinIDs names snapshots in a finding: "1, 2".
func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

// segments returns the merged, sorted offsets the non-lost ranges of tp
// cover: where rows may be.
func (a *auditor) segments(tp mapping.TopicPartition) []mapping.Interval {
	if cv := a.cover[tp]; cv != nil {
		return cv.Kept()
	}
	return nil
}

// inSegments reports whether offset lies in one of the sorted, disjoint
// intervals.
func inSegments(segs []mapping.Interval, offset int64) bool {
	_, found := findInterval(segs, func(iv mapping.Interval) mapping.Interval { return iv }, offset)
	return found
}

// findInterval returns the index of the element of xs whose interval (of)
// holds offset; xs are sorted by offset and their intervals disjoint.
func findInterval[T any](xs []T, of func(T) mapping.Interval, offset int64) (int, bool) {
	return slices.BinarySearchFunc(xs, offset, func(x T, o int64) int {
		switch iv := of(x); {
		case iv.High <= o:
			return -1
		case iv.Low > o:
			return 1
		}
		return 0
	})
}

func nonNil(ivs []mapping.Interval) []mapping.Interval {
	if ivs == nil {
		return []mapping.Interval{}
	}
	return ivs
}
