package snapshot_test

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// walkHookIO runs onWalk (once) when the data folder is first listed,
// and fails that listing as a file deleted under it does.
type walkHookIO struct {
	iceio.IO
	hook *walkHook
}

type walkHook struct{ onWalk func() }

func (w walkHookIO) Create(name string) (iceio.FileWriter, error) {
	return w.IO.(iceio.WriteFileIO).Create(name)
}
func (w walkHookIO) WriteFile(name string, p []byte) error {
	return w.IO.(iceio.WriteFileIO).WriteFile(name, p)
}
func (w walkHookIO) ReadFile(name string) ([]byte, error) {
	return w.IO.(iceio.ReadFileIO).ReadFile(name)
}
func (w walkHookIO) WalkDir(root string, fn fs.WalkDirFunc) error {
	if f := w.hook.onWalk; f != nil && strings.HasSuffix(strings.TrimSuffix(root, "/"), "/data") {
		w.hook.onWalk = nil
		f()
		return &fs.PathError{Op: "stat", Path: root + "/gone.parquet", Err: fs.ErrNotExist}
	}
	return w.IO.(iceio.ListableIO).WalkDir(root, fn)
}

type walkHookCatalog struct {
	icecat.Catalog
	hook *walkHook
}

func (c *walkHookCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	fsF := func(ctx context.Context) (iceio.IO, error) {
		f, err := tbl.FS(ctx)
		if err != nil {
			return nil, err
		}
		return walkHookIO{IO: f, hook: c.hook}, nil
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), fsF, c), nil
}

// TestOrphanRetryPlansOnFreshVersion: removeOrphans now reloads
// the table just before PlanOrphanFiles, but when that listing fails with
// ErrNotExist (another writer's expiry or compaction deleted a file while
// it was listed: the comment's own case) it plans again on the same
// version, with a cut-off taken anew at the retry. A sink commit that
// landed during the first listing (a listing that took 20 minutes: the
// case the reload was added for) adds a file that version does not
// reference and that is, at the retry, older than --orphan-min-age (15m):
// it is deleted although the head holds it. The sink wrote and committed
// it at once, so --orphan-min-age is respected by the writer.
func TestOrphanRetryPlansOnFreshVersion(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.orphretry", snapshot.OpenOptions{Create: true})
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 2}}, testRec{0, 0, "a", "x", 0}, testRec{0, 1, "b", "y", 0})
	writer := openTestTable(t, cat, "lake.orphretry", snapshot.OpenOptions{})
	hook := &walkHook{}
	hc := &walkHookCatalog{Catalog: cat, hook: hook}
	maint, err := snapshot.Open(t.Context(), hc, tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := strings.TrimPrefix(tbl.DataLocation(), "file://")
	hook.onWalk = func() {
		// During the first listing: the sink commits (its file written
		// and committed at once) ...
		commitRecs(t, writer, map[int32]mapping.Interval{0: {Low: 2, High: 4}}, testRec{0, 2, "c", "z", 0}, testRec{0, 3, "d", "w", 0})
		// ... and the listing goes on for 20 minutes before a file
		// deleted under it fails it.
		past := time.Now().Add(-20 * time.Minute)
		filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				os.Chtimes(p, past, past)
			}
			return nil
		})
	}
	res, err := maint.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, OrphanMinAge: 15 * time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if hook.onWalk != nil {
		t.Fatal("the data folder was never listed")
	}
	if len(res.Orphans) > 0 {
		t.Errorf("--remove-orphans deleted %v, which the table's head (committed during the first listing) holds", res.Orphans)
	}
	if err := snapshotRowsOrErr(openTestTable(t, cat, "lake.orphretry", snapshot.OpenOptions{})); err != nil {
		t.Errorf("reading the head: %v", err)
	}
}
