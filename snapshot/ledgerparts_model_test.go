package snapshot

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// Model tests of the memoized ledger parts (archiveIndex.parts,
// keepLedgers, Table.ledgerParts).

// modelSnap is one snapshot of a model table.
type modelSnap struct {
	id, parent int64 // parent 0: none
	floe       bool
}

func modelProps(t testing.TB, s modelSnap) map[string]string {
	t.Helper()
	if !s.floe {
		return nil
	}
	c := mapping.Commit{ID: fmt.Sprintf("c%d", s.id), Writer: "w", Ranges: []mapping.Range{{TopicPartition: mapping.TopicPartition{Topic: "t"},
		Interval: mapping.Interval{Low: s.id * 10, High: s.id*10 + 10}, Records: 10}}}
	props, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return props
}

// modelSegment indexes snaps (in the order given: the file's) as a
// segment at path, each entry taking sizes[i] MiB of the (virtual)
// file, so that blocks hold a few entries each. Nothing is written: the
// parts are never decoded.
func modelSegment(t testing.TB, path string, snaps []modelSnap, sizes []int) segment {
	t.Helper()
	ix := &segmentIndex{Format: indexFormat, TableUUID: "u"}
	x := indexer{ix: ix, light: func(_ int, s ArchivedSnapshot) error {
		ix.Snapshots = append(ix.Snapshots, s)
		return nil
	}}
	off := int64(0)
	for i, s := range snaps {
		as := ArchivedSnapshot{SnapshotID: s.id, TimestampMs: 1000 + s.id, Properties: modelProps(t, s)}
		if s.parent != 0 {
			p := s.parent
			as.ParentID = &p
		}
		size := int64(sizes[i]) << 20
		if err := x.add(as, off, off+size); err != nil {
			t.Fatal(err)
		}
		off += size
	}
	if err := x.close(); err != nil {
		t.Fatal(err)
	}
	ix.Size = off
	if err := ix.slim(); err != nil {
		t.Fatal(err)
	}
	return segment{key: PropLedgerSegmentPrefix + path, path: path, ix: ix}
}

