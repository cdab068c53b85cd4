package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// An upsert table (mapping.ModeUpsert) holds one row per key, the row of
// the key's winning record (mapping's winner rule: the latest by offset in
// a partition; across partitions the record of the later commit, then the
// later timestamp, then the higher partition), kept with equality deletes
// committed in the same snapshot as the rows. Keys are table-wide. Its
// ledger is an ordinary ledger whose ranges also count Deletes and
// Skipped. The audit checks, besides the ledger and broker levels every
// table gets:
//
//   - files: every live data file and every live delete file was added by
//     a floe commit (or a floe compaction); a data file holds one
//     partition and lies inside one range of the commit that added it,
//     whose files hold no more rows than the range upserted; every delete
//     file is an equality delete on the table's identifier fields; no
//     floe file, data or delete, was removed by a snapshot that is not a
//     floe commit or compaction;
//   - rows: read with deletes applied, every key is held by one row,
//     every (partition, offset) is unique and inside a range, each range
//     holds at most its record count of rows;
//   - content: the log over the ledger's ranges, folded key by key with
//     the winner rule, equals the table: the same keys, each key's row the
//     one of its winning record (same offset, same digest), no row for a
//     key whose winning record deletes it. The fold holds one entry per
//     key met in the log (upsertWinner).

// upsertTable is what the audit needs of an upsert table's key.
type upsertTable struct {
	key mapping.UpsertKey
	// ids are the schema's identifier field IDs, on which every equality
	// delete must match.
	ids []int
}

// newUpsertTable reads the key of an upsert table.
func newUpsertTable(tbl *snapshot.Table) (*upsertTable, error) {
	k := tbl.UpsertKey()
	cols, err := tbl.KeyColumns()
	if err != nil {
		return nil, fmt.Errorf("audit %s: %w", tbl.Name(), err)
	}
	if len(cols) > 0 {
		// Before a struct key's first commit names them, the key's own.
		k.Columns = cols
	}
	return &upsertTable{key: k, ids: slices.Sorted(slices.Values(tbl.Iceberg().Schema().IdentifierFieldIDs))}, nil
}

// columns returns the columns a scan of the table with deletes applied
// reads to get cols: cols for a table keyed by kafka_key; every column
// (nil) for a table keyed by decoded columns, whose projected scans
// iceberg-go v0.7.0 cannot apply equality deletes to ("equality field ID
// ... not found" in files written before a later schema).
func (u *upsertTable) columns(cols []string) []string {
	if u.key.Source == mapping.KeyFromKafkaKey {
		return cols
	}
	return nil
}

// rowKeyer computes the keyID of each row of a batch from its key columns.
type rowKeyer struct {
	cols []arrow.Array
	// raw is set when the key is kafka_key: its bytes are the key.
	raw bool
}

// keyer finds the key columns of b.
func (u *upsertTable) keyer(b arrow.RecordBatch) (*rowKeyer, error) {
	k := &rowKeyer{raw: u.key.Source == mapping.KeyFromKafkaKey}
	for _, name := range u.key.Columns {
		idx := b.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("no key column %s in %s", name, b.Schema())
		}
		k.cols = append(k.cols, b.Column(idx[0]))
	}
	return k, nil
}

// key returns the keyID of row i, the hash of the key identity the sink
// picks winners by (snapshot.RowKey), and false when a key column is null.
func (k *rowKeyer) key(a *auditor, i int) (keyID, bool) {
	s, ok := snapshot.RowKey(k.cols, i)
	if !ok {
		return keyID{}, false
	}
	return keyID{maphash.String(a.keySeeds[0], s), maphash.String(a.keySeeds[1], s)}, true
}

// text renders the key of row i as floe where --key takes it: the string
// of a kafka_key key, else a JSON object of the key columns.
func (k *rowKeyer) text(names []string, i int) string {
	if k.raw {
		switch c := k.cols[0].(type) {
		case *array.String:
			return c.Value(i)
		case *array.Binary:
			return string(c.Value(i))
		}
	}
	obj := map[string]any{}
	for j, c := range k.cols {
		obj[names[j]] = c.GetOneForMarshal(i)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Sprint(obj)
	}
	return string(b)
}

// keyedRow is a row's key and position: 32 bytes.
type keyedRow struct {
	key    keyID
	offset int64
	tp     int32 // index into auditor.tpIndex
}

func compareKeyedRows(x, y keyedRow) int {
	return cmp.Or(cmp.Compare(x.key[0], y.key[0]), cmp.Compare(x.key[1], y.key[1]),
		cmp.Compare(x.tp, y.tp), cmp.Compare(x.offset, y.offset))
}

// tpID returns the small index of tp (tpIndex), adding it.
func (a *auditor) tpID(tp mapping.TopicPartition) int32 {
	if i, ok := a.tpIDs[tp]; ok {
		return i
	}
	i := int32(len(a.tpIndex))
	a.tpIndex = append(a.tpIndex, tp)
	a.tpIDs[tp] = i
	return i
}

