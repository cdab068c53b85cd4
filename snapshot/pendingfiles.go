package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	iceio "github.com/apache/iceberg-go/io"
)

// ReadFiles calls fn with the rows of data files paths of t, file by
// file and batch by batch (a FileBatch with Done ends each file), read
// from its storage whether or not a snapshot of t holds them: a data
// table's commit lists the dead-letter files that hold its dead letters
// (mapping.Commit.DeadLetterFiles), written before the commit, which a
// writer that stopped between the two commits left out of the dead-letter
// table (DeadLetterState.Pending). They are what the ledger says the
// commit's dead letters are: the audit and the lookups read them as the
// dead letters they are. A file the storage no longer has (it cannot be
// opened: it does not exist) is one FileBatch with Missing and Done set; a
// failure once it was opened is an error, whatever it says.
func (t *Table) ReadFiles(ctx context.Context, paths []string, fn func(FileBatch) error) error {
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("open the storage of %s: %w", t.Name(), err)
	}
	for _, p := range paths {
		if err := readFile(ctx, fsys, p, fn); err != nil {
			return err
		}
	}
	return nil
}

// readFile is ReadFiles for one file. Only a file that cannot be opened
// because it does not exist is missing: a "does not exist" later, once it
// was opened (an object store's read of an object deleted since, fn's own
// error), is an error, not a file that holds nothing.
func readFile(ctx context.Context, fsys iceio.IO, path string, fn func(FileBatch) error) error {
	in, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fn(FileBatch{Path: path, Done: true, Missing: true})
	}
	if err != nil {
		return fmt.Errorf("open Parquet file %s: %w", path, err)
	}
	defer in.Close()
	if err := readOpenParquet(ctx, in, path, func(b arrow.RecordBatch) error { return fn(FileBatch{Path: path, Batch: b}) }); err != nil {
		return err
	}
	return fn(FileBatch{Path: path, Done: true})
}

// readParquet calls fn with the rows of the Parquet file at path, batch by
// batch; each batch is released when fn returns. A file that does not
// exist is an error wrapping fs.ErrNotExist.
func readParquet(ctx context.Context, fsys iceio.IO, path string, fn func(arrow.RecordBatch) error) error {
	in, err := fsys.Open(path)
	if err != nil {
		return fmt.Errorf("open Parquet file %s: %w", path, err)
	}
	defer in.Close()
	return readOpenParquet(ctx, in, path, fn)
}

// readOpenParquet is readParquet of the file at path, opened as in.
func readOpenParquet(ctx context.Context, in iceio.File, path string, fn func(arrow.RecordBatch) error) error {
	pf, err := file.NewParquetReader(in)
	if err != nil {
		return fmt.Errorf("read Parquet file %s: %w", path, err)
	}
	defer pf.Close()
	r, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("read Parquet file %s: %w", path, err)
	}
	rr, err := r.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return fmt.Errorf("read Parquet file %s: %w", path, err)
	}
	defer rr.Release()
	for rr.Next() {
		if err := fn(rr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read Parquet file %s: %w", path, err)
	}
	return nil
}
