package snapshot_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// wideTable opens a new table of a SQLite catalog and file warehouse with
// extra table properties.
func wideTable(t testing.TB, props map[string]string) *snapshot.Table {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalog.Open(t.Context(), catalog.Config{
		Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "wh")})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := snapshot.Open(t.Context(), cat, []string{"lake", "wide"}, snapshot.OpenOptions{Create: true, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// commitWide commits one range of 10 offsets (no rows: a file-less commit
// costs only metadata) for each of partitions [0, n), the i-th such commit
// of the table: ranges [10i, 10i+10).
func commitWide(t *testing.T, tbl *snapshot.Table, n int32, i int) snapshot.Result {
	t.Helper()
	var rs []mapping.Range
	for p := range n {
		rs = append(rs, mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: p}, Interval: mapping.Interval{Low: int64(10 * i), High: int64(10*i + 10)}})
	}
	res, err := tbl.Commit(t.Context(), snapshot.Flush{Ranges: rs}, snapshot.CommitOptions{Writer: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func metadataSize(t *testing.T, tbl *snapshot.Table) int64 {
	t.Helper()
	fi, err := os.Stat(strings.TrimPrefix(tbl.Iceberg().MetadataLocation(), "file://"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// rangesFiles lists the table's ranges files.
func rangesFiles(t *testing.T, tbl *snapshot.Table) []string {
	t.Helper()
	dir := strings.TrimPrefix(tbl.Iceberg().Location(), "file://") + "/metadata/floe-ranges"
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out
}

// TestWideCommitMetadataBounded: what a commit adds to metadata.json does
// not grow with the partitions it covers: 1,000 partitions cost what 10
// do, and the ledger reads back every range.
func TestWideCommitMetadataBounded(t *testing.T) {
	added := map[int32]int64{}
	for _, n := range []int32{10, 1000} {
		tbl := wideTable(t, nil)
		commitWide(t, tbl, n, 0)
		const commits = 3
		before := metadataSize(t, tbl)
		for i := 1; i <= commits; i++ {
			commitWide(t, tbl, n, i)
		}
		added[n] = (metadataSize(t, tbl) - before) / commits
		fresh, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := ledger(t, fresh)
		next := l.Next()
		if len(l.Commits) != commits+1 || len(next) != int(n) || next[mapping.TopicPartition{Topic: "t", Partition: n - 1}] != 10*(commits+1) {
			t.Fatalf("%d partitions: %d commits, next %v", n, len(l.Commits), next[mapping.TopicPartition{Topic: "t", Partition: n - 1}])
		}
		for _, c := range l.Commits {
			if len(c.Ranges) != int(n) {
				t.Fatalf("%d partitions: commit %s reads back %d ranges", n, c.ID, len(c.Ranges))
			}
		}
	}
	t.Logf("metadata.json bytes added per commit: %d at 10 partitions, %d at 1,000", added[10], added[1000])
	if added[1000] > added[10]+512 {
		t.Fatalf("a commit of 1,000 partitions adds %d bytes to metadata.json, one of 10 adds %d: want the same within 512", added[1000], added[10])
	}
}

// TestRangesFileTamperedOrDeleted: a ranges file that was altered or
// deleted makes the ledger through its snapshot an error naming the file,
// never a ledger without its ranges; the table still opens.
func TestRangesFileTamperedOrDeleted(t *testing.T) {
	for _, damage := range []string{"tampered", "deleted"} {
		t.Run(damage, func(t *testing.T) {
			tbl := wideTable(t, map[string]string{snapshot.PropInlineRangesMax: "0"})
			commitWide(t, tbl, 5, 0)
			commitWide(t, tbl, 5, 1)
			files := rangesFiles(t, tbl)
			if len(files) != 2 {
				t.Fatalf("ranges files %v, want one per commit", files)
			}
			victim := files[0]
			switch damage {
			case "tampered":
				b, err := os.ReadFile(victim)
				if err != nil {
					t.Fatal(err)
				}
				// Still a well-formed ranges file of the same commit, with
				// one range claiming a row.
				tampered := strings.Replace(string(b), "0:0,", "0:1,", 1)
				if tampered == string(b) {
					t.Fatalf("nothing to tamper with in %s", b)
				}
				b = []byte(tampered)
				if err := os.WriteFile(victim, b, 0o644); err != nil {
					t.Fatal(err)
				}
			case "deleted":
				if err := os.Remove(victim); err != nil {
					t.Fatal(err)
				}
			}
			fresh, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = fresh.Ledger()
			var rfe *mapping.RangesFileError
			if !errors.As(err, &rfe) || !strings.HasSuffix(victim, filepath.Base(rfe.Path)) {
				t.Fatalf("ledger with a %s ranges file: %v, want a *mapping.RangesFileError naming %s", damage, err, victim)
			}
			if damage == "tampered" && !strings.Contains(err.Error(), "the file was altered or damaged in the storage since (restore it from a copy") {
				t.Fatalf("error %q does not say the digest differs", err)
			}
			// A writer refuses to commit on top of it.
			if _, err := fresh.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: 0}, Interval: mapping.Interval{Low: 20, High: 30}}}},
				snapshot.CommitOptions{Writer: "test"}); !errors.Is(err, mapping.ErrRangesFile) {
				t.Fatalf("commit on a ledger with a %s ranges file: %v, want refused", damage, err)
			}
			// So does maintenance, which would archive its ranges.
			if _, err := fresh.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); !errors.Is(err, mapping.ErrRangesFile) {
				t.Fatalf("expiry over a %s ranges file: %v, want refused", damage, err)
			}
			if n := len(fresh.Iceberg().Metadata().Snapshots()); n != 2 {
				t.Fatalf("%d snapshots after a refused expiry, want 2", n)
			}
		})
	}
}