// position is one row or record of a finding.
type position struct {
	tp     mapping.TopicPartition
	offset int64
}

func (p position) String() string { return fmt.Sprintf("%s@%d", p.tp, p.offset) }

// maxNamedKeys bounds the keys a finding kind names one by one; the rest
// are counted.
const maxNamedKeys = 20

// upsertFiles is the files level of an upsert table, from manifests only.
func (a *auditor) upsertFiles(ctx context.Context) error {
	deletes, err := a.tbl.DeleteFiles(ctx, a.headID)
	if err != nil {
		return fmt.Errorf("list the delete files of %s: %w", a.tbl.Name(), err)
	}
	adders := addedBy(a.files)
	for _, d := range deletes {
		adders[d.AddedBy] = true
	}
	if err := a.commitsAddedBy(ctx, adders); err != nil {
		return err
	}
	held := map[rangeKey]int64{}
	// A file group's files hold the rows of all its ranges together.
	type group struct {
		rows   int64
		ranges []mapping.Range
	}
	groups := map[[2]int64]*group{}
	strays := map[[2]int64]bool{}
	for _, f := range a.files {
		c := a.commits[f.AddedBy]
		if c == nil && a.tbl.IsCompaction(f.AddedBy) {
			continue // compaction applies deletes: its files hold any kept rows (rows level)
		}
		if c == nil {
			a.foreignFile(f)
			continue
		}
		if g, i, ok := groupOf(c, f.Path); ok {
			k := [2]int64{c.SnapshotID, int64(i)}
			if groups[k] == nil {
				groups[k] = &group{}
			}
			groups[k].ranges = a.placeGroupFile(c, g, i, f, strays)
			groups[k].rows += f.Records
			continue
		}
		if !f.HasBounds {
			continue
		}
		if in := a.rangesHolding(c, f); len(in) == 1 {
			held[rangeKey{c.SnapshotID, in[0]}] += f.Records
			if a.selected(in[0].Topic) {
				a.part(in[0].TopicPartition).Files++
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(held), func(x, y rangeKey) int {
		return cmp.Or(cmp.Compare(x.snapshot, y.snapshot), x.r.TopicPartition.Compare(y.r.TopicPartition), cmp.Compare(x.r.Low, y.r.Low))
	}) {
		if n := held[k]; n > k.r.Records && a.selected(k.r.Topic) {
			a.find(Finding{Level: LevelFiles, Kind: KindCountMismatch, Partition: k.r.TopicPartition, HasPartition: true,
				Offsets: k.r.Interval, HasOffsets: true, SnapshotID: k.snapshot,
				Detail: fmt.Sprintf("range %s of snapshot %d upserted %d records; the files it added hold %d rows, more than it upserted", k.r.Interval, k.snapshot, k.r.Records, n)})
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(groups), func(x, y [2]int64) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) }) {
		g := groups[k]
		var upserted int64
		for _, r := range g.ranges {
			upserted += r.Records
		}
		// A group of several topics is reported under the first one the
		// audit selected.
		first := slices.IndexFunc(g.ranges, func(r mapping.Range) bool { return a.selected(r.Topic) })
		if first < 0 || g.rows <= upserted {
			continue
		}
		tp := g.ranges[first].TopicPartition
		a.find(Finding{Level: LevelFiles, Kind: KindCountMismatch, Partition: tp, HasPartition: true,
			Others: otherPartitions(tp, g.ranges), SnapshotID: k[0],
			Detail: fmt.Sprintf("ranges %s of snapshot %d upserted %d records; the files of their file group hold %d rows, more than they upserted", describeRanges(g.ranges), k[0], upserted, g.rows)})
	}
	for _, d := range deletes {
		fd := Finding{Level: LevelFiles, Kind: KindDeleteFiles, File: d.Path, SnapshotID: d.AddedBy}
		switch {
		case !a.floeCommit(d.AddedBy) && !a.tbl.IsCompaction(d.AddedBy):
			fd.Detail = fmt.Sprintf("delete file added by snapshot %d, which is not a floe commit: its %d deletes hide rows the ledger does not explain", d.AddedBy, d.Records)
		case !d.Equality:
			fd.Detail = fmt.Sprintf("position-delete file (%s) of snapshot %d: floe deletes rows of an upsert table with equality deletes on its key only", d.Format, d.AddedBy)
		case !slices.Equal(slices.Sorted(slices.Values(d.EqualityFieldIDs)), a.upsert.ids):
			fd.Detail = fmt.Sprintf("equality-delete file of snapshot %d matches on field IDs %v, not on the table's identifier fields %v (the key %s)", d.AddedBy, d.EqualityFieldIDs, a.upsert.ids, a.upsert.key)
		default:
			continue
		}
		a.find(fd)
	}
	return a.foreignRemovals(ctx)
}

// removedDeleteFiles reports the delete files that floe commits added and
// that the non-floe snapshot s (whose parent is parent) removed: the
// deletes they held no longer hide the rows they replaced.
func (a *auditor) removedDeleteFiles(ctx context.Context, parent, s int64, op string) error {
	before, err := a.tbl.DeleteFiles(ctx, parent)
	if err != nil {
		return fmt.Errorf("list the delete files of %s at snapshot %d: %w", a.tbl.Name(), parent, err)
	}
	after, err := a.tbl.DeleteFiles(ctx, s)
	if err != nil {
		return fmt.Errorf("list the delete files of %s at snapshot %d: %w", a.tbl.Name(), s, err)
	}
	kept := make(map[string]bool, len(after))
	for _, f := range after {
		kept[f.Path] = true
	}
	for _, f := range before {
		if kept[f.Path] || !a.floeCommit(f.AddedBy) {
			continue
		}
		a.find(Finding{Level: LevelFiles, Kind: KindMissingFile, File: f.Path, SnapshotID: s,
			Detail: fmt.Sprintf("equality-delete file added by floe snapshot %d was removed by snapshot %d (%s), which is not a floe commit: the rows its %d deletes replaced may be live again", f.AddedBy, s, op, f.Records)})
	}
	return nil
}

// upsertRows is what the rows level of an upsert table keeps: every row's
// key and position (32 bytes a row), sorted by key once read.
type upsertRows struct {
	rows []keyedRow
	null []position
}

// add records row i of a batch of partition tp.
func (u *upsertRows) add(a *auditor, k *rowKeyer, tp mapping.TopicPartition, i int, offset int64) {
	id, ok := k.key(a, i)
	if !ok {
		u.null = append(u.null, position{tp, offset})
		return
	}
	u.rows = append(u.rows, keyedRow{key: id, offset: offset, tp: a.tpID(tp)})
}

// checkUpsertKeys reports keys held by more than one row and rows with a
// null key; the keys are named from a second read of those rows.
func (a *auditor) checkUpsertKeys(ctx context.Context, u *upsertRows) error {
	slices.SortFunc(u.rows, compareKeyedRows)
	var dups [][]position
	for i := 0; i < len(u.rows); {
		j := i + 1
		for j < len(u.rows) && u.rows[j].key == u.rows[i].key {
			j++
		}
		if j-i > 1 {
			var ps []position
			for _, r := range u.rows[i:j] {
				ps = append(ps, position{a.tpIndex[r.tp], r.offset})
			}
			dups = append(dups, ps)
		}
		i = j
	}
	var named []position
	for _, ps := range dups[:min(len(dups), maxNamedKeys)] {
		named = append(named, ps[0])
	}
	names, err := a.keyTexts(ctx, named)
	if err != nil {
		return err
	}
	for n, ps := range dups {
		where := make([]string, len(ps))
		for i, p := range ps {
			where[i] = p.String()
		}
		key, named := "a key", ""
		if n < maxNamedKeys {
			named = names[ps[0]]
			key = keyPhrase(named)
		}
		first := ps[0]
		a.find(Finding{Level: LevelRows, Kind: KindDuplicateKey, Partition: first.tp, HasPartition: true,
			Offsets: mapping.Interval{Low: first.offset, High: first.offset + 1}, HasOffsets: true,
			Detail: fmt.Sprintf("%s is held by %d rows (%s); an upsert table holds one row per key", key, len(ps), strings.Join(where, ", ")), Key: named})
	}
	for _, p := range u.null {
		a.find(Finding{Level: LevelRows, Kind: KindNullKey, Partition: p.tp, HasPartition: true,
			Offsets: mapping.Interval{Low: p.offset, High: p.offset + 1}, HasOffsets: true,
			Detail: fmt.Sprintf("the row at %s has a null key column; an upsert table's key columns are required", p)})
	}
	return nil
}

// keyTexts reads the keys of the rows at ps (a few) from the table head.
func (a *auditor) keyTexts(ctx context.Context, ps []position) (map[position]string, error) {
	out := map[position]string{}
	if len(ps) == 0 {
		return out, nil
	}
	var any []iceberg.BooleanExpression
	for _, p := range ps {
		any = append(any, iceberg.NewAnd(iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), p.tp.Partition),
			iceberg.EqualTo(iceberg.Reference(mapping.ColOffset), p.offset)))
	}
	filter := any[0]
	if len(any) > 1 {
		filter = iceberg.NewOr(any[0], any[1], any[2:]...)
	}
	cols := a.upsert.columns(slices.Compact(append([]string{mapping.ColTopic, mapping.ColPartition, mapping.ColOffset}, a.upsert.key.Columns...)))
	// A file the storage lost (or whose deletes it lost) is the rows
	// level's finding; the rest is read.
	err := a.tbl.ScanFiles(ctx, a.headID, snapshot.ScanOptions{Columns: cols, Filter: filter, Concurrency: a.opts.Concurrency, MissingOK: true}, func(fb snapshot.FileBatch) error {
		if fb.Done {
			return nil
		}
		k, err := a.upsert.keyer(fb.Batch)
		if err != nil {
			return fmt.Errorf("data file %s: %w", fb.Path, err)
		}
		return eachRowPosition(fb.Batch, func(i int, tp mapping.TopicPartition, offset int64) {
			out[position{tp, offset}] = k.text(a.upsert.key.Columns, i)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read the keys of %d rows of %s: %w", len(ps), a.tbl.Name(), err)
	}
	return out, nil
}

// eachRowPosition calls fn with the index, partition and offset of every
// row of a batch holding the topic, partition and offset columns.
func eachRowPosition(b arrow.RecordBatch, fn func(int, mapping.TopicPartition, int64)) error {
	topic, ok1 := column[*array.String](b, mapping.ColTopic)
	part, ok2 := column[*array.Int32](b, mapping.ColPartition)
	off, ok3 := column[*array.Int64](b, mapping.ColOffset)
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("unexpected column types %s", b.Schema())
	}
	for i := range int(b.NumRows()) {
		fn(i, mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)}, off.Value(i))
	}
	return nil
}

