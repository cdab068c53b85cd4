package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// Row groups of streamed files: small enough that a partition's writer
// holds little while it encodes (Parquet buffers a row group's pages until
// the group ends), large enough that readers prune well.
const (
	streamRowGroupRows  = 32 * 1024
	streamRowGroupBytes = 8 << 20
)

// Pages of streamed files. arrow-go encodes a batch into a column's page
// in chunks of write.parquet.page-row-limit rows and ends the page once a
// chunk takes it past write.parquet.page-size-bytes; each page's buffer
// grows by doubling and is cleared whole when released. With iceberg-go's
// defaults (chunks of 20,000 rows, 1 MiB pages) a chunk of a value column
// is a batch's whole column, megabytes that outgrow the core's cache before
// they are compressed and cleared: smaller chunks and pages keep the
// buffers in cache and cost 6-10 % less CPU to encode (BenchmarkStream).
// Each page is compressed on its own: compressible values store a little
// larger (zstd's matches reach back one page only).
const (
	streamPageRows  = 1024
	streamPageBytes = 128 << 10
)

// Writer writes the rows of one flush into data files as they are
// consumed, one Stream per Kafka partition and range, for the schema the
// table has when the Writer is made, evolved to a writer schema (the
// flush's Flush.Schema). Commit then commits the files (Flush.Files)
// without writing anything: a flush's rows are never all in memory.
//
// A Writer is made from the table as last loaded: if another writer
// changes the schema before the commit so that the files' field IDs no
// longer match the schema the commit would produce, the commit removes
// them and returns ErrSchemaMoved, and the caller reads the flush again.
type Writer struct {
	t      *Table
	target *table.Table
	// schema is the Iceberg schema the files are written with (their field
	// IDs); want the writer schema asked for (nil: the table's).
	schema *iceberg.Schema
	want   *iceberg.Schema
	// plainKeys is target with kafka_key's dictionary off, made for the
	// first stream whose keys do not repeat (plainKeysTarget).
	plainKeysOnce sync.Once
	plainKeys     *table.Table
	plainKeysErr  error
	// opened is when the writer was made: its flush's files are at most
	// that old (CommitOptions.LookForFilesAfter).
	opened time.Time
}

// ErrSchemaMoved is returned by Commit of a flush whose files were written
// for a schema that another writer has since changed in a way that gives
// the files' columns other field IDs: the files are removed; read the flush
// again for the new schema.
var ErrSchemaMoved = errors.New("another writer changed the table's schema since this flush's files were written")

// ReserveSchema commits, ahead of the data, the schema changes that let
// the table take rows of writer schema want (columns added, types widened,
// the partition fields waiting for those columns), in a metadata commit
// without a snapshot, and returns the table as committed. When base (the
// table as loaded at some point, as for NewWriter) already has them, it
// returns base and commits nothing. A Writer made on it writes files
// whose field IDs other writers' later changes keep: they only add
// columns after them. Without it the changes land in the commit of the
// data that needs them, and a writer whose files were written for a column
// another writer's commit took the field ID of loses the flush
// (ErrSchemaMoved); two writers adding columns all the time can make one
// lose every flush. Columns reserved for rows whose commit then fails stay
// in the schema, null in every row.
//
// It loads the table itself and leaves t as it is, so it may run while a
// commit of t is in flight.
func (t *Table) ReserveSchema(ctx context.Context, base *table.Table, want *iceberg.Schema) (*table.Table, error) {
	_, target, err := t.stageOn(base, want)
	switch {
	case err != nil:
		return nil, err
	case target == base:
		return base, nil
	}
	// A failed commit's outcome is unknown: it may have been applied and
	// its answer lost. Reloading decides, as for a data commit: a schema
	// that landed needs nothing more (target == loaded).
	const maxAttempts, maxErrors = 30, 5
	errs := 0
	for attempt := 1; ; attempt++ {
		loaded, err := t.cat.LoadTable(ctx, t.ident)
		if err != nil {
			return nil, fmt.Errorf("reload table %s: %w", t.Name(), err)
		}
		txn, target, err := t.stageOn(loaded, want)
		if err != nil {
			return nil, err
		}
		if target == loaded {
			return loaded, nil
		}
		committed, err := txn.Commit(ctx)
		if err == nil {
			return committed, nil
		}
		if !isConflict(err) {
			errs++
		}
		if errs >= maxErrors || attempt >= maxAttempts || ctx.Err() != nil {
			return nil, fmt.Errorf("commit the schema change of %s ahead of its data: %w", t.Name(), err)
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return nil, err
		}
	}
}

