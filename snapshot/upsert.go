package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// checkOneSpec refuses to write deletes into target, an upsert table, when
// it holds files of a partition spec other than its current one: the
// equality deletes written under the current spec would not reach their
// rows. floe refuses such a change (SetPartitionBy); another engine may
// have made it. Only a table whose spec ever changed reads its manifest
// list for it.
func (t *Table) checkOneSpec(ctx context.Context, target *table.Table) error {
	snap := target.CurrentSnapshot()
	if len(target.Metadata().PartitionSpecs()) < 2 || snap == nil {
		return nil
	}
	fsys, err := target.FS(ctx)
	if err != nil {
		return fmt.Errorf("upsert into %s: open the table's storage: %w", t.Name(), err)
	}
	manifests, err := snap.Manifests(fsys)
	if err != nil {
		return fmt.Errorf("upsert into %s: read the manifest list of snapshot %d: %w", t.Name(), snap.SnapshotID, err)
	}
	spec := target.Spec()
	for _, m := range manifests {
		if m.PartitionSpecID() != int32(spec.ID()) && (m.HasAddedFiles() || m.HasExistingFiles()) {
			return &mapping.PartitionByError{Spec: specText(spec, target.Schema()), Table: t.Name(), TableSpec: true,
				Problem: fmt.Sprintf("the table's partition spec changed (not by this floe, which refuses it) while it held files of spec %d: the equality deletes written under the new spec would not reach their rows; replay the table into a new one (floe replay --mode upsert)", m.PartitionSpecID())}
		}
	}
	return nil
}

// checkKeySpec refuses writes into target, an upsert table, whose
// partition spec partitions by a column that is not a key column: a key's
// row and the deletes of it may then land in different partitions, which
// equality deletes do not reach across, and an update would leave the old
// row. floe refuses such a spec (UpsertKey.CheckPartitionBy); another
// engine may have set it (from a review: the sink then failed in
// iceberg-go's delete writer, after writing its data files). A table
// whose key columns are not named yet is checked once they are.
func (t *Table) checkKeySpec(target *table.Table) error {
	spec, schema := target.Spec(), target.Schema()
	if spec.NumFields() == 0 || len(t.key.Columns) == 0 {
		return nil
	}
	for _, pf := range spec.Fields() {
		col, _ := schema.FindColumnName(pf.SourceID())
		if !slices.Contains(t.key.Columns, col) {
			return &mapping.PartitionByError{Spec: specText(spec, schema), Table: t.Name(), Part: pf.Name, TableSpec: true,
				Problem: fmt.Sprintf("the table's partition spec (not set by this floe, which refuses it) partitions by %s, which is not a key column (%s): a key's row and the deletes of it could land in different partitions, and an update would leave its old row; give the table a spec of key columns, or none, with the engine that set it, or replay it into a new table (floe replay --mode upsert)",
					cmp.Or(col, fmt.Sprintf("field id %d", pf.SourceID())), strings.Join(t.key.Columns, ", "))}
		}
	}
	return nil
}

