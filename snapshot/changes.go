package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// Changes are what one commit does to a table's rows, in one snapshot:
// the one place where a flush becomes files (writeChanges, per mode), and
// what the one commit skeleton (Table.apply, commitOnce) applies without
// knowing the mode.
type Changes struct {
	// Add are new data files.
	Add []iceberg.DataFile
	// Remove are live data files the snapshot replaces (a fold's
	// rewritten files).
	Remove []iceberg.DataFile
	// Deletes are row-level delete files (equality deletes of an upsert
	// table): they apply to rows of earlier snapshots only, so that Add's
	// rows survive them.
	Deletes []iceberg.DataFile
	// Groups are the file groups of Add (an upsert's small partitions'
	// shared files), which the commit's ledger records.
	Groups []mapping.FileGroup
	// Truncate deletes every row the table holds before the snapshot:
	// the snapshot replaces every live data file (found when it is
	// applied, so that a retry on a newer head finds the newer files) and
	// needs no Deletes.
	Truncate bool
	// Rows is the number of rows the flush contributes: every row of an
	// append; the latest row per key of a fold or an upsert.
	Rows int64
	// shape is the schema and spec the files were written for.
	shape writeShape
}

// files are the files written for the changes, which a commit that never
// lands removes.
func (c Changes) files() []iceberg.DataFile {
	out := make([]iceberg.DataFile, 0, len(c.Add)+len(c.Deletes))
	return append(append(out, c.Add...), c.Deletes...)
}

// bytes is the size of the files written.
func (c Changes) bytes() int64 {
	var n int64
	for _, df := range c.files() {
		n += df.FileSizeBytes()
	}
	return n
}

// writeChanges turns flush f into the changes of one snapshot, for the
// table's mode, written for the table as it is with f's schema changes:
// an append table's streamed files as they are (Flush.Files and Groups), or its
// batches written as data files; an upsert's rows and equality deletes
// (upsertChanges). A legacy state table takes none (Writable). On error, the
// changes hold the files written so far.
func (t *Table) writeChanges(ctx context.Context, f Flush) (Changes, error) {
	shape := t.writeShape(f)
	if f.Writer != nil {
		ch := Changes{shape: shape, Add: f.DataFiles()}
		for _, df := range ch.Add {
			ch.Rows += df.Count()
		}
		return ch, nil
	}
	_, target, err := t.stage(f.Schema)
	if err == nil {
		target, err = t.withProperties(target, positionMetrics)
	}
	if err != nil {
		return Changes{shape: shape}, err
	}
	var ch Changes
	switch t.mode {
	case mapping.ModeAppend:
		ch.Add, err = writeFiles(ctx, target, f.Batches)
		for _, df := range ch.Add {
			ch.Rows += df.Count()
		}
	case mapping.ModeFold:
		err = t.Writable()
	case mapping.ModeUpsert:
		ch, err = t.upsertChanges(ctx, target, f)
	default:
		err = fmt.Errorf("table %s: this floe does not write tables of mode %s", t.Name(), t.mode)
	}
	ch.shape = shape
	return ch, err
}

// refit returns ch fitted to the table as last loaded, before an attempt
// to commit it: as it is when the schema and partition spec are those its
// files were written for. Otherwise another writer changed them, and the
// files carry field IDs of a schema, or partition values of a spec, this
// commit would not produce: batches are written again for the ones it
// would, and streamed files, which cannot be, are removed with
// ErrSchemaMoved. Files written again have other names: the caller
// records the new file groups (Changes.Groups) in the commit's ledger.
// Files a snapshot of this very commit names (kept: it landed unanswered
// and was rolled back since) stay, and so does what the commit wrote
// beside them (errKept).
func (t *Table) refit(ctx context.Context, log *slog.Logger, f Flush, ch Changes, kept bool) (Changes, error) {
	moved := ErrSchemaMoved
	if kept {
		moved = fmt.Errorf("%w (%w)", ErrSchemaMoved, errKept)
	}
	drop := func() {
		if !kept {
			t.removeFiles(ctx, log, ch.files())
		}
	}
	if f.Writer != nil {
		if t.fits(f.Writer, f.Schema) {
			return ch, nil
		}
		drop()
		return ch, moved
	}
	if t.writeShape(f) == ch.shape {
		return ch, nil
	}
	drop()
	if len(ch.Groups) > 0 && kept {
		// The rolled-back snapshot of this commit names the group's files
		// in the ledger it shares with this attempt (its ranges file is
		// the commit's): written again, the files would have other names,
		// which that ledger does not give. The flush is read again.
		return Changes{}, moved
	}
	if t.keyNamedOtherwise(f.Schema) {
		// The flush's records were judged by another key (the first one
		// this writer read): they are read again for the table's.
		return Changes{}, moved
	}
	ch, err := t.writeChanges(ctx, f)
	if err != nil {
		t.removeFiles(ctx, log, ch.files())
		return Changes{}, fmt.Errorf("write data files of %s again for its new schema: %w", t.Name(), err)
	}
	return ch, nil
}

