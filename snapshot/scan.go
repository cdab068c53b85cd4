package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/floe-dev/floe/catalog"
	"golang.org/x/sync/errgroup"
)

// ScanOptions select what ScanFiles reads.
type ScanOptions struct {
	// Columns are the names of the columns to read; only those columns are
	// read from the Parquet files. Nil reads every column.
	Columns []string
	// Filter prunes files by their column bounds and drops rows that do not
	// match; nil reads every row.
	Filter iceberg.BooleanExpression
	// Concurrency bounds the files decoded at once; zero means GOMAXPROCS.
	Concurrency int
	// Skip, when set, is called with the path of every data file the
	// scan plans; the files it returns true for are not read.
	Skip func(path string) bool
	// MissingOK reports a data file the storage no longer has as a
	// FileBatch with Missing set, instead of failing the scan.
	MissingOK bool
}

// FileBatch is one step of ScanFiles: some rows of one data file, or the end
// of that file.
type FileBatch struct {
	// Path is the data file the rows come from.
	Path string
	// Deletes is the number of delete files that apply to the file; the rows
	// they delete are not in the batches.
	Deletes int
	// Batch holds some of the file's rows, nil when Done. It is released
	// when the callback returns.
	Batch arrow.RecordBatch
	// Done marks the last call for the file: all its rows were delivered.
	Done bool
	// Missing, with Done, marks a file the storage no longer has
	// (ScanOptions.MissingOK): none of its rows were read. GoneDeletes,
	// when set, are the delete files of a data file that is there whose
	// storage no longer has them: its rows were not read either (which of
	// them are deleted is unknown).
	Missing     bool
	GoneDeletes []string
	// Unreadable, with Done, is why a file the storage has cannot be read
	// as Parquet (ScanOptions.MissingOK): it was altered or cut short after
	// it was committed; its rows, or the rest of them, were not read.
	Unreadable error
	// NoColumns, with Done, marks a file that has none of
	// ScanOptions.Columns: another writer's, written before they were
	// added to the table's schema. None of its rows were read (Arrow
	// cannot read a file for columns it lacks).
	NoColumns bool
}

// scanBatchRows is the rows of a batch ScanFiles delivers. iceberg-go's
// default, 131,072, made a batch of kafka_value alone tens of MB, held
// twice when a row filter copied it (a partition of a multi-partition
// file), by each reading worker and in the channel between them: `floe
// audit --verify-content` peaked at 0.6-0.9 GB on one partition of
// records of ~200 bytes, against 0.45 GB with batches of this size, with
// no loss of speed measured.
const scanBatchRows = 16384

// ScanFiles reads the rows of a snapshot (0 means the branch head) file by
// file, with delete files applied. Files are decoded in parallel; fn is
// called from one goroutine at a time, with each file's batches in order
// followed by one Done call for that file (files interleave). A file whose
// rows were all deleted or filtered out gets only its Done call. An error
// from fn stops the scan and is returned.
func (t *Table) ScanFiles(ctx context.Context, snapshotID int64, opts ScanOptions, fn func(FileBatch) error) error {
	snap := t.Head()
	if snapshotID != 0 {
		snap = t.tbl.Metadata().SnapshotByID(snapshotID)
		if snap == nil {
			return fmt.Errorf("scan %s: no snapshot %d", t.Name(), snapshotID)
		}
	}
	if snap == nil {
		return nil
	}
	scanOpts := []table.ScanOption{
		table.WithSnapshotID(snap.SnapshotID),
		table.WithMaxConcurrency(1),
		table.WithArrowBatchSize(scanBatchRows),
	}
	if opts.Columns != nil {
		scanOpts = append(scanOpts, table.WithSelectedFields(opts.Columns...))
	}
	if opts.Filter != nil {
		scanOpts = append(scanOpts, table.WithRowFilter(opts.Filter))
	}
	scan := t.tbl.Scan(scanOpts...)
	defer scan.Close()
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return fmt.Errorf("plan scan of %s at snapshot %d: %w", t.Name(), snap.SnapshotID, err)
	}
	// A large file may be split into several tasks; one worker reads all
	// tasks of a file so that its batches stay in order.
	var files [][]table.FileScanTask
	index := map[string]int{}
	skipped := map[string]bool{}
	for _, task := range tasks {
		p := task.File.FilePath()
		if opts.Skip != nil {
			if _, seen := index[p]; !seen && !skipped[p] && opts.Skip(p) {
				skipped[p] = true
			}
			if skipped[p] {
				continue
			}
		}
		i, ok := index[p]
		if !ok {
			i = len(files)
			index[p] = i
			files = append(files, nil)
		}
		files[i] = append(files[i], task)
	}

	workers := opts.Concurrency
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	out := make(chan FileBatch, 2*workers)
	go func() {
		for _, fileTasks := range files {
			if gctx.Err() != nil {
				break
			}
			g.Go(func() error { return t.readFile(gctx, scan, fileTasks, opts, out) })
		}
		_ = g.Wait()
		close(out)
	}()

	var fnErr error
	for fb := range out {
		if fnErr == nil {
			if fnErr = fn(fb); fnErr != nil {
				cancel()
			}
		}
		if fb.Batch != nil {
			fb.Batch.Release()
		}
	}
	if fnErr != nil {
		return fnErr
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("scan %s at snapshot %d: %w", t.Name(), snap.SnapshotID, err)
	}
	return nil
}

// DataFileGoneError reports a data file that table t lists and its storage
// no longer has (deleted outside floe): a scan that does not allow it
// (ScanOptions.MissingOK) stops with it.
type DataFileGoneError struct {
	Table, Path string
	// Delete is set when Path is a delete file, and DeletesOf then names
	// the data file it applies to when one was being read ("" when the
	// delete file was found gone by itself: floe files --check).
	Delete    bool
	DeletesOf string
	Err       error
}

