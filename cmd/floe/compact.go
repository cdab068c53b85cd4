package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/snapshot"
)

// compactFlags are floe maintain's compaction flags.
type compactFlags struct {
	compact        bool
	targetFileSize int64
}

func (f *compactFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.compact, "compact", false,
		"rewrite the small data files of each Iceberg partition into larger ones, across Kafka partitions (of the table, and of the dead-letter tables its ledger names, per Kafka partition), leaving the ledger as it is; on an upsert table, rewrite the files its deletes apply to with the deletes applied and drop the delete files")
	fs.Var(newByteSize(&f.targetFileSize, snapshot.DefaultTargetFileSize), "target-file-size",
		"with --compact: the size of the files it writes; files of at least 3/4 of it stay as they are: "+sizeHelp)
}

// printCompaction writes what compactions did, a line per table.
func printCompaction(w io.Writer, results []snapshot.CompactResult, dryRun bool) {
	for _, r := range results {
		if !dryRun && r.SnapshotID == 0 && (r.Groups > 0 || r.DroppedDeletes > 0) {
			// Planned, and no commit of it landed: the run's error says
			// why. Its report said "snapshot 0 replaced ...; committed at
			// attempt 5 (other commits got in first)" after five refusals
			// of the catalog (a new user's run).
			what := fmt.Sprintf("replaced %s (%d bytes) with %d, %s", plural(r.Replaced, "file"), r.BytesBefore, r.Added, plural(int(r.Rows), "row"))
			if r.Groups == 0 {
				what = fmt.Sprintf("dropped %s that applied to no row", plural(r.DroppedDeletes, "delete file"))
			}
			fmt.Fprintf(w, "compaction of %s: not committed (it would have %s; %s): the error below says why\n", r.Table, what, plural(r.Attempts, "attempt"))
			continue
		}
		if r.Groups == 0 {
			fmt.Fprintf(w, "compaction of %s: nothing to merge (%s", r.Table, plural(r.FilesBefore, "data file"))
			if r.Unplaced > 0 {
				fmt.Fprintf(w, ", %d small files it would merge left alone: the ledger does not place them", r.Unplaced)
			}
			fmt.Fprint(w, ")")
			switch {
			case r.DroppedDeletes > 0 && dryRun:
				verb := "apply"
				if r.DroppedDeletes == 1 {
					verb = "applies"
				}
				fmt.Fprintf(w, "; would drop %s that %s to no row", plural(r.DroppedDeletes, "delete file"), verb)
			case r.DroppedDeletes > 0:
				fmt.Fprintf(w, "; snapshot %d dropped %s that applied to no row", r.SnapshotID, plural(r.DroppedDeletes, "delete file"))
			}
			fmt.Fprintln(w, keptNote(r))
			continue
		}
		if dryRun {
			fmt.Fprintf(w, "compaction of %s would merge %d of its %s (%s, %d bytes) in %s",
				r.Table, r.Replaced, plural(r.FilesBefore, "data file"), plural(int(r.Rows), "row"), r.BytesBefore, plural(r.Groups, "group"))
			if r.DroppedDeletes > 0 {
				fmt.Fprintf(w, ", applying their deletes and dropping %s", plural(r.DroppedDeletes, "delete file"))
			}
			fmt.Fprintln(w, keptNote(r))
			continue
		}
		rows := plural(int(r.Rows), "row")
		if r.DroppedDeletes > 0 || r.Rows != r.LiveRows && r.LiveRows > 0 {
			// The rows read and those written told apart: "N rows" beside
			// "M rows live" read as the new files' count.
			rows = fmt.Sprintf("%d rows read, %d live after the deletes (%s dropped)", r.Rows, r.LiveRows, plural(r.DroppedDeletes, "delete file"))
		}
		snap := fmt.Sprintf("snapshot %d", r.SnapshotID)
		if r.Commits > 1 {
			snap = fmt.Sprintf("%d snapshots (the last %d)", r.Commits, r.SnapshotID)
		}
		fmt.Fprintf(w, "compaction of %s: %s replaced %s (%d bytes) with %d (%d bytes), %s; data files %d -> %d",
			r.Table, snap, plural(r.Replaced, "file"), r.BytesBefore, r.Added, r.BytesAfter, rows, r.FilesBefore, r.FilesAfter)
		switch {
		case r.Commits > 1 && r.Attempts > r.Commits:
			// Attempts adds up the parts': one each when none was beaten.
			fmt.Fprintf(w, "; %d commit attempts for its %d snapshots (other commits got in first)", r.Attempts, r.Commits)
		case r.Commits <= 1 && r.Attempts > 1:
			fmt.Fprintf(w, "; committed at attempt %d (other commits got in first)", r.Attempts)
		}
		fmt.Fprintln(w, keptNote(r))
	}
}

