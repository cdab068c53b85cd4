package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// A state table of mode mapping.ModeFold (mapping.PropFold=FoldLatest)
// holds, per topic partition and key, the row of the latest record with
// that key (KTable semantics): a record with a null value (a tombstone)
// deletes the key, and records with a null key are dropped, as a KTable
// drops them. Keys are folded per partition, as Kafka Streams keeps a
// KTable's state per partition, so every data file still holds one
// partition.
//
// Every commit to a state table still carries the ranges of the log it
// folded, with Records counting the records folded (not the rows left, which
// later commits may supersede), so the ledger stays gapless and auditable;
// the rows of a state table are a subset of its ranges' records, unique per
// (topic, partition, key).

// foldChanges stages a fold of the flush's batches into the table's rows.
//
// Per partition, the batch's latest record per key decides: the key's row in
// the table (if any) goes, and the latest record becomes its row unless it is
// a tombstone. Only data files of the partition that hold one of the batch's
// keys are rewritten; their surviving rows and the new rows are written
// together, so rewrites also consolidate small files. Memory is bounded by
// the batch (itself bounded by the flush policy) plus one decoded batch of a
// data file at a time, never by the key space: a long fold is a sequence of
// such passes, one per flush, each an atomic snapshot.
func (t *Table) foldChanges(ctx context.Context, target *table.Table, batches map[mapping.TopicPartition][]arrow.RecordBatch) (Changes, error) {
	var st Changes
	head := t.Head()
	for _, tp := range slices.SortedFunc(maps.Keys(batches), mapping.TopicPartition.Compare) {
		// A state table's files do not follow ranges: one pass per
		// partition over all of its rows.
		b, err := concatBatches(batches[tp])
		if err != nil {
			return st, fmt.Errorf("fold %s: %w", tp, err)
		}
		defer b.Release()
		keys, latest, err := latestPerKey(b)
		if err != nil {
			return st, fmt.Errorf("fold %s: %w", tp, err)
		}
		var touched []table.FileScanTask
		if head != nil && len(keys) > 0 {
			touched, err = t.filesWithKeys(ctx, head.SnapshotID, tp, keys)
			if err != nil {
				return st, fmt.Errorf("fold %s: find rows of the batch's keys: %w", tp, err)
			}
		}
		if len(touched) == 0 && len(latest) == 0 {
			continue
		}
		newRows, err := takeRows(ctx, b, latest)
		if err != nil {
			return st, fmt.Errorf("fold %s: %w", tp, err)
		}
		files, err := t.writeFold(ctx, target, head, tp, touched, keys, newRows)
		newRows.Release()
		st.Add = append(st.Add, files...)
		if err != nil {
			return st, fmt.Errorf("fold %s: %w", tp, err)
		}
		for _, task := range touched {
			st.Remove = append(st.Remove, task.File)
		}
		st.Rows += int64(len(latest))
	}
	return st, nil
}

// concatBatches returns batches of one schema as one batch, which the
// caller releases.
func concatBatches(batches []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(batches) == 1 {
		batches[0].Retain()
		return batches[0], nil
	}
	if len(batches) == 0 {
		return nil, errors.New("no batch to fold")
	}
	sc := batches[0].Schema()
	cols := make([]arrow.Array, sc.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(batches))
		for j, b := range batches {
			parts[j] = b.Column(i)
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("concatenate column %s: %w", sc.Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(sc, cols, rows), nil
}

// latestPerKey returns the set of non-null keys of a batch and the row
// indices, in offset order, of each key's latest record when that record is
// not a tombstone.
func latestPerKey(b arrow.RecordBatch) (map[string]struct{}, []int, error) {
	keyCol, err := column(b, mapping.ColKey)
	if err != nil {
		return nil, nil, err
	}
	offCol, err := columnAs[*array.Int64](b, mapping.ColOffset)
	if err != nil {
		return nil, nil, err
	}
	// A typed table keeps the value's bytes beside its columns.
	valName := mapping.ColValue
	if len(b.Schema().FieldIndices(mapping.ColRawValue)) == 1 {
		valName = mapping.ColRawValue
	}
	valCol, err := columnAs[*array.Binary](b, valName)
	if err != nil {
		return nil, nil, err
	}
	last := map[string]int{}
	for i := range int(b.NumRows()) {
		if keyCol.IsNull(i) {
			continue
		}
		k := keyOf(keyCol, i)
		if j, ok := last[k]; !ok || offCol.Value(i) > offCol.Value(j) {
			last[k] = i
		}
	}
	keys := make(map[string]struct{}, len(last))
	var rows []int
	for k, i := range last {
		keys[k] = struct{}{}
		if !valCol.IsNull(i) {
			rows = append(rows, i)
		}
	}
	slices.SortFunc(rows, func(a, b int) int { return cmp.Compare(offCol.Value(a), offCol.Value(b)) })
	return keys, rows, nil
}

// keyOf is the identity of a row's key: its bytes for a raw key, its
// text for a string key, and Arrow's rendering of any other decoded key
// (the same value renders the same for one schema, which a scan projects
// every file to).
func keyOf(col arrow.Array, i int) string {
	switch c := col.(type) {
	case *array.Binary:
		return string(c.Value(i))
	case *array.String:
		return c.Value(i)
	}
	return col.ValueStr(i)
}

// column returns the named column of b.
func column(b arrow.RecordBatch, name string) (arrow.Array, error) {
	idx := b.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return nil, fmt.Errorf("batch has no column %q", name)
	}
	return b.Column(idx[0]), nil
}

// columnAs returns the named column of b as type A.
func columnAs[A arrow.Array](b arrow.RecordBatch, name string) (A, error) {
	var zero A
	idx := b.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return zero, fmt.Errorf("batch has no column %q", name)
	}
	a, ok := b.Column(idx[0]).(A)
	if !ok {
		return zero, fmt.Errorf("column %q has type %s", name, b.Column(idx[0]).DataType())
	}
	return a, nil
}

