package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/snapshot"
)

func newMaintainCmd() *cobra.Command {
	var (
		f             tableFlags
		olderThan     time.Duration
		retainLast    int
		removeOrphans bool
		orphanMinAge  time.Duration
		dryRun        bool
		asJSON        bool
		compact       compactFlags
		dropLost      bool
		retention     retentionFlags
	)
	cmd := &cobra.Command{
		Use:   "maintain --table NAMESPACE.TABLE [--expire-older-than DURATION] [--retain-last N] [--remove-orphans [--orphan-min-age DURATION]] [--compact [--target-file-size SIZE]] [--drop-missing-dead-letter-files] [--set-max-snapshot-age DURATION] [--set-min-snapshots N] [--set-max-snapshots N] [--dry-run] [--json]",
		Short: "Expire old snapshots without losing the ledger, repair a truncated ledger, delete orphan files and compact small files",
		Long: `Expire snapshots (with --expire-older-than and/or --retain-last) and delete orphan files
(--remove-orphans). Every run, with no flag at all too, first checks the ledger of every branch
and tag and repairs one that an interrupted maintain run left truncated (see below), and
reconciles the dead-letter tables of a typed table with its branches' and tags' ledgers (adding
the dead letters of commits that have none, removing those of commits no ledger has); on a
dead-letter table, with its data table's. A data table's dead-letter tables are then maintained
with the same options (docs/dead-letters.md). Damage reconciling cannot repair (dead letters
whose files were deleted outside floe, rows changed outside floe) fails the run after the rest of
its work. A dead-letter table whose storage lost data files is not reconciled at all (sinks go on
and warn; floe audit reports the files) until the files are restored or
--drop-missing-dead-letter-files removes them: readers can then scan the table again, and the
commits whose own files are still there get their dead letters back. The flag also gives up on
the dead letters nothing can restore (their files are gone): it records them as lost on the
dead-letter table, so that later runs and sinks leave them alone, and floe audit reports them
(dead-letters-lost) until a replay of the table replaces them.

The ledger entries of the snapshots an expiry removes are first written to a new segment of the
table's ledger archive (a JSON file under metadata/floe-ledger/, named by a table property
floe.ledger-segment.ID), and the same catalog commit that removes the snapshots names it: the sink
resumes, audits and lookups read expired commits from the archive. When the segment cannot be
written, nothing is expired. A new segment absorbs the newest ones while it holds a quarter of
their entries (their properties are removed in the same commit, their files deleted after it), so
a table names few segments and an expiry writes about the entries it expires. Branch and tag heads
are always kept. A branch's own retention (min-snapshots-to-keep, max-snapshot-age-ms on the ref)
wins over the flags, and a branch or tag other than main older than its max-ref-age-ms (or
history.expire.max-ref-age-ms) is dropped. Maintain runs may overlap (sinks maintain their tables
between commits too): each adds a segment of its own and removes only segments whose entries its
new one holds, so none loses another's entries. A table whose ledger an overlapping run of floe
before segments left truncated (one archive file replaced by another) is repaired by the next
run: it merges the archive files and commits the merge, or, when no archive file holds the
missing entries, fails naming their snapshots.

Orphans are data files under the table's data location that no snapshot references (a crashed or
fenced writer leaves them), metadata files no table version will reference (commits that lost the
catalog's race leave them: their version is at most the current one and the metadata log does not
list them), and ledger archive files the table does not name whose every entry is live or in a
segment it names (killed maintain runs leave them). Only files older than --orphan-min-age are
deleted: a younger data file may belong to a writer that is about to commit it (a sink closes a
file up to one --flush-interval before its commit: keep --orphan-min-age well above the writers'
flush interval), a younger archive to a maintain run that is about to. A data location
(write.data.path) that is not a folder of the table's own under its location, or that holds the
metadata folder, is refused; a metadata location (write.metadata.path) outside the table's
location is not cleaned (a warning says so).

--compact rewrites the small data files (below 3/4 of --target-file-size) of each Iceberg
partition (of the current spec), across Kafka partitions, into files of about --target-file-size,
in one snapshot (operation replace, summary floe.operation=compact) that carries no ledger entry:
the ledger is untouched. It takes a file of one Kafka partition only when its offsets lie on one
unbroken chain of ledger ranges, and the files of a file group (a commit's shared files, an
earlier compaction's) only all together; the compaction snapshot records its files' file group
(floe.file-groups: the offsets of each partition they hold, joined across offsets of the ranges
they meet, never a gap, a lost or aborted range), and floe audit places them on those ranges.
The small files of one Kafka partition on one chain make a file of that partition only, placed by
its bounds. A file an earlier compaction wrote is merged again only with at least as many rows of
other files (size tiers: a row is rewritten O(log n) times, not at every compaction). Dead-letter
tables are compacted per Kafka partition. It runs after the rest, on the table and on the
dead-letter tables its ledger names, and runs safely beside live sinks: a sink commit in between
makes it retry on the new head, and when a file it replaces is gone (another compaction) it
deletes what it wrote and plans again on the new table (three times at most). Files another writer
added are left alone, and an upsert table with another writer's files is not compacted: merged,
their change would become floe's, which floe audit no longer reports.
The replaced files stay until snapshot expiry removes the snapshots that reference them. State
tables (floe.fold) are refused: their folds rewrite their files themselves.`,
		Example: `  floe maintain --table lake.orders --expire-older-than 168h --retain-last 100
  floe maintain --table lake.orders --remove-orphans --dry-run
  floe maintain --table lake.orders --compact --target-file-size 256MiB
  floe maintain --table lake.orders --set-max-snapshot-age 24h --set-max-snapshots 500
  floe maintain --table lake.orders                  # check and repair the ledger only`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			defer func() {
				// A scheduler's SIGTERM: the library's errors said
				// "context canceled" (found by review).
				if err != nil && ctx.Err() != nil {
					err = fmt.Errorf("interrupted before it finished: what it committed stays, and running it again finishes the work (%w)", err)
				}
			}()
			fs := cmd.Flags()
			expire := fs.Changed("expire-older-than") || fs.Changed("retain-last")
			if olderThan < 0 {
				return fmt.Errorf("--expire-older-than %s: want a non-negative duration", olderThan)
			}
			if retainLast < 1 {
				return fmt.Errorf("--retain-last %d: want at least 1", retainLast)
			}
			if orphanMinAge <= 0 {
				return fmt.Errorf("--orphan-min-age %s: want a positive duration (a younger file may be about to be committed)", orphanMinAge)
			}
			if removeOrphans && !dryRun && orphanMinAge < time.Hour {
				// A live sink's file being written, or written and not yet
				// committed, is an orphan to the listing: deleted, its rows
				// are lost, which only floe audit --deep sees (found by
				// review).
				slog.Warn("--orphan-min-age is below an hour: a file a live sink is still writing or about to commit (up to one --flush-interval, longer on a slow upload) may be deleted, and its rows lost; stop the table's sinks first, or keep it well above their --flush-interval",
					"orphan_min_age", orphanMinAge)
			}
			props, err := retention.properties(fs)
			if err != nil {
				return err
			}
			tbl, err := f.open(ctx, snapshot.OpenOptions{})
			if err != nil {
				return err
			}
			// Set first: this run's expiry applies the flags, not the
			// table's retention.
			var said io.Writer
			if !asJSON {
				said = cmd.OutOrStdout()
				// Run over several tables in a loop, the lines that
				// follow named none (a new user's cron job).
				fmt.Fprintf(said, "maintenance of %s\n", tbl.Name())
			}
			if err := setRetention(ctx, said, tbl, props, dryRun); err != nil {
				return err
			}
			res, damage := tbl.Maintain(ctx, snapshot.MaintainOptions{
				Expire: expire, ExpireOlderThan: olderThan, RetainLast: retainLast,
				RemoveOrphans: removeOrphans, OrphanMinAge: orphanMinAge, DryRun: dryRun,
				DropMissingDeadLetterFiles: dropLost,
			})
			drops := tbl.CutShortDrops()
			for _, branch := range slices.Sorted(maps.Keys(drops)) {
				// Only the drop run again reads its record: said here,
				// or its tables stay named by nothing but it.
				slog.Warn("a drop of a branch was cut short after its commit and left its dead-letter tables: run it again to drop them",
					"table", tbl.Name(), "branch", branch, "dead_letter_tables", strings.Join(drops[branch], ","),
					"command", "floe drop --table "+tbl.Name()+" --branch "+branch+" --yes")
			}
			// Damage to a dead-letter table is returned after the rest
			// of the maintenance, which is reported.
			if damage != nil && !snapshot.IsDeadLetterDamage(damage) {
				return damage
			}
			var compacted []snapshot.CompactResult
			if compact.compact {
				var err error
				compacted, err = tbl.CompactAll(ctx, snapshot.CompactOptions{TargetFileSize: compact.targetFileSize, DryRun: dryRun})
				// A table compaction failed on (a dead-letter table whose
				// storage lost a file, a file it cannot read) is not
				// compacted; what came before (an expiry, committed) and
				// the other tables are reported all the same: a failed
				// compaction hid a committed expiry (from a new-user run).
				damage = errors.Join(damage, err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return errors.Join(printJSON(out, maintainReport{Table: tbl.Name(), DryRun: dryRun, SetProperties: props, MaintainResult: res, Compaction: compactionReports(compacted, dryRun)}), damage)
			}
			would := ""
			if dryRun {
				would = "would be "
				fmt.Fprintf(out, "dry run: %s is unchanged\n", tbl.Name())
			}
			if n := len(res.DroppedDeadLetterFiles); n > 0 {
				verb := "dropped"
				if dryRun {
					verb = "would drop"
				}
				fmt.Fprintf(out, "dead letters: %s %s the storage had lost (their dead letters are lost for good)\n", verb, plural(n, "data file"))
				for _, p := range res.DroppedDeadLetterFiles {
					fmt.Fprintf(out, "  %s\n", p)
				}
			}
			if n := res.DeadLetters.RecordedLost; n > 0 {
				verb := "recorded"
				if dryRun {
					verb = "would record"
				}
				fmt.Fprintf(out, "dead letters: %s the dead letters of %s whose files are gone as lost (floe audit reports them as dead-letters-lost until a replay of the table brings them back)\n", verb, plural(n, "commit"))
			}
			if d := res.DeadLetters; d.Added > 0 || d.Removed > 0 || d.RemovedLegacy > 0 || d.RepairedLegacy > 0 || d.Refilled > 0 {
				fmt.Fprintf(out, "dead letters: added those of %d commits that had none; removed those of %d commits no ledger has (and %d older rows no commit accounts for); replaced the older rows of %d commits an older floe doubled by their files\n",
					d.Added, d.Removed, d.RemovedLegacy, d.RepairedLegacy)
				if d.Refilled > 0 {
					fmt.Fprintf(out, "dead letters: replaced the rows of %s that had too few (part of them were in a dropped file) by their own files\n", plural(d.Refilled, "commit"))
				}
			}
			if expire || removeOrphans {
				for _, name := range slices.Sorted(maps.Keys(res.DeadLetterTables)) {
					d := res.DeadLetterTables[name]
					fmt.Fprintf(out, "dead-letter table %s: %s %sexpired, %s %sdeleted\n", name, plural(len(d.Expired), "snapshot"), would, plural(len(d.Orphans), "orphan file"), would)
				}
			} else if len(res.DeadLetterTables) > 0 && !dryRun {
				fmt.Fprintf(out, "dead-letter tables checked against the ledger: %s\n", strings.Join(slices.Sorted(maps.Keys(res.DeadLetterTables)), ", "))
			}
			if of := tbl.Iceberg().Properties()[snapshot.PropDeadLettersOf]; of != "" {
				// Nothing of a ledger to say: other commands say it so.
				fmt.Fprintf(out, "%s is the dead-letter table of %s and has no ledger of its own (floe audit --table %s checks these dead letters against its ledger)\n",
					tbl.Name(), of, of)
			} else if len(res.TruncatedRefs) > 0 {
				fmt.Fprintf(out, "ledger %srepaired: %s restored from the archive files (truncated: %s)\n",
					would, plural(len(res.Restored), "archived snapshot"), strings.Join(res.TruncatedRefs, ", "))
			} else {
				fmt.Fprintln(out, "ledger: every branch and tag reads its whole history (nothing to repair)")
			}
			if expire {
				fmt.Fprintf(out, "snapshots %sexpired: %d (%s)", would, len(res.Expired), plural(res.ExpiredCommits, "floe commit"))
				switch len(res.Expired) {
				case 0:
				case 1:
					fmt.Fprintf(out, ", %d", res.Expired[0])
				default:
					fmt.Fprintf(out, ", %d to %d", res.Expired[0], res.Expired[len(res.Expired)-1])
				}
				fmt.Fprintln(out)
			}
			if (expire || len(res.TruncatedRefs) > 0) && len(res.Segments) > 0 {
				fmt.Fprintf(out, "ledger archive: %s in %s\n", plural(res.Archived, "snapshot"), plural(len(res.Segments), "segment"))
				for _, s := range res.Segments {
					fmt.Fprintf(out, "  %s\n", s)
				}
			}
			if removeOrphans {
				fmt.Fprintf(out, "orphan data files %sdeleted: %d (%d bytes, older than %s)\n", would, len(res.Orphans), res.OrphanBytes, orphanMinAge)
				for _, o := range res.Orphans {
					fmt.Fprintf(out, "  %s\n", o)
				}
				fmt.Fprintf(out, "stale metadata files %sdeleted: %d (older than %s)\n", would, len(res.StaleMetadata), orphanMinAge)
				for _, o := range res.StaleMetadata {
					fmt.Fprintf(out, "  %s\n", o)
				}
				fmt.Fprintf(out, "unreferenced manifests %sdeleted: %d (older than %s)\n", would, len(res.StaleManifests), orphanMinAge)
				for _, o := range res.StaleManifests {
					fmt.Fprintf(out, "  %s\n", o)
				}
				fmt.Fprintf(out, "stale ledger archive files %sdeleted: %d (older than %s)\n", would, len(res.StaleArchives), orphanMinAge)
				for _, o := range res.StaleArchives {
					fmt.Fprintf(out, "  %s\n", o)
				}
				fmt.Fprintf(out, "stale ledger ranges files %sdeleted: %d (older than %s)\n", would, len(res.StaleRangesFiles), orphanMinAge)
				for _, o := range res.StaleRangesFiles {
					fmt.Fprintf(out, "  %s\n", o)
				}
			}
			printCompaction(out, compacted, dryRun)
			return damage
		},
	}
	fs := cmd.Flags()
	f.register(fs)
	fs.DurationVar(&olderThan, "expire-older-than", 0, "expire snapshots older than this (0 with --retain-last: every snapshot beyond the last N)")
	fs.IntVar(&retainLast, "retain-last", 1, "keep at least this many snapshots per branch, however old")
	fs.BoolVar(&removeOrphans, "remove-orphans", false, "delete data files no snapshot references, metadata files no table version references, and ledger archive and ranges files the table does not need, older than --orphan-min-age")
	fs.DurationVar(&orphanMinAge, "orphan-min-age", snapshot.DefaultOrphanMinAge, "only delete orphans older than this")
	fs.BoolVar(&dropLost, "drop-missing-dead-letter-files", false, "remove from the dead-letter tables the data files their storage no longer has (deleted outside floe), so that they can be read and reconciled again, and record as lost the dead letters nothing can restore: they are lost for good (see docs/dead-letters.md)")
	fs.BoolVar(&dryRun, "dry-run", false, "print what would be done and change nothing")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	compact.register(fs)
	retention.register(fs)
	return cmd
}