// DefaultCompactInterval is how often floe sink compacts its table unless
// --compact-interval says otherwise. Without compaction every commit adds
// its files for good: a table's live data files, and with them the
// manifest entries every in-sink expiry reads (to learn which files are
// still live) and every scan plans over, grow with its age (BenchmarkSoak,
// docs/performance.md).
const DefaultCompactInterval = time.Hour

// sinkCompaction is floe sink's scheduled compaction.
type sinkCompaction struct {
	interval       time.Duration
	targetFileSize int64
}

func (f *sinkCompaction) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.interval, "compact-interval", DefaultCompactInterval,
		"compact the table's small files (and its dead-letter tables') this often while sinking, as floe maintain --compact does (on an upsert table it also applies the row-level deletes and drops the delete files); 0 turns it off")
	fs.Var(newByteSize(&f.targetFileSize, snapshot.DefaultTargetFileSize), "compact-target-file-size",
		"with --compact-interval: the size of the files compaction writes: "+sizeHelp)
}

// every is how often start compacts: the interval, or 0 (never).
func (f *sinkCompaction) every() time.Duration { return max(f.interval, 0) }

// start runs a compaction of the sink's table every f.every(sinkTable)
// until the returned stop is called; a no-op when that is 0. It opens
// its own handle of the table: a snapshot.Table is not for concurrent use.
// It plans and rewrites beside the sink's commits, and commits holding
// turn, the lock the sink holds around each of its commits
// (connector.Config.CommitTurn): a sink committing several times a second
// would otherwise get in before each attempt of the compaction's commit,
// which then gave up after 30 (BenchmarkSoak). Other writers of the table
// are ordered by the catalog (each retries over the other; the sink is
// never fenced by a compaction). A failed compaction is logged and tried
// again at the next tick: it committed nothing, and the sink goes on.
func (f *sinkCompaction) start(ctx context.Context, sinkTable *snapshot.Table, turn sync.Locker) (stop func()) {
	interval := f.every()
	if interval == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			tbl, err := sinkTable.Reopen(ctx)
			if err != nil {
				slog.Warn("scheduled compaction: cannot open the table", "table", sinkTable.Name(), "err", err)
				continue
			}
			// The compaction logs what it committed ("compacted"): a line of
			// its own here said it again (found by a new user).
			_, err = tbl.CompactAll(ctx, snapshot.CompactOptions{TargetFileSize: f.targetFileSize, Turn: turn, Logger: slog.Default().With("scheduled", true)})
			if err != nil && ctx.Err() == nil {
				slog.Warn("scheduled compaction failed; the sink goes on, and the next one plans again", "table", sinkTable.Name(), "err", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// keptNote ends a compaction's line with the small files it keeps for
// what they are (of older partition specs, another writer's), or nothing.
func keptNote(r snapshot.CompactResult) string {
	var b strings.Builder
	if r.OtherSpec > 0 {
		fmt.Fprintf(&b, "; %s of an older partition spec kept as they are", plural(r.OtherSpec, "small file"))
	}
	if r.Foreign > 0 {
		fmt.Fprintf(&b, "; %s another writer added kept as they are (floe audit reports them)", plural(r.Foreign, "small file"))
	}
	return b.String()
}