// commitOnce makes one attempt to commit ch on the table's branch as last
// loaded, with the schema changes of want, asserting the branch head: an
// append (AddDataFiles) when ch only adds, an overwrite
// (ReplaceDataFiles) when it replaces files, a row delta (NewRowDelta)
// when it deletes rows.
func (t *Table) commitOnce(ctx context.Context, ch Changes, props iceberg.Properties, want *iceberg.Schema) (*table.Snapshot, error) {
	txn, _, err := t.stage(want)
	if err != nil {
		return nil, err
	}
	if err := txn.AssertRefSnapshotID(t.branch); err != nil {
		return nil, err
	}
	if t.Head() == nil {
		// The branch's first snapshot has no parent: every other branch
		// must be as loaded too (branchHeads).
		for name := range branchHeadIDs(t.tbl.Metadata()) {
			if name == t.branch {
				continue
			}
			if err := txn.AssertRefSnapshotID(name); err != nil {
				return nil, err
			}
		}
	}
	if t.recordLayout {
		if err := txn.SetProperties(t.layout.Properties()); err != nil {
			return nil, err
		}
	}
	if ch.Truncate {
		if ch.Remove, err = t.liveDataFiles(ctx); err != nil {
			return nil, err
		}
		if t.tbl.Properties()[mapping.PropTruncated] == "" {
			if err := txn.SetProperties(iceberg.Properties{mapping.PropTruncated: "true"}); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case len(ch.Deletes) > 0 && len(ch.Remove) > 0:
		return nil, errors.New("commit: one snapshot cannot both replace data files and add delete files")
	case len(ch.Deletes) > 0:
		// Rows and the deletes of the keys they replace in one snapshot:
		// the deletes' sequence number is the rows', so they apply to
		// older rows only.
		err = txn.NewRowDelta(props).AddRows(ch.Add...).AddDeletes(ch.Deletes...).Commit(ctx)
	case len(ch.Remove) > 0:
		// One overwrite snapshot: the replaced files leave, the new ones
		// arrive. It fails if a replaced file is no longer live.
		err = txn.ReplaceDataFilesWithDataFiles(ctx, ch.Remove, ch.Add, props, table.WithoutDuplicateCheck())
	case len(ch.Add) == 0:
		// A snapshot with no files still carries ranges of offsets that
		// produced no rows (markers, aborted records, losses). With no file
		// to add there is no duplicate to look for: the check would read
		// every manifest of the table.
		err = txn.AddFiles(ctx, nil, props, true)
	default:
		err = appendFiles(ctx, txn, t.tbl.Metadata().Version(), ch.Add, props)
	}
	if err != nil {
		return nil, err
	}
	tbl, err := txn.Commit(ctx)
	if err != nil {
		return nil, err
	}
	t.recordLayout = false
	snap := tbl.Metadata().SnapshotByName(t.branch)
	if snap == nil {
		return nil, fmt.Errorf("commit succeeded but branch %s has no head", t.branch)
	}
	if err := t.adoptCommitted(ctx, tbl); err != nil {
		// The commit is applied; the retry's reload and settle find it.
		return nil, fmt.Errorf("%w, but loading the table it produced failed: %w", errCommitApplied, err)
	}
	return snap, nil
}

// errCommitApplied is wrapped by commitOnce's error of a commit the catalog
// applied: whatever the reload's error says (a refusal of the reload's
// read), the commit's files are the table's.
var errCommitApplied = errors.New("commit applied")

// ErrTruncateFormat is why an upsert table of format version 3 cannot
// take a truncate: the truncate's snapshot replaces every live data file,
// and iceberg-go v0.7.0 replaces files on v3 only with files that carry
// their first row id, which the files floe writes do not (a row delta,
// every other commit of an upsert table, assigns them).
var ErrTruncateFormat = errors.New("a table of format version 3 cannot take a truncate yet (iceberg-go v0.7.0 replaces its data files only with files carrying first_row_id): sink Debezium truncates into a table of format version 2, or use --on-truncate dead-letter")

// CanTruncate reports why the table cannot take a truncate
// (ErrTruncateFormat), or nil.
func (t *Table) CanTruncate() error {
	if t.tbl.Metadata().Version() >= 3 {
		return fmt.Errorf("table %s: %w", t.Name(), ErrTruncateFormat)
	}
	return nil
}

// liveDataFiles lists the data files of the branch head as last loaded.
func (t *Table) liveDataFiles(ctx context.Context) ([]iceberg.DataFile, error) {
	head := t.Head()
	if head == nil {
		return nil, nil
	}
	tasks, err := t.tbl.Scan(table.WithSnapshotID(head.SnapshotID)).PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the data files of %s: %w", t.Name(), err)
	}
	// A large file is planned as several tasks (read.split.target-size):
	// each file once, as ReplaceDataFilesWithDataFiles requires.
	files := make([]iceberg.DataFile, 0, len(tasks))
	seen := make(map[string]bool, len(tasks))
	for _, task := range tasks {
		if p := task.File.FilePath(); !seen[p] {
			seen[p] = true
			files = append(files, task.File)
		}
	}
	return files, nil
}

// appendFiles adds files in an append snapshot of txn's table, of format
// version version. File names are random UUIDs, so AddDataFiles' duplicate
// check, which reads every manifest of the table, would only cost time.
// Format 3 gives every row an id: AddDataFiles wants each file's
// first_row_id set by whoever wrote it, which iceberg-go's writer does not
// do, and refused every commit of an append table of format 3; a row delta
// of rows alone (an append too) has its manifest list assign them.
func appendFiles(ctx context.Context, txn *table.Transaction, version int, files []iceberg.DataFile, props iceberg.Properties) error {
	if version >= 3 {
		return txn.NewRowDelta(props).AddRows(files...).Commit(ctx)
	}
	return txn.AddDataFiles(ctx, files, props, table.WithoutDuplicateCheck())
}