// upsertChanges stages an upsert of flush f into the rows of an upsert
// table (mapping.ModeUpsert): for every key the flush touches, the
// winning record (mapping.Winner: each partition's latest by offset, then
// the later timestamp, then the higher partition) becomes the key's row,
// unless it deletes the key (Flush.Deletes); and one equality delete per
// key, on the table's identifier fields, removes the key's rows of earlier
// snapshots. Rows and deletes go into one snapshot (commitOnce's row
// delta), whose sequence number keeps the deletes off its own rows.
//
// Memory is set by the flush, never by the table: the batches themselves,
// and one entry per distinct key of the flush (its key's text and where
// its winning row is, some 64 bytes besides the key), which the flush
// policy bounds (--flush-records).
func (t *Table) upsertChanges(ctx context.Context, target *table.Table, f Flush) (Changes, error) {
	ch := Changes{Truncate: len(f.Truncated) > 0}
	if len(f.Batches) == 0 {
		// Ranges without rows (starts, markers, losses): nothing to key.
		return ch, nil
	}
	if err := t.checkKeySpec(target); err != nil {
		return ch, err
	}
	if err := t.checkOneSpec(ctx, target); err != nil {
		return ch, err
	}
	ids := target.Schema().IdentifierFieldIDs
	cols, err := t.keyColumnsOf(target.Schema())
	if err != nil {
		return ch, err
	}
	type pick struct {
		batch, row int
		rec        mapping.KeyRecord
		del        bool
	}
	var (
		batches []arrow.RecordBatch
		parts   []mapping.TopicPartition
	)
	winners := map[string]pick{}
	for _, tp := range slices.SortedFunc(maps.Keys(f.Batches), mapping.TopicPartition.Compare) {
		cut, truncated := f.Truncated[tp]
		dels := make(map[int64]struct{}, len(f.Deletes[tp]))
		for _, o := range f.Deletes[tp] {
			dels[o] = struct{}{}
		}
		latest := map[string]pick{}
		for _, b := range f.Batches[tp] {
			bi := len(batches)
			batches, parts = append(batches, b), append(parts, tp)
			keys, err := keyColumns(b, cols)
			if err != nil {
				return ch, fmt.Errorf("upsert %s: %w", tp, err)
			}
			off, err := columnAs[*array.Int64](b, mapping.ColOffset)
			if err != nil {
				return ch, fmt.Errorf("upsert %s: %w", tp, err)
			}
			ts, err := columnAs[*array.Timestamp](b, mapping.ColTimestamp)
			if err != nil {
				return ch, fmt.Errorf("upsert %s: %w", tp, err)
			}
			for i := range int(b.NumRows()) {
				if truncated && off.Value(i) < cut {
					continue
				}
				k, ok := RowKey(keys, i)
				if !ok {
					return ch, fmt.Errorf("upsert %s: the row of offset %d has a null key column (such a record is a dead letter)", tp, off.Value(i))
				}
				p := pick{batch: bi, row: i, rec: mapping.KeyRecord{Partition: tp, Offset: off.Value(i), Timestamp: ts.Value(i).ToTime(arrow.Microsecond)}}
				_, p.del = dels[p.rec.Offset]
				if q, ok := latest[k]; !ok || mapping.Supersedes(p.rec, q.rec) {
					latest[k] = p
				}
			}
		}
		for k, p := range latest {
			if w, ok := winners[k]; !ok || mapping.Supersedes(p.rec, w.rec) {
				winners[k] = p
			}
		}
	}
	rows := make([][]int, len(batches))
	touched := make([][]int, len(batches))
	for _, p := range winners {
		touched[p.batch] = append(touched[p.batch], p.row)
		if !p.del {
			rows[p.batch] = append(rows[p.batch], p.row)
		}
	}
	winners = nil

	kept := map[mapping.TopicPartition][]arrow.RecordBatch{}
	defer func() {
		for _, bs := range kept {
			releaseAll(bs)
		}
	}()
	var deletes []arrow.RecordBatch
	defer func() { releaseAll(deletes) }()
	delSchema, err := keySchema(target, cols)
	if err != nil {
		return ch, err
	}
	for bi, b := range batches {
		if len(rows[bi]) > 0 {
			slices.Sort(rows[bi])
			nb, err := takeRows(ctx, b, rows[bi])
			if err != nil {
				return ch, err
			}
			kept[parts[bi]] = append(kept[parts[bi]], requireColumns(nb, cols))
			ch.Rows += int64(len(rows[bi]))
		}
		if len(touched[bi]) > 0 {
			slices.Sort(touched[bi])
			kb, err := takeRows(ctx, b, touched[bi])
			if err != nil {
				return ch, err
			}
			db, err := project(kb, delSchema)
			kb.Release()
			if err != nil {
				return ch, err
			}
			deletes = append(deletes, db)
		}
	}
	// The deletes are written while the rows are: one file of key columns
	// beside the data files' parallel writers.
	var delErr error
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if len(deletes) == 0 || ch.Truncate {
			// After a truncate no older row is left to delete.
			return
		}
		seq := func(yield func(arrow.RecordBatch, error) bool) {
			for _, b := range deletes {
				b.Retain() // the writer releases what it takes; the deferred release drops ours.
				if !yield(b, nil) {
					return
				}
			}
		}
		ch.Deletes, delErr = target.NewTransactionOnBranch(t.branch).WriteEqualityDeletes(ctx, ids, seq)
	}()
	ch.Add, ch.Groups, err = writeUpsertFiles(ctx, target, kept, f.Ranges)
	<-wrote
	if delErr != nil {
		delErr = fmt.Errorf("write the equality deletes of %s: %w", t.Name(), delErr)
	}
	return ch, errors.Join(err, delErr)
}