// upsertWinner is the fold's entry for one key: its winning record so far.
// With the keyID it keys, one entry is 16 + 32 bytes (plus the map's own
// overhead, measured in BenchmarkUpsertFold).
type upsertWinner struct {
	offset    int64
	timestamp int64 // microseconds
	commit    int32 // index of the commit whose range holds the offset
	tp        int32 // auditor.tpIndex
	tombstone bool
}

// record is the winner rule's view of w.
func (a *auditor) keyRecord(w upsertWinner) mapping.KeyRecord {
	return mapping.KeyRecord{Partition: a.tpIndex[w.tp], Offset: w.offset, Timestamp: time.UnixMicro(w.timestamp)}
}

// supersedes reports whether w replaces the key's winner so far, e: the
// record of the later commit, or within one commit mapping.Supersedes,
// the rule the sink applies (both are each partition's latest record of
// the key, which the partition's own fold picked by offset).
func (a *auditor) supersedes(w, e upsertWinner) bool {
	if w.commit != e.commit {
		return w.commit > e.commit
	}
	return mapping.Supersedes(a.keyRecord(w), a.keyRecord(e))
}

// commitIndex maps the offsets of each partition to the index, in the
// ledger, of the commit whose range holds them, and keeps each range's
// counts (rangeAccount): of the ledger, all an upsert table's content
// level needs, about 56 bytes a range.
type commitIndex map[mapping.TopicPartition][]indexedRange

