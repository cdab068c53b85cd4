package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/floe-dev/floe/mapping"
)

// TestIndexBlocks: a segment larger than a block is cut into blocks whose
// byte spans read back exactly their entries, with every property, and
// whose summaries are those of their commits; the index's entries keep no
// ranges.
func TestIndexBlocks(t *testing.T) {
	const partitions = 500
	a := &Archive{Format: ArchiveFormat, TableUUID: "u"}
	var parent *int64
	for i := range 600 {
		c := mapping.Commit{ID: fmt.Sprintf("c%d", i), Writer: "w", TopicIDs: map[string]string{"t": "AAAAAAAAAAAAAAAAAAAAAA"}}
		for p := range int32(partitions) {
			c.Ranges = append(c.Ranges, mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: p},
				Interval: mapping.Interval{Low: int64(i) * 100, High: int64(i+1) * 100}, Records: 90, DeadLetters: int64(i % 2)})
		}
		props, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		id := int64(i + 1)
		a.Snapshots = append(a.Snapshots, ArchivedSnapshot{SnapshotID: id, ParentID: parent, TimestampMs: 1000 + id, Properties: props})
		parent = &id
	}
	b, err := json.MarshalIndent(a, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := buildIndex(bytes.NewReader(b), "u")
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Blocks) < 2 || ix.Size != int64(len(b)) {
		t.Fatalf("%d blocks, size %d of %d bytes: want several blocks", len(ix.Blocks), ix.Size, len(b))
	}
	for _, s := range ix.Snapshots {
		for k := range s.Properties {
			if strings.HasPrefix(k, mapping.KeyRangesPrefix) || strings.HasPrefix(k, mapping.KeyLostPrefix) || strings.HasPrefix(k, mapping.KeyAbortedPrefix) {
				t.Fatalf("index entry %d keeps %s", s.SnapshotID, k)
			}
		}
	}
	// The index round-trips through its file form.
	out, err := json.Marshal(ix)
	if err != nil {
		t.Fatal(err)
	}
	var back segmentIndex
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, ix) {
		t.Fatal("the index does not read back as written")
	}
	// What a table holds of each entry: its ancestry, that it is a floe
	// commit and the hash of its commit id, and no properties.
	if err := ix.slim(); err != nil {
		t.Fatal(err)
	}
	if ix.Snapshots != nil || len(ix.entries) != len(a.Snapshots) {
		t.Fatalf("slim index: %d snapshots, %d entries; want 0 and %d", len(ix.Snapshots), len(ix.entries), len(a.Snapshots))
	}
	for i, e := range ix.entries {
		s := a.Snapshots[i]
		parent, ok := ix.parentOf(i)
		if e.id != s.SnapshotID || e.ts != s.TimestampMs || (s.ParentID == nil) == ok || (s.ParentID != nil && *s.ParentID != parent) ||
			!e.floeCommit() || e.commit != commitHash(fmt.Sprintf("c%d", i)) || e.flags()&entryCompaction != 0 {
			t.Fatalf("entry %d: %+v, of snapshot %+v", i, e, s)
		}
	}
	path := filepath.Join(t.TempDir(), "seg.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	fsys := iceio.LocalFS{}
	next := 0
	for bl, blk := range ix.Blocks {
		if blk.First != next {
			t.Fatalf("block %d starts at entry %d, want %d", bl, blk.First, next)
		}
		next += blk.Count
		got, err := readBlock(fsys, path, ix, bl)
		if err != nil {
			t.Fatal(err)
		}
		want := a.Snapshots[blk.First : blk.First+blk.Count]
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("block %d reads back other entries", bl)
		}
		var l mapping.Ledger
		for _, s := range want {
			c, err := mapping.DecodeCommit(s.SnapshotID, time.UnixMilli(s.TimestampMs).UTC(), s.Properties)
			if err != nil {
				t.Fatal(err)
			}
			l.Commits = append(l.Commits, c)
		}
		if sum := l.Summarize(); !reflect.DeepEqual(blk.Summary.Summary, sum) {
			t.Fatalf("block %d: summary differs from its commits'", bl)
		}
	}
	if next != len(a.Snapshots) {
		t.Fatalf("blocks hold %d entries, want %d", next, len(a.Snapshots))
	}
	wholeSum := mapping.Summary{}
	for _, s := range a.Snapshots {
		c, err := mapping.DecodeCommit(s.SnapshotID, time.UnixMilli(s.TimestampMs).UTC(), s.Properties)
		if err != nil {
			t.Fatal(err)
		}
		wholeSum.Add(c)
	}
	if !reflect.DeepEqual(ix.Summary.Summary, wholeSum) {
		t.Fatal("the segment's summary differs from its commits'")
	}
	checkIndexFiles(t, b, ix, wholeSum)
}