// TestMixedEncodings: a table whose commits are inline (version 2, as
// floe before ranges files wrote them) and in ranges files reads as one
// ledger, and the ledger's next-offset check fences a writer across both:
// a writer that read the ledger before another writer's wide commit is
// refused, with its files removed.
func TestMixedEncodings(t *testing.T) {
	tbl := wideTable(t, nil)
	commitWide(t, tbl, 3, 0)
	stale, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	commitWide(t, tbl, 200, 1)
	commitWide(t, tbl, 3, 2)
	summaries := map[string]int{}
	for _, s := range tbl.Iceberg().Metadata().Snapshots() {
		summaries[s.Summary.Properties[mapping.KeyVersion]]++
		if v := s.Summary.Properties[mapping.KeyVersion]; (v == "3") != (s.Summary.Properties[mapping.KeyRangesFile] != "") {
			t.Fatalf("snapshot %d: version %s with ranges file %q", s.SnapshotID, v, s.Summary.Properties[mapping.KeyRangesFile])
		}
	}
	if summaries["2"] != 2 || summaries["3"] != 1 || len(rangesFiles(t, tbl)) != 1 {
		t.Fatalf("versions %v, ranges files %v: want the narrow commits inline, the wide one in a file", summaries, rangesFiles(t, tbl))
	}
	l := freshLedger(t, tbl)
	want := map[int32]int64{0: 30, 2: 30, 3: 20, 199: 20}
	for p, n := range want {
		if got := l.Next()[mapping.TopicPartition{Topic: "t", Partition: p}]; got != n {
			t.Fatalf("next of partition %d: %d, want %d", p, got, n)
		}
	}
	// The stale writer's partition 150 is not in its ledger; partition 5
	// is behind: the wide commit moved it.
	_, err = stale.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: 150}, Interval: mapping.Interval{Low: 10, High: 20}}}},
		snapshot.CommitOptions{Writer: "stale"})
	var fe *snapshot.FencedError
	if !errors.As(err, &fe) || fe.Partition.Partition != 150 || fe.Next != 20 {
		t.Fatalf("stale writer: %v, want fenced on partition 150 at 20", err)
	}
}

// TestMaintainArchivesRangesFiles: an expiry archives the ranges of the
// snapshots it removes inline, so the ledger is the same afterwards;
// the ranges files of live snapshots are kept however old, those only
// expired snapshots referenced are collected once old, a young
// unreferenced one (a commit about to land) is kept.
func TestMaintainArchivesRangesFiles(t *testing.T) {
	tbl := wideTable(t, map[string]string{snapshot.PropInlineRangesMax: "0"})
	for i := range 6 {
		commitWide(t, tbl, 4, i)
	}
	before := freshLedger(t, tbl)
	files := rangesFiles(t, tbl)
	if len(files) != 6 {
		t.Fatalf("ranges files %v, want 6", files)
	}
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Expired) != 4 || len(res.StaleRangesFiles) != 0 {
		t.Fatalf("expiry %+v, want 4 expired and no ranges file deleted yet", res)
	}
	seg := readArchiveFile(t, res.Segments[0])
	for _, s := range seg.Snapshots {
		if s.Properties[mapping.KeyRangesFile] != "" || s.Properties["floe.ranges.t"] == "" {
			t.Fatalf("archived entry %+v: want its ranges inline, no reference", s)
		}
	}
	if after := freshLedger(t, tbl); !reflect.DeepEqual(after, before) {
		t.Fatalf("ledger after expiry\n%+v\nwant\n%+v", after, before)
	}
	young := filepath.Join(filepath.Dir(files[0]), "0d8e0c3e-young.json")
	if err := os.WriteFile(young, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	backdate(t, files...)
	res, err = tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, s := range tbl.Iceberg().Metadata().Snapshots() {
		live = append(live, filepath.Base(s.Summary.Properties[mapping.KeyRangesFile]))
	}
	if len(res.StaleRangesFiles) != 4 {
		t.Fatalf("stale ranges files %v, want the 4 of expired snapshots", res.StaleRangesFiles)
	}
	for _, f := range res.StaleRangesFiles {
		if slices.Contains(live, filepath.Base(f)) {
			t.Fatalf("deleted %s, which a live snapshot references", f)
		}
	}
	if got := rangesFiles(t, tbl); len(got) != 3 || !slices.Contains(got, young) {
		t.Fatalf("ranges files left %v, want the 2 live ones and the young one", got)
	}
	if after := freshLedger(t, tbl); !reflect.DeepEqual(after, before) {
		t.Fatalf("ledger after collecting ranges files\n%+v\nwant\n%+v", after, before)
	}
}