type indexedRange struct {
	mapping.Interval
	counts [4]int64 // records, deletes, skipped, dead letters
	commit int32
}

// add indexes the ranges of the i-th commit of the ledger; sorted sorts
// the index once every commit is added.
func (ci commitIndex) add(i int, c mapping.Commit) {
	for _, r := range c.Ranges {
		if !r.Deleted() && r.Len() > 0 {
			ci[r.TopicPartition] = append(ci[r.TopicPartition], indexedRange{r.Interval, [4]int64{r.Records, r.Deletes, r.Skipped, r.DeadLetters}, int32(i)})
		}
	}
}

func (ci commitIndex) sorted() {
	for _, rs := range ci {
		slices.SortStableFunc(rs, func(x, y indexedRange) int { return cmp.Compare(x.Low, y.Low) })
	}
}

// of returns the commit holding offset of tp, or -1.
func (ci commitIndex) of(tp mapping.TopicPartition, offset int64) int32 {
	rs := ci[tp]
	if i, ok := findInterval(rs, func(r indexedRange) mapping.Interval { return r.Interval }, offset); ok {
		return rs[i].commit
	}
	return -1
}

// upsertFold is the content level's fold of an upsert table's log: per key
// met in the retained part of the ranges, its winning record.
type upsertFold struct {
	winners map[keyID]upsertWinner
	// others are, for a key met in several partitions, the latest
	// retained record of its key in each partition but the winner's: a
	// row of such a partition whose record is gone is stale when a later
	// one of its partition is retained, whichever partition won; and one
	// of them wins when a truncate removed the winner (winnerOf).
	others map[keyID][]upsertWinner
	// dead is, per key, its latest dead letter by the winner rule
	// (logRecord.deadKeyed).
	dead    map[keyID]upsertWinner
	commits commitIndex
	// lastUnverified is lastUnverifiedCommits, once computed.
	lastUnverified map[mapping.TopicPartition]int32
	// rows are the table's rows, sorted by key; byTP their digests per
	// partition, sorted by offset.
	rows []keyedRow
	byTP map[mapping.TopicPartition][]offsetDigest
	// unverifiable are, per partition, the offsets whose records the log
	// no longer holds (below its start, or compacted away).
	unverifiable map[mapping.TopicPartition][]mapping.Interval
	// truncates are the truncates the sink applied (--on-truncate
	// delete-all) that the log holds, sorted by commit, partition and
	// offset once every partition is read.
	truncates []truncation
}

