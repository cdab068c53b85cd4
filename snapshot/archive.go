package snapshot

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// PropLedgerSegmentPrefix prefixes the table properties that name the
// table's ledger archive: each property PropLedgerSegmentPrefix+ID names
// one segment, a JSON file under the table's metadata folder holding the
// ledger entries of some expired snapshots. The archive is the union of
// the segments the table names.
//
// Snapshot expiry erases the summaries that carry the ledger. Maintain
// writes the snapshots it is about to expire into a new segment and adds
// its property in the same catalog commit that expires them, so there is
// no moment at which a snapshot is gone but its entry is not durable:
// either the commit lands and both changed, or nothing changed.
//
// A property per segment, rather than one property naming the whole
// archive, is what lets maintenance runs overlap: catalogs apply a
// commit's property changes key by key to the table as it is then, so a
// run adds its segment without replacing another run's, and a merge
// removes only the segments it read, in the commit that names the segment
// holding their entries. No interleaving of runs leaves a table version
// whose archive lacks an entry. Segments are small and written once, so an
// expiry costs the entries it expires, not the table's whole history.
const PropLedgerSegmentPrefix = "floe.ledger-segment."

// PropLedgerDigestPrefix prefixes the table properties that record the
// SHA-256 digests of the ledger archive's files: PropLedgerDigestPrefix+ID
// holds those of the segment PropLedgerSegmentPrefix+ID names and of its
// index, in hex, separated by a space, and is set and removed with it.
// The index holds the digests of the segment's blocks and of their
// summaries, so every byte a reader takes from the archive is checked
// against the table's metadata, as a ranges file is against its
// snapshot's summary: an archive file altered or damaged in the storage
// fails the reads that need it (*ArchiveError), rather than changing the
// ledger the audit proves. Segments written before floe recorded digests
// have none, and are read unchecked until a merge absorbs them.
const PropLedgerDigestPrefix = "floe.ledger-segment-sha256."

// PropLedgerArchive is the table property under which floe before archive
// segments named its whole ledger archive, one file rewritten by every
// expiry. It is still read, as one more segment, and the first expiry
// that merges it into a segment removes it.
const PropLedgerArchive = "floe.ledger-archive"

// ArchiveFormat is the archive file's format marker.
const ArchiveFormat = "floe.ledger-archive/v1"

// archiveFolder is the archive files' folder under the metadata location. A
// folder of its own keeps them apart from metadata.json versions, which
// iceberg-go deletes after commits.
const archiveFolder = "floe-ledger"

// ArchivedSnapshot is one expired snapshot as the archive keeps it: enough
// to walk a branch's ancestry through it (the parent) and to decode its
// ledger entry exactly as from the live snapshot (id, commit time and the
// summary's floe. properties). Snapshots of other writers are archived too,
// without properties, so that the ancestry stays walkable across them.
type ArchivedSnapshot struct {
	SnapshotID  int64  `json:"snapshot-id"`
	ParentID    *int64 `json:"parent-snapshot-id,omitempty"`
	TimestampMs int64  `json:"timestamp-ms"`
	// SchemaID is the schema the snapshot's rows read in, which as-of
	// needs to read them from a later snapshot; nil in entries archived
	// before floe recorded it.
	SchemaID   *int              `json:"schema-id,omitempty"`
	Properties map[string]string `json:"floe-properties,omitempty"`
}

// Archive is a table's ledger archive. The zero value (or nil) is an empty
// archive.
type Archive struct {
	Format    string             `json:"format"`
	TableUUID string             `json:"table-uuid"`
	Snapshots []ArchivedSnapshot `json:"snapshots"`

	byID map[int64]int
}

// Len is the number of archived snapshots.
func (a *Archive) Len() int {
	if a == nil {
		return 0
	}
	return len(a.Snapshots)
}