// An upsert flush writes the rows its small partitions kept (fewer than
// groupRows each) into files they share: one file group of the ledger
// (mapping.FileGroup) whose spans are their ranges with rows in the flush,
// as an append table's lane does, so that a commit covering 1,000 quiet
// partitions writes a file, not 1,000 (files by bytes). A partition that
// kept more, and every partition of a flush with groupPartitions small ones
// or fewer, writes a file per batch, which its bounds place alone.
const (
	groupRows       = 8 * 1024
	groupPartitions = 4
)

// writeUpsertFiles writes kept, an upsert flush's rows by partition, into
// data files of target: the small partitions' into one file group, whose
// spans are theirs of ranges, the others' a file per batch.
func writeUpsertFiles(ctx context.Context, target *table.Table, kept map[mapping.TopicPartition][]arrow.RecordBatch, ranges []mapping.Range) ([]iceberg.DataFile, []mapping.FileGroup, error) {
	own := map[mapping.TopicPartition][]arrow.RecordBatch{}
	var small []mapping.TopicPartition
	for tp, bs := range kept {
		var rows int64
		for _, b := range bs {
			rows += b.NumRows()
		}
		if rows >= groupRows {
			own[tp] = bs
		} else {
			small = append(small, tp)
		}
	}
	if len(small) <= groupPartitions {
		for _, tp := range small {
			own[tp] = kept[tp]
		}
		small = nil
	}
	slices.SortFunc(small, mapping.TopicPartition.Compare)
	var (
		grouped  []iceberg.DataFile
		groupErr error
		wg       sync.WaitGroup
	)
	if len(small) > 0 {
		var bs []arrow.RecordBatch
		for _, tp := range small {
			bs = append(bs, kept[tp]...)
		}
		wg.Go(func() { grouped, groupErr = writeBatches(ctx, target, bs) })
	}
	files, err := writeFiles(ctx, target, own)
	wg.Wait()
	files = append(files, grouped...)
	if err := errors.Join(err, groupErr); err != nil || len(grouped) == 0 {
		return files, nil, err
	}
	var g mapping.FileGroup
	for _, df := range grouped {
		g.Files = append(g.Files, df.FilePath())
	}
	for _, r := range ranges {
		if !r.Deleted() && r.Records > 0 && slices.Contains(small, r.TopicPartition) {
			g.Spans = append(g.Spans, mapping.Span{TopicPartition: r.TopicPartition, Interval: r.Interval})
		}
	}
	g.Spans = mapping.MergeSpans(g.Spans)
	return files, []mapping.FileGroup{g}, nil
}

// writeBatches writes bs into data files of target, each run of batches
// of one schema through one writer, which rolls its files at
// write.target-file-size-bytes and splits them by the partition spec.
func writeBatches(ctx context.Context, target *table.Table, bs []arrow.RecordBatch) ([]iceberg.DataFile, error) {
	var files []iceberg.DataFile
	for len(bs) > 0 {
		n := 1
		for n < len(bs) && bs[n].Schema().Equal(bs[0].Schema()) {
			n++
		}
		run := bs[:n]
		bs = bs[n:]
		seq := func(yield func(arrow.RecordBatch, error) bool) {
			for _, b := range run {
				b.Retain() // the writer releases what it takes; the caller releases its own.
				if !yield(b, nil) {
					return
				}
			}
		}
		for df, err := range table.WriteRecords(ctx, target, run[0].Schema(), seq) {
			if err != nil {
				return files, err
			}
			files = append(files, df)
		}
	}
	return files, nil
}

