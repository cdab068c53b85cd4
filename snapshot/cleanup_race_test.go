package snapshot_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// afterLoadCatalog runs afterLoad (once) right after a LoadTable through it
// returned: what other writers commit while the loader works on the
// version it just loaded.
type afterLoadCatalog struct {
	icecat.Catalog
	afterLoad func()
}

func (c *afterLoadCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if f := c.afterLoad; f != nil && err == nil {
		c.afterLoad = nil
		f()
	}
	return tbl, err
}

// TestStaleRangesFileOfCommitAfterLoad: a maintain run (here the
// sink's own, RemoveDebris with the default hour) decides which ranges
// files are stale from the snapshots of the table version it loaded at its
// start, but lists the folder (and compares ages) much later. A sink commit
// that lands in between references a ranges file that the run's version
// does not know; once that file is older than the age when the folder is
// listed (a run that spends its hour listing a large data folder, or a
// shorter --orphan-min-age), it is deleted although a live snapshot
// references it: the ledger of the table can no longer be read.
func TestStaleRangesFileOfCommitAfterLoad(t *testing.T) {
	tbl := wideTable(t, map[string]string{snapshot.PropInlineRangesMax: "0"})
	commitWide(t, tbl, 4, 0)
	writer, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := &afterLoadCatalog{Catalog: tbl.Catalog()}
	maint, err := snapshot.Open(t.Context(), hc, tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The sink commits right after the maintain run loaded the table; by
	// the time the run lists the ranges folder, the hour has passed
	// (backdate stands for it).
	hc.afterLoad = func() {
		commitWide(t, writer, 4, 1)
		backdate(t, rangesFiles(t, tbl)...)
	}
	res, err := maint.Maintain(t.Context(), snapshot.MaintainOptions{RemoveDebris: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.StaleRangesFiles) != 0 {
		t.Errorf("maintain deleted ranges files %v that a live snapshot references", res.StaleRangesFiles)
	}
	fresh, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatalf("open after maintain: %v", err)
	}
	if l, err := fresh.Ledger(); err != nil || len(l.Commits) != 2 {
		t.Fatalf("ledger after maintain: %d commits, %v; want both commits", len(l.Commits), err)
	}
}

// TestOrphanRemovalKeepsFileCommittedAfterLoad: the data-file
// side of TestStaleRangesFileOfCommitAfterLoad. floe maintain
// --remove-orphans takes the files the table references from the version
// it loaded at its start, and lists the data folder later (after the
// dead-letter reconciliation, while reading every manifest). A sink commit
// that lands in between adds a file that version does not reference; once
// the listing finds it older than --orphan-min-age (15m here, which the
// docs allow for a 30 s flush: "well above the longest flush interval ...
// plus their commit time"), it is deleted although the head holds it. The
// file-level audit (the default) then calls the table complete.
func TestOrphanRemovalKeepsFileCommittedAfterLoad(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.orph", snapshot.OpenOptions{Create: true})
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 2}}, testRec{0, 0, "a", "x", 0}, testRec{0, 1, "b", "y", 0})
	writer := openTestTable(t, cat, "lake.orph", snapshot.OpenOptions{})
	hc := &afterLoadCatalog{Catalog: cat}
	maint, err := snapshot.Open(t.Context(), hc, tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := strings.TrimPrefix(tbl.DataLocation(), "file://")
	hc.afterLoad = func() {
		commitRecs(t, writer, map[int32]mapping.Interval{0: {Low: 2, High: 4}}, testRec{0, 2, "c", "z", 0}, testRec{0, 3, "d", "w", 0})
		// The run reaches the listing 20 minutes later.
		var files []string
		if err := filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-20 * time.Minute)
		for _, f := range files {
			if err := os.Chtimes(f, past, past); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := maint.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, OrphanMinAge: 15 * time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orphans) > 0 {
		t.Errorf("--remove-orphans deleted %v, which the table's head holds", res.Orphans)
	}
	fresh := openTestTable(t, cat, "lake.orph", snapshot.OpenOptions{})
	rep, err := audit.Run(t.Context(), fresh, audit.Options{Depth: audit.DepthFiles})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) == 0 && len(res.Orphans) > 0 {
		t.Errorf("the file-level audit finds nothing wrong with a table whose live file %v is gone", res.Orphans)
	}
	if rows := snapshotRowsOrErr(fresh); rows != nil {
		t.Errorf("reading the head: %v", rows)
	}
}

// snapshotRowsOrErr scans the head, returning the error.
func snapshotRowsOrErr(tbl *snapshot.Table) error {
	_, err := tbl.Iceberg().Scan().ToArrowTable(context.Background())
	return err
}

// TestLostRaceManifestsCollected: a commit that loses the
// catalog's race has written its manifest list and manifests into the
// metadata folder before it; the retry writes new ones. Nothing references
// the first ones, and floe maintain --remove-orphans must collect them
// (DESIGN: "Orphans are cleaned by maintenance").
func TestLostRaceManifestsCollected(t *testing.T) {
	cat := tempCatalog(t)
	a := openTestTable(t, cat, "lake.race", snapshot.OpenOptions{Create: true})
	b := openTestTable(t, cat, "lake.race", snapshot.OpenOptions{})
	commitRecs(t, a, map[int32]mapping.Interval{0: {Low: 0, High: 1}}, testRec{0, 0, "k", "v", 0})
	commitRecs(t, b, map[int32]mapping.Interval{1: {Low: 0, High: 1}}, testRec{1, 0, "k", "v", 0}) // loses once, retries
	dir := strings.TrimPrefix(a.Iceberg().Location(), "file://") + "/metadata"
	avros := func() []string {
		t.Helper()
		var out []string
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".avro") {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
		return out
	}
	if err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	referenced := map[string]bool{}
	fsys, err := a.Iceberg().FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range a.Iceberg().Metadata().Snapshots() {
		referenced[filepath.Base(s.ManifestList)] = true
		mans, err := s.Manifests(fsys)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mans {
			referenced[filepath.Base(m.FilePath())] = true
		}
	}
	var stray []string
	for _, f := range avros() {
		if !referenced[filepath.Base(f)] {
			stray = append(stray, f)
		}
	}
	if len(stray) == 0 {
		t.Skip("the lost race left no manifest behind")
	}
	backdate(t, stray...)
	res, err := a.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Reported as manifests, on their own (from a new user: they were
	// counted as stale metadata files).
	if len(res.StaleManifests) != len(stray) || slices.ContainsFunc(res.StaleMetadata, func(f string) bool { return strings.HasSuffix(f, ".avro") }) {
		t.Errorf("reported stale manifests %v and metadata %v; want the %d manifests as manifests", res.StaleManifests, res.StaleMetadata, len(stray))
	}
	var left []string
	for _, f := range stray {
		if exists(t, f) {
			left = append(left, filepath.Base(f))
		}
	}
	if len(left) > 0 {
		t.Fatalf("unreferenced manifests of a lost race kept by --remove-orphans: %v", left)
	}
}
