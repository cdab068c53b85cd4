package snapshot

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/google/uuid"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
)

// A merge streams the union of its inputs in entry order, each snapshot
// once, and the segment and index it writes read back as those written
// whole: every block decodes to its entries, and indexing the file again
// gives the same blocks and entries.
func TestWriteSegmentMerges(t *testing.T) {
	ctx := t.Context()
	tbl, _ := internalTable(t, OpenOptions{Create: true})
	id := tbl.tbl.Metadata().TableUUID().String()
	entry := func(i int) ArchivedSnapshot {
		c := mapping.Commit{ID: uuid.NewString(), Writer: "test", Ranges: []mapping.Range{{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: int32(i % 3)},
			Interval: mapping.Interval{Low: int64(i), High: int64(i + 1)}}}}
		if i%5 == 0 {
			c.FileGroups = []mapping.FileGroup{{Files: []string{"f" + uuid.NewString()}, Spans: []mapping.Span{{TopicPartition: c.Ranges[0].TopicPartition, Interval: c.Ranges[0].Interval}}}}
		}
		props, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		// Entries of a few KiB: the segment spans several index blocks.
		props["test.pad"] = strings.Repeat("p", 3000)
		// Commit times repeat: the snapshot id orders entries of one
		// millisecond.
		// Most parents are the entry before; some are outside the segment.
		parent := int64(1000 - i + 1)
		if i%7 == 0 {
			parent = int64(5000 + i)
		}
		return ArchivedSnapshot{SnapshotID: int64(1000 - i), ParentID: &parent, TimestampMs: int64(i / 2), Properties: props}
	}
	// Two segments and the fresh entries interleave, and overlap where a
	// merge that was not committed left an entry in two segments.
	var odd, even, fresh []ArchivedSnapshot
	for i := range 3000 {
		switch {
		case i >= 2900:
			fresh = append(fresh, entry(i))
		case i%2 == 1:
			odd = append(odd, entry(i))
		default:
			even = append(even, entry(i))
		}
	}
	even = append(even, odd[100], odd[200])
	fresh = append(fresh, even[7])
	var segs []segment
	for _, in := range [][]ArchivedSnapshot{odd, even} {
		slices.SortFunc(in, entryOrder)
		path, _, digest, err := writeSegment(ctx, tbl.tbl, len(in), in, nil)
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, segment{path: path, digest: digest})
	}
	slices.SortFunc(fresh, entryOrder)
	path, ix, digest, err := writeSegment(ctx, tbl.tbl, 3000, fresh, segs)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := tbl.tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []ArchivedSnapshot
	for s, err := range segmentEntries(fsys, id, path, digest.segment) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if len(got) != 3000 || !slices.IsSortedFunc(got, entryOrder) {
		t.Fatalf("merged %d entries (sorted: %v), want the 3,000 distinct ones in order", len(got), slices.IsSortedFunc(got, entryOrder))
	}
	for i := 1; i < len(got); i++ {
		if got[i].SnapshotID == got[i-1].SnapshotID {
			t.Fatalf("snapshot %d merged twice", got[i].SnapshotID)
		}
	}
	// The index written beside it, and the one built from the file.
	read, err := readIndex(fsys, id, path, digest)
	if err != nil || read.built.Load() {
		t.Fatalf("read the index: %v (built from the segment: %v)", err, read != nil && read.built.Load())
	}
	f, err := fsys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	built, err := buildIndex(f, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := built.slim(); err != nil {
		t.Fatal(err)
	}
	for _, other := range []*segmentIndex{read, built} {
		if !slices.Equal(other.entries, ix.entries) || !maps.Equal(other.parents, ix.parents) || other.Size != ix.Size || len(other.Blocks) != len(ix.Blocks) {
			t.Fatalf("index: %d entries, %d blocks, size %d; written: %d, %d, %d", len(other.entries), len(other.Blocks), other.Size, len(ix.entries), len(ix.Blocks), ix.Size)
		}
		if len(other.Blocks) < 2 {
			t.Fatalf("%d index blocks, want several", len(other.Blocks))
		}
		// The same blocks: an index built again (its file lost) reads the
		// same bytes for an entry as the one written with the segment.
		for bl, b := range other.Blocks {
			w := ix.Blocks[bl]
			if b.First != w.First || b.Count != w.Count || b.Offset != w.Offset || b.Length != w.Length {
				t.Fatalf("block %d: entries %d+%d at %d+%d; written: %d+%d at %d+%d", bl, b.First, b.Count, b.Offset, b.Length, w.First, w.Count, w.Offset, w.Length)
			}
		}
	}
	for i, s := range got {
		if p, ok := ix.parentOf(i); !ok || p != *s.ParentID {
			t.Fatalf("entry %d: parent %d, %v; the file's %d", i, p, ok, *s.ParentID)
		}
	}
	n := 0
	for bl := range ix.Blocks {
		snaps, err := readBlock(fsys, path, ix, bl)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range snaps {
			if !maps.Equal(s.Properties, got[n].Properties) {
				t.Fatalf("block %d: entry %d's properties differ from the file's", bl, n)
			}
			n++
		}
	}
	if n != len(got) {
		t.Fatalf("the blocks hold %d entries, the file %d", n, len(got))
	}
}

// internalTable creates the table lake.t in a catalog of its own under a
// temporary folder, and returns it with that folder.
func internalTable(t testing.TB, opts OpenOptions) (*Table, string) {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalog.Open(t.Context(), catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "wh")})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := Open(t.Context(), cat, []string{"lake", "t"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, dir
}

// An archive file of floe before segments that archived nothing holds
// "snapshots": null: it reads as empty, as when it was decoded whole.
func TestEmptyArchiveReadsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000-empty.json")
	if err := os.WriteFile(path, []byte(`{"format":"`+ArchiveFormat+`","table-uuid":"u","snapshots":null}`), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := readArchiveFile(iceio.LocalFS{}, "u", "lake.t", path, "")
	if err != nil || a.Len() != 0 {
		t.Fatalf("read the empty archive: %v, %d entries", err, a.Len())
	}
	if _, err := readArchiveFile(iceio.LocalFS{}, "v", "lake.t", path, ""); err == nil {
		t.Fatal("read another table's archive without an error")
	}
}