// maintainReport is floe maintain --json: the result (whose field names
// snapshot.MaintainResult documents) with the table and whether it was a
// dry run.
type maintainReport struct {
	Table  string `json:"table"`
	DryRun bool   `json:"dry_run"`
	// SetProperties are the retention properties the run set (or, in a
	// dry run, would set).
	SetProperties map[string]string `json:"set_properties,omitempty"`
	snapshot.MaintainResult
	// Compaction has a result per table compacted (--compact).
	Compaction []compactionReport `json:"compaction,omitempty"`
}

// compactionReport is a compaction's result in floe maintain --json. Took
// gives duration_ns with its unit, as durations are everywhere else
// (duration_ns stays, for the scripts that read it); Summary is the text
// report's line, which says in words when there was nothing to merge.
type compactionReport struct {
	snapshot.CompactResult
	Took    string `json:"took"`
	Summary string `json:"summary"`
}

// compactionReports are results as floe maintain --json gives them.
func compactionReports(results []snapshot.CompactResult, dryRun bool) []compactionReport {
	out := make([]compactionReport, len(results))
	for i, r := range results {
		var line strings.Builder
		printCompaction(&line, []snapshot.CompactResult{r}, dryRun)
		out[i] = compactionReport{CompactResult: r, Took: r.Duration.Round(time.Millisecond).String(), Summary: strings.TrimSpace(line.String())}
	}
	return out
}