// takeRows returns a new batch of b's rows at the given indices.
func takeRows(ctx context.Context, b arrow.RecordBatch, rows []int) (arrow.RecordBatch, error) {
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	defer ib.Release()
	for _, i := range rows {
		ib.Append(int64(i))
	}
	idx := ib.NewInt64Array()
	defer idx.Release()
	out, err := compute.Take(ctx, *compute.DefaultTakeOptions(), compute.NewDatumWithoutOwning(b), compute.NewDatumWithoutOwning(idx))
	if err != nil {
		return nil, fmt.Errorf("select latest rows: %w", err)
	}
	return out.(*compute.RecordDatum).Value, nil
}

// partitionScan scans the rows of one topic partition in a snapshot. Data
// files of other partitions are pruned by their column bounds.
func (t *Table) partitionScan(snapshotID int64, tp mapping.TopicPartition, fields ...string) *table.Scan {
	opts := []table.ScanOption{
		table.WithSnapshotID(snapshotID),
		table.WithRowFilter(iceberg.NewAnd(
			iceberg.EqualTo(iceberg.Reference(mapping.ColTopic), tp.Topic),
			iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), tp.Partition))),
	}
	if len(fields) > 0 {
		opts = append(opts, table.WithSelectedFields(fields...))
	}
	return t.tbl.Scan(opts...)
}

// filesWithKeys returns the data files of tp in a snapshot that hold a row
// with one of keys, reading only the key column, one file at a time.
func (t *Table) filesWithKeys(ctx context.Context, snapshotID int64, tp mapping.TopicPartition, keys map[string]struct{}) ([]table.FileScanTask, error) {
	scan := t.partitionScan(snapshotID, tp, mapping.ColKey)
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	var out []table.FileScanTask
	for _, task := range tasks {
		hit, err := anyKey(ctx, scan, task, keys)
		if err != nil {
			return nil, fmt.Errorf("read keys of %s: %w", task.File.FilePath(), err)
		}
		if hit {
			out = append(out, task)
		}
	}
	return out, nil
}

func anyKey(ctx context.Context, scan *table.Scan, task table.FileScanTask, keys map[string]struct{}) (bool, error) {
	_, it, err := scan.ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return false, err
	}
	for b, err := range it {
		if err != nil {
			return false, err
		}
		col, err := column(b, mapping.ColKey)
		if err != nil {
			b.Release()
			return false, err
		}
		for i := range col.Len() {
			if _, ok := keys[keyOf(col, i)]; ok && !col.IsNull(i) {
				b.Release()
				return true, nil
			}
		}
		b.Release()
	}
	return false, nil
}

// writeFold writes the rows of the touched files whose key is not in keys,
// followed by newRows, as the partition's new data files.
func (t *Table) writeFold(ctx context.Context, target *table.Table, head *table.Snapshot, tp mapping.TopicPartition, touched []table.FileScanTask, keys map[string]struct{}, newRows arrow.RecordBatch) ([]iceberg.DataFile, error) {
	rows := func(yield func(arrow.RecordBatch, error) bool) {
		if len(touched) > 0 {
			scan := t.partitionScan(head.SnapshotID, tp)
			_, it, err := scan.ReadTasks(ctx, touched)
			if err != nil {
				yield(nil, err)
				return
			}
			for b, err := range it {
				if err != nil {
					yield(nil, err)
					return
				}
				kept, err := t.survivors(ctx, b, keys)
				b.Release()
				if err != nil {
					yield(nil, err)
					return
				}
				if kept == nil {
					continue
				}
				if !yield(kept, nil) {
					return
				}
			}
		}
		if newRows.NumRows() > 0 {
			newRows.Retain()
			yield(newRows, nil)
		}
	}
	return t.writeRows(ctx, target, rows)
}

// survivors returns the rows of b whose key is not in keys, in the table's
// write schema, or nil when none survive.
func (t *Table) survivors(ctx context.Context, b arrow.RecordBatch, keys map[string]struct{}) (arrow.RecordBatch, error) {
	col, err := column(b, mapping.ColKey)
	if err != nil {
		return nil, err
	}
	mb := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer mb.Release()
	n := 0
	for i := range col.Len() {
		_, gone := keys[keyOf(col, i)]
		keep := col.IsNull(i) || !gone
		mb.Append(keep)
		if keep {
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	mask := mb.NewBooleanArray()
	defer mask.Release()
	kept, err := compute.FilterRecordBatch(ctx, b, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("filter surviving rows: %w", err)
	}
	defer kept.Release()
	return t.conform(kept)
}

// conform returns b's floe columns as a batch of the table's write schema,
// which carries the field IDs the Parquet writer needs.
func (t *Table) conform(b arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, t.schema.NumFields())
	for i, f := range t.schema.Fields() {
		idx := b.Schema().FieldIndices(f.Name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("scanned rows have no column %q", f.Name)
		}
		c := b.Column(idx[0])
		if !arrow.TypeEqual(c.DataType(), f.Type) {
			return nil, fmt.Errorf("scanned column %q has type %s, the table writes %s", f.Name, c.DataType(), f.Type)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(t.schema, cols, b.NumRows()), nil
}

// writeRows writes a stream of batches in the table's write schema as data
// files of target (rolled at the table's target file size). It releases
// the batches.
func (t *Table) writeRows(ctx context.Context, target *table.Table, rows iter.Seq2[arrow.RecordBatch, error]) ([]iceberg.DataFile, error) {
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, target, t.schema, rows) {
		if err != nil {
			return files, err
		}
		files = append(files, df)
	}
	return files, nil
}
