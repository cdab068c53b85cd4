package audit

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// A state table (table property floe.fold=latest, see mapping.ModeFold)
// keeps, per topic partition and key, only the row of the latest record
// with that key; a tombstone deletes the key and records without a key are
// dropped. Its ledger is an ordinary ledger: every commit records the ranges
// it folded, with Records counting the records folded. What the event-table
// audit assumes does not hold for its rows and files: a range keeps only
// the records no later record of their key superseded, and every fold
// commit rewrites the files holding the keys it changes, so a live file
// spans the ranges of several commits and files of earlier commits are
// replaced. The audit therefore checks these invariants instead (the
// ledger and broker levels are the same for both kinds of table):
//
//   - files: every live data file was added by a floe commit, holds one
//     partition, and its offset bounds lie inside [first, high), where first
//     is the partition's first offset in the ledger and high the end of the
//     adding commit's range of that partition (a fold writes the rows folded
//     so far, never a record it has not read); the live files of a
//     partition hold no more rows than its ranges folded records; no floe
//     file was removed by a snapshot that is not a floe commit;
//   - rows: every offset is unique and inside a (non-lost) range; each range
//     holds at most its record count of rows; every key is held by one row
//     only (per topic partition) and no row has a null key; every file's
//     rows agree with its manifest;
//   - content: every row is a copy of the committed record at its offset,
//     which is neither a tombstone nor keyless; no row's key has a later
//     committed record inside the ranges (the fold applied every record);
//     the latest committed record of every key inside the retained ranges
//     has its row unless it is a tombstone.

// keyID identifies a record key within one audit: two independent 64-bit
// hashes of its bytes, so that telling keys apart needs 16 bytes per key
// and a collision is out of reach (2^-128 per pair).
type keyID [2]uint64

// keyOf returns the keyID of a key.
func (a *auditor) keyOf(key []byte) keyID {
	return keyID{maphash.Bytes(a.keySeeds[0], key), maphash.Bytes(a.keySeeds[1], key)}
}

// keyedOffset is the key of the row at an offset.
type keyedOffset struct {
	key    keyID
	offset int64
}

func compareKeyed(x, y keyedOffset) int {
	return cmp.Or(cmp.Compare(x.key[0], y.key[0]), cmp.Compare(x.key[1], y.key[1]), cmp.Compare(x.offset, y.offset))
}