// NewWriter returns a writer of files for rows of the Arrow schema of want
// (mapping.WriterArrowSchema; nil: the table's own, ArrowSchema), on base:
// the table as loaded at some point (Iceberg), which may be older than the
// table a commit in flight is about to adopt.
func (t *Table) NewWriter(base *table.Table, want *iceberg.Schema) (*Writer, error) {
	_, target, err := t.stageOn(base, want)
	if err != nil {
		return nil, err
	}
	// The files' row groups are small unless the table says otherwise:
	// the writer's memory is set by a row group, not by a flush. So are
	// their pages (streamPageBytes).
	props := iceberg.Properties{}
	for key, value := range map[string]int{
		table.ParquetRowGroupSizeBytesKey: streamRowGroupBytes,
		table.ParquetPageRowLimitKey:      streamPageRows,
		table.ParquetPageSizeBytesKey:     streamPageBytes,
	} {
		if _, ok := target.Properties()[key]; !ok {
			props[key] = strconv.Itoa(value)
		}
	}
	for _, col := range plainColumns {
		if _, ok := target.Properties()[dictColumnKey+col]; !ok {
			props[dictColumnKey+col] = "false"
		}
	}
	maps.Copy(props, positionMetrics)
	if target, err = t.withProperties(target, props); err != nil {
		return nil, err
	}
	return &Writer{t: t, target: target, schema: target.Schema(), want: want, opened: time.Now()}, nil
}

// plainKeysTarget returns the table that streams whose keys do not repeat
// write with: kafka_key without a dictionary, unless the table says how
// to encode it.
func (w *Writer) plainKeysTarget() (*table.Table, error) {
	w.plainKeysOnce.Do(func() {
		w.plainKeys = w.target
		if _, ok := w.target.Properties()[dictColumnKey+mapping.ColKey]; !ok {
			w.plainKeys, w.plainKeysErr = w.t.withProperties(w.target, iceberg.Properties{dictColumnKey + mapping.ColKey: "false"})
		}
	})
	return w.plainKeys, w.plainKeysErr
}

// plainColumns are the Parquet columns streams write without a dictionary
// unless the table says otherwise. A file holds one Kafka partition, or a
// lane's few (whose rows come partition by partition): its topic and
// partition are constant or in long runs, which zstd stores in as few
// bytes plain as with a dictionary, without hashing every row. Header names and
// values are plain for the same reason, and because unique ones (trace
// ids beside a few content types) made files 17 % larger with one.
var plainColumns = []string{mapping.ColTopic, mapping.ColPartition,
	mapping.ColHeaders + ".list.element.key", mapping.ColHeaders + ".list.element.value"}

// dictColumnKey is the prefix of the table properties that turn a
// column's dictionary encoding on or off.
const dictColumnKey = "write.parquet.dict-encoding-enabled.column."

// positionMetrics keeps the full column bounds of the position columns in
// the manifests of every file floe writes, whatever the table's
// write.metadata.metrics settings: compaction checks each file it wrote
// against them before committing it, and the lookups and the audit find
// a partition's files by them (a table with metrics off had every
// compaction of file groups refused).
var positionMetrics = iceberg.Properties{
	table.MetricsModeColumnConfPrefix + "." + mapping.ColTopic:     "full",
	table.MetricsModeColumnConfPrefix + "." + mapping.ColPartition: "full",
	table.MetricsModeColumnConfPrefix + "." + mapping.ColOffset:    "full",
}