// snapshot returns an archived snapshot as an Iceberg snapshot with its
// ledger properties, or nil.
func (a *Archive) snapshot(id int64) *table.Snapshot {
	if a == nil {
		return nil
	}
	i, ok := a.byID[id]
	if !ok {
		return nil
	}
	s := a.Snapshots[i]
	return &table.Snapshot{SnapshotID: s.SnapshotID, ParentSnapshotID: s.ParentID, TimestampMs: s.TimestampMs, SchemaID: s.SchemaID,
		Summary: &table.Summary{Properties: iceberg.Properties(s.Properties)}}
}

// archivedSnapshots is an archive an ancestry is walked through: an
// Archive read whole, or the archiveIndex a table holds.
type archivedSnapshots interface {
	// snapshot returns an archived snapshot, or nil.
	snapshot(id int64) *table.Snapshot
}

// archiveIndex is what a table holds of its ledger archive: the indexes
// of the segments it names, each with its entries ordered by snapshot id.
// It grows by 28 bytes per archived snapshot (archivedEntry and its
// position in segmentIndex.byID); the entries' properties stay in the
// segment files. Building one costs only the segments the table did not
// hold before, which readSegments reuses. The zero value (or nil) is an
// empty archive.
type archiveIndex struct {
	segs []segment
	// n is the number of snapshots the segments hold, each once, plus
	// one; 0 until counted (Len).
	n atomic.Int64
	// tails memoizes the walks through the archive below a snapshot
	// (tail): an archiveIndex never changes once built, and a writer walks
	// the same history at every maintenance run and after every expiry.
	mu    sync.Mutex
	tails map[int64]archivedTail
	// ledgers memoizes the ledger parts of the archived walks that reached
	// the table's first snapshot (parts), by the snapshot they start at.
	ledgers map[int64][]ledgerPart
}

// archivedTail is what a walk of an ancestry finds from an archived
// snapshot down, every snapshot of it archived: whether it reaches the
// table's first snapshot (complete), the oldest snapshot found (found:
// any), and the dead-letter tables its floe commits name.
type archivedTail struct {
	complete, found bool
	oldest          int64
	deadLetters     []string
}

// maxTails bounds the memo: walks enter the archive at the first
// archived ancestor of a branch or tag head, a few per table version.
const maxTails = 64

