package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// Snapshot returns a snapshot of the table (0: the branch head), or an
// *UnknownSnapshotError.
func (t *Table) Snapshot(snapshotID int64) (*table.Snapshot, error) {
	if snapshotID == 0 {
		if h := t.Head(); h != nil {
			return h, nil
		}
		return nil, fmt.Errorf("table %s has no snapshot on branch %s yet", t.Name(), t.branch)
	}
	if s := t.tbl.Metadata().SnapshotByID(snapshotID); s != nil {
		return s, nil
	}
	return nil, &UnknownSnapshotError{Table: t.Name(), SnapshotID: snapshotID}
}

// UnknownSnapshotError reports a snapshot id a table (or a catalog) does not
// have.
type UnknownSnapshotError struct {
	Table      string // empty: no table of the catalog has it
	SnapshotID int64
}

func (e *UnknownSnapshotError) Error() string {
	if e.Table == "" {
		return fmt.Sprintf("no table of the catalog has snapshot %d", e.SnapshotID)
	}
	return fmt.Sprintf("table %s has no snapshot %d (expired, or of another table)", e.Table, e.SnapshotID)
}

// RowAt looks for the row of offset in tp in a snapshot (0: the branch
// head). Data files are pruned by their manifest bounds on the topic,
// partition and offset columns, and only the offset column of the remaining
// candidates (normally one) is read; in is the commit whose range holds
// the offset (Table.Locate), whose file groups say which files of several
// partitions may hold it (likelyFirst). It returns the data file holding
// the row, or ok false when the snapshot has no such row.
func (t *Table) RowAt(ctx context.Context, snapshotID int64, tp mapping.TopicPartition, offset int64, in mapping.Commit) (file string, ok bool, err error) {
	file, _, ok, err = t.rowAt(ctx, snapshotID, tp, offset, mapping.ColOffset, in)
	return file, ok, err
}

// DeadLetterAt looks for the dead letter of offset in tp that commit (a
// data commit's id) accounts for in the head of a dead-letter table
// (OpenDeadLetters), as RowAt does for a row: the data file holding it
// and why the record could not become a row. A dead-letter table holds
// the dead letters of every branch's and tag's ledger, so two commits may
// each have one at an offset (a rollback kept by a tag, then the same
// offsets sunk again): a row naming another commit is not commit's; one
// without a commit id (an older floe's) is taken when no row names
// commit. With commit "", or a table without the column, any row is.
func (t *Table) DeadLetterAt(ctx context.Context, tp mapping.TopicPartition, offset int64, commit string) (file, reason string, ok bool, err error) {
	if _, hasIDs := t.tbl.Schema().FindFieldByName(mapping.ColCommitID); commit == "" || !hasIDs {
		return t.rowAt(ctx, 0, tp, offset, mapping.ColError, mapping.Commit{})
	}
	var legacyFile, legacyReason string
	legacy := false
	filter := iceberg.NewAnd(partitionFilter(tp), iceberg.EqualTo(iceberg.Reference(mapping.ColOffset), offset))
	err = t.ScanFiles(ctx, 0, ScanOptions{Columns: []string{mapping.ColError, mapping.ColCommitID}, Filter: filter}, func(fb FileBatch) error {
		if fb.Done || ok {
			return nil
		}
		why, err1 := columnAs[*array.String](fb.Batch, mapping.ColError)
		ids, err2 := columnAs[*array.String](fb.Batch, mapping.ColCommitID)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("dead-letter file %s: %w", fb.Path, err)
		}
		for i := range int(fb.Batch.NumRows()) {
			var r string
			if why.IsValid(i) {
				r = why.Value(i)
			}
			switch {
			case ids.IsValid(i) && ids.Value(i) == commit:
				file, reason, ok = fb.Path, r, true
				return nil
			case !ids.IsValid(i) && !legacy:
				legacyFile, legacyReason, legacy = fb.Path, r, true
			}
		}
		return nil
	})
	if err != nil {
		return "", "", false, fmt.Errorf("look up %s@%d in %s: %w", tp, offset, t.Name(), err)
	}
	if !ok && legacy {
		return legacyFile, legacyReason, true, nil
	}
	return file, reason, ok, nil
}