// withProperties returns target with props set, in memory only: they
// change how this writer writes files, not the table.
func (t *Table) withProperties(target *table.Table, props iceberg.Properties) (*table.Table, error) {
	if len(props) == 0 {
		return target, nil
	}
	mb, err := table.MetadataBuilderFromBase(target.Metadata(), target.MetadataLocation())
	if err != nil {
		return nil, fmt.Errorf("prepare the writer of %s: %w", t.Name(), err)
	}
	if err := mb.SetProperties(props); err != nil {
		return nil, fmt.Errorf("prepare the writer of %s: %w", t.Name(), err)
	}
	meta, err := mb.Build()
	if err != nil {
		return nil, fmt.Errorf("prepare the writer of %s: %w", t.Name(), err)
	}
	return table.New(t.ident, meta, target.MetadataLocation(), target.FS, t.cat), nil
}

// Schema is the writer schema the Writer was made for (nil: the table's).
func (w *Writer) Schema() *iceberg.Schema { return w.want }

// Stream is one open set of data files of one Kafka partition: batches
// written to it are encoded into Parquet in a goroutine of its own while
// the caller goes on, and Close returns the files. Write blocks until the
// encoder takes the batch, so that a stream holds two batches at most (the
// one encoding, the one handed over).
type Stream struct {
	w     *Writer
	ch    chan arrow.RecordBatch
	done  chan struct{}
	files []iceberg.DataFile
	err   error
	once  sync.Once
}

// Stream starts a stream of batches of the given Arrow schema.
//
// The stream looks at its first batch's keys: where they do not repeat, its
// files' kafka_key column has no dictionary (keysRepeat).
func (w *Writer) Stream(ctx context.Context, schema *arrow.Schema) *Stream {
	s := &Stream{w: w, ch: make(chan arrow.RecordBatch), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		first, ok := <-s.ch
		if !ok {
			return
		}
		target, err := w.target, error(nil)
		if !keysRepeat(first) {
			target, err = w.plainKeysTarget()
		}
		// iceberg-go may fail before it reads any batch: whoever takes
		// first, the writer or the cleanup below, releases it.
		var taken atomic.Bool
		in := func(yield func(arrow.RecordBatch, error) bool) {
			if taken.CompareAndSwap(false, true) && !yield(first, nil) {
				return
			}
			for b := range s.ch {
				if !yield(b, nil) {
					return
				}
			}
		}
		if err != nil {
			s.err = err
		} else {
			for df, err := range table.WriteRecords(ctx, target, schema, in, table.WithParquetRowGroupLimit(streamRowGroupRows),
				// iceberg-go queues 64 batches per file writer by default:
				// a flush's worth of rows again.
				table.WithRecordBatchBufferSize(1)) {
				if err != nil {
					s.err = fmt.Errorf("write data files of %s: %w", w.t.Name(), err)
					break
				}
				s.files = append(s.files, df)
			}
		}
		// Batches the writer did not take (it failed) are released here.
		if taken.CompareAndSwap(false, true) {
			first.Release()
		}
		for b := range s.ch {
			b.Release()
		}
	}()
	return s
}

