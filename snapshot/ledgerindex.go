package snapshot

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/floe-dev/floe/mapping"
)

// A segment's index lets a reader use the ledger archive without holding
// it: the segment's snapshots without their ranges (enough to walk a
// branch's ancestry and tell floe commits apart), the segment cut into
// blocks of consecutive entries, each with the byte span of the segment
// file that holds it, and the summary of the segment's floe commits
// (mapping.Summary: per partition the span of offsets, next offset,
// counts, start and topic IDs). Each block's own summary is in a file
// beside the index (summariesPath), read by the block when a reader needs
// it: a reader holds one summary per segment, whose number grows with
// the logarithm of the history (segmentMergeRatio), and not one per block
// (a busy wide topic's blocks' summaries cost 873 bytes per archived
// commit, about 0.9 GB after a year on 1,000 partitions). A writer
// resumes and a status is read from the segments' summaries; a lookup of
// one position reads only the block summaries of the segments whose
// summary spans it, and the blocks whose summary does; the audit reads
// block after block.
//
// Maintain writes each segment's index (indexPath) and summaries when it
// writes the segment, and deletes them with the segment; ones left by a
// run that failed in between name a segment no table version names, and
// are never read. A segment without an index (written by floe before
// indexes, or whose index is unreadable) is indexed when a table version
// naming it is adopted, by decoding it entry by entry: it still works, at
// the cost of reading it once per process. An index of the first format
// (indexFormatV1) holds its blocks' summaries, and the table holds them
// as it did.
const indexFormat = "floe.ledger-index/v2"

// indexFormatV1 is the format of the indexes written before the blocks'
// summaries moved to a file of their own.
const indexFormatV1 = "floe.ledger-index/v1"

// indexBlockBytes is the size of the segment file a block spans, at most
// one entry more: a lookup reads one block and its summary (about 55
// blocks for 10,000 commits of 1,000 partitions each).
const indexBlockBytes = 4 << 20

// segmentIndex is the index of one segment file.
type segmentIndex struct {
	Format    string `json:"format"`
	TableUUID string `json:"table-uuid"`
	// Size is the segment file's length in bytes.
	Size int64 `json:"size"`
	// Snapshots are the segment's entries, in file order, with their floe
	// properties but those holding ranges (lightProperties), as the index
	// file stores them; an index in use holds entries instead (slim).
	Snapshots []ArchivedSnapshot `json:"snapshots"`
	Blocks    []indexBlock       `json:"blocks"`
	// Summary folds the segment's blocks' summaries in file order: the
	// summary of the ledger its floe commits make, when a branch's ledger
	// holds every one of them (segmentRun). An index of the first format
	// has none: it is folded when read.
	Summary summaryJSON `json:"summary"`
	// Partitions locate the segment's partition directory in its
	// summaries file, sorted by partition (summariesWriter.finish).
	Partitions []partitionDir `json:"partition-directory,omitempty"`
	// entries are the segment's entries as a table holds them, in file
	// order; byID their positions ordered by snapshot id (seal), in file
	// order among equal ids. A segment is immutable, so a table that
	// adopts a new version of its archive indexes only the segments it
	// did not hold.
	entries []archivedEntry
	byID    []int32
	// parents are the parents of the entries whose parent is not the entry
	// before them; most entries' is (entryParentIsPrevious), as a segment
	// holds a branch's commits in order, so an entry does not hold its
	// parent. building holds every entry's parent until seal sorts them so.
	parents  map[int32]int64
	building []int64
	// rangesFiles is set when an entry references a ranges file (the
	// archive inlines them: only a damaged or foreign segment does).
	rangesFiles bool
	// digested is set on an index built by decoding a segment whose
	// digest the table records: its index file is missing or altered,
	// and no new one would match the digest.
	digested bool
	// built is set on an index built by decoding its segment, which has
	// no index file yet (writeMissingIndexes writes it). Handles of the
	// table share the index (ArchiveCache): the only field that changes
	// once it is read.
	built atomic.Bool
}

