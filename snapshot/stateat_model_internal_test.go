package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// modelSnapAt is one snapshot of the randomized model: its parent, its
// floe commit (nil: none) and whether it carries a pad that closes its
// archive block.
type modelSnapAt struct {
	id, parent int64
	commit     *mapping.Commit
	pad        bool
}

func (s modelSnapAt) props(t testing.TB) map[string]string {
	t.Helper()
	props := map[string]string{}
	if s.commit != nil {
		p, err := s.commit.Encode()
		if err != nil {
			t.Fatal(err)
		}
		props = p
	} else {
		props[KeyOperation] = "replace"
	}
	if s.pad {
		props["x-pad"] = strings.Repeat("p", indexBlockBytes)
	}
	return props
}

// modelMetaAt is modelMeta with the snapshots' own properties.
func modelMetaAt(t testing.TB, live []modelSnapAt, refs map[string]int64) table.Metadata {
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
	live = slices.Clone(live)
	slices.SortFunc(live, func(x, y modelSnapAt) int { return int(x.id - y.id) })
	for _, s := range live {
		s.pad = false
		props := s.props(t)
		snap := table.Snapshot{SnapshotID: s.id, SequenceNumber: s.id, TimestampMs: time.Now().UnixMilli() + s.id,
			Summary: &table.Summary{Operation: table.OpAppend, Properties: iceberg.Properties(props)}}
		if s.parent != 0 {
			p := s.parent
			snap.ParentSnapshotID = &p
		}
		if err := b.AddSnapshot(&snap); err != nil {
			t.Fatal(err)
		}
	}
	for name, id := range refs {
		if err := b.SetSnapshotRef(name, id, table.BranchRef); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

var modelParts = []mapping.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "t", Partition: 2}, {Topic: "u", Partition: 0}}

// modelCommit returns a random commit over modelParts, advancing next:
// partitions absent, starts, gaps, overlaps, lost and aborted ranges.
func modelCommit(rnd *rand.Rand, id int64, next map[mapping.TopicPartition]int64) *mapping.Commit {
	c := &mapping.Commit{ID: fmt.Sprintf("c%d", id), Writer: "w"}
	for _, tp := range modelParts {
		if rnd.IntN(2) == 0 {
			continue
		}
		n := next[tp]
		k := int64(1 + rnd.IntN(5))
		r := mapping.Range{TopicPartition: tp}
		switch x := rnd.IntN(20); {
		case x < 10:
			r.Interval, r.Records = mapping.Interval{Low: n, High: n + k}, k
		case x < 12:
			r.Interval = mapping.Interval{Low: n, High: n}
		case x < 14:
			r.Interval, r.Lost = mapping.Interval{Low: n, High: n + k}, true
		case x < 15:
			r.Interval, r.Aborted = mapping.Interval{Low: n, High: n + k}, true
		case x < 17:
			g := int64(1 + rnd.IntN(3))
			r.Interval, r.Records = mapping.Interval{Low: n + g, High: n + g + k}, k
		case x < 19:
			lo := max(0, n-int64(1+rnd.IntN(4)))
			r.Interval, r.Records = mapping.Interval{Low: lo, High: lo + k}, 0
		default:
			// a lost range then a data range of the same partition
			c.Ranges = append(c.Ranges, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: n, High: n + 1}, Lost: true})
			r.Interval, r.Records = mapping.Interval{Low: n + 1, High: n + 1 + k}, k
		}
		c.Ranges = append(c.Ranges, r)
		next[tp] = max(next[tp], r.High)
	}
	if len(c.Ranges) == 0 {
		tp := modelParts[3]
		c.Ranges = append(c.Ranges, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: next[tp], High: next[tp] + 1}, Records: 1})
		next[tp]++
	}
	return c
}