// rowAt is RowAt reading column col of the row too, when it is a string.
func (t *Table) rowAt(ctx context.Context, snapshotID int64, tp mapping.TopicPartition, offset int64, col string, in mapping.Commit) (file, value string, ok bool, err error) {
	s, err := t.Snapshot(snapshotID)
	if err != nil {
		return "", "", false, err
	}
	opts := []table.ScanOption{
		table.WithSnapshotID(s.SnapshotID),
		table.WithRowFilter(iceberg.NewAnd(partitionFilter(tp), iceberg.EqualTo(iceberg.Reference(mapping.ColOffset), offset))),
	}
	if t.mode != mapping.ModeUpsert || t.key.Source == mapping.KeyFromKafkaKey {
		// An upsert table keyed by decoded columns is read whole:
		// iceberg-go v0.7.0 cannot apply equality deletes to its projected
		// scans ("equality field ID ... not found").
		opts = append(opts, table.WithSelectedFields(col))
	}
	scan := t.tbl.Scan(opts...)
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return "", "", false, fmt.Errorf("plan lookup of %s@%d in %s: %w", tp, offset, t.Name(), err)
	}
	tasks, err = t.likelyFirst(tasks, tp, offset, in)
	if err != nil {
		return "", "", false, err
	}
	for _, task := range tasks {
		_, it, err := scan.ReadTasks(ctx, []table.FileScanTask{task})
		if err != nil {
			return "", "", false, t.readError(task.File.FilePath(), err)
		}
		found := false
		for b, err := range it {
			if err != nil {
				return "", "", false, t.readError(task.File.FilePath(), err)
			}
			if !found && b.NumRows() > 0 {
				found = true
				c, err := column(b, col)
				if err != nil {
					b.Release()
					return "", "", false, t.readError(task.File.FilePath(), err)
				}
				if v, isString := c.(*array.String); isString && v.IsValid(0) {
					value = v.Value(0)
				}
			}
			b.Release()
		}
		if found {
			return task.File.FilePath(), value, true, nil
		}
	}
	return "", "", false, nil
}

// partitionFilter selects the rows of tp, by their topic and partition
// columns.
func partitionFilter(tp mapping.TopicPartition) iceberg.BooleanExpression {
	return iceberg.NewAnd(
		iceberg.EqualTo(iceberg.Reference(mapping.ColTopic), tp.Topic),
		iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), tp.Partition))
}

// OffsetFilter is a scan filter (ScanOptions.Filter) selecting the rows
// whose offset column lies in span, half-open as spans are; it names no
// partition, so a caller ands it with the columns that tell its
// partition's rows (by partition number alone, or with the topic).
func OffsetFilter(span mapping.Interval) iceberg.BooleanExpression {
	return iceberg.NewAnd(
		iceberg.GreaterThanEqual(iceberg.Reference(mapping.ColOffset), span.Low),
		iceberg.LessThan(iceberg.Reference(mapping.ColOffset), span.High))
}

// PositionOptions are ScanPositions' options.
type PositionOptions struct {
	// MissingOK leaves out the rows of data files the storage no longer
	// has, instead of failing the scan (ScanOptions.MissingOK).
	MissingOK bool
	// Commits, when set, keeps only the rows whose commit id is one of
	// them (a dead-letter table's rows of some commits); rows without a
	// commit id, an older floe's, are left out.
	Commits map[string]bool
}