// archivedEntry is what a table holds of one archived snapshot, so that
// its memory does not grow with the properties of every commit it ever
// archived: what walking a branch's ancestry and the per-file questions
// of the audit (is this snapshot a compaction?) answer without I/O. An
// entry's other properties (its file groups, its ranges) are read from
// its block when asked for; its parent is the entry before it, or in its
// segment's parents (segmentIndex.parentOf). It takes 24 bytes, and 4
// more in its segment's byID: a table's memory grows by 28 bytes per
// archived snapshot.
type archivedEntry struct {
	id, ts int64
	// commit is the hash of the commit id (commitHash) of a floe commit:
	// a lookup by commit id reads only the blocks where it may be, and
	// compares the ids it decodes.
	commit uint32
	// bits are the entry's entryFlags (the low 8 bits) and 1 + the index,
	// in its block's deadLetterTables, of the dead-letter table the
	// commit names (the high 24 bits; 0 for none).
	bits uint32
}

type entryFlags uint8

const (
	entryHasParent entryFlags = 1 << iota
	entryFloeCommit
	entryCompaction
	// entryFileGroups marks a commit that records file groups.
	entryFileGroups
	// entryParentIsPrevious marks an entry whose parent is the entry
	// before it in its segment.
	entryParentIsPrevious
)

func (e *archivedEntry) flags() entryFlags { return entryFlags(e.bits) }

func (e *archivedEntry) floeCommit() bool { return e.flags()&entryFloeCommit != 0 }

// maxBlockDeadLetterTables bounds the dead-letter tables of one block
// that archivedEntry.bits can tell apart. A block spans about
// indexBlockBytes of its segment, too few for so many entries.
const maxBlockDeadLetterTables = 1<<24 - 1

// commitHash is the hash of a commit id that archivedEntry keeps.
func commitHash(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()
}

// slim replaces the index's decoded Snapshots by entries, and seals it.
func (ix *segmentIndex) slim() error {
	ix.entries = make([]archivedEntry, len(ix.Snapshots))
	for bl, b := range ix.Blocks {
		for i := b.First; i < b.First+b.Count && i < len(ix.Snapshots); i++ {
			e, err := ix.entry(bl, i, ix.Snapshots[i])
			if err != nil {
				return err
			}
			ix.entries[i] = e
		}
	}
	ix.Snapshots = nil
	ix.seal()
	return nil
}

// seal orders the entries by snapshot id (byID), once they are all in,
// and keeps the parents that are not the entry before (parentOf).
func (ix *segmentIndex) seal() {
	ix.entries = slices.Clip(ix.entries)
	for i, p := range ix.building[:min(len(ix.building), len(ix.entries))] {
		e := &ix.entries[i]
		switch {
		case e.flags()&entryHasParent == 0:
		case i > 0 && ix.entries[i-1].id == p:
			e.bits |= uint32(entryParentIsPrevious)
		default:
			if ix.parents == nil {
				ix.parents = map[int32]int64{}
			}
			ix.parents[int32(i)] = p
		}
	}
	ix.building = nil
	ix.byID = make([]int32, len(ix.entries))
	for i := range ix.byID {
		ix.byID[i] = int32(i)
	}
	slices.SortStableFunc(ix.byID, func(a, b int32) int { return cmp.Compare(ix.entries[a].id, ix.entries[b].id) })
}

// find returns the position of the entry of snapshot id (the first, when
// the segment holds it twice), and false when it holds none.
func (ix *segmentIndex) find(id int64) (int, bool) {
	i, ok := slices.BinarySearchFunc(ix.byID, id, func(p int32, id int64) int { return cmp.Compare(ix.entries[p].id, id) })
	if !ok {
		return 0, false
	}
	return int(ix.byID[i]), true
}

// parentOf returns the parent of entry i, and false when it has none.
func (ix *segmentIndex) parentOf(i int) (int64, bool) {
	e := &ix.entries[i]
	switch {
	case e.flags()&entryHasParent == 0:
		return 0, false
	case e.flags()&entryParentIsPrevious != 0:
		return ix.entries[i-1].id, true
	}
	return ix.parents[int32(i)], true
}

