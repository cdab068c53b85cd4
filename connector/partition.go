package connector

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/mapping"
)

// partition is one partition's offset accounting within a sink session: the
// open range [low, next) and the rows it produced, the ranges closed since
// the last flush, and the end of a bounded run. It does no I/O: the session
// feeds it the records it fetched and the decisions it took about deleted
// offsets, and takes its ranges and rows at each flush.
//
// The invariant it keeps: the closed ranges, then the open range, cover
// every offset from the first range's low to next exactly once, and every
// row built belongs to the range that covers its offset; a data range and
// its rows are cut at a lost or aborted range, so that no data file spans
// one.
type partition struct {
	tp mapping.TopicPartition
	// low is where the open range starts, next the expected next offset.
	low, next int64
	records   int64
	// dead counts the open range's records that went to the dead-letter
	// table instead of rows; deletes those that deleted their key in an
	// upsert table, ignored those an upsert table skipped on purpose.
	dead, deletes, ignored int64
	// deleted are the offsets, since the last flush, of the rows that
	// delete their key (snapshot.Flush.Deletes); truncated is the offset
	// of the last record since then that truncated the table, -1: none
	// (snapshot.Flush.Truncated).
	deleted   []int64
	truncated int64
	// closed are the ranges finished since the last flush (before a lost
	// or aborted range).
	closed []mapping.Range
	rows   *mapping.RowBuilder
	// pieces are rows of the open range cut from rows before it closed,
	// when the writer schema changed (cutRows).
	pieces []arrow.RecordBatch
	// batches hold the rows of closed ranges, one group per range (the
	// pieces of different writer schemas the flush joins into one batch),
	// so that every data file lies inside one range.
	batches [][]arrow.RecordBatch
	// deadLetters builds the dead-letter rows of the open range;
	// deadBatches hold those of closed ranges, one batch per range. Nil
	// when the sink has no dead-letter table.
	deadLetters *mapping.RowBuilder
	deadBatches []arrow.RecordBatch
	// bytes counts the record bytes in rows since they were last drained.
	bytes int64
	// held counts the record bytes of the rows it holds while it has no
	// stream of its own in the flush: the session's held bytes, which
	// move to the flush's spill lane (session.spillRows).
	held int64
	// deadBytes counts the record bytes and reasons of the dead letters it
	// holds until the flush takes them (session.deadHeld).
	deadBytes int64
	// end is where a bounded run stops the partition; -1 when unbounded.
	end int64
	// skipped is the last lost or aborted range: records inside it that the
	// client fetched before it was declared stay out of the table.
	skipped mapping.Interval
	// checked is next as of the last retention check (-1: none counts).
	checked int64
	paused  bool
	// adopted orders the partitions a group member took on
	// (groupMember.adoptions): a poll that began before a partition was
	// taken on may hold records fetched for an earlier ownership of it.
	adopted uint64
}

// newPartition returns a partition that resumes at pos, stopping at end
// (-1: never).
func newPartition(tp mapping.TopicPartition, pos, end int64) *partition {
	return &partition{tp: tp, low: pos, next: pos, end: end, checked: -1, truncated: -1}
}

func (p *partition) done() bool { return p.end >= 0 && p.next >= p.end }

// holdsRows reports rows held for the flush (not dead letters).
func (p *partition) holdsRows() bool {
	return len(p.batches) > 0 || len(p.pieces) > 0 || (p.rows != nil && p.rows.Rows() > 0)
}

// dirty reports whether the partition has offsets to commit.
func (p *partition) dirty() bool { return p.next > p.low || len(p.closed) > 0 }

// capped limits an offset to the partition's end in bounded mode.
func (p *partition) capped(offset int64) int64 {
	if p.end >= 0 {
		return max(p.next, min(offset, p.end))
	}
	return offset
}

// step is what one fetched record means for a partition.
type step int

const (
	// stepRow: the record is a row of the open range; next moved past it.
	stepRow step = iota
	// stepNoRow: the record moved next without a row (a transaction
	// marker), or proved that the offsets up to the end held nothing
	// readable (a record past the end).
	stepNoRow
	// stepDeleted: the record lies past offsets that retention deleted
	// before they were read. The session decides whether they are a loss
	// (lose, or skip as aborted), then observes the record again.
	stepDeleted
	// stepStale: the record lies in offsets already declared deleted: it
	// was fetched before, and stays out of the table.
	stepStale
	// stepBack: the record lies below next outside any deleted range: the
	// log went back (a recreated topic or a truncated log).
	stepBack
	// stepDone: the partition is done; the record changes nothing.
	stepDone
)