// modelMeta returns table metadata holding the live snapshots (their
// parents may be expired) and refs (name to snapshot; tags when the name
// starts with "tag").
func modelMeta(t testing.TB, live []modelSnap, refs map[string]int64) table.Metadata {
	t.Helper()
	base, err := table.NewMetadata(iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int64}),
		iceberg.UnpartitionedSpec, table.UnsortedSortOrder, "file:///tmp/t", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := table.MetadataBuilderFromBase(base, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	live = slices.Clone(live)
	slices.SortFunc(live, func(x, y modelSnap) int { return int(x.id - y.id) })
	for _, s := range live {
		snap := table.Snapshot{SnapshotID: s.id, SequenceNumber: s.id, TimestampMs: now + s.id,
			Summary: &table.Summary{Operation: table.OpAppend, Properties: iceberg.Properties(modelProps(t, s))}}
		if s.parent != 0 {
			p := s.parent
			snap.ParentSnapshotID = &p
		}
		if err := b.AddSnapshot(&snap); err != nil {
			t.Fatal(err)
		}
	}
	for name, id := range refs {
		typ := table.BranchRef
		if strings.HasPrefix(name, "tag") {
			typ = table.TagRef
		}
		if err := b.SetSnapshotRef(name, id, typ); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// modelTable is a table of meta whose archive is a.
func modelTable(meta table.Metadata, a *archiveIndex) *Table {
	ident := table.Identifier{"lake", "t"}
	return &Table{ident: ident, tbl: table.New(ident, meta, "", nil, nil), archive: a}
}

// refLedgerParts is the model of Table.ledgerParts: the ancestry walked
// whole, as ledgerParts did before the archive memoized its parts.
func refLedgerParts(meta table.Metadata, a *archiveIndex, snapshotID int64) ([]ledgerPart, *TruncatedLedgerError) {
	ancestors, te := ancestry(meta, a, snapshotID)
	if te != nil {
		return nil, te
	}
	var parts []ledgerPart
	for i := len(ancestors) - 1; i >= 0; i-- {
		s := ancestors[i]
		if meta.SnapshotByID(s.SnapshotID) != nil {
			if s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties) {
				parts = append(parts, ledgerPart{snap: &s})
			}
			continue
		}
		e, at, ok := a.find(s.SnapshotID)
		if !ok || !e.floeCommit() {
			continue
		}
		if n := len(parts); n > 0 && parts[n-1].snap == nil && parts[n-1].at.path == at.path && parts[n-1].at.block == at.block {
			parts[n-1].ids = append(parts[n-1].ids, s.SnapshotID)
			continue
		}
		parts = append(parts, ledgerPart{at: at, ids: []int64{s.SnapshotID}})
	}
	for i := range parts {
		p := &parts[i]
		if p.snap != nil {
			continue
		}
		floe := p.at.blockCommits()
		p.whole = slices.Equal(floe, p.ids) && p.at.ix.Blocks[p.at.block].Commits == len(floe)
	}
	return parts, nil
}

// ledgerOf flattens parts: L<id> for a live snapshot, A<id> for an
// archived commit.
func ledgerOf(ps []ledgerPart) []string {
	var out []string
	for _, p := range ps {
		if p.snap != nil {
			out = append(out, fmt.Sprintf("L%d", p.snap.SnapshotID))
			continue
		}
		for _, id := range p.commitIDs() {
			out = append(out, fmt.Sprintf("A%d", id))
		}
	}
	return out
}

// checkParts compares the memoized parts of id with the walk of the
// whole ancestry, and checks each archived part against its block and
// the segments a names. It returns whether the shapes (segment, block,
// wholeness) differ.
func checkParts(t *testing.T, where string, meta table.Metadata, a *archiveIndex, id int64) bool {
	t.Helper()
	got, err := modelTable(meta, a).ledgerParts(id)
	want, wte := refLedgerParts(meta, a, id)
	var gte *TruncatedLedgerError
	if errors.As(err, &gte) != (wte != nil) || (err != nil && gte == nil) {
		t.Fatalf("%s: ledgerParts(%d): error %v, the whole walk's %v", where, id, err, wte)
	}
	if wte != nil {
		if gte.SnapshotID != wte.SnapshotID || gte.Oldest != wte.Oldest {
			t.Fatalf("%s: ledgerParts(%d): %+v, the whole walk's %+v", where, id, *gte, *wte)
		}
		return false
	}
	if g, w := ledgerOf(got), ledgerOf(want); !slices.Equal(g, w) {
		t.Fatalf("%s: ledger of %d:\n got %v\nwant %v", where, id, g, w)
	}
	for i, p := range got {
		if p.snap != nil {
			continue
		}
		if !indexes(a.segs, p.at.ix) {
			t.Fatalf("%s: ledger of %d: part %d is in segment %s, which the index does not name", where, id, i, p.at.path)
		}
		b := p.at.ix.Blocks[p.at.block]
		for _, c := range p.commitIDs() {
			if !slices.ContainsFunc(p.at.ix.entries[b.First:b.First+b.Count], func(e archivedEntry) bool { return e.id == c }) {
				t.Fatalf("%s: ledger of %d: part %d (%s#%d) names commit %d its block lacks", where, id, i, p.at.path, p.at.block, c)
			}
		}
		if p.whole {
			if ids := p.commitIDs(); !slices.Equal(ids, p.at.blockCommits()) || b.Commits != len(ids) {
				t.Fatalf("%s: ledger of %d: part %d whole, but %v against the block's %v", where, id, i, ids, p.at.blockCommits())
			}
		}
	}
	return !slices.Equal(partsShape(got), partsShape(want))
}

// TestLedgerPartsAgreeWithWholeWalk: on random tables (a branch
// besides main, tags keeping snapshots live below expired ones, expiries
// absorbing segments as planSegment does, sometimes leaving a merged
// segment named beside the new one, segments named in random key order,
// sometimes an expired snapshot archived nowhere), ledgerParts through
// the memo gives the ledger, the error and its Oldest of a walk of the
// whole ancestry, with parts in named segments and whole only when whole.
func TestLedgerPartsAgreeWithWholeWalk(t *testing.T) {
	shapes, checks := 0, 0
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 99))
		var (
			all     []modelSnap
			expired = map[int64]bool{}
			tags    = map[string]int64{}
			heads   = map[string]int64{}
			segs    []segment
			prev    *archiveIndex
			next    = int64(1)
			lossy   = seed%5 == 4
			overlap = seed%3 == 2
		)
		add := func(branch string) {
			s := modelSnap{id: next, parent: heads[branch], floe: rng.IntN(4) != 0}
			if branch == "br" && heads["br"] == 0 {
				s.parent = heads["main"]
			}
			next++
			all = append(all, s)
			heads[branch] = s.id
		}
		for step := range 40 {
			for range 1 + rng.IntN(6) {
				if heads["br"] == 0 && heads["main"] != 0 && rng.IntN(8) == 0 {
					add("br")
				} else if heads["br"] != 0 && rng.IntN(3) == 0 {
					add("br")
				} else {
					add("main")
				}
			}
			if rng.IntN(4) == 0 {
				s := all[rng.IntN(len(all))]
				if !expired[s.id] {
					tags[fmt.Sprintf("tag%d", s.id)] = s.id
				}
			}
			if len(tags) > 0 && rng.IntN(4) == 0 {
				for name := range tags {
					delete(tags, name)
					break
				}
			}
			changed := false
			if rng.IntN(3) != 0 {
				cutoff := next - 1 - int64(rng.IntN(5))
				kept := map[int64]bool{}
				for _, id := range heads {
					kept[id] = true
				}
				for _, id := range tags {
					kept[id] = true
				}
				var fresh []modelSnap
				for _, s := range all {
					if !expired[s.id] && s.id <= cutoff && !kept[s.id] {
						expired[s.id] = true
						if lossy && rng.IntN(30) == 0 {
							continue // expired by another tool: archived nowhere
						}
						fresh = append(fresh, s)
					}
				}
				if len(fresh) > 0 {
					changed = true
					// Absorb the newest segments as planSegment does.
					named := slices.Clone(segs)
					slices.SortFunc(named, func(x, y segment) int {
						return cmpOldest(x, y)
					})
					entries := slices.Clone(fresh)
					n := len(fresh)
					var absorbed []segment
					for len(named) > 0 {
						last := named[len(named)-1]
						if n*segmentMergeRatio < len(last.ix.entries) {
							break
						}
						for i, e := range last.ix.entries {
							s := modelSnap{id: e.id, floe: e.floeCommit()}
							if p, ok := last.ix.parentOf(i); ok {
								s.parent = p
							}
							if !slices.ContainsFunc(entries, func(x modelSnap) bool { return x.id == s.id }) {
								entries = append(entries, s)
								n++
							}
						}
						absorbed = append(absorbed, last)
						named = named[:len(named)-1]
					}
					slices.SortFunc(entries, func(x, y modelSnap) int { return int(x.id - y.id) })
					sizes := make([]int, len(entries))
					for i := range sizes {
						sizes[i] = 1 + rng.IntN(3)
					}
					seg := modelSegment(t, fmt.Sprintf("%08x-s%d", rng.Uint32(), step), entries, sizes)
					if !(overlap && rng.IntN(3) == 0) {
						segs = slices.DeleteFunc(slices.Clone(segs), func(s segment) bool {
							return slices.ContainsFunc(absorbed, func(x segment) bool { return x.ix == s.ix })
						})
					}
					segs = append(slices.Clip(segs), seg)
					slices.SortFunc(segs, func(x, y segment) int { return strings.Compare(x.key, y.key) })
				}
			}
			var live []modelSnap
			for _, s := range all {
				if !expired[s.id] {
					live = append(live, s)
				}
			}
			refs := map[string]int64{}
			for name, id := range heads {
				refs[name] = id
			}
			for name, id := range tags {
				refs[name] = id
			}
			meta := modelMeta(t, live, refs)
			a := prev
			if changed || a == nil {
				if len(segs) == 0 {
					continue
				}
				a = newArchiveIndex(slices.Clone(segs), prev)
			}
			ids := []int64{}
			for _, id := range refs {
				ids = append(ids, id)
			}
			for range 4 {
				ids = append(ids, all[rng.IntN(len(all))].id)
			}
			slices.Sort(ids)
			for range 2 {
				for _, id := range ids {
					where := fmt.Sprintf("seed %d step %d", seed, step)
					if checkParts(t, where, meta, a, id) {
						shapes++
					}
					checks++
				}
			}
			prev = a
		}
	}
	t.Logf("%d checks, %d with parts shaped otherwise than a whole walk's", checks, shapes)
}