// entry returns what the index holds of s, entry i of the segment in
// block bl, adding the dead-letter table it names to the block's; its
// parent waits in building until seal.
func (ix *segmentIndex) entry(bl, i int, s ArchivedSnapshot) (archivedEntry, error) {
	b := &ix.Blocks[bl]
	e := archivedEntry{id: s.SnapshotID, ts: s.TimestampMs}
	var flags entryFlags
	if s.ParentID != nil {
		if n := i + 1 - len(ix.building); n > 0 {
			ix.building = append(ix.building, make([]int64, n)...)
		}
		ix.building[i], flags = *s.ParentID, entryHasParent
	}
	if id, ok := s.Properties[mapping.KeyCommitID]; ok {
		e.commit, flags = commitHash(id), flags|entryFloeCommit
	}
	if s.Properties[KeyOperation] == OperationCompact {
		flags |= entryCompaction
	}
	if s.Properties[mapping.KeyFileGroups] != "" {
		flags |= entryFileGroups
	}
	e.bits = uint32(flags)
	if dlq := s.Properties[mapping.KeyDeadLetterTable]; dlq != "" {
		at := slices.Index(b.deadLetterTables, dlq)
		if at < 0 {
			if len(b.deadLetterTables) == maxBlockDeadLetterTables {
				return e, fmt.Errorf("block %d names more than %d dead-letter tables", bl, maxBlockDeadLetterTables)
			}
			at = len(b.deadLetterTables)
			b.deadLetterTables = append(b.deadLetterTables, dlq)
		}
		e.bits |= uint32(at+1) << 8
	}
	if s.Properties[mapping.KeyRangesFile] != "" {
		ix.rangesFiles = true
	}
	return e, nil
}

// deadLetterTable is the dead-letter table entry i (of block bl) names.
func (ix *segmentIndex) deadLetterTable(bl, i int) string {
	if d := ix.entries[i].bits >> 8; d > 0 {
		return ix.Blocks[bl].deadLetterTables[d-1]
	}
	return ""
}

// indexBlock is a run of consecutive entries of a segment.
type indexBlock struct {
	// First and Count are the block's entries (indexes of
	// segmentIndex.Snapshots); Offset and Length the bytes of the segment
	// file that hold them.
	First  int   `json:"first"`
	Count  int   `json:"count"`
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
	// Commits is the number of floe commits the block's summary folds
	// (some may not decode: readers decode the block and meet the error).
	Commits int `json:"commits"`
	// SummaryAt and SummaryLength are the bytes of the segment's
	// summaries file that hold the block's summary; none for a block
	// without floe commits.
	SummaryAt     int64 `json:"summary-at,omitempty"`
	SummaryLength int64 `json:"summary-length,omitempty"`
	// SHA256 and SummarySHA256 are the SHA-256 digests of the block's
	// bytes in the segment file and of its summary, which reading them
	// checks: an index whose own digest the table records (segmentDigest)
	// vouches for every byte a reader takes from the archive. Indexes
	// written before floe recorded them have none, nor one built by
	// decoding its segment.
	SHA256        string `json:"sha256,omitempty"`
	SummarySHA256 string `json:"summary-sha256,omitempty"`
	// Summary folds the block's floe commits in file order. Only an index
	// of the first format holds it, and one built by decoding its
	// segment; others' is read from the summaries file (Table.blockSummary).
	Summary *summaryJSON `json:"summary,omitempty"`
	// deadLetterTables are the dead-letter tables the block's commits
	// name (segmentIndex.slim).
	deadLetterTables []string
}

// summaryJSON is a mapping.Summary as the index stores it.
type summaryJSON struct {
	mapping.Summary
	Partitions []partitionJSON `json:"partitions"`
}

type partitionJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	mapping.PartitionSummary
}

func (s summaryJSON) MarshalJSON() ([]byte, error) {
	type plain summaryJSON
	p := plain(s)
	for _, tp := range s.Summary.Partitions() {
		p.Partitions = append(p.Partitions, partitionJSON{Topic: tp.Topic, Partition: tp.Partition, PartitionSummary: *s.Parts[tp]})
	}
	return json.Marshal(p)
}

