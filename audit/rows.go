package audit

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// partRows is what the rows level learns about one partition.
type partRows struct {
	segs               []mapping.Interval // where the ledger allows rows
	seen, dup, outside *offsetSet
	rows               int64
	keys               *keyRows // the rows' keys, in a state table only
}

// fileRows is what the rows level learns about one data file.
type fileRows struct {
	rows               int64
	pmin, pmax         int32
	omin, omax         int64
	mixedTopics, empty bool
	topic              string
}

// rowsLevel reads the topic, partition and offset columns of every live
// data file: every offset must be unique and inside a range of its
// topic's partition (a row of a topic the ledger does not have lies
// outside every range, whatever its partition and offset), every range must hold exactly its record count, and every file's
// rows must agree with its manifest. In a
// state table it also reads the key column: every key must be held by one
// row and none be null, and a range holds at most its record count.
//
// It runs after the files level, whose list of live files it reuses.
func (a *auditor) rowsLevel(ctx context.Context) error {
	a.addLevel(LevelRows)
	manifest := make(map[string]snapshot.DataFile, len(a.files))
	var total int64
	for _, f := range a.files {
		manifest[f.Path] = f
		total += f.Records
	}
	// The topic column even of a one-topic table: a constant, stored as
	// a dictionary, cheap to read, and a file rewritten behind floe's back
	// with another topic's name in it must not read as this topic's rows.
	cols := []string{mapping.ColPartition, mapping.ColOffset, mapping.ColTopic}
	withKey := a.fold != "" || a.upsert != nil
	var keyed *upsertRows
	switch {
	case a.upsert != nil:
		keyed = &upsertRows{}
		for _, c := range a.upsert.key.Columns {
			if !slices.Contains(cols, c) {
				cols = append(cols, c)
			}
		}
	case withKey:
		cols = append(cols, mapping.ColKey)
	}

	parts := map[mapping.TopicPartition]*partRows{}
	state := func(tp mapping.TopicPartition) *partRows {
		s := parts[tp]
		if s == nil {
			s = &partRows{segs: a.segments(tp), seen: newOffsetSet(), dup: newOffsetSet(), outside: newOffsetSet()}
			if withKey && keyed == nil {
				s.keys = newKeyRows()
			}
			parts[tp] = s
		}
		return s
	}
	perFile := map[string]*fileRows{}
	prog := a.progress("rows: reading partition and offset columns", total)
	defer prog.Finish()

	if keyed != nil {
		cols = a.upsert.columns(cols)
	}
	goneDeletes := map[string]bool{}
	err := a.tbl.ScanFiles(ctx, a.headID, snapshot.ScanOptions{Columns: cols, Concurrency: a.opts.Concurrency, MissingOK: true}, func(fb snapshot.FileBatch) error {
		fr := perFile[fb.Path]
		if fr == nil {
			fr = &fileRows{pmin: math.MaxInt32, pmax: math.MinInt32, omin: math.MaxInt64, omax: math.MinInt64, empty: true}
			perFile[fb.Path] = fr
		}
		if len(fb.GoneDeletes) > 0 {
			m := manifest[fb.Path]
			for _, del := range fb.GoneDeletes {
				// An equality delete applies to every older data file of
				// its partition: one finding a file.
				if goneDeletes[del] {
					continue
				}
				goneDeletes[del] = true
				a.find(Finding{Level: LevelRows, Kind: KindMissingFile, File: del, SnapshotID: m.AddedBy,
					Detail: fmt.Sprintf("the table's current snapshot lists delete file %s (for data file %s among others), but the storage no longer has it: no reader can apply it, so the rows it deletes (old values of updated keys, deleted keys) cannot be told from live ones (floe replay rebuilds the table from the log)", del, fb.Path)})
			}
			prog.Add(m.Records)
			return nil
		}
		if fb.Unreadable != nil {
			m := manifest[fb.Path]
			a.find(Finding{Level: LevelRows, Kind: KindFileContent, File: fb.Path, SnapshotID: m.AddedBy,
				Detail: fmt.Sprintf("the data file was altered after it was committed: it cannot be read as Parquet (%v), so its %d rows cannot be read (floe replay rebuilds the table from the log)", fb.Unreadable, m.Records)})
			prog.Add(m.Records)
			return nil
		}
		if fb.NoColumns {
			m := manifest[fb.Path]
			a.positionless(m, cols)
			prog.Add(m.Records)
			return nil
		}
		if fb.Missing {
			m := manifest[fb.Path]
			a.find(Finding{Level: LevelRows, Kind: KindMissingFile, File: fb.Path, SnapshotID: m.AddedBy,
				Detail: fmt.Sprintf("the table's current snapshot lists data file %s (%d rows, added by snapshot %d), but the storage no longer has it: its rows are lost (floe replay rebuilds the table from the log)", fb.Path, m.Records, m.AddedBy)})
			prog.Add(m.Records)
			return nil
		}
		if fb.Done {
			a.checkFile(manifest[fb.Path], fb.Deletes, fr)
			return nil
		}
		b := fb.Batch
		part, ok1 := column[*array.Int32](b, mapping.ColPartition)
		off, ok2 := column[*array.Int64](b, mapping.ColOffset)
		topic, ok3 := column[*array.String](b, mapping.ColTopic)
		var (
			key   *array.Binary
			keyer *rowKeyer
			ok4   = true
		)
		switch {
		case keyed != nil:
			var err error
			if keyer, err = a.upsert.keyer(b); err != nil {
				return fmt.Errorf("data file %s: %w", fb.Path, err)
			}
		case withKey:
			key, ok4 = column[*array.Binary](b, mapping.ColKey)
		}
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return fmt.Errorf("data file %s: unexpected column types %s", fb.Path, b.Schema())
		}
		var (
			s    *partRows
			last mapping.TopicPartition
		)
		for i := range int(b.NumRows()) {
			tp := mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)}
			if fr.empty {
				fr.topic = tp.Topic
			} else if tp.Topic != fr.topic {
				fr.mixedTopics = true
			}
			if s == nil || tp != last {
				s, last = state(tp), tp
			}
			o := off.Value(i)
			s.rows++
			if s.seen.add(o) {
				s.dup.add(o)
			}
			if !inSegments(s.segs, o) {
				s.outside.add(o)
			}
			switch {
			case keyed != nil:
				keyed.add(a, keyer, tp, i, o)
			case s.keys != nil:
				s.keys.add(a, key, i, o)
			}
			fr.empty = false
			fr.rows++
			fr.pmin, fr.pmax = min(fr.pmin, tp.Partition), max(fr.pmax, tp.Partition)
			fr.omin, fr.omax = min(fr.omin, o), max(fr.omax, o)
		}
		a.rep.RowsRead += b.NumRows()
		prog.Add(b.NumRows())
		return nil
	})
	if err != nil {
		return fmt.Errorf("rows level: %w", err)
	}

	for _, tp := range slices.SortedFunc(maps.Keys(parts), mapping.TopicPartition.Compare) {
		s := parts[tp]
		if a.selected(tp.Topic) {
			a.part(tp).Rows = s.rows
		}
		for _, iv := range s.dup.intervals() {
			a.find(Finding{Level: LevelRows, Kind: KindDuplicate, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
				Detail: fmt.Sprintf("offsets %s are held by more than one row", iv)})
		}
		for _, iv := range s.outside.intervals() {
			a.find(Finding{Level: LevelRows, Kind: KindOutsideLedger, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
				Detail: fmt.Sprintf("rows at offsets %s lie outside every range of the ledger", iv)})
		}
		if s.keys != nil {
			a.checkKeys(tp, s.keys)
		}
	}
	if keyed != nil {
		if err := a.checkUpsertKeys(ctx, keyed); err != nil {
			return err
		}
	}
	// Ranges that count dead letters are counted whether or not the
	// table has a dead-letter table: a ledger counting dead letters in no
	// table read as complete (found by review s66). The dead letters are
	// read first, so that one pass over the ledger checks both counts of
	// every range.
	deadLetters := len(a.deadTables) > 0
	for _, p := range a.sum.Parts {
		deadLetters = deadLetters || p.DeadLetters > 0
	}
	if deadLetters {
		rows := make(map[mapping.TopicPartition]*offsetSet, len(parts))
		for tp, s := range parts {
			rows[tp] = s.seen
		}
		if err := a.deadLetterRows(ctx, rows); err != nil {
			return err
		}
	}
	err = a.eachCommit(ctx, func(c mapping.Commit) {
		for _, r := range c.Ranges {
			if r.Deleted() || !a.selected(r.Topic) {
				continue
			}
			var got int64
			if s := parts[r.TopicPartition]; s != nil {
				got = s.seen.count(r.Interval)
			}
			var detail string
			switch {
			case withKey && got > r.Records:
				// A state or upsert table keeps a subset of each range's
				// records.
				detail = fmt.Sprintf("range %s of snapshot %d folded %d records; the table holds %d distinct offsets in it, more than it folded", r.Interval, c.SnapshotID, r.Records, got)
			case !withKey && got != r.Records:
				detail = fmt.Sprintf("range %s of snapshot %d has %d records in the ledger; the table holds %d distinct offsets in it", r.Interval, c.SnapshotID, r.Records, got)
			}
			if detail != "" {
				a.find(Finding{Level: LevelRows, Kind: KindCountMismatch, Partition: r.TopicPartition, HasPartition: true,
					Offsets: r.Interval, HasOffsets: true, SnapshotID: c.SnapshotID, Detail: detail})
			}
			if deadLetters {
				a.deadLetterCount(c, r)
			}
		}
	})
	if err != nil {
		return err
	}
	for _, p := range a.parts {
		if p.InLedger && p.Rows < 0 {
			p.Rows = 0 // the table holds no row of the partition
		}
	}
	return nil
}