func cmpOldest(x, y segment) int {
	if c := int(x.ix.oldest() - y.ix.oldest()); c != 0 {
		return c
	}
	return strings.Compare(x.key, y.key)
}

// ledgerPartsWithin runs ledgerParts(id) on a table of meta and a,
// and fails when it does not return within d. A walk that never ends
// keeps spinning (and holding the index's lock) until the test binary
// exits: the snapshots of these tests are no floe commits, so that it
// spins without growing.
func ledgerPartsWithin(t *testing.T, meta table.Metadata, a *archiveIndex, id int64, d time.Duration) ([]ledgerPart, error) {
	t.Helper()
	type result struct {
		ps  []ledgerPart
		err error
	}
	done := make(chan result, 1)
	go func() {
		ps, err := modelTable(meta, a).ledgerParts(id)
		done <- result{ps, err}
	}()
	select {
	case r := <-done:
		return r.ps, r.err
	case <-time.After(d):
		_, want := ancestry(meta, a, id)
		t.Fatalf("ledgerParts(%d) did not return within %v; ancestry reports %+v", id, d, want)
		return nil, nil
	}
}

// truncatedLikeAncestry checks that ledgerParts(id) returns, within 3 s,
// the *TruncatedLedgerError of ancestry, and returns that.
func truncatedLikeAncestry(t *testing.T, meta table.Metadata, a *archiveIndex, id int64) *TruncatedLedgerError {
	t.Helper()
	_, want := ancestry(meta, a, id)
	if want == nil {
		t.Fatal("ancestry walked the cycle as a complete history")
	}
	_, err := ledgerPartsWithin(t, meta, a, id, 3*time.Second)
	var te *TruncatedLedgerError
	if !errors.As(err, &te) || te.Oldest != want.Oldest {
		t.Fatalf("ledgerParts: %v, want the *TruncatedLedgerError of ancestry %+v", err, *want)
	}
	return want
}