func (s *summaryJSON) UnmarshalJSON(b []byte) error {
	type plain summaryJSON
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = summaryJSON(p)
	s.Parts = make(map[mapping.TopicPartition]*mapping.PartitionSummary, len(p.Partitions))
	for i := range p.Partitions {
		ps := p.Partitions[i].PartitionSummary
		s.Parts[mapping.TopicPartition{Topic: p.Partitions[i].Topic, Partition: p.Partitions[i].Partition}] = &ps
	}
	s.Partitions = nil
	return nil
}

// indexFolder is the folder of the segments' indexes under the metadata
// location, beside the archive's: maintenance reads every file of that
// one as a segment.
const indexFolder = "floe-ledger-index"

// indexPath is the path of the index of the segment at path. Its
// segment's name keeps it apart from any other's.
func indexPath(segment string) string {
	dir, name := path.Split(segment)
	return strings.TrimSuffix(dir, archiveFolder+"/") + indexFolder + "/" + name
}

// summariesSuffix ends the name of a segment's summaries file, in the
// index folder: the segment's name without ".json", and it.
const summariesSuffix = ".summaries.jsonl"

// summariesPath is the path of the file of the blocks' summaries of the
// segment at path: one JSON summary (summaryJSON) per block with floe
// commits, at the bytes its index records.
func summariesPath(segment string) string {
	return strings.TrimSuffix(indexPath(segment), ".json") + summariesSuffix
}

// segmentOfSummaries is the name of the segment whose summaries file is
// named name, and false for a name of another file.
func segmentOfSummaries(name string) (string, bool) {
	seg, ok := strings.CutSuffix(name, summariesSuffix)
	return seg + ".json", ok
}

// segmentFiles are the files of the segment at path: itself, its index
// and its blocks' summaries.
func segmentFiles(path string) []string {
	return []string{path, indexPath(path), summariesPath(path)}
}

// fileGroupsMarker stands in an index for an entry's file groups: the
// groups name every file with its spans, as long as the ranges, and are
// read from the entry's block; the index says only that there are some.
const fileGroupsMarker = "*"

// lightProperties returns what a segment's index keeps of an entry's
// properties: those its entry is built from (segmentIndex.entry), with
// fileGroupsMarker for file groups. Indexes written before kept every
// property but the ranges, and read alike.
func lightProperties(props map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{mapping.KeyCommitID, KeyOperation, mapping.KeyDeadLetterTable, mapping.KeyRangesFile, mapping.KeyFileGroups} {
		v, ok := props[k]
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		if k == mapping.KeyFileGroups && v != "" {
			v = fileGroupsMarker
		}
		out[k] = v
	}
	return out
}

// indexer builds a segment's index entry by entry, as the segment is read
// or written: it cuts the entries into blocks of about indexBlockBytes,
// each with its byte span and the summary of its floe commits, folds
// those into the segment's summary, and passes each entry's light
// properties, with its block, to light, and each block's summary, once
// the block is complete, to closed (nil: the block holds it).
type indexer struct {
	ix     *segmentIndex
	light  func(bl int, s ArchivedSnapshot) error
	closed func(bl int, b *indexBlock, s mapping.Summary) error
	n      int  // entries added
	open   bool // the last block takes more entries
	sum    mapping.Summary
}

// add adds s, which the segment file holds at bytes [start, end) (start
// may include the separator before it). An entry whose ledger properties
// do not decode is left out of its block's summary: readers decode the
// block and meet the error there.
func (x *indexer) add(s ArchivedSnapshot, start, end int64) error {
	ix := x.ix
	if !x.open {
		ix.Blocks = append(ix.Blocks, indexBlock{First: x.n, Offset: start})
		x.open = true
	}
	bl := len(ix.Blocks) - 1
	b := &ix.Blocks[bl]
	b.Count++
	b.Length = end - b.Offset
	foldEntry(&x.sum, s)
	x.n++
	s.Properties = lightProperties(s.Properties)
	if err := x.light(bl, s); err != nil {
		return err
	}
	if b.Length >= indexBlockBytes {
		return x.close()
	}
	return nil
}