// keyColumns returns the key columns of b, in key order.
func keyColumns(b arrow.RecordBatch, cols []string) ([]arrow.Array, error) {
	out := make([]arrow.Array, len(cols))
	for i, c := range cols {
		a, err := column(b, c)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// KeyColumns returns the key columns of an upsert table as last loaded:
// its identifier fields, in field ID order (the order RowKey takes them
// in). None before a struct key's first commit names them.
func (t *Table) KeyColumns() ([]string, error) {
	if t.mode != mapping.ModeUpsert {
		return nil, fmt.Errorf("table %s is of mode %s: only an upsert table has key columns", t.Name(), t.mode)
	}
	if len(t.tbl.Schema().IdentifierFieldIDs) == 0 {
		return nil, nil
	}
	return t.keyColumnsOf(t.tbl.Schema())
}

// keyColumnsOf returns the columns of schema's identifier fields.
func (t *Table) keyColumnsOf(schema *iceberg.Schema) ([]string, error) {
	ids := schema.IdentifierFieldIDs
	if len(ids) == 0 {
		return nil, fmt.Errorf("upsert table %s has no identifier fields (its key %s): it was not created by floe, or its schema was edited", t.Name(), t.key)
	}
	cols := make([]string, len(ids))
	for i, id := range ids {
		name, ok := schema.FindColumnName(id)
		if !ok {
			return nil, fmt.Errorf("upsert table %s: identifier field %d is not a column", t.Name(), id)
		}
		cols[i] = name
	}
	return cols, nil
}

// RowKey is the identity of row i's key, given its key columns (in
// KeyColumns order): the value of a one-column key (a binary key's bytes,
// a string's text, Arrow's rendering of other types), and for several
// columns their values, each prefixed with its length. false when a key
// column is null. The commit picks each key's winner by it; a reader
// comparing a table with the log keys rows the same way.
func RowKey(keys []arrow.Array, i int) (string, bool) {
	if len(keys) == 1 {
		return keyOf(keys[0], i), !keys[0].IsNull(i)
	}
	var sb strings.Builder
	for _, k := range keys {
		if k.IsNull(i) {
			return "", false
		}
		v := keyOf(k, i)
		sb.WriteString(strconv.Itoa(len(v)))
		sb.WriteByte(':')
		sb.WriteString(v)
	}
	return sb.String(), true
}

// PartitionKey is RowKey of the key columns (kafka_topic, kafka_partition,
// kafka_key) of mapping.KeyFromPartitionKey for a record of topic and
// partition with key: what a reader of the log compares with the rows of
// a table replay --fold latest wrote.
func PartitionKey(topic string, partition int32, key []byte) string {
	var sb strings.Builder
	for _, v := range []string{topic, strconv.Itoa(int(partition)), string(key)} {
		sb.WriteString(strconv.Itoa(len(v)))
		sb.WriteByte(':')
		sb.WriteString(v)
	}
	return sb.String()
}

// keySchema is the Arrow schema of target's equality deletes on cols, with
// the table's field IDs.
func keySchema(target *table.Table, cols []string) (*arrow.Schema, error) {
	sel, err := target.Schema().Select(true, cols...)
	if err != nil {
		return nil, fmt.Errorf("key columns of %s: %w", strings.Join(target.Identifier(), "."), err)
	}
	sc, err := table.SchemaToArrowSchema(sel, nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("key columns of %s: %w", strings.Join(target.Identifier(), "."), err)
	}
	return sc, nil
}

// project returns b's columns of sc's names as a batch of schema sc.
func project(b arrow.RecordBatch, sc *arrow.Schema) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		c, err := column(b, f.Name)
		if err != nil {
			return nil, err
		}
		if !arrow.TypeEqual(c.DataType(), f.Type) {
			return nil, fmt.Errorf("key column %q has type %s, the table's is %s", f.Name, c.DataType(), f.Type)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(sc, cols, b.NumRows()), nil
}

// requireColumns returns b, whose cols hold no nulls, with those columns
// marked non-nullable as the table's required key columns are; it
// releases b.
func requireColumns(b arrow.RecordBatch, cols []string) arrow.RecordBatch {
	fields := slices.Clone(b.Schema().Fields())
	changed := false
	for i := range fields {
		if fields[i].Nullable && slices.Contains(cols, fields[i].Name) {
			fields[i].Nullable, changed = false, true
		}
	}
	if !changed {
		return b
	}
	md := b.Schema().Metadata()
	out := array.NewRecordBatch(arrow.NewSchema(fields, &md), b.Columns(), b.NumRows())
	b.Release()
	return out
}