// TestCrashBeforeRangesFileCommitted: a writer killed after writing its
// ranges file and before its commit leaves only that file, unreferenced:
// the ledger is as before, and maintenance collects the file once old.
func TestCrashBeforeRangesFileCommitted(t *testing.T) {
	tbl := wideTable(t, map[string]string{snapshot.PropInlineRangesMax: "0"})
	commitWide(t, tbl, 4, 0)
	before := freshLedger(t, tbl)
	hc := &hookCatalog{Catalog: tbl.Catalog()}
	doomed, err := snapshot.Open(t.Context(), hc, tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc.beforeCommit = func() { hc.dead = true }
	rs := []mapping.Range{{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: 0}, Interval: mapping.Interval{Low: 10, High: 20}}}
	if _, err := doomed.Commit(t.Context(), snapshot.Flush{Ranges: rs}, snapshot.CommitOptions{Writer: "doomed", MaxAttempts: 2}); err == nil {
		t.Fatal("a killed writer's commit succeeded")
	}
	files := rangesFiles(t, tbl)
	if len(files) != 2 {
		t.Fatalf("ranges files %v, want the committed one and the killed writer's", files)
	}
	if after := freshLedger(t, tbl); !reflect.DeepEqual(after, before) {
		t.Fatalf("ledger after the killed commit\n%+v\nwant\n%+v", after, before)
	}
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil || len(res.StaleRangesFiles) != 0 {
		t.Fatalf("maintain with a young orphan: %v, deleted %v; want it kept", err, res.StaleRangesFiles)
	}
	backdate(t, files...)
	res, err = tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.StaleRangesFiles) != 1 || len(rangesFiles(t, tbl)) != 1 {
		t.Fatalf("deleted %v, left %v: want only the killed writer's file deleted", res.StaleRangesFiles, rangesFiles(t, tbl))
	}
	if after := freshLedger(t, tbl); !reflect.DeepEqual(after, before) {
		t.Fatalf("ledger after collecting the orphan\n%+v\nwant\n%+v", after, before)
	}
	// The next writer resumes where the ledger ends.
	commitWide(t, tbl, 4, 1)
}

// TestRangesFilesReadOnce: a writer reads each ranges file once: after a
// file is gone from storage, the writer that read it (or wrote it) still
// reads its ledger and commits, while a table opened afresh cannot.
func TestRangesFilesReadOnce(t *testing.T) {
	tbl := wideTable(t, map[string]string{snapshot.PropInlineRangesMax: "0"})
	commitWide(t, tbl, 4, 0)
	reader, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	commitWide(t, tbl, 4, 1)
	if err := reader.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, f := range rangesFiles(t, tbl) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	commitWide(t, tbl, 4, 2)
	if err := reader.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*snapshot.Table{tbl, reader} {
		if l, err := r.Ledger(); err != nil || len(l.Commits) != 3 {
			t.Fatalf("ledger of a table that read its ranges files: %d commits, %v", len(l.Commits), err)
		}
	}
	fresh, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Ledger(); !errors.Is(err, mapping.ErrRangesFile) {
		t.Fatalf("fresh ledger without the files: %v, want a ranges file error", err)
	}
}

// staleOnceCatalog answers its first LoadTable with a table version
// loaded earlier, as a reader that loaded the table just before a
// maintenance run and reads its files just after would see it.
type staleOnceCatalog struct {
	icecat.Catalog
	stale *table.Table
}

func (c *staleOnceCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if s := c.stale; s != nil {
		c.stale = nil
		return s, nil
	}
	return c.Catalog.LoadTable(ctx, ident)
}

// TestReaderOfCollectedRangesFiles: a reader that loaded a table version
// whose snapshots were then expired (their ranges archived) and their
// ranges files collected finds the files gone, reloads the table, and
// reads the whole ledger from the archive.
func TestReaderOfCollectedRangesFiles(t *testing.T) {
	tbl := wideTable(t, map[string]string{snapshot.PropInlineRangesMax: "0"})
	for i := range 5 {
		commitWide(t, tbl, 4, i)
	}
	before := freshLedger(t, tbl)
	old := tbl.Iceberg()
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	backdate(t, rangesFiles(t, tbl)...)
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil || len(res.StaleRangesFiles) != 4 {
		t.Fatalf("collected %v, %v; want the 4 expired commits' ranges files", res.StaleRangesFiles, err)
	}
	reader, err := snapshot.Open(t.Context(), &staleOnceCatalog{Catalog: tbl.Catalog(), stale: old}, tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if reader.Iceberg().MetadataLocation() == old.MetadataLocation() {
		t.Fatal("the reader kept the table version whose ranges files are gone")
	}
	if after := ledger(t, reader); !reflect.DeepEqual(after, before) {
		t.Fatalf("ledger of the reader\n%+v\nwant\n%+v", after, before)
	}
}
