package main

import (
	"errors"
	"fmt"
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
	)
	cmd := &cobra.Command{
		Use:   "maintain --table NAMESPACE.TABLE [--expire-older-than DURATION] [--retain-last N] [--remove-orphans [--orphan-min-age DURATION]] [--dry-run]",
		Short: "Expire old snapshots without losing the ledger, and delete orphan data files",
		Long: `Expire snapshots (with --expire-older-than and/or --retain-last) and delete orphan data files
(--remove-orphans). The ledger entries of the snapshots an expiry removes are first written to the
table's ledger archive (a JSON file under metadata/floe-ledger/, named by the table property
floe.ledger-archive), and the same catalog commit that removes the snapshots points the table at
it: the sink resumes, audits and lookups read expired commits from it. When the archive cannot be
written, nothing is expired. Branch and tag heads are always kept. A branch's own retention
(min-snapshots-to-keep, max-snapshot-age-ms on the ref) wins over the flags, and a branch or tag
other than main older than its max-ref-age-ms (or history.expire.max-ref-age-ms) is dropped. Run
one maintain per table at a time; a run that finds that an overlapping one replaced its archive
merges the archive files and commits the merge.

Orphans are data files under the table's data location that no snapshot references (a crashed or
fenced writer leaves them). Only files older than --orphan-min-age are deleted: a younger one may
belong to a writer that is about to commit it. A data location (write.data.path) that is not a
folder of the table's own under its location, or that holds the metadata folder, is refused.`,
		Example: `  floe maintain --table lake.orders --expire-older-than 168h --retain-last 100
  floe maintain --table lake.orders --remove-orphans --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			fs := cmd.Flags()
			expire := fs.Changed("expire-older-than") || fs.Changed("retain-last")
			if !expire && !removeOrphans {
				return errors.New("nothing to do: give --expire-older-than, --retain-last or --remove-orphans")
			}
			if olderThan < 0 {
				return fmt.Errorf("--expire-older-than %s: want a non-negative duration", olderThan)
			}
			if retainLast < 1 {
				return fmt.Errorf("--retain-last %d: want at least 1", retainLast)
			}
			if orphanMinAge <= 0 {
				return fmt.Errorf("--orphan-min-age %s: want a positive duration (a younger file may be about to be committed)", orphanMinAge)
			}
			tbl, err := f.open(ctx, snapshot.OpenOptions{})
			if err != nil {
				return err
			}
			res, err := tbl.Maintain(ctx, snapshot.MaintainOptions{
				Expire: expire, ExpireOlderThan: olderThan, RetainLast: retainLast,
				RemoveOrphans: removeOrphans, OrphanMinAge: orphanMinAge, DryRun: dryRun,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			would := ""
			if dryRun {
				would = "would be "
				fmt.Fprintf(out, "dry run: %s is unchanged\n", tbl.Name())
			}
			if expire {
				fmt.Fprintf(out, "snapshots %sexpired: %d (%d floe commits)", would, len(res.Expired), res.ExpiredCommits)
				if len(res.Expired) > 0 {
					fmt.Fprintf(out, ", %d to %d", res.Expired[0], res.Expired[len(res.Expired)-1])
				}
				fmt.Fprintln(out)
				if res.Archive != "" {
					fmt.Fprintf(out, "ledger archive: %s (%d snapshots)\n", res.Archive, res.Archived)
				}
			}
			if removeOrphans {
				fmt.Fprintf(out, "orphan data files %sdeleted: %d (%d bytes, older than %s)\n", would, len(res.Orphans), res.OrphanBytes, orphanMinAge)
				for _, o := range res.Orphans {
					fmt.Fprintf(out, "  %s\n", o)
				}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	f.register(fs)
	fs.DurationVar(&olderThan, "expire-older-than", 0, "expire snapshots older than this (0 with --retain-last: every snapshot beyond the last N)")
	fs.IntVar(&retainLast, "retain-last", 1, "keep at least this many snapshots per branch, however old")
	fs.BoolVar(&removeOrphans, "remove-orphans", false, "delete data files no snapshot references that are older than --orphan-min-age")
	fs.DurationVar(&orphanMinAge, "orphan-min-age", snapshot.DefaultOrphanMinAge, "only delete orphans older than this")
	fs.BoolVar(&dryRun, "dry-run", false, "print what would be done and change nothing")
	return cmd
}
