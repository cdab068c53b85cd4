package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// variedHistory returns n archived floe commits, a branch's, over
// partitions of topic t: commit i has a range of partition p unless
// (i+p)%4 == 0, so that a partition is absent from some commits (and, in
// a segment whose blocks hold few commits, from some blocks), and each
// partition's ranges tile its offsets.
func variedHistory(t testing.TB, n, partitions int) []ArchivedSnapshot {
	t.Helper()
	next := make([]int64, partitions)
	snaps := make([]ArchivedSnapshot, 0, n)
	for i := 1; i <= n; i++ {
		c := mapping.Commit{ID: fmt.Sprintf("c%d", i), Writer: "w"}
		for p := range partitions {
			if (i+p)%4 == 0 {
				continue
			}
			size := int64(1 + (i+p)%7)
			c.Ranges = append(c.Ranges, mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: int32(p)},
				Interval: mapping.Interval{Low: next[p], High: next[p] + size}, Records: size})
			next[p] += size
		}
		props, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		s := ArchivedSnapshot{SnapshotID: int64(i), TimestampMs: 1000 + int64(i), Properties: props}
		if i > 1 {
			parent := int64(i - 1)
			s.ParentID = &parent
		}
		snaps = append(snaps, s)
	}
	return snaps
}

// writeV1Index writes the index of the segment at path in the first
// format, as floe wrote it before the summaries file: its blocks' summaries
// inline, no segment summary.
func writeV1Index(t testing.TB, path string) {
	t.Helper()
	built, err := indexSegmentFile(iceio.LocalFS{}, "u", path, "")
	if err != nil {
		t.Fatal(err)
	}
	v1, err := json.Marshal(struct {
		Format    string             `json:"format"`
		TableUUID string             `json:"table-uuid"`
		Size      int64              `json:"size"`
		Snapshots []ArchivedSnapshot `json:"snapshots"`
		Blocks    []indexBlock       `json:"blocks"`
	}{indexFormatV1, "u", built.Size, built.Snapshots, built.Blocks})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(indexPath(path), v1, 0o644); err != nil {
		t.Fatal(err)
	}
}

// nextID is the id of a boundary's next commit, or "".
func nextID(b mapping.Boundary) string {
	if b.Next == nil {
		return ""
	}
	return b.Next.ID
}