// checkFile compares the rows read from one data file with its manifest
// entry. Delete files make the manifest's row count and bounds an upper
// limit rather than exact.
func (a *auditor) checkFile(m snapshot.DataFile, deletes int, fr *fileRows) {
	// A file of a file group may hold rows of several partitions and
	// topics; the files level checks its group as a whole. So may a
	// compaction's file of an upsert table, which merges an Iceberg
	// partition's files whatever their Kafka partitions: its rows are
	// checked against the fold, range by range.
	grouped := a.grouped(m) || a.upsert != nil && a.commits[m.AddedBy] == nil && a.tbl.IsCompaction(m.AddedBy)
	var problem string
	switch {
	case fr.mixedTopics && !grouped:
		problem = "it holds rows of several topics"
	case !fr.empty && fr.pmin != fr.pmax && !grouped:
		problem = "it holds rows of " + partitionsText(fr.pmin, fr.pmax)
	case deletes == 0 && fr.rows != m.Records:
		problem = fmt.Sprintf("its manifest says %d rows, the file holds %d", m.Records, fr.rows)
	case fr.empty || !m.HasBounds:
	case deletes == 0 && (fr.pmin != m.PartitionMin || fr.pmax != m.PartitionMax || fr.omin != m.Offsets.Low || fr.omax+1 != m.Offsets.High):
		problem = fmt.Sprintf("its manifest says %s offsets %s, the rows are %s offsets %s",
			partitionsText(m.PartitionMin, m.PartitionMax), m.Offsets, partitionsText(fr.pmin, fr.pmax), mapping.Interval{Low: fr.omin, High: fr.omax + 1})
	case fr.pmin < m.PartitionMin || fr.pmax > m.PartitionMax || fr.omin < m.Offsets.Low || fr.omax >= m.Offsets.High:
		problem = fmt.Sprintf("its rows (%s offsets %s) lie outside its manifest bounds (%s offsets %s)",
			partitionsText(fr.pmin, fr.pmax), mapping.Interval{Low: fr.omin, High: fr.omax + 1}, partitionsText(m.PartitionMin, m.PartitionMax), m.Offsets)
	}
	if problem == "" {
		return
	}
	f := Finding{Level: LevelRows, Kind: KindFileContent, File: m.Path, SnapshotID: m.AddedBy,
		Detail: "the data file was altered after it was committed: " + problem}
	if !fr.empty && fr.pmin == fr.pmax {
		f.Partition, f.HasPartition = mapping.TopicPartition{Topic: fr.topic, Partition: fr.pmin}, true
		if fr.topic == "" {
			f.Partition.Topic = a.single
		}
		f.Offsets, f.HasOffsets = mapping.Interval{Low: fr.omin, High: fr.omax + 1}, true
	}
	a.find(f)
}