// TestLedgerPartsCyclicArchive: an archive whose entries' parents form a
// cycle (a damaged or foreign segment) is a truncated history, as to
// ancestry (table.AncestorsOfChecked stops at a snapshot seen before):
// ledgerParts and ancestryEnd return its *TruncatedLedgerError. A walk
// that never ended would hold the index's lock, and every later reader of
// the ledger would wait on it.
func TestLedgerPartsCyclicArchive(t *testing.T) {
	seg := modelSegment(t, "cycle", []modelSnap{{id: 1, parent: 3}, {id: 2, parent: 1}, {id: 3, parent: 2}}, []int{1, 1, 1})
	a := newArchiveIndex([]segment{seg}, nil)
	meta := modelMeta(t, []modelSnap{{id: 4, parent: 3}}, map[string]int64{"main": 4})
	want := truncatedLikeAncestry(t, meta, a, 4)
	end := make(chan *TruncatedLedgerError, 1)
	go func() { end <- ancestryEnd(meta, newArchiveIndex([]segment{seg}, nil), 4) }()
	select {
	case te := <-end:
		if te == nil || te.Oldest != want.Oldest {
			t.Fatalf("ancestryEnd: %v, want %+v", te, *want)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ancestryEnd did not return within 3s")
	}
}

// TestLedgerPartsCyclicLiveAncestry: the same with the cycle in the
// table's live snapshots (liveAncestors).
func TestLedgerPartsCyclicLiveAncestry(t *testing.T) {
	meta := modelMeta(t, []modelSnap{{id: 1, parent: 2}, {id: 2, parent: 1}, {id: 3, parent: 2}}, map[string]int64{"main": 3})
	a := newArchiveIndex([]segment{modelSegment(t, "s", []modelSnap{{id: 10}}, []int{1})}, nil)
	truncatedLikeAncestry(t, meta, a, 3)
}