// ScanPositions calls fn with the position of every row of a snapshot (0:
// the branch head) that lies in spans: a row of a partition of spans, by
// its topic and partition columns, whose offset lies in that partition's
// span. The rows are those a reader of the snapshot sees, delete files
// applied. Only the position columns are read (and the commit id, with
// opts.Commits), of the files whose bounds reach the spans.
func (t *Table) ScanPositions(ctx context.Context, snapshotID int64, spans map[mapping.TopicPartition]mapping.Interval, opts PositionOptions, fn func(mapping.TopicPartition, int64)) error {
	cols := []string{mapping.ColTopic, mapping.ColPartition, mapping.ColOffset}
	if opts.Commits != nil {
		cols = append(cols, mapping.ColCommitID)
	}
	var terms []iceberg.BooleanExpression
	for _, tp := range slices.SortedFunc(maps.Keys(spans), mapping.TopicPartition.Compare) {
		terms = append(terms, iceberg.NewAnd(partitionFilter(tp), OffsetFilter(spans[tp])))
	}
	if len(terms) == 0 {
		return nil
	}
	return t.ScanFiles(ctx, snapshotID, ScanOptions{Columns: cols, Filter: anyOf(terms...), MissingOK: opts.MissingOK},
		func(fb FileBatch) error {
			if fb.Batch == nil {
				return nil
			}
			var commit *array.String
			if opts.Commits != nil {
				var err error
				if commit, err = columnAs[*array.String](fb.Batch, mapping.ColCommitID); err != nil {
					// An older floe's file, without the column: no row
					// has a commit id.
					return nil
				}
			}
			err := eachPosition(fb.Batch, func(i int, tp mapping.TopicPartition, off int64) {
				if commit == nil || commit.IsValid(i) && opts.Commits[commit.Value(i)] {
					fn(tp, off)
				}
			})
			if err != nil {
				return fmt.Errorf("data file %s: %w", fb.Path, err)
			}
			return nil
		})
}

// cutFilter selects the rows below a cut: rows of a partition the cut names
// with an offset below its cut, and every row of the other partitions.
func cutFilter(cut mapping.Cut) iceberg.BooleanExpression {
	var below, named []iceberg.BooleanExpression
	for _, tp := range slices.SortedFunc(maps.Keys(cut), mapping.TopicPartition.Compare) {
		below = append(below, iceberg.NewAnd(partitionFilter(tp), iceberg.LessThan(iceberg.Reference(mapping.ColOffset), cut[tp])))
		named = append(named, partitionFilter(tp))
	}
	return anyOf(append(below, iceberg.NewNot(anyOf(named...)))...)
}

// anyOf is the disjunction of one or more expressions.
func anyOf(es ...iceberg.BooleanExpression) iceberg.BooleanExpression {
	if len(es) == 1 {
		return es[0]
	}
	return iceberg.NewOr(es[0], es[1], es[2:]...)
}

// Rows calls fn with the rows of a snapshot (0: the branch head) that lie
// below the cut (a nil cut: every row), in batches of the table's columns;
// each batch is released when fn returns. Data files wholly above the cut
// are pruned by their bounds. Files are read in the order of their lowest
// topic, partition and offset, so that a partition's rows come in offset
// order where its files hold it alone (a file group holds several). An
// error from fn stops the scan.
func (t *Table) Rows(ctx context.Context, snapshotID int64, cut mapping.Cut, fn func(arrow.RecordBatch) error) error {
	s, err := t.Snapshot(snapshotID)
	if err != nil {
		return err
	}
	opts := []table.ScanOption{table.WithSnapshotID(s.SnapshotID)}
	if len(cut) > 0 {
		opts = append(opts, table.WithRowFilter(cutFilter(cut)))
	}
	scan := t.tbl.Scan(opts...)
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return fmt.Errorf("scan %s at snapshot %d: %w", t.Name(), s.SnapshotID, err)
	}
	fields, err := t.positionFields()
	if err != nil {
		return err
	}
	slices.SortStableFunc(tasks, func(a, b table.FileScanTask) int {
		ta, tb := fields.topicBounds(a.File), fields.topicBounds(b.File)
		pa, _, oa, _ := fields.partitionBounds(a.File)
		pb, _, ob, _ := fields.partitionBounds(b.File)
		return cmp.Or(cmp.Compare(ta.low, tb.low), cmp.Compare(pa, pb), cmp.Compare(oa.Low, ob.Low))
	})
	_, it, err := scan.ReadTasks(ctx, tasks)
	if err != nil {
		return fmt.Errorf("scan %s at snapshot %d: %w", t.Name(), s.SnapshotID, err)
	}
	for b, err := range it {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist) {
			return t.readError(pe.Path, err)
		}
		if err != nil {
			return fmt.Errorf("scan %s at snapshot %d: %w", t.Name(), s.SnapshotID, err)
		}
		err = fn(b)
		b.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// TimeCut maps a record time to a cut from the table's own timestamp column,