// stateFiles is the files level of a state table, from manifests only:
// every live file lies in one partition, between the partition's first
// offset and the end of the range of the commit that added it; the files
// of a partition hold no more rows than its ranges folded; floe files were
// removed only by floe commits.
func (a *auditor) stateFiles(ctx context.Context) error {
	if err := a.commitsAddedBy(ctx, addedBy(a.files)); err != nil {
		return err
	}
	first := map[mapping.TopicPartition]int64{}
	records := map[mapping.TopicPartition]int64{}
	for tp, cv := range a.cover {
		c := cv.Coverage()
		first[tp], records[tp] = c.First, c.Records
	}
	held := map[mapping.TopicPartition]int64{}
	unplaced := map[mapping.TopicPartition]bool{} // partitions whose rows manifests cannot count
	ambiguous, unbounded := 0, 0
	for _, f := range a.files {
		c := a.commits[f.AddedBy]
		if c == nil {
			a.foreignFile(f)
			continue
		}
		if !f.HasBounds {
			unbounded++
			for _, r := range c.Ranges {
				unplaced[r.TopicPartition] = true
			}
			continue
		}
		if a.severalPartitions(c, f) {
			continue
		}
		// The commit's reach per topic holding this partition number: the
		// end of its last range of it.
		reach := map[mapping.TopicPartition]int64{}
		for _, r := range c.Ranges {
			if !r.Deleted() && r.Partition == f.PartitionMin {
				reach[r.TopicPartition] = max(reach[r.TopicPartition], r.High)
			}
		}
		var cands []mapping.TopicPartition
		for tp, high := range reach {
			if first[tp] <= f.Offsets.Low && f.Offsets.High <= high {
				cands = append(cands, tp)
			}
		}
		switch len(cands) {
		case 0:
			tp := a.topicOf(f.PartitionMin)
			var where string
			switch len(reach) {
			case 0:
				where = fmt.Sprintf("snapshot %d, which added the file, has no range of partition %d", c.SnapshotID, f.PartitionMin)
			case 1:
				for t, high := range reach {
					tp = t
					where = fmt.Sprintf("a file of snapshot %d can only hold offsets [%d, %d): from the partition's first offset in the ledger to the end of that snapshot's range", c.SnapshotID, first[t], high)
				}
			default:
				where = fmt.Sprintf("in no topic does partition %d's coverage, up to the end of snapshot %d's range, hold them", f.PartitionMin, c.SnapshotID)
			}
			a.find(Finding{Level: LevelFiles, Kind: KindStrayFile, Partition: tp, HasPartition: true,
				Offsets: f.Offsets, HasOffsets: true, File: f.Path, SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("%d rows at offsets %s lie outside what the ledger had folded: %s", f.Records, f.Offsets, where)})
		case 1:
			held[cands[0]] += f.Records
			if a.selected(cands[0].Topic) {
				a.part(cands[0]).Files++
			}
		default:
			ambiguous++
			for _, tp := range cands {
				unplaced[tp] = true
			}
		}
	}
	if ambiguous > 0 {
		a.note("files level: %d data files of commits holding several topics cannot be attributed to one topic from manifests; their partitions' rows were not counted (the rows level counts them)", ambiguous)
	}
	if unbounded > 0 {
		a.note("files level: %d data files have no partition and offset bounds in their manifests (column metrics disabled); their partitions' rows were not counted (the rows level counts them)", unbounded)
	}
	for _, tp := range slices.SortedFunc(maps.Keys(a.cover), mapping.TopicPartition.Compare) {
		if !a.selected(tp.Topic) || unplaced[tp] || held[tp] <= records[tp] {
			continue
		}
		c := a.cover[tp].Coverage()
		a.find(Finding{Level: LevelFiles, Kind: KindCountMismatch, Partition: tp, HasPartition: true,
			Offsets: mapping.Interval{Low: c.First, High: c.Next}, HasOffsets: true,
			Detail: fmt.Sprintf("the live files hold %d rows of the partition, more than the %d records its ranges folded", held[tp], records[tp])})
	}
	return a.foreignRemovals(ctx)
}