// checkIndexFiles writes the index of a segment as maintenance writes
// it (file is the segment), and checks what a reader reads back: the blocks without their
// summaries, which the summaries file holds, each equal to built's, and
// the segment's summary. An index of the first format (the blocks'
// summaries inline, no segment summary) reads as built.
func checkIndexFiles(t *testing.T, b []byte, built *segmentIndex, sum mapping.Summary) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{archiveFolder, indexFolder} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := dir + "/" + archiveFolder + "/00001-x.json"
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	fsys := iceio.LocalFS{}
	if _, err := writeIndex(fsys, "u", path); err != nil {
		t.Fatal(err)
	}
	v1Path := dir + "/" + archiveFolder + "/00002-v1.json"
	if err := os.WriteFile(v1Path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	writeV1Index(t, v1Path)
	for _, tc := range []struct {
		path   string
		inline bool
	}{{path, false}, {v1Path, true}} {
		ix, err := readIndex(fsys, "u", tc.path, segmentDigest{})
		if err != nil || ix.built.Load() {
			t.Fatalf("%s: read the index: %v (built from the segment: %v)", tc.path, err, ix != nil && ix.built.Load())
		}
		if !reflect.DeepEqual(ix.Summary.Summary, sum) {
			t.Fatalf("%s: the segment's summary differs from its commits'", tc.path)
		}
		if len(ix.Blocks) != len(built.Blocks) {
			t.Fatalf("%s: %d blocks, want %d", tc.path, len(ix.Blocks), len(built.Blocks))
		}
		for bl, blk := range ix.Blocks {
			if (blk.Summary != nil) != tc.inline || blk.Commits != built.Blocks[bl].Commits {
				t.Fatalf("%s: block %d holds its summary: %v, want %v; %d commits, want %d", tc.path, bl, blk.Summary != nil, tc.inline, blk.Commits, built.Blocks[bl].Commits)
			}
			var fs iceio.IO = fsys
			got, err := (&Table{}).blockSummary(t.Context(), &fs, archivedAt{path: tc.path, ix: ix, block: bl})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, built.Blocks[bl].Summary.Summary) {
				t.Fatalf("%s: block %d: summary differs from the one built", tc.path, bl)
			}
		}
	}
}

// TestEntryParents: an entry whose parent is the entry before it does not
// hold it; the others' parents are kept apart, and parentOf answers both.
func TestEntryParents(t *testing.T) {
	ix := &segmentIndex{Blocks: []indexBlock{{}}}
	parent := func(id int64) *int64 { return &id }
	snaps := []ArchivedSnapshot{
		{SnapshotID: 10},
		{SnapshotID: 11, ParentID: parent(10)},
		{SnapshotID: 12, ParentID: parent(10)}, // a branch from 10
		{SnapshotID: 13, ParentID: parent(99)}, // a parent outside the segment
		{SnapshotID: 14, ParentID: parent(13)},
		{SnapshotID: 15, ParentID: parent(0)},
	}
	for i, s := range snaps {
		e, err := ix.entry(0, i, s)
		if err != nil {
			t.Fatal(err)
		}
		ix.entries = append(ix.entries, e)
	}
	ix.seal()
	for i, s := range snaps {
		p, ok := ix.parentOf(i)
		if (s.ParentID != nil) != ok || ok && p != *s.ParentID {
			t.Errorf("entry %d: parent %d, %v; want %v", i, p, ok, s.ParentID)
		}
	}
	if len(ix.parents) != 3 || ix.building != nil {
		t.Errorf("%d parents kept apart, want 3 (12, 13, 15); building %v", len(ix.parents), ix.building)
	}
}

// TestSpanListRoundTrip: the delta-encoded spans of a partition directory
// being written read back as added, offsets going back (a replay) and
// forward, spans empty and wide.
func TestSpanListRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 23))
	var (
		l    spanList
		want []blockSpan
	)
	bl, off := int64(0), int64(1<<40)
	for range 10_000 {
		bl += 1 + r.Int64N(3)
		off += r.Int64N(2_000_000) - 500_000
		s := blockSpan{bl, off, off + r.Int64N(1<<20)}
		l.add(s)
		want = append(want, s)
	}
	if got := l.all(); !slices.Equal(got, want) {
		t.Fatalf("spans read back differ from those added (%d against %d)", len(got), len(want))
	}
	if per := float64(len(l.buf)) / float64(len(want)); per > 10 {
		t.Fatalf("%.1f bytes a span, want well under blockSpan's 24", per)
	}
}