// foldEntry folds the floe commit of an archived entry into a block's
// summary; an entry that is no floe commit, or whose ledger properties do
// not decode, is left out.
func foldEntry(sum *mapping.Summary, s ArchivedSnapshot) {
	if !mapping.IsFloeCommit(s.Properties) {
		return
	}
	if c, err := mapping.DecodeCommit(s.SnapshotID, time.UnixMilli(s.TimestampMs).UTC(), s.Properties); err == nil {
		sum.Add(c)
	}
}

// close completes the open block, if any: its summary goes into the
// segment's and to closed. The last block is completed by the caller,
// after the segment's last entry.
func (x *indexer) close() error {
	if !x.open {
		return nil
	}
	x.open = false
	bl := len(x.ix.Blocks) - 1
	b := &x.ix.Blocks[bl]
	s := x.sum
	x.sum = mapping.Summary{}
	b.Commits = s.Commits
	x.ix.Summary.Merge(s)
	if x.closed == nil {
		b.Summary = &summaryJSON{Summary: s}
		return nil
	}
	return x.closed(bl, b, s)
}

// buildIndex indexes the segment file read from r, decoding it one entry
// at a time, and returns the index with its Snapshots, its blocks holding
// their summaries and the digests of the bytes they were decoded from, so
// that reading a block later checks it as an index file's digests do.
func buildIndex(r io.Reader, tableUUID string) (*segmentIndex, error) {
	ix := &segmentIndex{Format: indexFormat, TableUUID: tableUUID}
	x := indexer{ix: ix, light: func(_ int, s ArchivedSnapshot) error {
		ix.Snapshots = append(ix.Snapshots, s)
		return nil
	}}
	var rec spanRecorder
	er := newEntryReader(io.TeeReader(r, &rec), tableUUID)
	digest := func() {
		b := &ix.Blocks[len(ix.Blocks)-1]
		b.SHA256 = rec.take(b.Offset, b.Offset+b.Length)
	}
	for {
		s, ok, err := er.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if err := x.add(s, er.start, er.end); err != nil {
			return nil, err
		}
		if !x.open {
			digest()
		}
	}
	if x.open {
		digest()
	}
	if err := x.close(); err != nil {
		return nil, err
	}
	ix.Size = er.dec.InputOffset()
	return ix, nil
}

// spanRecorder keeps the bytes of a file read through it from the end of
// the last span taken on, to digest spans of it as they are decoded.
type spanRecorder struct {
	base int64 // the offset of buf[0]
	buf  []byte
}

func (r *spanRecorder) Write(p []byte) (int, error) {
	r.buf = append(r.buf, p...)
	return len(p), nil
}

// take returns the SHA-256 of bytes [from, to) in hex, which it holds
// (from is at least the end of the last span taken), and forgets the
// bytes before to.
func (r *spanRecorder) take(from, to int64) string {
	sum := sha256Hex(r.buf[from-r.base : to-r.base])
	r.buf = slices.Clone(r.buf[to-r.base:])
	r.base = to
	return sum
}

// summariesWriter writes a segment's summaries file: one block's summary
// at a time, recording in the block where it is, and then the segment's
// partition directory (finish).
type summariesWriter struct {
	*segmentStream
	// spans are, per partition, the spans of offsets of the blocks
	// summarised so far that hold ranges of it, in block order.
	spans map[mapping.TopicPartition]*spanList
}

// spanList is a partition's spans in the blocks of a segment being
// written, delta-encoded: the largest segment of a year on 1,000 busy
// partitions has about 4,000 blocks, 4 million spans, which take about 5
// bytes each here and 24 as blockSpans (96 MB while the segment is
// written).
type spanList struct {
	buf  []byte
	last blockSpan
}

// add appends s, whose block follows the last one's.
func (l *spanList) add(s blockSpan) {
	l.buf = binary.AppendUvarint(l.buf, uint64(s[0]-l.last[0]))
	l.buf = binary.AppendVarint(l.buf, s[1]-l.last[2])
	l.buf = binary.AppendVarint(l.buf, s[2]-s[1])
	l.last = s
}