// tail returns the walk of the ancestry from id down through the archive
// (archivedTail), memoized. ok is false when a snapshot of it is live in
// meta (a tag or branch kept an ancestor of snapshots that expired), or
// the walk went round a cycle of parents: the caller walks that ancestry
// in full. Its verdict cannot change for this index: a live snapshot
// leaves the metadata only when it expires, and a new one is no ancestor
// of an old one.
func (a *archiveIndex) tail(meta table.Metadata, id int64) (archivedTail, bool) {
	if a == nil {
		return archivedTail{}, meta.SnapshotByID(id) == nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.tails[id]; ok {
		return t, true
	}
	var t archivedTail
	names := map[string]bool{}
	for cur, steps := id, a.longestWalk(meta); ; steps-- {
		if steps == 0 || meta.SnapshotByID(cur) != nil {
			return archivedTail{}, false
		}
		// The walk meets one memoized before (the history below the
		// previous expiry's snapshots, most often): it ends as that one.
		if m, ok := a.tails[cur]; ok && cur != id {
			t.complete = m.complete
			if m.found {
				t.found, t.oldest = true, m.oldest
			}
			for _, name := range m.deadLetters {
				names[name] = true
			}
			break
		}
		_, at, ok := a.find(cur)
		if !ok {
			break
		}
		t.found, t.oldest = true, cur
		if name := at.ix.deadLetterTable(at.block, at.entry); name != "" {
			names[name] = true
		}
		parent, ok := at.ix.parentOf(at.entry)
		if !ok {
			t.complete = true
			break
		}
		cur = parent
	}
	t.deadLetters = slices.Sorted(maps.Keys(names))
	if a.tails == nil || len(a.tails) >= maxTails {
		a.tails = map[int64]archivedTail{}
	}
	a.tails[id] = t
	return t, true
}

// parts returns the ledger parts of the ancestry from id down, oldest
// first (as Table.ledgerParts), id not live in meta: the archived floe
// commits by block, and the live snapshots a tag or branch kept below
// them. complete is false when the walk did not reach the table's first
// snapshot, or went round a cycle of parents (a damaged archive). A walk
// of archived snapshots only is memoized, and a later one ends where it
// meets one memoized, so that a writer walks only what its expiries
// archived since.
func (a *archiveIndex) parts(meta table.Metadata, id int64) (parts []ledgerPart, complete bool) {
	if a == nil {
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ps, ok := a.ledgers[id]; ok {
		return ps, true
	}
	var (
		fresh []ledgerPart // newest first, each part's ids too
		below []ledgerPart
		pure  = true
	)
	for cur, steps := id, a.longestWalk(meta); ; steps-- {
		if steps == 0 {
			return nil, false
		}
		if s := meta.SnapshotByID(cur); s != nil {
			pure = false
			if s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties) {
				fresh = append(fresh, ledgerPart{snap: s})
			}
			if s.ParentSnapshotID == nil {
				complete = true
				break
			}
			cur = *s.ParentSnapshotID
			continue
		}
		if ps, ok := a.ledgers[cur]; ok && cur != id {
			below, complete = ps, true
			break
		}
		e, at, ok := a.find(cur)
		if !ok {
			break
		}
		if e.floeCommit() {
			if n := len(fresh); n > 0 && fresh[n-1].snap == nil && fresh[n-1].at.path == at.path && fresh[n-1].at.block == at.block {
				fresh[n-1].ids = append(fresh[n-1].ids, cur)
			} else {
				fresh = append(fresh, ledgerPart{at: at, ids: []int64{cur}})
			}
		}
		parent, ok := at.ix.parentOf(at.entry)
		if !ok {
			complete = true
			break
		}
		cur = parent
	}
	if !complete {
		return nil, false
	}
	parts = make([]ledgerPart, 0, len(below)+len(fresh))
	parts = append(parts, below...)
	for i := len(fresh) - 1; i >= 0; i-- {
		p := fresh[i]
		if p.snap != nil {
			parts = append(parts, p)
			continue
		}
		slices.Reverse(p.ids)
		// The walk met the memoized one inside a block: one part.
		if n := len(parts); n > 0 && parts[n-1].snap == nil && parts[n-1].at.path == p.at.path && parts[n-1].at.block == p.at.block {
			p.ids = append(slices.Clone(parts[n-1].commitIDs()), p.ids...)
			parts = parts[:n-1]
		}
		p.settle()
		parts = append(parts, p)
	}
	// Callers append to the parts: never into the memo's array.
	parts = slices.Clip(parts)
	if pure {
		if a.ledgers == nil || len(a.ledgers) >= maxTails {
			a.ledgers = map[int64][]ledgerPart{}
		}
		a.ledgers[id] = parts
	}
	return parts, true
}

// longestWalk bounds a walk of an ancestry through meta and a: one step
// more than it has snapshots; a walk that takes more went round a cycle.
func (a *archiveIndex) longestWalk(meta table.Metadata) int {
	n := len(meta.Snapshots()) + 1
	for _, s := range a.segs {
		n += len(s.ix.entries)
	}
	return n
}

// keepLedgers keeps the memoized ledger parts of prev (an index a holds)
// whose blocks a still indexes, each up to its first part in a segment a
// no longer names (absorbed by a merge: the newest, most often), under
// the newest commit that leaves it.
func (a *archiveIndex) keepLedgers(prev *archiveIndex) {
	for _, ps := range prev.ledgers {
		k := 0
		for k < len(ps) && indexes(a.segs, ps[k].at.ix) {
			k++
		}
		if k == 0 {
			continue
		}
		if a.ledgers == nil {
			a.ledgers = map[int64][]ledgerPart{}
		}
		ids := ps[k-1].commitIDs()
		a.ledgers[ids[len(ids)-1]] = ps[:k:k]
	}
}

// newArchiveIndex indexes the entries of segs. A snapshot in two segments
// (a merge not yet committed left both) is the first one's: entries
// describe immutable snapshots. prev is the index of the table version
// before (nil: none): when this one holds each of its entries (an expiry
// only adds entries), it keeps the walks prev memoized that reached the
// table's first snapshot, so that a writer's walks after an expiry cover
// the snapshots it archived, not the whole archive again. A truncated
// walk is not kept: a repair may restore what it missed.
func newArchiveIndex(segs []segment, prev *archiveIndex) *archiveIndex {
	a := &archiveIndex{segs: segs}
	if prev != nil && a.holds(prev) {
		a.countFrom(prev)
		prev.mu.Lock()
		for id, t := range prev.tails {
			if t.complete {
				if a.tails == nil {
					a.tails = map[int64]archivedTail{}
				}
				a.tails[id] = t
			}
		}
		a.keepLedgers(prev)
		prev.mu.Unlock()
	}
	return a
}

// holds reports whether a indexes every snapshot prev does: those of the
// segments both hold at once, and each entry of the others (the small
// segments an expiry's merge absorbed, most often) looked up.
func (a *archiveIndex) holds(prev *archiveIndex) bool {
	for _, ps := range prev.segs {
		if indexes(a.segs, ps.ix) {
			continue
		}
		for i := range ps.ix.entries {
			if !a.has(ps.ix.entries[i].id) {
				return false
			}
		}
	}
	return true
}

// indexes reports whether one of segs has the index ix: the same segment,
// read once (readSegments, ArchiveCache).
func indexes(segs []segment, ix *segmentIndex) bool {
	return slices.ContainsFunc(segs, func(s segment) bool { return s.ix == ix })
}

// Len is the number of archived snapshots.
func (a *archiveIndex) Len() int {
	if a == nil {
		return 0
	}
	if n := a.n.Load(); n > 0 {
		return int(n - 1)
	}
	n := a.distinct()
	a.n.Store(int64(n) + 1)
	return n
}

// countFrom counts a's snapshots from prev's count, when prev has one and
// a holds prev: prev's, and those of the segments a does not share with
// prev that prev lacks, each at its first entry (find).
func (a *archiveIndex) countFrom(prev *archiveIndex) {
	n := prev.n.Load()
	if n == 0 {
		return
	}
	for si, s := range a.segs {
		// A segment prev shares, or one named twice (counted at its
		// first naming), adds nothing.
		if indexes(prev.segs, s.ix) || indexes(a.segs[:si], s.ix) {
			continue
		}
		for i := range s.ix.entries {
			id := s.ix.entries[i].id
			if _, at, _ := a.find(id); at.ix == s.ix && at.entry == i && !prev.has(id) {
				n++
			}
		}
	}
	a.n.Store(n)
}

// distinct counts the snapshots of the segments, each once, merging their
// orders by id: a snapshot is in two segments only while a merge has not
// committed.
func (a *archiveIndex) distinct() int {
	next := make([]int, len(a.segs))
	n, last := 0, int64(0)
	for {
		best, id := -1, int64(0)
		for si, s := range a.segs {
			if next[si] < len(s.ix.byID) {
				if e := s.ix.entries[s.ix.byID[next[si]]].id; best < 0 || e < id {
					best, id = si, e
				}
			}
		}
		if best < 0 {
			return n
		}
		next[best]++
		if n == 0 || id != last {
			n, last = n+1, id
		}
	}
}

// find returns the entry of an archived snapshot and where it is, or
// false. A snapshot in two segments is the first one's.
func (a *archiveIndex) find(id int64) (*archivedEntry, archivedAt, bool) {
	if a == nil {
		return nil, archivedAt{}, false
	}
	for _, seg := range a.segs {
		if i, ok := seg.ix.find(id); ok {
			return &seg.ix.entries[i], archivedAt{path: seg.path, ix: seg.ix, block: seg.ix.blockOf(i), entry: i}, true
		}
	}
	return nil, archivedAt{}, false
}

// has reports whether a snapshot is archived.
func (a *archiveIndex) has(id int64) bool {
	_, _, ok := a.find(id)
	return ok
}

// snapshot returns an archived snapshot without its summary (what the
// table holds of it is its archivedEntry), or nil.
func (a *archiveIndex) snapshot(id int64) *table.Snapshot {
	e, at, ok := a.find(id)
	if !ok {
		return nil
	}
	s := &table.Snapshot{SnapshotID: e.id, TimestampMs: e.ts}
	if parent, ok := at.ix.parentOf(at.entry); ok {
		s.ParentSnapshotID = &parent
	}
	return s
}

// rangesFiles reports whether an archived entry references a ranges file.
func (a *archiveIndex) rangesFiles() bool {
	return a != nil && slices.ContainsFunc(a.segs, func(s segment) bool { return s.ix.rangesFiles })
}

// archivedProperties returns the floe properties of an archived snapshot, reading
// its block, and false when it is not archived.
func (t *Table) archivedProperties(ctx context.Context, id int64) (map[string]string, bool, error) {
	e, ok, err := t.archived(ctx, id)
	return e.Properties, ok, err
}

// archived returns the archive's entry of a snapshot, reading its block,
// and false when it is not archived.
func (t *Table) archived(ctx context.Context, id int64) (ArchivedSnapshot, bool, error) {
	// The segment may have been merged into a new one and deleted by
	// another writer's expiry since the table was loaded.
	var (
		e  ArchivedSnapshot
		ok bool
	)
	err := t.reloadingOnAbsorbed(ctx, func() error {
		var err error
		e, ok, err = t.readArchived(ctx, id)
		return err
	})
	return e, ok, err
}

// readArchived is archived as the table is loaded.
func (t *Table) readArchived(ctx context.Context, id int64) (ArchivedSnapshot, bool, error) {
	_, at, ok := t.archive.find(id)
	if !ok {
		return ArchivedSnapshot{}, false, nil
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return ArchivedSnapshot{}, false, &ArchiveError{Table: t.Name(), Path: at.path, Err: err}
	}
	snaps, err := readBlock(fsys, at.path, at.ix, at.block)
	if err != nil {
		return ArchivedSnapshot{}, false, &ArchiveError{Table: t.Name(), Path: at.path, Err: fmt.Errorf("block %d: %w", at.block, err)}
	}
	return snaps[at.entry-at.ix.Blocks[at.block].First], true, nil
}

// SchemaOf returns the id of the schema a snapshot's rows read in, live
// or archived; known is false for a snapshot the table does not know, or
// archived before floe recorded schemas.
func (t *Table) SchemaOf(ctx context.Context, snapshotID int64) (id int, known bool, err error) {
	if s := t.tbl.Metadata().SnapshotByID(snapshotID); s != nil {
		if s.SchemaID == nil {
			return 0, false, nil
		}
		return *s.SchemaID, true, nil
	}
	e, ok, err := t.archived(ctx, snapshotID)
	if err != nil || !ok || e.SchemaID == nil {
		return 0, false, err
	}
	return *e.SchemaID, true, nil
}

func (a *Archive) index() {
	a.byID = make(map[int64]int, len(a.Snapshots))
	for i, s := range a.Snapshots {
		a.byID[s.SnapshotID] = i
	}
}

// with returns a new archive holding a's snapshots and snaps (a snapshot
// already archived is kept once), ordered by commit time. A snapshot whose
// ranges are in a ranges file is archived with them inline (rf holds the
// files of the table version snaps are of): the archive stays whole
// without the file, which maintenance then collects. A file that cannot
// be read is a *mapping.RangesFileError, and nothing is archived.
func (a *Archive) with(tableUUID string, snaps []table.Snapshot, rf *rangesFiles) (*Archive, error) {
	add := make([]ArchivedSnapshot, 0, len(snaps))
	for _, s := range snaps {
		props, err := rf.inline(s)
		if err != nil {
			return nil, err
		}
		add = append(add, ArchivedSnapshot{SnapshotID: s.SnapshotID, ParentID: s.ParentSnapshotID, TimestampMs: s.TimestampMs, SchemaID: s.SchemaID, Properties: props})
	}
	return a.plus(tableUUID, add), nil
}

// union returns a new archive holding the snapshots of a and b. Entries
// describe immutable snapshots, so two archives never disagree about one.
func (a *Archive) union(tableUUID string, b *Archive) *Archive {
	if b == nil {
		return a.plus(tableUUID, nil)
	}
	return a.plus(tableUUID, b.Snapshots)
}

func (a *Archive) plus(tableUUID string, add []ArchivedSnapshot) *Archive {
	out := &Archive{Format: ArchiveFormat, TableUUID: tableUUID}
	if a != nil {
		out.Snapshots = slices.Clone(a.Snapshots)
	}
	out.index()
	for _, as := range add {
		if _, ok := out.byID[as.SnapshotID]; ok {
			continue
		}
		out.byID[as.SnapshotID] = len(out.Snapshots)
		out.Snapshots = append(out.Snapshots, as)
	}
	slices.SortFunc(out.Snapshots, func(x, y ArchivedSnapshot) int {
		return cmp.Or(cmp.Compare(x.TimestampMs, y.TimestampMs), cmp.Compare(x.SnapshotID, y.SnapshotID))
	})
	out.index()
	return out
}

// ArchiveError reports a ledger archive that cannot be read or written.
// Reading a table whose archive is unreadable fails rather than returning
// a ledger without the archived entries.
type ArchiveError struct {
	Table string
	Path  string
	Err   error
}

func (e *ArchiveError) Error() string {
	return fmt.Sprintf("ledger archive %s of table %s: %v", e.Path, e.Table, e.Err)
}

func (e *ArchiveError) Unwrap() error { return e.Err }

// segment is one archive file a table names: the property naming it and
// its index, read with the table version naming it. Its entries with
// their ranges are read only by maintenance, when it rewrites them.
type segment struct {
	key, path string
	digest    segmentDigest
	ix        *segmentIndex
}

// segmentDigest is the SHA-256 of a segment file and of its index file,
// in hex, as the table records them (PropLedgerDigestPrefix); empty for a
// segment written before floe recorded them.
type segmentDigest struct{ segment, index string }

func (d segmentDigest) String() string {
	if d.segment == "" {
		return ""
	}
	return d.segment + " " + d.index
}

// namedSegments returns the archive files props name, ordered by property
// key: the segments and the archive of floe before segments.
func namedSegments(props iceberg.Properties) []segment {
	var segs []segment
	for k, v := range props {
		if (k == PropLedgerArchive || strings.HasPrefix(k, PropLedgerSegmentPrefix)) && v != "" {
			seg := segment{key: k, path: v}
			if id, ok := strings.CutPrefix(k, PropLedgerSegmentPrefix); ok {
				// A value that is not two digests is checked against, and
				// matches no file: the archive is unreadable, not unchecked.
				d := props[PropLedgerDigestPrefix+id]
				seg.digest.segment, seg.digest.index, _ = strings.Cut(d, " ")
				if d != "" && (seg.digest.segment == "" || seg.digest.index == "") {
					seg.digest = segmentDigest{segment: d, index: d}
				}
			}
			segs = append(segs, seg)
		}
	}
	slices.SortFunc(segs, func(x, y segment) int { return strings.Compare(x.key, y.key) })
	return segs
}

// segmentsSignature identifies a set of named segments: two table versions
// with the same signature have the same archive.
func segmentsSignature(segs []segment) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.key)
		b.WriteByte('=')
		b.WriteString(s.path)
		b.WriteByte(' ')
		b.WriteString(s.digest.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// readSegments reads the indexes of the segments named (reusing those of
// loaded, segments read before, and of cache, which other handles of the
// table read or wrote: a segment file is never rewritten) and returns
// them with the index of their entries, nil when none is named; prev is
// the table's index before (newArchiveIndex). Readers fetch the
// properties and ranges by block.
func readSegments(ctx context.Context, tbl *table.Table, name string, named, loaded []segment, prev *archiveIndex, cache *ArchiveCache) ([]segment, *archiveIndex, error) {
	if len(named) == 0 {
		return nil, nil, nil
	}
	known := map[string]*segmentIndex{}
	for _, s := range loaded {
		known[s.path] = s.ix
	}
	uuid := tbl.Metadata().TableUUID().String()
	var fsys iceio.IO
	for i, s := range named {
		ix := known[s.path]
		if ix == nil {
			ix = cache.get(uuid, s.path)
		}
		if ix == nil {
			if fsys == nil {
				var err error
				if fsys, err = tbl.FS(ctx); err != nil {
					return nil, nil, &ArchiveError{Table: name, Path: s.path, Err: err}
				}
			}
			var err error
			if ix, err = readIndex(fsys, uuid, s.path, s.digest); err != nil {
				return nil, nil, &ArchiveError{Table: name, Path: s.path, Err: err}
			}
		}
		cache.put(uuid, s.path, ix)
		named[i].ix = ix
	}
	return named, newArchiveIndex(named, prev), nil
}

// readArchiveFile reads and checks one archive file of the table with uuid
// tableUUID, whose SHA-256 must be want unless want is empty.
func readArchiveFile(fsys iceio.IO, tableUUID, name, path, want string) (*Archive, error) {
	a := &Archive{Format: ArchiveFormat, TableUUID: tableUUID}
	for s, err := range segmentEntries(fsys, tableUUID, path, want) {
		if err != nil {
			return nil, &ArchiveError{Table: name, Path: path, Err: err}
		}
		a.Snapshots = append(a.Snapshots, s)
	}
	a.index()
	return a, nil
}

// archiveLocation is the folder of a table's archive files.
func archiveLocation(meta table.Metadata) string {
	return metadataDir(meta) + "/" + archiveFolder
}

// metadataDir is the table's metadata location.
func metadataDir(meta table.Metadata) string {
	loc := meta.Properties()[table.WriteMetadataPathKey]
	if loc == "" {
		loc = strings.TrimSuffix(meta.Location(), "/") + "/metadata"
	}
	return strings.TrimSuffix(loc, "/")
}

// segmentKey is the property that names the segment written to path.
func segmentKey(path string) string {
	return PropLedgerSegmentPrefix + segmentID(path)
}

// digestKey is the property that records the digests of the segment
// written to path.
func digestKey(path string) string {
	return PropLedgerDigestPrefix + segmentID(path)
}

func segmentID(path string) string {
	return strings.TrimSuffix(path[strings.LastIndexByte(path, '/')+1:], ".json")
}

// checkSHA256 checks that b has the SHA-256 want (hex), unless want is
// empty.
func checkSHA256(b []byte, want string) error {
	if want == "" {
		return nil
	}
	sum := sha256.Sum256(b)
	return checkSum(sum[:], want)
}

// checkSum checks that a SHA-256 sum is want (hex).
func checkSum(sum []byte, want string) error {
	if got := hex.EncodeToString(sum); got != want {
		return fmt.Errorf("its SHA-256 is %s, the table recorded %s when floe wrote it: the file was altered or damaged in the storage since (restore it from a copy of the storage, or replay the topics into a new table)", got, want)
	}
	return nil
}

// sha256Hex is the SHA-256 of b, in hex.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// segmentMergeRatio bounds the number of segments: a new segment absorbs
// the newest named segment while it holds at least 1/segmentMergeRatio of
// that one's entries, and then the next, so segments shrink by at least
// this factor from the oldest to the newest. A table with N archived
// entries, expired in batches of b, names at most 1+log4(N/b) segments
// (about 6 for 10,000 entries in batches of 20), and each entry is
// rewritten O(log N) times over the table's life.
const segmentMergeRatio = 4

// segmentPlan is the segment an expiry writes: the entries of the
// snapshots it expires, and the newest named segments it absorbs, whose
// properties are removed in the commit that names the new one.
type segmentPlan struct {
	fresh    []ArchivedSnapshot
	absorbed []segment
	// n is the number of entries of the segment.
	n int
}

// planSegment returns the segment to write for an expiry of snaps: their
// entries (those not archived already), with the ranges of their ranges
// files inline, and the segments it absorbs. A ranges file of snaps that
// cannot be read is an error: nothing is expired.
func (t *Table) planSegment(snaps []table.Snapshot) (segmentPlan, error) {
	uuid := t.tbl.Metadata().TableUUID().String()
	var fresh []table.Snapshot
	for _, s := range snaps {
		if !t.archive.has(s.SnapshotID) {
			fresh = append(fresh, s)
		}
	}
	seg, err := (*Archive)(nil).with(uuid, fresh, t.ranges)
	if err != nil {
		return segmentPlan{}, err
	}
	plan := segmentPlan{fresh: seg.Snapshots, n: seg.Len()}
	named := slices.Clone(t.segments)
	// Oldest entries first: the segment to absorb next is the last.
	slices.SortFunc(named, func(x, y segment) int {
		return cmp.Or(cmp.Compare(x.ix.oldest(), y.ix.oldest()), strings.Compare(x.key, y.key))
	})
	// Two segments may hold the same snapshot (a merge not yet committed
	// left both): counted once, as the merge writes it.
	ids := map[int64]bool{}
	for _, s := range plan.fresh {
		ids[s.SnapshotID] = true
	}
	for len(named) > 0 {
		last := named[len(named)-1]
		if plan.n*segmentMergeRatio < len(last.ix.entries) {
			break
		}
		for _, e := range last.ix.entries {
			if !ids[e.id] {
				ids[e.id] = true
				plan.n++
			}
		}
		plan.absorbed = append(plan.absorbed, last)
		named = named[:len(named)-1]
	}
	return plan, nil
}

// write writes the plan's segment, merging the absorbed segments' entries
// with the fresh ones as it reads them.
func (p segmentPlan) write(ctx context.Context, tbl *table.Table) (string, *segmentIndex, segmentDigest, error) {
	return writeSegment(ctx, tbl, p.n, p.fresh, p.absorbed)
}

// read reads the entries the plan's segment would hold, as write does,
// without writing them: a dry run fails where the run would.
func (p segmentPlan) read(ctx context.Context, tbl *table.Table) error {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	for _, err := range mergedEntries(fsys, tbl.Metadata().TableUUID().String(), p.fresh, p.absorbed) {
		if err != nil {
			return err
		}
	}
	return nil
}

// readSegment reads the segment seg whole, checked against its digest:
// every entry with its ranges.
func (t *Table) readSegment(ctx context.Context, seg segment) (*Archive, error) {
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return nil, &ArchiveError{Table: t.Name(), Path: seg.path, Err: err}
	}
	return readArchiveFile(fsys, t.tbl.Metadata().TableUUID().String(), t.Name(), seg.path, seg.digest.segment)
}

// oldest is the commit time of the segment's oldest entry (0: empty).
func (ix *segmentIndex) oldest() int64 {
	if len(ix.entries) == 0 {
		return 0
	}
	return ix.entries[0].ts
}