// keysRepeat reports whether the kafka_key values of b may repeat enough
// for a dictionary to pay. Parquet's writer starts every row group's key
// column with a dictionary, and gives it up after the row group's first
// batch when distinct keys (ids, UUIDs) would store smaller plain: writing
// such keys plain from the start gives the same file for less CPU. A batch
// decides when it has at least keysSampleRows keys, 95 % or more of them
// distinct; keys that repeat less often than within a batch (8k rows)
// may then lose a dictionary that would have paid in a row group (32k).
func keysRepeat(b arrow.RecordBatch) bool {
	var key func(i int) string
	keys, _ := column(b, mapping.ColKey)
	switch c := keys.(type) {
	case *array.Binary:
		key = func(i int) string { return string(c.Value(i)) }
	case *array.String:
		key = c.Value
	default:
		// No key column, or a decoded key's struct.
		return true
	}
	if keys.Len()-keys.NullN() < keysSampleRows {
		return true
	}
	n := keys.Len() - keys.NullN()
	seen := make(map[string]struct{}, n)
	repeats, allowed := 0, n/20
	for i := range keys.Len() {
		if keys.IsNull(i) {
			continue
		}
		k := key(i)
		if _, ok := seen[k]; ok {
			if repeats++; repeats > allowed {
				return true
			}
			continue
		}
		seen[k] = struct{}{}
	}
	return false
}

// keysSampleRows is the fewest keys a batch decides keysRepeat on.
const keysSampleRows = 1000

// Write hands b to the stream, which owns it from then on. It returns the
// stream's error once the encoder has failed.
func (s *Stream) Write(b arrow.RecordBatch) error {
	select {
	case <-s.done:
		b.Release()
		if s.err == nil {
			return errors.New("write to a closed stream")
		}
		return s.err
	case s.ch <- b:
		return nil
	}
}

// Close ends the stream and returns its files, once they are complete.
func (s *Stream) Close() ([]iceberg.DataFile, error) {
	s.once.Do(func() { close(s.ch) })
	<-s.done
	return s.files, s.err
}

// Abort ends the stream and removes the files it wrote: a flush that will
// not be committed leaves nothing behind (what a crash leaves is an orphan
// for floe maintain).
func (s *Stream) Abort(ctx context.Context, log *slog.Logger) {
	files, _ := s.Close()
	s.w.t.removeFiles(ctx, log, files)
}

// sameFieldIDs reports whether every column and nested field of written (the
// schema files were written with) has the same field ID and type in now.
func sameFieldIDs(written, now *iceberg.Schema) bool {
	for _, f := range written.Fields() {
		g, ok := now.FindFieldByName(f.Name)
		if !ok || !sameIDs(f, g) {
			return false
		}
	}
	return true
}

func sameIDs(a, b iceberg.NestedField) bool {
	if a.ID != b.ID {
		return false
	}
	switch at := a.Type.(type) {
	case *iceberg.StructType:
		bt, ok := b.Type.(*iceberg.StructType)
		if !ok {
			return false
		}
		for _, f := range at.FieldList {
			g, ok := mapping.FindField(bt, f.Name)
			if !ok || !sameIDs(f, g) {
				return false
			}
		}
		return true
	case *iceberg.ListType:
		bt, ok := b.Type.(*iceberg.ListType)
		return ok && sameIDs(at.ElementField(), bt.ElementField())
	case *iceberg.MapType:
		bt, ok := b.Type.(*iceberg.MapType)
		return ok && sameIDs(at.KeyField(), bt.KeyField()) && sameIDs(at.ValueField(), bt.ValueField())
	}
	return a.Type.Equals(b.Type)
}

// fits reports whether files w wrote fit a commit of a flush for writer
// schema want on the table as last loaded: the schema the commit produces
// gives their columns the same field IDs, and the partition spec is the
// one they were written with.
func (t *Table) fits(w *Writer, want *iceberg.Schema) bool {
	// The commit may evolve the spec itself (fields waiting for columns
	// the flush adds): compare with the spec it would produce.
	_, target, err := t.stage(want)
	return err == nil && target.Metadata().DefaultPartitionSpec() == w.target.Metadata().DefaultPartitionSpec() &&
		sameFieldIDs(w.schema, target.Schema())
}

// RemoveFiles deletes data files that will never be committed (a flush
// abandoned after its streams wrote them). Failures only leave orphans for
// floe maintain, so they are logged, not returned.
func (t *Table) RemoveFiles(ctx context.Context, log *slog.Logger, files []iceberg.DataFile) {
	t.removeFiles(ctx, log, files)
}