// observe accounts for one fetched record at offset (control for a
// transaction marker), fetched when the partition's log started at
// logStart. It returns what the record means and how many offsets next
// advanced. For stepDeleted, deleted is the interval retention removed
// before it was read, and nothing changed yet.
//
// Jumps inside the retained log are normal (aborted records filtered by
// read_committed, offsets compacted away): the offsets jumped over join the
// open range without rows. Only a jump across the log start is a deletion.
func (p *partition) observe(offset int64, control bool, logStart int64) (s step, advanced int64, deleted mapping.Interval) {
	switch {
	case p.done():
		return stepDone, 0, deleted
	case offset < p.next && p.skipped.Contains(offset):
		return stepStale, 0, deleted
	case offset < p.next:
		// franz-go never returns offsets below the fetch position unless
		// it was reset to the log start because the position was past the
		// log end.
		return stepBack, 0, deleted
	case offset > p.next && logStart > p.next:
		return stepDeleted, 0, mapping.Interval{Low: p.next, High: p.capped(min(logStart, offset))}
	case p.end >= 0 && offset >= p.end:
		// Offsets up to the end that yielded nothing were aborted
		// records: a record past the end proves the consumer passed them.
		advanced = p.end - p.next
		p.next = p.end
		return stepNoRow, advanced, deleted
	}
	advanced = offset + 1 - p.next
	p.next = offset + 1
	if control {
		return stepNoRow, advanced, deleted
	}
	p.records++
	return stepRow, advanced, deleted
}

// unread takes back the record observe just turned into stepRow, moving
// next back to its offset (offsets observe jumped over before it stay in
// the open range, without rows): the record could not be
// decoded for a reason that is no record's fault (the schema registry
// could not be reached), so the session ends before it and the next one
// reads it again.
func (p *partition) unread() {
	p.next--
	p.records--
}

// deadLetter turns the record observe just turned into stepRow into a
// dead letter: it counts in the open range as a dead letter, not a row.
func (p *partition) deadLetter() {
	p.records--
	p.dead++
}

// change turns the record at offset, which observe just turned into
// stepRow, into what it does to an upsert table's row of its key: still a
// row, a row that deletes its key, or no row at all (skipped, or a
// truncate of the whole table).
func (p *partition) change(offset int64, c mapping.Change) {
	switch c {
	case mapping.ChangeDelete:
		p.records--
		p.deletes++
		p.deleted = append(p.deleted, offset)
	case mapping.ChangeTruncate:
		p.records--
		p.deletes++
		p.truncated = offset
	case mapping.ChangeSkip:
		p.records--
		p.ignored++
	}
}

// cutRows moves the open range's rows built so far out of the builder, so
// that the builder can start again for another writer schema.
func (p *partition) cutRows(rows *mapping.RowBuilder) {
	if p.rows.Rows() > 0 {
		p.pieces = append(p.pieces, p.rows.TakeBatch())
	}
	p.rows.Release()
	p.rows = rows
}

// stalledBehind reports, at a retention check, whether the partition made
// no progress since the previous check and the log now starts past next:
// then no record may arrive to reveal that retention deleted offsets it had
// not read (everything after next was deleted), and the session must ask.
// It records this check's position for the next one.
func (p *partition) stalledBehind(logStart int64) bool {
	stalled := p.next == p.checked
	p.checked = p.next
	return stalled && !p.done() && logStart > p.next
}

// drain returns the open range's rows built so far, pieces built for
// earlier writer schemas first, and empties the builder; the range stays
// open. A session streaming rows into data files drains a partition when
// its rows reach a row group's worth; the builder then reserves room for
// as many rows again when reserve is set (mapping.RowBuilder.NewBatch).
func (p *partition) drain(reserve bool) []arrow.RecordBatch {
	out := p.pieces
	p.pieces = nil
	if p.rows != nil && p.rows.Rows() > 0 {
		if reserve {
			out = append(out, p.rows.NewBatch())
		} else {
			out = append(out, p.rows.TakeBatch())
		}
	}
	p.bytes = 0
	return out
}

// takeRows returns every row it holds, a group per range (closed ranges'
// first, then the open range's rows so far, pieces built for earlier
// writer schemas first), and empties its batches and builder; the ranges
// stay as they are. A partition that shares a lane takes its rows out
// before the flush (session.spillRows).
func (p *partition) takeRows() [][]arrow.RecordBatch {
	out := p.batches
	p.batches = nil
	if open := p.drain(false); len(open) > 0 {
		out = append(out, open)
	}
	p.held = 0
	return out
}

