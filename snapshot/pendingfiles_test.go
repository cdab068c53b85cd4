package snapshot_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// vanishingReads is a catalog whose tables' storage opens files, and then
// fails every read of them as gone: an object store's object deleted
// between the open and the read (a ranged GET answered NoSuchKey).
type vanishingReads struct{ icecat.Catalog }

func (c vanishingReads) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(ident, tbl.Metadata(), tbl.MetadataLocation(), func(ctx context.Context) (iceio.IO, error) {
		fsys, err := tbl.FS(ctx)
		return vanishingIO{fsys}, err
	}, c), nil
}

type vanishingIO struct{ iceio.IO }

func (v vanishingIO) Open(name string) (iceio.File, error) {
	f, err := v.IO.Open(name)
	if err != nil {
		return nil, err
	}
	return vanishingFile{File: f, name: name}, nil
}

type vanishingFile struct {
	iceio.File
	name string
}

func (f vanishingFile) gone() error {
	return &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrNotExist}
}
func (f vanishingFile) Read([]byte) (int, error)          { return 0, f.gone() }
func (f vanishingFile) ReadAt([]byte, int64) (int, error) { return 0, f.gone() }

// TestReadFilesMissingOnlyWhenNotOpened: ReadFiles reports a file that
// cannot be opened because it does not exist as Missing, and any failure
// once it was opened as an error, even one that says "does not exist": it
// reported those as a missing file too, which holds no dead letter, so a
// reader took a commit's pending dead letters for none.
func TestReadFilesMissingOnlyWhenNotOpened(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	res := pendingCommit(t, cat, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	files := res.Commit.DeadLetterFiles
	if len(files) != 1 {
		t.Fatalf("the commit lists dead-letter files %v, want one", files)
	}
	read := func(dlq *snapshot.Table) (rows int64, missing bool, err error) {
		err = dlq.ReadFiles(t.Context(), files, func(fb snapshot.FileBatch) error {
			if fb.Batch != nil {
				rows += fb.Batch.NumRows()
			}
			missing = missing || fb.Missing
			return nil
		})
		return rows, missing, err
	}
	if rows, missing, err := read(dlq); err != nil || missing || rows != 1 {
		t.Fatalf("ReadFiles of the commit's file: %d rows, missing %v, %v; want its dead letter", rows, missing, err)
	}
	vanishing, err := snapshot.OpenDeadLetters(t.Context(), vanishingReads{cat}, dlq.Identifier(), tbl.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	rows, missing, err := read(vanishing)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || missing {
		t.Errorf("ReadFiles of a file opened, whose reads fail as gone: %d rows, missing %v, error %v; want the error, not a missing file", rows, missing, err)
	}
	if err := os.Remove(strings.TrimPrefix(files[0], "file://")); err != nil {
		t.Fatal(err)
	}
	if rows, missing, err := read(dlq); err != nil || !missing || rows != 0 {
		t.Errorf("ReadFiles of a file deleted: %d rows, missing %v, %v; want it missing", rows, missing, err)
	}
}