func (e *DataFileGoneError) Error() string {
	switch {
	case e.Delete && e.DeletesOf != "":
		return fmt.Sprintf("read %s: delete file %s, which %s lists for it, is gone from its storage (deleted outside floe): %v", e.DeletesOf, e.Path, e.Table, e.Err)
	case e.Delete:
		return fmt.Sprintf("delete file %s, which %s lists, is gone from its storage (deleted outside floe): %v", e.Path, e.Table, e.Err)
	}
	return fmt.Sprintf("read %s: a data file %s lists is gone from its storage (deleted outside floe): %v", e.Path, e.Table, e.Err)
}

func (e *DataFileGoneError) Unwrap() error { return e.Err }

// readError is the error of reading data file path of t: a
// *DataFileGoneError when the storage no longer has it.
func (t *Table) readError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &DataFileGoneError{Table: t.Name(), Path: path, Err: err}
	}
	return fmt.Errorf("read %s: %w", path, err)
}

// corruptParquet reports whether err, reading a file the storage has, says
// that its bytes are no Parquet file arrow-go can read (cut short, altered),
// not that the storage failed: an audit reports such a file, where it
// stopped without a verdict (from a new-user run).
func corruptParquet(err error) bool {
	return !errors.Is(err, fs.ErrNotExist) && !catalog.IsTransient(err) && !errors.Is(err, context.Canceled) &&
		strings.Contains(err.Error(), "parquet:")
}

// goneDeletes returns the delete files of task that the storage no longer
// has when its data file path is there (none when it is gone, or when
// they cannot be looked for).
func (t *Table) goneDeletes(ctx context.Context, path string, task table.FileScanTask) []string {
	var dels []string
	for _, group := range [][]iceberg.DataFile{task.DeleteFiles, task.EqualityDeleteFiles, task.DeletionVectorFiles} {
		for _, df := range group {
			dels = append(dels, df.FilePath())
		}
	}
	if len(dels) == 0 {
		return nil
	}
	gone, err := t.MissingFiles(ctx, append([]string{path}, dels...))
	if err != nil || slices.Contains(gone, path) {
		return nil
	}
	return gone
}

// readFile reads every task of one data file of t and sends its batches,
// then its Done marker; with opts.MissingOK, a file the storage does not
// have is a Done marker with Missing set, and otherwise a
// *DataFileGoneError. A file that has none of opts.Columns is a Done
// marker with NoColumns set.
func (t *Table) readFile(ctx context.Context, scan *table.Scan, tasks []table.FileScanTask, opts ScanOptions, out chan<- FileBatch) error {
	missingOK := opts.MissingOK
	path := tasks[0].File.FilePath()
	deletes := len(tasks[0].DeleteFiles) + len(tasks[0].EqualityDeleteFiles) + len(tasks[0].DeletionVectorFiles)
	send := func(fb FileBatch) error {
		select {
		case out <- fb:
			return nil
		case <-ctx.Done():
			if fb.Batch != nil {
				fb.Batch.Release()
			}
			return ctx.Err()
		}
	}
	// A file the storage lacks: the data file, or one of its deletes.
	gone := func(err error) error {
		if missingOK && corruptParquet(err) {
			return send(FileBatch{Path: path, Deletes: deletes, Done: true, Unreadable: err})
		}
		if !errors.Is(err, fs.ErrNotExist) {
			// Looked for only once reading failed: a file floe wrote
			// has its columns, and a footer read costs a request.
			if lacks, lerr := t.lacksColumns(ctx, path, opts.Columns); lerr == nil && lacks {
				return send(FileBatch{Path: path, Deletes: deletes, Done: true, NoColumns: true})
			}
			return t.readError(path, err)
		}
		dels := t.goneDeletes(ctx, path, tasks[0])
		switch {
		case missingOK:
			return send(FileBatch{Path: path, Deletes: deletes, Done: true, Missing: len(dels) == 0, GoneDeletes: dels})
		case len(dels) > 0:
			return &DataFileGoneError{Table: t.Name(), Path: dels[0], Delete: true, DeletesOf: path, Err: err}
		}
		return t.readError(path, err)
	}
	_, batches, err := scan.ReadTasks(ctx, tasks)
	if err != nil {
		return gone(err)
	}
	sent := false
	for b, err := range batches {
		if err != nil && (!sent || missingOK && corruptParquet(err)) {
			return gone(err)
		}
		if err != nil {
			return t.readError(path, err)
		}
		sent = true
		if err := send(FileBatch{Path: path, Deletes: deletes, Batch: b}); err != nil {
			return err
		}
	}
	return send(FileBatch{Path: path, Deletes: deletes, Done: true})
}

// lacksColumns reports whether data file path of t has none of the table
// columns named cols (false for nil cols: every column). A file column is
// one of them by its field ID, or by its name in a file without field
// IDs, which readers place by name.
func (t *Table) lacksColumns(ctx context.Context, path string, cols []string) (bool, error) {
	if len(cols) == 0 {
		return false, nil
	}
	ids := map[int]bool{}
	for _, c := range cols {
		if f, ok := t.tbl.Schema().FindFieldByName(c); ok {
			ids[f.ID] = true
		}
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return false, err
	}
	in, err := fsys.Open(path)
	if err != nil {
		return false, err
	}
	defer in.Close()
	pf, err := file.NewParquetReader(in)
	if err != nil {
		return false, err
	}
	defer pf.Close()
	root := pf.MetaData().Schema.Root()
	for i := range root.NumFields() {
		f := root.Field(i)
		if id := int(f.FieldID()); id >= 0 && ids[id] || id < 0 && slices.Contains(cols, f.Name()) {
			return false, nil
		}
	}
	return true, nil
}