// as Kafka's ListOffsets by timestamp does from the log: for every partition
// in the ledger of a snapshot (0: the branch head), the offset of the first
// row whose timestamp is at or after at, or the ledger's next offset where no
// row is. Rows below the cut are those before the first record at or after
// at, out-of-order timestamps included. The records that became dead
// letters are records of the log too: their timestamps, in the table's
// dead-letter tables, count as the rows' do. It reads only the topic,
// partition, offset and timestamp columns, of files whose bounds reach at.
func (t *Table) TimeCut(ctx context.Context, snapshotID int64, at time.Time) (mapping.Cut, error) {
	s, err := t.Snapshot(snapshotID)
	if err != nil {
		return nil, err
	}
	sum, err := t.Summary(ctx, s.SnapshotID)
	if err != nil {
		return nil, err
	}
	cut := mapping.Cut(sum.Next())
	if err := t.lowerToTime(ctx, s.SnapshotID, at, cut); err != nil {
		return nil, err
	}
	dlqs, err := t.DeadLetterTables(ctx)
	if err != nil {
		return nil, err
	}
	if err := t.deadLettersHeld(ctx, dlqs); err != nil {
		return nil, err
	}
	for _, dlq := range dlqs {
		if head := dlq.Head(); head != nil {
			if err := dlq.lowerToTime(ctx, head.SnapshotID, at, cut); err != nil {
				return nil, err
			}
		}
	}
	return cut, nil
}

// ErrDeadLettersNotHeld is matched (errors.Is) when dead letters that the
// ledger counts are in no dead-letter table: their records' times are
// unknown to the table.
var ErrDeadLettersNotHeld = errors.New("the table does not hold every dead letter its ledger counts")