// all returns the spans added, in order.
func (l *spanList) all() []blockSpan {
	var (
		out  []blockSpan
		prev blockSpan
	)
	for b := l.buf; len(b) > 0; {
		bl, n := binary.Uvarint(b)
		b = b[n:]
		low, n := binary.Varint(b)
		b = b[n:]
		length, n := binary.Varint(b)
		b = b[n:]
		prev = blockSpan{prev[0] + int64(bl), prev[2] + low, prev[2] + low + length}
		out = append(out, prev)
	}
	return out
}

// blockSpan is the span of a partition's offsets in one block: the block,
// and Low and High of its summary (mapping.PartitionSummary.Span).
type blockSpan [3]int64

func (s blockSpan) block() int             { return int(s[0]) }
func (s blockSpan) span() mapping.Interval { return mapping.Interval{Low: s[1], High: s[2]} }

// newSummariesWriter writes a summaries file to s.
func newSummariesWriter(s *segmentStream) *summariesWriter {
	return &summariesWriter{segmentStream: s, spans: map[mapping.TopicPartition]*spanList{}}
}

// block writes the summary s of block bl, b, and notes its partitions'
// spans for the directory. A block without floe commits has no summary
// to read.
func (w *summariesWriter) block(bl int, b *indexBlock, s mapping.Summary) error {
	if s.Commits == 0 {
		return nil
	}
	out, err := json.Marshal(summaryJSON{Summary: s})
	if err != nil {
		return err
	}
	b.SummaryAt = w.n
	b.SummaryLength = int64(len(out))
	b.SummarySHA256 = sha256Hex(out)
	for tp, ps := range s.Parts {
		l := w.spans[tp]
		if l == nil {
			l = &spanList{}
			w.spans[tp] = l
		}
		l.add(blockSpan{int64(bl), ps.Low, ps.High})
	}
	return w.write(append(out, '\n'))
}

// finish writes the segment's partition directory after the blocks'
// summaries: per partition, one line of the spans of its offsets in each
// block (blockSpan), which ix.Partitions locates. A lookup of one
// partition's offset then reads that line and the blocks it names,
// rather than every block's summary of a segment that spans it.
func (w *summariesWriter) finish(ix *segmentIndex) error {
	for _, tp := range slices.SortedFunc(maps.Keys(w.spans), mapping.TopicPartition.Compare) {
		out, err := json.Marshal(w.spans[tp].all())
		if err != nil {
			return err
		}
		ix.Partitions = append(ix.Partitions, partitionDir{Topic: tp.Topic, Partition: tp.Partition, At: w.n, Length: int64(len(out)), SHA256: sha256Hex(out)})
		if err := w.write(append(out, '\n')); err != nil {
			return err
		}
	}
	return w.w.Flush()
}

// partitionDir locates one partition's line of a segment's partition
// directory in its summaries file.
type partitionDir struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	At        int64  `json:"at"`
	Length    int64  `json:"length"`
	SHA256    string `json:"sha256,omitempty"`
}

// partitionSpans returns the spans of tp's offsets in each block of the
// segment at path that holds ranges of it, in block order, read from its
// summaries file; ok is false when the index has no partition directory
// (of the first format, or built by decoding the segment: its blocks hold
// their summaries).
func (ix *segmentIndex) partitionSpans(fsys iceio.IO, path string, tp mapping.TopicPartition) (spans []blockSpan, ok bool, err error) {
	if ix.Partitions == nil {
		return nil, false, nil
	}
	i, found := slices.BinarySearchFunc(ix.Partitions, tp, func(d partitionDir, tp mapping.TopicPartition) int {
		return mapping.TopicPartition{Topic: d.Topic, Partition: d.Partition}.Compare(tp)
	})
	if !found {
		return nil, true, nil
	}
	d := ix.Partitions[i]
	buf, err := readSpan(fsys, summariesPath(path), d.At, d.Length)
	if err == nil {
		err = checkSHA256(buf, d.SHA256)
	}
	if err != nil {
		return nil, true, fmt.Errorf("partition directory of %s: %w", tp, err)
	}
	if err := json.Unmarshal(buf, &spans); err != nil {
		return nil, true, fmt.Errorf("partition directory of %s: %w", tp, err)
	}
	return spans, true, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, found %v", want, tok)
	}
	return nil
}