// TestLookupsThroughSummariesFiles: on segments of several blocks, the
// ledger's summary, where an offset is (Locate) and the first commit
// covering a cut (FirstCovering) and the commit boundary at or below it
// (StateAt) are the whole ledger's, for offsets in
// every block of partitions absent from some of them, whether the
// segments' indexes are as maintenance writes them (the blocks' summaries
// and the partition directory in the summaries file), of the first format
// (the blocks' summaries inline) or built by decoding the segments.
func TestLookupsThroughSummariesFiles(t *testing.T) {
	const commits, partitions, cut = 1600, 1000, 1200
	snaps := variedHistory(t, commits, partitions)
	var whole mapping.Ledger
	for _, s := range snaps {
		c, err := mapping.DecodeCommit(s.SnapshotID, time.UnixMilli(s.TimestampMs).UTC(), s.Properties)
		if err != nil {
			t.Fatal(err)
		}
		whole.Commits = append(whole.Commits, c)
	}
	dir := t.TempDir()
	for _, d := range []string{archiveFolder, indexFolder} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var paths []string
	for i, part := range [][]ArchivedSnapshot{snaps[:cut], snaps[cut:]} {
		b, err := json.Marshal(&Archive{Format: ArchiveFormat, TableUUID: "u", Snapshots: part})
		if err != nil {
			t.Fatal(err)
		}
		path := fmt.Sprintf("%s/%s/%05d-seg%d.json", dir, archiveFolder, len(part), i)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	meta := modelMeta(t, []modelSnap{{id: commits + 1, parent: commits}}, map[string]int64{table.MainBranch: commits + 1})
	fsF := func(context.Context) (iceio.IO, error) { return iceio.LocalFS{}, nil }

	for _, form := range []string{"summaries file", "first format", "built"} {
		t.Run(form, func(t *testing.T) {
			var segs []segment
			for _, path := range paths {
				ix, err := writeIndex(iceio.LocalFS{}, "u", path)
				if err != nil {
					t.Fatal(err)
				}
				switch form {
				case "first format":
					writeV1Index(t, path)
				case "built":
					if err := os.Remove(indexPath(path)); err != nil {
						t.Fatal(err)
					}
				}
				if form == "summaries file" && (len(ix.Blocks) < 2 || ix.Partitions == nil) {
					t.Fatalf("segment %s: %d blocks, directory %v: want several blocks and a directory", path, len(ix.Blocks), ix.Partitions != nil)
				}
				if ix, err = readIndex(iceio.LocalFS{}, "u", path, segmentDigest{}); err != nil {
					t.Fatal(err)
				}
				if held := ix.Blocks[0].Summary != nil; held != (form != "summaries file") || ix.built.Load() != (form == "built") {
					t.Fatalf("index read: blocks' summaries held %v, built %v", held, ix.built.Load())
				}
				segs = append(segs, segment{key: PropLedgerSegmentPrefix + filepath.Base(path), path: path, ix: ix})
			}
			ident := table.Identifier{"lake", "t"}
			tbl := &Table{ident: ident, branch: table.MainBranch, tbl: table.New(ident, meta, "", fsF, nil), archive: newArchiveIndex(segs, nil)}

			sum, err := tbl.Summary(t.Context(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := whole.Summarize(); !reflect.DeepEqual(sum, want) {
				for tp, p := range want.Parts {
					if q := sum.Parts[tp]; q == nil || *q != *p {
						t.Logf("%s: %+v, want %+v", tp, q, *p)
						break
					}
				}
				t.Logf("commits %d %d ids %v %v", sum.Commits, want.Commits, sum.IDs, want.IDs)
				t.Fatal("the ledger's summary differs from the whole ledger's")
			}
			// The blocks' summaries held are the code path of before: one
			// partition checks it.
			checked := []int32{0, 7, partitions - 1}
			if form != "summaries file" {
				checked = checked[1:2]
			}
			// Cuts at the ends of blocks: the boundary's commit is then the
			// last of a block StateAt passes by its summary.
			var starts []int
			for k, seg := range segs {
				for _, blk := range seg.ix.Blocks {
					starts = append(starts, k*cut+blk.First)
				}
			}
			for _, p := range checked {
				tp := mapping.TopicPartition{Topic: "t", Partition: p}
				ps, _ := sum.Partition(tp)
				for _, j := range starts {
					at := mapping.Cut{tp: 0}
					for _, c := range whole.Commits[:j] {
						for _, r := range c.Ranges {
							if r.TopicPartition == tp {
								at[tp] = r.High
							}
						}
					}
					gb, err := tbl.StateAt(t.Context(), 0, at)
					if err != nil {
						t.Fatal(err)
					}
					wb, err := whole.StateAt(at)
					if err != nil {
						t.Fatal(err)
					}
					if gb.Commit.ID != wb.Commit.ID || gb.Empty != wb.Empty || gb.At.String() != wb.At.String() || nextID(gb) != nextID(wb) {
						t.Fatalf("state at %s, a block's end: commit %q empty %v at %s next %q; the whole ledger's %q %v %s %q", at,
							gb.Commit.ID, gb.Empty, gb.At, nextID(gb), wb.Commit.ID, wb.Empty, wb.At, nextID(wb))
					}
				}
				for off := int64(-1); off <= ps.High+1; off += 1 + ps.High/9 {
					got, err := tbl.Locate(t.Context(), 0, tp, off)
					if err != nil {
						t.Fatal(err)
					}
					want := whole.Where(tp, off)
					if got.Status != want.Status || got.Commit.ID != want.Commit.ID || got.Range != want.Range {
						t.Fatalf("where %s@%d: %s in %s %v; the whole ledger: %s in %s %v", tp, off, got.Status, got.Commit.ID, got.Range, want.Status, want.Commit.ID, want.Range)
					}
				}
				for at := int64(0); at < ps.High; at += 1 + ps.High/5 {
					for _, cut := range []mapping.Cut{{tp: at}, {tp: at, {Topic: "t", Partition: (p + 1) % partitions}: at / 2}} {
						got, err := tbl.FirstCovering(t.Context(), 0, cut)
						if err != nil {
							t.Fatal(err)
						}
						want, err := whole.FirstCovering(cut)
						if err != nil {
							t.Fatal(err)
						}
						if got.ID != want.ID {
							t.Fatalf("first covering %s: %s, the whole ledger's %s", cut, got.ID, want.ID)
						}
						gb, err := tbl.StateAt(t.Context(), 0, cut)
						if err != nil {
							t.Fatal(err)
						}
						wb, err := whole.StateAt(cut)
						if err != nil {
							t.Fatal(err)
						}
						if gb.Commit.ID != wb.Commit.ID || gb.Empty != wb.Empty || gb.At.String() != wb.At.String() || nextID(gb) != nextID(wb) {
							t.Fatalf("state at %s: commit %q empty %v at %s next %q; the whole ledger's %q %v %s %q", cut,
								gb.Commit.ID, gb.Empty, gb.At, nextID(gb), wb.Commit.ID, wb.Empty, wb.At, nextID(wb))
						}
					}
				}
			}
		})
	}
}