// deadLettersHeld returns an error wrapping ErrDeadLettersNotHeld when a
// commit of t's ledger (its branch's) counts dead letters that its
// dead-letter table does not hold: the table was dropped, or they are
// pending, lost or fewer than counted (dlqs are t's DeadLetterTables). A
// record stamped at or after a time, which would have cut its partition
// before it, is then not found (found by review).
func (t *Table) deadLettersHeld(ctx context.Context, dlqs []*Table) error {
	head := t.Head()
	if head == nil {
		return nil
	}
	named := map[string]bool{}
	if err := t.branchDeadLetterTables(t.tbl.Metadata(), head.SnapshotID, named); err != nil {
		return fmt.Errorf("read the ledger of %s for its dead-letter tables: %w", t.Name(), err)
	}
	have := map[string]*Table{}
	for _, d := range dlqs {
		have[d.Name()] = d
	}
	for _, name := range slices.Sorted(maps.Keys(named)) {
		if have[name] == nil {
			return fmt.Errorf("%w: dead-letter table %s, which its ledger names, does not exist", ErrDeadLettersNotHeld, name)
		}
	}
	counting := map[string]bool{}
	for c, err := range t.Commits(ctx, 0) {
		if err != nil {
			return fmt.Errorf("read ledger of %s: %w", t.Name(), err)
		}
		if deadLetterCount(c) > 0 {
			counting[c.ID] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(named)) {
		st, err := t.DeadLetterState(ctx, have[name])
		if err != nil {
			return err
		}
		short := slices.DeleteFunc(st.CountMismatches(), func(c mapping.Commit) bool { return st.Rows[c.ID] > deadLetterCount(c) })
		for _, c := range slices.Concat(st.Pending, st.Missing, st.GivenUp, short) {
			if counting[c.ID] {
				return fmt.Errorf("%w: dead-letter table %s does not hold every dead letter of commit %s (pending, or lost: floe audit says which)", ErrDeadLettersNotHeld, name, c.ID)
			}
		}
	}
	return nil
}

// lowerToTime lowers each partition's offset in cut to that of the first
// row of snapshot snapshotID whose timestamp is at or after at (partitions
// not in cut are left out).
func (t *Table) lowerToTime(ctx context.Context, snapshotID int64, at time.Time, cut mapping.Cut) error {
	// The column holds microseconds: a time between two is rounded up,
	// not down to a record stamped before it.
	us := at.UnixMicro()
	if time.UnixMicro(us).Before(at) {
		us++
	}
	scan := t.tbl.Scan(
		table.WithSnapshotID(snapshotID),
		table.WithSelectedFields(mapping.ColTopic, mapping.ColPartition, mapping.ColOffset),
		table.WithRowFilter(iceberg.GreaterThanEqual(iceberg.Reference(mapping.ColTimestamp), iceberg.Timestamp(us))))
	_, it, err := scan.ToArrowRecords(ctx)
	if err != nil {
		return fmt.Errorf("scan timestamps of %s: %w", t.Name(), err)
	}
	for b, err := range it {
		if err != nil {
			return fmt.Errorf("scan timestamps of %s: %w", t.Name(), err)
		}
		err = eachPosition(b, func(_ int, tp mapping.TopicPartition, off int64) {
			if o, ok := cut[tp]; ok && off < o {
				cut[tp] = off
			}
		})
		b.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// eachPosition calls fn with the index, topic partition and offset of
// every row.
func eachPosition(b arrow.RecordBatch, fn func(int, mapping.TopicPartition, int64)) error {
	topic, err := columnAs[*array.String](b, mapping.ColTopic)
	if err != nil {
		return err
	}
	part, err := columnAs[*array.Int32](b, mapping.ColPartition)
	if err != nil {
		return err
	}
	off, err := columnAs[*array.Int64](b, mapping.ColOffset)
	if err != nil {
		return err
	}
	for i := range int(b.NumRows()) {
		fn(i, mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)}, off.Value(i))
	}
	return nil
}

// FindSnapshot returns the table of the catalog that has snapshot id, or
// whose ledger has its commit (the snapshot expired, its commit is in the
// ledger archive), looking first at the tables named in prefer (which may
// not exist), then at every table of every namespace. The table is opened
// on main.
func FindSnapshot(ctx context.Context, cat catalog.Catalog, id int64, prefer ...table.Identifier) (*Table, error) {
	// has looks in a table's metadata, or (archived) its ledger archive.
	has := func(t *Table, archived bool) bool {
		if !archived {
			return t.tbl.Metadata().SnapshotByID(id) != nil
		}
		for c, err := range t.CommitsOf(ctx, 0, map[int64]bool{id: true}) {
			if err != nil {
				return false
			}
			if c.SnapshotID == id {
				return true
			}
		}
		return false
	}
	for _, ident := range prefer {
		if t, err := Open(ctx, cat, ident, OpenOptions{}); err == nil && (has(t, false) || has(t, true)) {
			return t, nil
		}
	}
	var tables []*Table
	for ident, err := range Tables(ctx, cat) {
		if err != nil {
			return nil, fmt.Errorf("find snapshot %d: %w", id, err)
		}
		// Not a floe table, or unreadable: it cannot be a replay's
		// starting point anyway.
		if t, err := Open(ctx, cat, ident, OpenOptions{}); err == nil {
			tables = append(tables, t)
		}
	}
	// Every table's metadata first: the ledgers are read only for a
	// snapshot that expired everywhere.
	var found []*Table
	for _, archived := range []bool{false, true} {
		for _, t := range tables {
			if has(t, archived) {
				found = append(found, t)
			}
		}
		if len(found) > 0 {
			break
		}
	}
	switch len(found) {
	case 0:
		return nil, &UnknownSnapshotError{SnapshotID: id}
	case 1:
		return found[0], nil
	default:
		names := make([]string, len(found))
		for i, t := range found {
			names[i] = t.Name()
		}
		return nil, fmt.Errorf("snapshot %d exists in several tables: %s", id, strings.Join(names, ", "))
	}
}

// Tables yields every table of every top-level namespace of cat, by
// namespace as the catalog lists them.
func Tables(ctx context.Context, cat catalog.Catalog) iter.Seq2[table.Identifier, error] {
	return func(yield func(table.Identifier, error) bool) {
		namespaces, err := cat.ListNamespaces(ctx, nil)
		if err != nil {
			yield(nil, fmt.Errorf("list namespaces: %w", err))
			return
		}
		for _, ns := range namespaces {
			for ident, err := range cat.ListTables(ctx, ns) {
				if err != nil {
					err = fmt.Errorf("list tables of %s: %w", strings.Join(ns, "."), err)
				}
				if !yield(ident, err) || err != nil {
					return
				}
			}
		}
	}
}

// likelyFirst orders the files a lookup of offset in tp may read: files of
// one partition (their bounds place them), then the files of in's file
// groups that hold the offset, then the other files of several partitions,
// which bounds alone cannot rule out. A file group's bounds span many
// partitions and offsets, so every group of a wide table's history may
// pass the scan's pruning: when every file of the group holding the offset
// is live and none has another writer's deletes, the row is in that group
// or nowhere, and the others are left out; otherwise (a compaction, or
// another writer, rewrote files of the group or deleted rows of them) they
// are read last.
func (t *Table) likelyFirst(tasks []table.FileScanTask, tp mapping.TopicPartition, offset int64, in mapping.Commit) ([]table.FileScanTask, error) {
	fields, err := t.positionFields()
	if err != nil {
		return nil, err
	}
	var hinted []string
	for _, g := range in.FileGroups {
		if g.Holds(tp, offset) {
			hinted = append(hinted, g.Files...)
		}
	}
	rank := func(task table.FileScanTask) int {
		if pmin, pmax, _, ok := fields.partitionBounds(task.File); ok && pmin == pmax {
			return 0
		}
		if slices.Contains(hinted, task.File.FilePath()) {
			return 1
		}
		return 2
	}
	slices.SortStableFunc(tasks, func(a, b table.FileScanTask) int { return cmp.Compare(rank(a), rank(b)) })
	// Only a whole group, as floe wrote it, rules the others out: another
	// writer that rewrote one of its files (a delete copy-on-write) left
	// the rest live, and one that updated rows merge-on-read hid them with
	// deletes and wrote them anew elsewhere; the rewritten rows were never
	// looked for (found by review). floe writes deletes only as an upsert
	// table's equality deletes.
	live, rewritten := map[string]bool{}, false
	for _, task := range tasks {
		if rank(task) == 1 {
			live[task.File.FilePath()] = true
			rewritten = rewritten || len(task.DeleteFiles) > 0 || len(task.DeletionVectorFiles) > 0 ||
				len(task.EqualityDeleteFiles) > 0 && t.mode != mapping.ModeUpsert
		}
	}
	if len(hinted) > 0 && len(live) == len(hinted) && !rewritten {
		tasks = slices.DeleteFunc(tasks, func(task table.FileScanTask) bool { return rank(task) == 2 })
	}
	return tasks, nil
}