// foreignRemovals reports the data files that floe commits added and that a
// snapshot which is not a floe commit removed (an overwrite, a delete or a
// rewrite by another writer). A fold replaces files in every commit, so a
// floe file that is no longer live is a finding only when no floe commit
// removed it. Each lookup lists the files of one snapshot and its parent;
// appends, and snapshots whose summary says they deleted no data file, need
// none.
func (a *auditor) foreignRemovals(ctx context.Context) error {
	meta := a.tbl.Iceberg().Metadata()
	lookups := 0
	for _, s := range table.AncestorsOf(a.headID, meta.SnapshotByID) {
		if a.floeCommit(s.SnapshotID) || s.ParentSnapshotID == nil || meta.SnapshotByID(*s.ParentSnapshotID) == nil {
			continue
		}
		if a.upsert != nil && a.tbl.IsCompaction(s.SnapshotID) {
			continue // compaction applies an upsert table's deletes and drops them
		}
		op := "unknown operation"
		if s.Summary != nil {
			op = string(s.Summary.Operation)
			if s.Summary.Operation == table.OpAppend {
				continue
			}
			if none(s.Summary.Properties, "deleted-data-files") && (a.upsert == nil || none(s.Summary.Properties, "removed-delete-files")) {
				continue
			}
		}
		if lookups == maxRemovedLookups {
			a.note("files level: files removed by snapshots that are not floe commits were looked up for the latest %d such snapshots only", maxRemovedLookups)
			break
		}
		lookups++
		before, err := a.tbl.Files(ctx, *s.ParentSnapshotID)
		if err != nil {
			return fmt.Errorf("list the data files of %s at snapshot %d: %w", a.tbl.Name(), *s.ParentSnapshotID, err)
		}
		after, err := a.tbl.Files(ctx, s.SnapshotID)
		if err != nil {
			return fmt.Errorf("list the data files of %s at snapshot %d: %w", a.tbl.Name(), s.SnapshotID, err)
		}
		if a.upsert != nil {
			if err := a.removedDeleteFiles(ctx, *s.ParentSnapshotID, s.SnapshotID, op); err != nil {
				return err
			}
		}
		kept := make(map[string]bool, len(after))
		for _, f := range after {
			kept[f.Path] = true
		}
		for _, f := range before {
			if kept[f.Path] || !a.floeCommit(f.AddedBy) {
				continue
			}
			fd := Finding{Level: LevelFiles, Kind: KindMissingFile, File: f.Path, SnapshotID: s.SnapshotID,
				Detail: fmt.Sprintf("file added by floe snapshot %d was removed by snapshot %d (%s), which is not a floe commit: its %d rows of the state are gone", f.AddedBy, s.SnapshotID, op, f.Records)}
			if f.HasBounds && f.PartitionMin == f.PartitionMax {
				fd.Partition, fd.HasPartition = a.topicOf(f.PartitionMin), true
				fd.Offsets, fd.HasOffsets = f.Offsets, true
			}
			a.find(fd)
		}
	}
	return nil
}

// none reports whether a snapshot summary counts zero of a file property.
func none(props map[string]string, key string) bool {
	n, ok := props[key]
	if !ok {
		return false
	}
	d, err := strconv.ParseInt(n, 10, 64)
	return err == nil && d == 0
}

// keyRows collects the keys of one partition's rows at the rows level of a
// state table: 24 bytes per row.
type keyRows struct {
	rows []keyedOffset
	null *offsetSet // offsets of rows with a null key
}

func newKeyRows() *keyRows { return &keyRows{null: newOffsetSet()} }

// add records the key of row i of col, at offset.
func (k *keyRows) add(a *auditor, col *array.Binary, i int, offset int64) {
	if col.IsNull(i) {
		k.null.add(offset)
		return
	}
	k.rows = append(k.rows, keyedOffset{a.keyOf(col.Value(i)), offset})
}

// checkKeys reports the rows of tp that break the state table's key
// invariant: a key held by several rows (each row but the one at the
// highest offset is reported: a later record of its key superseded it),
// and rows without a key.
func (a *auditor) checkKeys(tp mapping.TopicPartition, k *keyRows) {
	slices.SortFunc(k.rows, compareKeyed)
	superseded := newOffsetSet()
	for i := 0; i < len(k.rows); {
		j := i + 1
		for j < len(k.rows) && k.rows[j].key == k.rows[i].key {
			j++
		}
		latest := k.rows[j-1].offset
		for _, r := range k.rows[i:j] {
			// Rows at the latest offset itself are duplicated offsets,
			// which the duplicate finding reports.
			if r.offset < latest {
				superseded.add(r.offset)
			}
		}
		i = j
	}
	for _, iv := range superseded.intervals() {
		a.find(Finding{Level: LevelRows, Kind: KindDuplicateKey, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
			Detail: fmt.Sprintf("the rows at offsets %s hold keys that rows at higher offsets hold too; a state table holds one row per key, its latest", iv)})
	}
	for _, iv := range k.null.intervals() {
		a.find(Finding{Level: LevelRows, Kind: KindNullKey, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
			Detail: fmt.Sprintf("the rows at offsets %s have a null key; a state table drops records without a key", iv)})
	}
}