// closeRange closes the open range [low, next), when it is not empty, with
// its rows and its dead letters cut into batches of their own.
func (p *partition) closeRange() {
	if p.next > p.low {
		p.closed = append(p.closed, mapping.Range{TopicPartition: p.tp, Interval: mapping.Interval{Low: p.low, High: p.next},
			Records: p.records, DeadLetters: p.dead, Deletes: p.deletes, Skipped: p.ignored})
		group := p.pieces
		if p.rows != nil && p.rows.Rows() > 0 {
			group = append(group, p.rows.TakeBatch())
		}
		if len(group) > 0 {
			p.batches = append(p.batches, group)
		}
		p.pieces, p.bytes = nil, 0
		if p.deadLetters != nil && p.deadLetters.Rows() > 0 {
			p.deadBatches = append(p.deadBatches, p.deadLetters.TakeBatch())
		}
	}
	p.low, p.records, p.dead, p.deletes, p.ignored = p.next, 0, 0, 0, 0
}

// skip records r, a lost or aborted range that starts at next: the open
// range closes before it (its rows in a batch of their own, so that no
// data file spans r), and the partition goes on after it.
func (p *partition) skip(r mapping.Range) {
	p.closeRange()
	p.closed = append(p.closed, r)
	p.low, p.next, p.skipped = r.High, r.High, r.Interval
	p.checked = -1
}

// taken is what a flush takes of a partition (take).
type taken struct {
	ranges []mapping.Range
	// groups are the row batches, a group per range; dead the dead-letter
	// batches. The caller owns them. open is the index in groups of the
	// rows of the range open until the take, -1 when it had none: the
	// others are of ranges a lost or aborted range closed.
	groups [][]arrow.RecordBatch
	open   int
	dead   []arrow.RecordBatch
	// deleted and truncated are partition.deleted and .truncated.
	deleted   []int64
	truncated int64
}

// take returns what the partition holds since the last flush, and starts
// the next range where it ends.
func (p *partition) take() taken {
	open := len(p.batches)
	p.closeRange()
	if open == len(p.batches) {
		open = -1
	}
	out := taken{ranges: p.closed, groups: p.batches, open: open, dead: p.deadBatches, deleted: p.deleted, truncated: p.truncated}
	p.closed, p.batches, p.deadBatches, p.deleted, p.truncated = nil, nil, nil, nil, -1
	p.held, p.deadBytes = 0, 0
	return out
}

// release frees the rows the partition holds.
func (p *partition) release() {
	for _, g := range p.batches {
		releaseAll(g)
	}
	releaseAll(p.pieces)
	releaseAll(p.deadBatches)
	p.batches, p.pieces, p.deadBatches = nil, nil, nil
	if p.rows != nil {
		p.rows.Release()
	}
	if p.deadLetters != nil {
		p.deadLetters.Release()
	}
}

func releaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}

// startPolicy says where a partition the ledger does not have begins.
type startPolicy struct {
	// start applies when the table begins the topic.
	start Start
	// offsets, when set, give each partition's start (a replay); a
	// partition they do not name is not read.
	offsets map[int32]int64
	// replay is set for a run whose end offsets fix the partitions it
	// reads: partitions that appear later are not its business.
	replay bool
	// recordHeadLoss records [0, logStart) as lost when a partition starts
	// at its log start above offset 0.
	recordHeadLoss bool
}

// begin returns the ranges that record where partition tp begins: a start
// range at its first offset, or the head of the log lost before it. ok is
// false when the run does not read tp (replay offsets that do not name
// it). headDeleted is the log start when a partition that begins at its log
// start finds the head of its log deleted (offsets [0, headDeleted) were
// never in any table).
//
// fresh says that every record of the partition was written since the
// table began the topic (the ledger holds other partitions of the topic,
// or the partition was added while the sink ran): it then starts at offset
// 0, and what retention already deleted of it is a loss. --start applies
// once per topic, when the table begins it, like Kafka's
// auto.offset.reset.
func (c startPolicy) begin(tp mapping.TopicPartition, w Watermarks, fresh bool) (ranges []mapping.Range, headDeleted int64, ok bool) {
	var pos int64
	switch {
	case fresh && c.offsets == nil && !c.replay:
		pos = 0
	case c.offsets != nil:
		if pos, ok = c.offsets[tp.Partition]; !ok {
			return nil, 0, false
		}
	case c.start == StartLatest:
		pos = w.LastStable
	default:
		pos = w.LogStart
		if pos > 0 {
			headDeleted = pos
			if c.recordHeadLoss {
				return []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: pos}, Lost: true}}, headDeleted, true
			}
		}
	}
	return []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: pos, High: pos}}}, headDeleted, true
}