// readIndex returns the index of the segment at path: its index file when
// it has a readable one for this table (whose SHA-256 is the one the table
// recorded, if it recorded one), else one built by decoding the segment,
// which then must have the SHA-256 the table recorded for it.
func readIndex(fsys iceio.IO, tableUUID, path string, want segmentDigest) (*segmentIndex, error) {
	if b, err := readAll(fsys, indexPath(path)); err == nil && checkSHA256(b, want.index) == nil {
		var ix segmentIndex
		if json.Unmarshal(b, &ix) == nil && ix.TableUUID == tableUUID && ix.adopt() && ix.summariesIntact(fsys, path) && ix.slim() == nil {
			return &ix, nil
		}
	}
	ix, err := indexSegmentFile(fsys, tableUUID, path, want.segment)
	if err != nil {
		return nil, err
	}
	if err := ix.slim(); err != nil {
		return nil, err
	}
	ix.built.Store(true)
	ix.digested = want.segment != ""
	return ix, nil
}

// adopt checks an index read from its file, and folds the segment's
// summary of an index of the first format from its blocks'. It reports
// whether the index is one this floe reads.
func (ix *segmentIndex) adopt() bool {
	switch ix.Format {
	case indexFormat:
		return !slices.ContainsFunc(ix.Blocks, func(b indexBlock) bool { return b.Summary != nil })
	case indexFormatV1:
		ix.Summary = summaryJSON{}
		for i := range ix.Blocks {
			b := &ix.Blocks[i]
			if b.Summary == nil {
				return false
			}
			b.Commits = b.Summary.Commits
			ix.Summary.Merge(b.Summary.Summary)
		}
		return true
	}
	return false
}

// summariesIntact reports whether the summaries file of the segment at
// path holds every byte its index locates in it (an index of the first
// format has none). One that does not (cut short by a writer killed while
// it rewrote a legacy segment's index, or removed) makes the index be
// built again, and maintenance writes both anew (writeMissingIndexes);
// readers of an index read before that read the blocks instead
// (Table.blockSummary).
func (ix *segmentIndex) summariesIntact(fsys iceio.IO, path string) bool {
	if ix.Format != indexFormat {
		return true
	}
	var need int64
	for _, b := range ix.Blocks {
		need = max(need, b.SummaryAt+b.SummaryLength)
	}
	for _, d := range ix.Partitions {
		need = max(need, d.At+d.Length)
	}
	if need == 0 {
		return true
	}
	f, err := fsys.Open(summariesPath(path))
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	return err == nil && st.Size() >= need
}

// indexSegmentFile indexes the segment file at path (buildIndex), and
// checks that its SHA-256 is want, unless want is empty.
func indexSegmentFile(fsys iceio.IO, tableUUID, path, want string) (*segmentIndex, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	r := io.TeeReader(f, h)
	ix, err := buildIndex(r, tableUUID)
	if err != nil {
		return nil, err
	}
	if want == "" {
		return ix, nil
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, err
	}
	return ix, checkSum(h.Sum(nil), want)
}

// writeMissingIndexes writes the index files of the named segments that
// have none (written by floe before indexes), so that readers stop
// decoding them. The index held keeps its blocks' summaries.
func (t *Table) writeMissingIndexes(ctx context.Context) error {
	var wfs iceio.WriteFileIO
	for _, s := range t.segments {
		// An index the table recorded the digest of is not replaced: a
		// new one would not have it. Readers build it from the segment,
		// checking the segment's digest.
		if !s.ix.built.Load() || s.ix.digested {
			continue
		}
		if wfs == nil {
			fsys, err := t.tbl.FS(ctx)
			if err != nil {
				return fmt.Errorf("index the ledger archive of %s: %w", t.Name(), err)
			}
			var ok bool
			if wfs, ok = fsys.(iceio.WriteFileIO); !ok {
				return fmt.Errorf("index the ledger archive of %s: the table's storage cannot write files", t.Name())
			}
		}
		if _, err := writeIndex(wfs, s.ix.TableUUID, s.path); err != nil {
			return fmt.Errorf("index the ledger archive segment %s of %s: %w", s.path, t.Name(), err)
		}
		s.ix.built.Store(false)
	}
	return nil
}