// logRecord is what the content level keeps of a record read from the log
// until its fate (committed or aborted) is known.
type logRecord struct {
	offset int64
	sum    digest
	// raw is the digest of the record's bytes (sum in a raw table), which
	// a dead letter keeps.
	raw digest
	// key, noKey and tombstone are set for state and upsert tables only;
	// skip for an upsert table's record its sink ignores on purpose, and
	// truncate for a change event that truncates an upsert table
	// (--on-truncate delete-all).
	key                              keyID
	noKey, tombstone, skip, truncate bool
	// deadKeyed is set for a dead letter whose key is known (key): it
	// changes no row, and a key whose latest record it is keeps an
	// earlier record's row (staleKeys).
	deadKeyed bool
	// untold is set for a dead letter of an upsert table keyed by decoded
	// columns whose key cannot be told (verifier.deadLetterKey).
	untold bool
	// unavailable is set for a dead letter for Debezium's unchanged-TOAST
	// placeholder (mapping.UnavailableValueError).
	unavailable bool
	// decodes is set in a typed table for a record that decodes into a
	// row as the sink decodes it, with the table's schema of today.
	decodes   bool
	timestamp int64 // microseconds
}

// foldCheck checks at the content level that a state table's rows of one
// partition are the fold of its log: it holds the partition's keyed rows
// (24 bytes each) and, per key met in the retained part of the ranges, its
// latest committed record (about 40 bytes per distinct key).
type foldCheck struct {
	rows   []keyedOffset // sorted by key and offset, unique
	latest map[keyID]latestRecord
	// dead is, per key, its latest dead letter (logRecord.deadKeyed).
	dead map[keyID]latestRecord
	// truncates are the offsets of the partition's committed truncates,
	// which only the table-wide fold can apply (upsertFold.truncates).
	truncates []int64
}

// latestRecord is the latest committed record of a key seen so far.
type latestRecord struct {
	offset    int64
	timestamp int64 // microseconds, for an upsert table's winner rule
	tombstone bool
}

func newFoldCheck(rows []keyedOffset) *foldCheck {
	slices.SortFunc(rows, compareKeyed)
	return &foldCheck{rows: slices.Compact(rows), latest: map[keyID]latestRecord{}, dead: map[keyID]latestRecord{}}
}

// observe folds a committed record inside the ranges. Records are observed
// in the order their fate becomes known (a transaction's at its marker), so
// the latest is chosen by offset.
func (f *foldCheck) observe(rec logRecord) {
	if rec.truncate {
		f.truncates = append(f.truncates, rec.offset)
		return
	}
	if rec.deadKeyed {
		if l, ok := f.dead[rec.key]; !ok || l.offset < rec.offset {
			f.dead[rec.key] = latestRecord{offset: rec.offset, timestamp: rec.timestamp}
		}
		return
	}
	if rec.noKey || rec.skip {
		return
	}
	if l, ok := f.latest[rec.key]; ok && l.offset > rec.offset {
		return
	}
	f.latest[rec.key] = latestRecord{offset: rec.offset, timestamp: rec.timestamp, tombstone: rec.tombstone}
}

// settle compares, once the log is read, every key's latest record with the
// rows holding that key: rows at lower offsets were superseded and should
// be gone; a latest record that is not a tombstone should have its row.
func (v *verifier) settle() {
	f := v.fold
	// Findings come out in map order; flush sorts and merges them.
	for k, l := range f.latest {
		i, _ := slices.BinarySearchFunc(f.rows, keyedOffset{key: k, offset: math.MinInt64}, compareKeyed)
		held := false
		for ; i < len(f.rows) && f.rows[i].key == k; i++ {
			switch o := f.rows[i].offset; {
			case o < l.offset:
				v.find(KindSupersededRow, o)
			case o == l.offset:
				held = true
			}
		}
		if !held && !l.tombstone {
			v.stats.Folded-- // counted as folded away when it was read
			v.find(KindMissingRow, l.offset)
		}
	}
	for k, d := range f.dead {
		if l, ok := f.latest[k]; !ok || l.offset < d.offset {
			v.a.staleKey(position{v.tp, d.offset})
		}
	}
}