// truncation is a truncate the sink applied: its commit's snapshot
// replaced every data file, so that rows of earlier commits went, and so
// did the rows of its own commit and partition before it; its commit's
// other rows stayed (snapshot.Flush.Truncated).
type truncation struct {
	commit int32
	tp     int32 // auditor.tpIndex
	offset int64
}

// removedBy returns the truncate that removed the row, or the record, at
// offset of the partition whose index is tp, committed by commit (-1: by
// none, a finding of the rows level); false when no truncate did.
func (f *upsertFold) removedBy(tp int32, offset int64, commit int32) (truncation, bool) {
	if commit < 0 {
		return truncation{}, false
	}
	i, _ := slices.BinarySearchFunc(f.truncates, commit, func(t truncation, c int32) int { return cmp.Compare(t.commit, c) })
	for ; i < len(f.truncates); i++ {
		if t := f.truncates[i]; t.commit > commit || t.tp == tp && t.offset > offset {
			return t, true
		}
	}
	return truncation{}, false
}

// rowRemovedBy is removedBy for the table's row r.
func (f *upsertFold) rowRemovedBy(a *auditor, r keyedRow) (truncation, bool) {
	if len(f.truncates) == 0 {
		return truncation{}, false
	}
	return f.removedBy(r.tp, r.offset, f.commits.of(a.tpIndex[r.tp], r.offset))
}

// winnerOf returns the winning record of key k, whose fold's winner is w,
// among the records no truncate removed: w, or the best of the other
// partitions' latest records a truncate left (within the truncate's
// commit, as the sink picks among the rows it keeps); false when
// truncates removed them all.
func (a *auditor) winnerOf(f *upsertFold, k keyID, w upsertWinner) (upsertWinner, bool) {
	if _, gone := f.removedBy(w.tp, w.offset, w.commit); !gone {
		return w, true
	}
	var (
		best upsertWinner
		kept bool
	)
	for _, o := range f.others[k] {
		if _, gone := f.removedBy(o.tp, o.offset, o.commit); !gone && (!kept || a.supersedes(o, best)) {
			best, kept = o, true
		}
	}
	return best, kept
}

// merge folds one partition's latest record of each key into the
// table-wide fold, with the winner rule, and keeps the partition's
// truncates, applied once every partition is read (settleUpsert).
func (a *auditor) merge(f *upsertFold, tp mapping.TopicPartition, latest, dead map[keyID]latestRecord, truncates []int64) {
	id := a.tpID(tp)
	for _, o := range truncates {
		f.truncates = append(f.truncates, truncation{commit: f.commits.of(tp, o), tp: id, offset: o})
	}
	for k, l := range dead {
		w := upsertWinner{offset: l.offset, timestamp: l.timestamp, commit: f.commits.of(tp, l.offset), tp: id}
		if e, ok := f.dead[k]; !ok || a.supersedes(w, e) {
			f.dead[k] = w
		}
	}
	for k, l := range latest {
		w := upsertWinner{offset: l.offset, timestamp: l.timestamp, commit: f.commits.of(tp, l.offset), tp: id, tombstone: l.tombstone}
		e, ok := f.winners[k]
		switch {
		case !ok:
			f.winners[k] = w
		case a.supersedes(w, e):
			f.others[k] = append(f.others[k], e)
			f.winners[k] = w
		default:
			f.others[k] = append(f.others[k], w)
		}
	}
}

// latestIn returns the offset of the latest retained record of key k,
// whose winner is w, in partition tp, and false when tp retains none.
func (f *upsertFold) latestIn(k keyID, w upsertWinner, tp int32) (int64, bool) {
	if w.tp == tp {
		return w.offset, true
	}
	for _, o := range f.others[k] {
		if o.tp == tp {
			return o.offset, true
		}
	}
	return 0, false
}

// unverifiedAfter reports whether a partition other than the one whose
// index is tp has offsets the log no longer holds in a commit at or after
// commit: a record there (a delete among them) may have won over the
// winner of a key, so the winner's row may rightly be missing.
func (f *upsertFold) unverifiedAfter(a *auditor, tp int32, commit int32) bool {
	if f.lastUnverified == nil {
		f.lastUnverified = f.lastUnverifiedCommits(a)
	}
	for other, last := range f.lastUnverified {
		if last >= commit && a.tpIndex[tp] != other {
			return true
		}
	}
	return false
}

// lastUnverifiedCommits returns, per partition, the latest commit whose
// range holds offsets the log no longer holds (-1: none): computed once,
// a check is then one comparison per partition.
func (f *upsertFold) lastUnverifiedCommits(a *auditor) map[mapping.TopicPartition]int32 {
	last := map[mapping.TopicPartition]int32{}
	for tp, rs := range f.commits {
		last[tp] = -1
		for _, r := range rs {
			if r.commit > last[tp] && (!f.verifiable(a, tp, r.Low) || !f.verifiable(a, tp, r.High-1) || f.holeIn(tp, r.Interval)) {
				last[tp] = r.commit
			}
		}
	}
	return last
}