// writeIndex writes the index and the summaries file of the segment file
// at path, the summaries first (a reader of the index reads them), and
// returns the index slim.
func writeIndex(wfs iceio.WriteFileIO, tableUUID, path string) (*segmentIndex, error) {
	ix, err := indexSegmentFile(wfs, tableUUID, path, "")
	if err != nil {
		return nil, err
	}
	sums, err := createStream(wfs, summariesPath(path))
	if err != nil {
		return nil, err
	}
	err = func() error {
		w := newSummariesWriter(sums)
		for i := range ix.Blocks {
			b := &ix.Blocks[i]
			if err := w.block(i, b, b.Summary.Summary); err != nil {
				return err
			}
			b.Summary = nil
		}
		return w.finish(ix)
	}()
	if cerr := sums.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("summaries: %w", err)
	}
	out, err := json.Marshal(ix)
	if err != nil {
		return nil, err
	}
	if err := ix.slim(); err != nil {
		return nil, err
	}
	return ix, wfs.WriteFile(indexPath(path), out)
}

// readBlock returns the entries of block bl of the segment at path, with
// every floe property, reading only the bytes that hold them.
func readBlock(fsys iceio.IO, path string, ix *segmentIndex, bl int) ([]ArchivedSnapshot, error) {
	b := ix.Blocks[bl]
	buf, err := readSpan(fsys, path, b.Offset, b.Length)
	if err != nil {
		return nil, err
	}
	if err := checkSHA256(buf, b.SHA256); err != nil {
		return nil, fmt.Errorf("block %d: %w", bl, err)
	}
	// The span starts after the previous entry: a separator may lead.
	buf = bytes.TrimLeft(buf, ", \t\r\n")
	var snaps []ArchivedSnapshot
	if err := json.Unmarshal(slices.Concat([]byte("["), buf, []byte("]")), &snaps); err != nil {
		return nil, err
	}
	if len(snaps) != b.Count {
		return nil, fmt.Errorf("block %d holds %d entries, its index says %d", bl, len(snaps), b.Count)
	}
	for i, s := range snaps {
		if s.SnapshotID != ix.entries[b.First+i].id {
			return nil, fmt.Errorf("block %d holds snapshot %d where its index has %d", bl, s.SnapshotID, ix.entries[b.First+i].id)
		}
	}
	return snaps, nil
}

// readSpan reads length bytes at offset of the file at path, which its
// index says it holds.
func readSpan(fsys iceio.IO, path string, offset, length int64) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, length)
	if n, err := f.ReadAt(buf, offset); err != nil && (n < len(buf) || !errors.Is(err, io.EOF)) {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("the file is shorter than its index says (%d bytes at %d): %w", length, offset, fs.ErrInvalid)
		}
		return nil, err
	}
	return buf, nil
}

// readSummary returns the summary of block b from the segment's summaries
// file at path, reading only the bytes that hold it.
func readSummary(fsys iceio.IO, path string, b indexBlock) (mapping.Summary, error) {
	buf, err := readSpan(fsys, path, b.SummaryAt, b.SummaryLength)
	if err == nil {
		err = checkSHA256(buf, b.SummarySHA256)
	}
	if err != nil {
		return mapping.Summary{}, err
	}
	var s summaryJSON
	if err := json.Unmarshal(buf, &s); err != nil {
		return mapping.Summary{}, err
	}
	if s.Commits != b.Commits {
		return mapping.Summary{}, fmt.Errorf("the summary folds %d commits, its index says %d", s.Commits, b.Commits)
	}
	return s.Summary, nil
}

// blockOf returns the block holding entry i of the index.
func (ix *segmentIndex) blockOf(i int) int {
	bl, found := slices.BinarySearchFunc(ix.Blocks, i, func(b indexBlock, i int) int {
		switch {
		case b.First+b.Count <= i:
			return -1
		case b.First > i:
			return 1
		}
		return 0
	})
	if !found {
		return -1
	}
	return bl
}