// TestStateAtModelArchive (from a review): Table.StateAt equals
// mapping.Ledger.StateAt on the whole ledger, for random ledgers (partitions absent from commits,
// starts, gaps, overlaps, lost and aborted ranges, another topic) archived
// in segments of several blocks (some without floe commits), in every
// index form, with live commits on top, and for a side branch whose
// commits share the archive's blocks with main's.
func TestStateAtModelArchive(t *testing.T) {
	seed := uint64(39)
	if s := os.Getenv("FLOE_STATEAT_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	// Each iteration writes segments of several 4 MiB blocks: a few keep
	// the suite quick, FLOE_STATEAT_ITERS runs more.
	iters := 6
	if s := os.Getenv("FLOE_STATEAT_ITERS"); s != "" {
		fmt.Sscan(s, &iters)
	}
	rnd := rand.New(rand.NewPCG(seed, 7))
	fsF := func(context.Context) (iceio.IO, error) { return iceio.LocalFS{}, nil }
	for it := range iters {
		// main: snapshots 1..n, a side branch of snapshots 1001.. forked
		// from main's snapshot fork.
		n := 6 + rnd.IntN(18)
		next := map[mapping.TopicPartition]int64{}
		for _, tp := range modelParts {
			next[tp] = int64(rnd.IntN(4))
		}
		var mainSnaps []modelSnapAt
		for i := 1; i <= n; i++ {
			s := modelSnapAt{id: int64(i), parent: int64(i - 1)}
			if i == 1 || rnd.IntN(8) > 0 {
				s.commit = modelCommit(rnd, s.id, next)
			}
			s.pad = rnd.IntN(4) == 0
			mainSnaps = append(mainSnaps, s)
		}
		live := rnd.IntN(4) // main's live snapshots
		if live == 0 || mainSnaps[n-1].commit == nil {
			live = max(live, 1)
		}
		archivedMain := mainSnaps[:n-live]
		var side []modelSnapAt
		if rnd.IntN(2) == 0 && len(archivedMain) > 1 {
			fork := 1 + rnd.IntN(len(archivedMain)-1)
			bnext := map[mapping.TopicPartition]int64{}
			for _, tp := range modelParts {
				bnext[tp] = next[tp] + 0
			}
			// the branch replays from where main stood at fork, roughly
			parent := int64(fork)
			for j := range 1 + rnd.IntN(5) {
				s := modelSnapAt{id: int64(1001 + j), parent: parent, commit: modelCommit(rnd, int64(1001+j), bnext), pad: rnd.IntN(4) == 0}
				side = append(side, s)
				parent = s.id
			}
		}
		// File order: main's archived snapshots, with the branch's but its
		// head interleaved after the fork.
		var order []modelSnapAt
		order = append(order, archivedMain...)
		if len(side) > 1 {
			for _, s := range side[:len(side)-1] {
				lo := slices.IndexFunc(order, func(x modelSnapAt) bool { return x.id == s.parent }) + 1
				at := lo + rnd.IntN(len(order)-lo+1)
				order = slices.Insert(order, at, s)
			}
		}
		// segments: cut the file order in 1..3 pieces
		nseg := 1 + rnd.IntN(3)
		cuts := []int{0}
		for k := 1; k < nseg; k++ {
			cuts = append(cuts, rnd.IntN(len(order)+1))
		}
		cuts = append(cuts, len(order))
		slices.Sort(cuts)
		dir := t.TempDir()
		for _, d := range []string{archiveFolder, indexFolder} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		var segs []segment
		var forms []string
		for k := 0; k+1 < len(cuts); k++ {
			piece := order[cuts[k]:cuts[k+1]]
			if len(piece) == 0 {
				continue
			}
			var as []ArchivedSnapshot
			for _, s := range piece {
				a := ArchivedSnapshot{SnapshotID: s.id, TimestampMs: 1000 + s.id, Properties: s.props(t)}
				if s.parent != 0 {
					p := s.parent
					a.ParentID = &p
				}
				as = append(as, a)
			}
			b, err := json.Marshal(&Archive{Format: ArchiveFormat, TableUUID: "u", Snapshots: as})
			if err != nil {
				t.Fatal(err)
			}
			path := fmt.Sprintf("%s/%s/%05d-seg%d.json", dir, archiveFolder, len(as), k)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := writeIndex(iceio.LocalFS{}, "u", path); err != nil {
				t.Fatal(err)
			}
			form := []string{"summaries file", "first format", "built"}[rnd.IntN(3)]
			switch form {
			case "first format":
				writeV1Index(t, path)
			case "built":
				if err := os.Remove(indexPath(path)); err != nil {
					t.Fatal(err)
				}
			}
			ix, err := readIndex(iceio.LocalFS{}, "u", path, segmentDigest{})
			if err != nil {
				t.Fatal(err)
			}
			forms = append(forms, fmt.Sprintf("%s(%d blocks)", form, len(ix.Blocks)))
			segs = append(segs, segment{key: fmt.Sprintf("%s%05d-seg%d.json", PropLedgerSegmentPrefix, len(as), k), path: path, ix: ix})
		}
		liveSnaps := slices.Clone(mainSnaps[n-live:])
		refs := map[string]int64{table.MainBranch: int64(n)}
		if len(side) > 0 {
			liveSnaps = append(liveSnaps, side[len(side)-1])
			refs["side"] = side[len(side)-1].id
		}
		meta := modelMetaAt(t, liveSnaps, refs)
		ident := table.Identifier{"lake", "t"}
		tbl := &Table{ident: ident, branch: table.MainBranch, tbl: table.New(ident, meta, "", fsF, nil), archive: newArchiveIndex(segs, nil)}

		// The whole ledgers, by the model.
		byID := map[int64]modelSnapAt{}
		for _, s := range mainSnaps {
			byID[s.id] = s
		}
		for _, s := range side {
			byID[s.id] = s
		}
		ledgerOf := func(head int64) mapping.Ledger {
			var chain []modelSnapAt
			for id := head; id != 0; id = byID[id].parent {
				chain = append(chain, byID[id])
			}
			slices.Reverse(chain)
			var l mapping.Ledger
			for _, s := range chain {
				if s.commit == nil {
					continue
				}
				props := s.props(t)
				c, err := mapping.DecodeCommit(s.id, time.UnixMilli(1000+s.id).UTC(), props)
				if err != nil {
					t.Fatal(err)
				}
				l.Commits = append(l.Commits, c)
			}
			return l
		}
		heads := []int64{0}
		if len(side) > 0 {
			heads = append(heads, side[len(side)-1].id)
		}
		for _, head := range heads {
			whole := ledgerOf(head)
			if head == 0 {
				whole = ledgerOf(int64(n))
			}
			// Reference check: the table's ledger is the model's.
			got, err := tbl.ReadLedger(t.Context(), head)
			if err != nil {
				t.Fatalf("iteration %d: read ledger: %v", it, err)
			}
			if len(got.Commits) != len(whole.Commits) {
				t.Fatalf("iteration %d head %d: table's ledger has %d commits, model %d", it, head, len(got.Commits), len(whole.Commits))
			}
			sum := whole.Summarize()
			// Positions to cut at: every range's ends, and around them.
			offs := map[mapping.TopicPartition][]int64{}
			for _, tp := range modelParts {
				set := map[int64]bool{0: true}
				for _, r := range whole.Ranges(tp) {
					set[r.Low], set[r.High], set[r.High+1] = true, true, true
					if r.Low > 0 {
						set[r.Low-1] = true
					}
				}
				offs[tp] = slices.Sorted(func(yield func(int64) bool) {
					for o := range set {
						if !yield(o) {
							return
						}
					}
				})
			}
			for range 40 {
				cut := mapping.Cut{}
				for _, tp := range modelParts {
					if rnd.IntN(2) == 0 {
						cut[tp] = offs[tp][rnd.IntN(len(offs[tp]))]
					}
				}
				if rnd.IntN(10) == 0 {
					cut[mapping.TopicPartition{Topic: "t", Partition: 7}] = 0
				}
				if len(cut) == 0 {
					cut[modelParts[0]] = offs[modelParts[0]][rnd.IntN(len(offs[modelParts[0]]))]
				}
				wb, werr := whole.StateAt(cut)
				gb, gerr := tbl.StateAt(t.Context(), head, cut)
				if (werr != nil) != (gerr != nil) {
					t.Fatalf("iteration %d head %d cut %s (%s): error %v, the whole ledger's %v", it, head, cut, strings.Join(forms, ", "), gerr, werr)
				}
				if werr != nil {
					continue
				}
				if gb.Commit.ID != wb.Commit.ID || gb.Empty != wb.Empty || gb.At.String() != wb.At.String() || nextID(gb) != nextID(wb) {
					var desc []string
					for _, c := range whole.Commits {
						desc = append(desc, fmt.Sprintf("%d:%v", c.SnapshotID, c.Ranges))
					}
					t.Fatalf("iteration %d head %d cut %s (segments %s, summary %d commits): commit %q empty %v at %s next %q; the whole ledger's %q %v %s %q\nledger:\n%s", it, head, cut,
						strings.Join(forms, ", "), sum.Commits, gb.Commit.ID, gb.Empty, gb.At, nextID(gb), wb.Commit.ID, wb.Empty, wb.At, nextID(wb), strings.Join(desc, "\n"))
				}
			}
		}
	}
}