// positionless accounts for data file m, which has none of the columns
// cols the rows level reads: its rows hold no Kafka position, so they are
// no partition's. Another writer's file (written before floe's columns
// were added to the table) is the files level's foreign-file finding
// already; a file of a floe commit or compaction was replaced since.
func (a *auditor) positionless(m snapshot.DataFile, cols []string) {
	if a.commits[m.AddedBy] == nil && !a.tbl.IsCompaction(m.AddedBy) {
		a.note("data file %s (%d rows, added by snapshot %d, not a floe commit) has none of the columns %s: its rows hold no Kafka position and are no partition's; the files level reports it as a foreign-file",
			m.Path, m.Records, m.AddedBy, strings.Join(cols, ", "))
		return
	}
	a.find(Finding{Level: LevelRows, Kind: KindFileContent, File: m.Path, SnapshotID: m.AddedBy,
		Detail: fmt.Sprintf("the data file was altered after it was committed: it has none of the columns %s, so its %d rows hold no Kafka position (floe replay rebuilds the table from the log)", strings.Join(cols, ", "), m.Records)})
}

// column returns the named column of b as type T.
func column[T arrow.Array](b arrow.RecordBatch, name string) (T, bool) {
	var zero T
	idx := b.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return zero, false
	}
	c, ok := b.Column(idx[0]).(T)
	return c, ok
}

// partitionsText names partition pmin, or partitions pmin to pmax.
func partitionsText(pmin, pmax int32) string {
	if pmin == pmax {
		return fmt.Sprintf("partition %d", pmin)
	}
	return fmt.Sprintf("partitions %d to %d", pmin, pmax)
}