// holeIn reports whether an unverifiable interval of tp overlaps iv.
func (f *upsertFold) holeIn(tp mapping.TopicPartition, iv mapping.Interval) bool {
	for _, h := range f.unverifiable[tp] {
		if h.Low < iv.High && iv.Low < h.High {
			return true
		}
	}
	return false
}

// readUpsertRows reads every row of the head, with deletes applied: its
// key, position and content digest (upsertFold.rows and byTP).
func (a *auditor) readUpsertRows(ctx context.Context) (*upsertFold, error) {
	f := &upsertFold{winners: map[keyID]upsertWinner{}, others: map[keyID][]upsertWinner{}, dead: map[keyID]upsertWinner{}, commits: a.upCommits,
		byTP: map[mapping.TopicPartition][]offsetDigest{}, unverifiable: map[mapping.TopicPartition][]mapping.Interval{}}
	layout := a.tbl.Layout()
	value := layout.RawValueColumn()
	var cols []string // every column of a typed table
	if a.typed == nil {
		cols = slices.Compact(slices.Sorted(slices.Values(append(append(contentColumns(value), mapping.ColTopic, mapping.ColPartition), a.upsert.key.Columns...))))
	}
	var d digester
	// A file the storage lost (or whose deletes it lost) is the rows
	// level's finding; the rest is read.
	err := a.tbl.ScanFiles(ctx, a.headID, snapshot.ScanOptions{Columns: cols, Concurrency: a.opts.Concurrency, MissingOK: true}, func(fb snapshot.FileBatch) error {
		if fb.Done {
			return nil
		}
		b := fb.Batch
		a.contentRows += b.NumRows()
		k, err := a.upsert.keyer(b)
		if err != nil {
			return fmt.Errorf("data file %s: %w", fb.Path, err)
		}
		var c rowColumns
		if a.typed == nil {
			if c, err = newRowColumns(b, value); err != nil {
				return fmt.Errorf("data file %s: %w", fb.Path, err)
			}
		}
		var rowErr error
		// Each row is its own topic's, in a one-topic table too: rows
		// rewritten to name another topic were verified as the table's
		// (found by review s64).
		err = eachRowPosition(b, func(i int, tp mapping.TopicPartition, offset int64) {
			if rowErr != nil || !a.selected(tp.Topic) {
				return
			}
			sum := digest{}
			if a.typed != nil {
				sum, rowErr = d.typedRow(b, i, layout)
			} else {
				sum = d.row(c, i)
			}
			f.byTP[tp] = append(f.byTP[tp], offsetDigest{offset, sum})
			if id, ok := k.key(a, i); ok {
				f.rows = append(f.rows, keyedRow{key: id, offset: offset, tp: a.tpID(tp)})
			}
		})
		if err == nil {
			err = rowErr
		}
		if err != nil {
			return fmt.Errorf("data file %s: %w", fb.Path, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the rows of %s: %w", a.tbl.Name(), err)
	}
	for tp, rs := range f.byTP {
		sortDigests(rs)
		f.byTP[tp] = slices.CompactFunc(rs, func(x, y offsetDigest) bool { return x.offset == y.offset })
	}
	slices.SortFunc(f.rows, compareKeyedRows)
	return f, nil
}

// rowsOf returns the rows of tp with offsets in iv.
func (f *upsertFold) rowsOf(tp mapping.TopicPartition, iv mapping.Interval) []offsetDigest {
	rs := f.byTP[tp]
	i, _ := slices.BinarySearchFunc(rs, iv.Low, func(r offsetDigest, o int64) int { return cmp.Compare(r.offset, o) })
	j, _ := slices.BinarySearchFunc(rs, iv.High, func(r offsetDigest, o int64) int { return cmp.Compare(r.offset, o) })
	return rs[i:j]
}

// verifiable reports whether the record at offset of tp was read from the
// log: inside the content level's interval of tp and in no hole.
func (f *upsertFold) verifiable(a *auditor, tp mapping.TopicPartition, offset int64) bool {
	p := a.parts[tp]
	if p == nil || p.Broker == nil || offset < max(p.First, p.Broker.LogStart) || offset >= min(p.Next, p.Broker.HighWatermark) {
		return false
	}
	for _, h := range f.unverifiable[tp] {
		if h.Contains(offset) {
			return false
		}
	}
	return true
}

// upsertFinding is one key the fold and the table disagree on.
type upsertFinding struct {
	kind Kind
	// row is the table's row concerned, record the log's (winning) record.
	row, record position
	hasRow      bool
	tombstone   bool
	// truncated: the row is one a truncate removed, record.
	truncated bool
}

// settleUpsert compares, once the log of every partition is folded, each
// key's winning record with the table's rows of that key: the winner's
// row must be there (it was compared with its record, digest for digest,
// as the log was read), unless the winner deletes the key; every other row
// of the key is superseded. A row whose own record the log no longer
// holds is superseded only when the winner's commit is later than its own:
// otherwise nothing retained tells which won.
func (a *auditor) settleUpsert(ctx context.Context, f *upsertFold) error {
	slices.SortFunc(f.truncates, func(x, y truncation) int {
		return cmp.Or(cmp.Compare(x.commit, y.commit), cmp.Compare(x.tp, y.tp), cmp.Compare(x.offset, y.offset))
	})
	for k, d := range f.dead {
		if _, gone := f.removedBy(d.tp, d.offset, d.commit); gone {
			continue // a truncate left the key no row to keep stale
		}
		w, ok := f.winners[k]
		if ok {
			w, ok = a.winnerOf(f, k, w)
		}
		if !ok || a.supersedes(d, w) {
			a.staleKey(position{a.tpIndex[d.tp], d.offset})
		}
	}
	var found []upsertFinding
	// Every row a truncate removed is a finding, whether or not the log
	// still holds its record or any record of its key.
	for _, r := range f.rows {
		if t, gone := f.rowRemovedBy(a, r); gone {
			found = append(found, upsertFinding{kind: KindSupersededRow, row: position{a.tpIndex[r.tp], r.offset}, hasRow: true,
				record: position{a.tpIndex[t.tp], t.offset}, truncated: true})
		}
	}
	for k, first := range f.winners {
		w, kept := a.winnerOf(f, k, first)
		if !kept {
			// Truncates removed every record of the key: like a delete,
			// it leaves no row.
			w = first
			w.tombstone = true
		}
		i, _ := slices.BinarySearchFunc(f.rows, keyedRow{key: k, tp: math.MinInt32, offset: math.MinInt64}, compareKeyedRows)
		rec := position{a.tpIndex[w.tp], w.offset}
		// held: the winner's row is there; unjudged: a row whose record is
		// gone may have won over the winner, so the winner may rightly
		// have no row.
		held, unjudged := false, false
		for ; i < len(f.rows) && f.rows[i].key == k; i++ {
			r := f.rows[i]
			row := position{a.tpIndex[r.tp], r.offset}
			if _, gone := f.rowRemovedBy(a, r); gone {
				continue // found above
			}
			if !w.tombstone && r.tp == w.tp && r.offset == w.offset {
				held = true
				continue
			}
			if !f.verifiable(a, row.tp, row.offset) && f.commits.of(row.tp, row.offset) >= w.commit {
				// A later record of its own partition is retained: it
				// wins over the row's, whichever partition won.
				if l, ok := f.latestIn(k, first, r.tp); !ok || l <= r.offset {
					unjudged = true
					continue
				}
			}
			found = append(found, upsertFinding{kind: KindSupersededRow, row: row, hasRow: true, record: rec, tombstone: w.tombstone})
		}
		if !held && !unjudged && !w.tombstone && !f.unverifiedAfter(a, w.tp, w.commit) {
			a.parts[rec.tp].Content.Folded-- // counted as folded away when it was read
			found = append(found, upsertFinding{kind: KindMissingRow, record: rec})
		}
	}
	slices.SortFunc(found, func(x, y upsertFinding) int {
		return cmp.Or(cmp.Compare(x.kind, y.kind), x.record.tp.Compare(y.record.tp), cmp.Compare(x.record.offset, y.record.offset),
			x.row.tp.Compare(y.row.tp), cmp.Compare(x.row.offset, y.row.offset))
	})
	var rows, records []position
	for _, fd := range found[:min(len(found), maxNamedKeys)] {
		if fd.hasRow {
			rows = append(rows, fd.row)
		} else {
			records = append(records, fd.record)
		}
	}
	rowKeys, err := a.keyTexts(ctx, rows)
	if err != nil {
		return err
	}
	recordKeys, err := a.recordKeys(ctx, records)
	if err != nil {
		return err
	}
	for n, fd := range found {
		key, named := "its key", ""
		if n < maxNamedKeys {
			named = recordKeys[fd.record]
			if fd.hasRow {
				named = rowKeys[fd.row]
			}
			key = keyPhrase(named)
		}
		at := fd.record
		var detail string
		switch {
		case fd.kind == KindMissingRow:
			detail = fmt.Sprintf("the record at %s is the winning record of %s in the log and not a delete, but the table has no row of that key", fd.record, key)
		case fd.truncated:
			at = fd.row
			detail = fmt.Sprintf("the row at %s holds %s, which the truncate at %s removed (--on-truncate delete-all: its commit removed every row committed before it, and the rows of its partition before it in its own commit): the table should not hold it", fd.row, key, fd.record)
		case fd.tombstone:
			at = fd.row
			detail = fmt.Sprintf("the row at %s holds %s, which the record at %s deletes (the key's winning record): the table should have no row of it", fd.row, key, fd.record)
		default:
			at = fd.row
			detail = fmt.Sprintf("the row at %s holds %s, whose winning record in the log is at %s: the row is stale", fd.row, key, fd.record)
		}
		a.find(Finding{Level: LevelContent, Kind: fd.kind, Partition: at.tp, HasPartition: true,
			Offsets: mapping.Interval{Low: at.offset, High: at.offset + 1}, HasOffsets: true, Detail: detail, Key: named})
	}
	return nil
}

// recordKeys reads the keys of the records at ps (a few) from the log, as
// Kafka holds them.
func (a *auditor) recordKeys(ctx context.Context, ps []position) (map[position]string, error) {
	out := map[position]string{}
	for _, p := range ps {
		var rec *kgo.Record
		err := a.opts.Broker.ReadLog(ctx, p.tp.Topic, p.tp.Partition, p.offset, p.offset+1, func(r *kgo.Record, _ int64) bool {
			if r.Offset == p.offset {
				rec = r
			}
			return false
		})
		if err != nil {
			return nil, fmt.Errorf("read the key of the record at %s: %w", p, err)
		}
		if rec == nil {
			continue
		}
		out[p] = string(rec.Key)
		if a.upsert.key.Source != mapping.KeyFromKafkaKey && a.typed != nil {
			// A key of decoded columns is named as its row names it (the
			// JSON object of the key columns, as floe where --key takes
			// it), not by the record key's bytes (found by review: a
			// Debezium key's whole Connect schema).
			var d digester
			_, _, _, err := a.typed.digest(ctx, &d, rec, func(b arrow.RecordBatch) error {
				k, err := a.upsert.keyer(b)
				if err == nil {
					out[p] = k.text(a.upsert.key.Columns, 0)
				}
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("decode the key of the record at %s: %w", p, err)
			}
		}
	}
	return out, nil
}

// rangeAccount counts, per range of one partition wholly inside the part
// of the log the content level reads, its committed records by what they
// do to an upsert table, as its sink decides it: upsert a row, delete the
// key, be skipped on purpose, or go to the dead-letter table (found there,
// or without a usable key). With the offsets that hold no record, they
// must be the range's ledger counts (accounted): every offset accounted for.
type rangeAccount struct {
	ranges []indexedRange // sorted by offset, wholly inside the read part
	got    [][4]int64     // records, deletes, skipped, dead letters
}

// newRangeAccount accounts the ranges of rs (a partition's, sorted by
// offset, none lost or empty: commitIndex) wholly inside iv.
func newRangeAccount(rs []indexedRange, iv mapping.Interval) *rangeAccount {
	acct := &rangeAccount{}
	for _, r := range rs {
		if iv.Low <= r.Low && r.High <= iv.High {
			acct.ranges = append(acct.ranges, r)
		}
	}
	acct.got = make([][4]int64, len(acct.ranges))
	return acct
}

// count classifies a committed record; dead is set when the dead-letter
// table holds it.
func (acct *rangeAccount) count(rec logRecord, dead bool) {
	i, found := findInterval(acct.ranges, func(r indexedRange) mapping.Interval { return r.Interval }, rec.offset)
	if !found {
		return
	}
	switch {
	case dead || rec.noKey:
		acct.got[i][3]++
	case rec.skip:
		acct.got[i][2]++
	case rec.tombstone || rec.truncate:
		// The sink counts a truncate as a delete.
		acct.got[i][1]++
	default:
		acct.got[i][0]++
	}
}

// settleAccount reports the ranges of tp whose counts differ from what the
// log holds (accounted); compacts says the topic's cleanup.policy
// includes compact.
func (a *auditor) settleAccount(tp mapping.TopicPartition, acct *rangeAccount, compacts bool) {
	for i, r := range acct.ranges {
		g := acct.got[i]
		if accounted(g, r.counts, compacts) {
			continue
		}
		a.find(Finding{Level: LevelContent, Kind: KindCountMismatch, Partition: tp, HasPartition: true, Offsets: r.Interval, HasOffsets: true,
			Detail: fmt.Sprintf("range %s counts %d upserts, %d deletes, %d skipped and %d dead letters; its committed records in the log, classified as the sink classifies them, are %d, %d, %d and %d",
				r.Interval, r.counts[0], r.counts[1], r.counts[2], r.counts[3], g[0], g[1], g[2], g[3])})
	}
}

// accounted reports whether the counts the log gives a range (got:
// upserts, deletes, skipped, dead letters) agree with the ledger's (want):
//   - A tombstone after a Debezium delete deletes its key; floes before
//     counted it as skipped. A range may count as skipped what the log
//     counts as deletes, not the other way.
//   - On a compacted topic, records the sink read may have been removed
//     since (superseded by a later record of their key): the log may give
//     each count less than the ledger, never more.
func accounted(got, want [4]int64, compacts bool) bool {
	if compacts {
		return got[0] <= want[0] && got[1]+got[2] <= want[1]+want[2] && got[3] <= want[3]
	}
	return got[0] == want[0] && got[1]+got[2] == want[1]+want[2] && got[1] >= want[1] && got[3] == want[3]
}
