package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

func newDropCmd() *cobra.Command {
	var (
		f         tableFlags
		yes       bool
		keepFiles bool
		asJSON    bool
		branch    string
		tag       string
	)
	cmd := &cobra.Command{
		Use:   "drop --table NAMESPACE.TABLE [--branch NAME|--tag NAME] [--keep-files] --yes [--json]",
		Short: "Drop a table and its dead-letter tables, with their files, or a branch or tag of it",
		Long: `Drop a table from the catalog with its dead-letter tables (the default one, those its ledger
names, those it recorded and its replay branches' tables), and delete their files (data,
metadata, ledger archive) where the catalog can (SQLite, PostgreSQL, Glue, REST); --keep-files
drops the catalog entries only, and the files stay under the tables' locations. A table created
by mistake (a typo in --table) or whose topic is gone for good is what it is for; nothing can
undo it.

Without --yes it lists what it would drop and drops nothing (exit 2); a table committed to in the
last ten minutes is named, with or without --yes, as a sink may still be writing it. A
dead-letter table is refused while its data table exists (drop the data table), and dropped
alone once that is gone. A table another tool created and floe never wrote is refused: drop it
with that tool. A drop cut short (the dead-letter tables go first) is finished by
running it again.

--branch NAME drops a branch of the table instead, such as a replay's (floe replay --branch) once
abandoned or published, and --tag NAME a tag, such as the one floe replay --tag-main made: one
commit removes the ref, and the next floe maintain expires the snapshots only it kept, by its
retention rules, and deletes their files. main is refused. The branch's dead-letter table (a
replay's TABLE_BRANCH_dlq) is dropped with it, unless another branch's or tag's ledger names it:
a published branch's commits are main's, and main keeps their dead letters (the output says
what keeps each table that stays). A branch a publish is
swapping onto main is refused until the publish ends; one committed to in the last ten minutes
is named, as a replay may still be writing it.`,
		Example: `  floe drop --table lake.ordres               # lists what would go
  floe drop --table lake.ordres --yes
  floe drop --table lake.orders --branch rebuild --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if branch != "" && tag != "" {
				return errors.New("--branch and --tag: name one ref to drop")
			}
			if branch != "" || tag != "" {
				return dropRef(cmd, f, branch, tag, snapshot.DropRefOptions{KeepFiles: keepFiles, DryRun: !yes}, asJSON)
			}
			cat, ident, err := f.tableCatalog(ctx, false)
			if err != nil {
				return err
			}
			// A sink may still be writing it (an operator dropped a table 3 s
			// after its last commit without a word): said before a drop,
			// and after the listing without --yes.
			var recent string
			// Not of a dead-letter table, whose drop is refused (its data
			// table's drops it): the warning came before the refusal.
			if t, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{}); err == nil && t.Head() != nil && t.Iceberg().Properties()[snapshot.PropDeadLettersOf] == "" {
				if ago := time.Since(time.UnixMilli(t.Head().TimestampMs)); ago < 10*time.Minute {
					recent = fmt.Sprintf("%s was last committed %s ago", t.Name(), ago.Round(time.Second))
				}
			}
			if yes && recent != "" {
				slog.Warn(recent + ": a sink still writing it stops at its next commit, finding the table gone")
			}
			dropped, err := snapshot.Drop(ctx, cat, ident, snapshot.DropOptions{KeepFiles: keepFiles, DryRun: !yes})
			if err != nil && len(dropped) == 0 {
				return f.notFound(ctx, cat, err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				printJSONLine(out, map[string]any{"dropped": yes, "tables": dropped})
			} else {
				for _, d := range dropped {
					switch {
					case !yes:
						fmt.Fprintf(out, "would drop %s (%s)\n", d.Table, d.Location)
					case d.FilesDeleted:
						fmt.Fprintf(out, "dropped %s and deleted its files (%s)\n", d.Table, d.Location)
					default:
						fmt.Fprintf(out, "dropped %s; its files stay in %s\n", d.Table, d.Location)
					}
				}
			}
			if err != nil {
				return err
			}
			if !yes {
				if recent != "" && !asJSON {
					fmt.Fprintf(out, "%s: stop the sinks that write it before dropping it\n", recent)
				}
				names := make([]string, len(dropped))
				for i, d := range dropped {
					names[i] = d.Table
				}
				return errors.New("nothing dropped: dropping " + strings.Join(names, " and ") + " cannot be undone; pass --yes to drop")
			}
			return nil
		},
	}
	fs := cmd.Flags()
	f.register(fs)
	fs.BoolVar(&yes, "yes", false, "drop: without it, the command lists what it would drop")
	fs.StringVar(&branch, "branch", "", "drop this branch of the table (and its own dead-letter table), not the table")
	fs.StringVar(&tag, "tag", "", "drop this tag of the table, not the table")
	fs.BoolVar(&keepFiles, "keep-files", false, "drop the catalog entries only; the tables' files stay under their locations")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of text: dropped (whether anything was) and tables (table, location, files_deleted); with --branch or --tag, table, ref, published, dead_letter_tables and kept_dead_letter_tables")
	return cmd
}

// dropRef is floe drop --branch or --tag: it drops the ref, or without
// opts.DryRun lists what it would drop (exit 2).
func dropRef(cmd *cobra.Command, f tableFlags, branch, tag string, opts snapshot.DropRefOptions, asJSON bool) error {
	ctx := cmd.Context()
	t, err := f.open(ctx, snapshot.OpenOptions{})
	if err != nil {
		return err
	}
	name, kind := branch, "branch"
	if tag != "" {
		name, kind, opts.Tag = tag, "tag", true
	} else {
		opts.Properties = replay.BranchProperties(branch)
	}
	// A replay may still be writing the branch: said before a drop, and
	// after the listing without --yes (tags are never written). Not of
	// main, which is refused, nor of a branch whose head its replay
	// published: that replay has ended (both from a new-user run, the
	// second the documented publish-then-drop).
	var recent string
	published := t.Iceberg().Properties()[snapshot.PropPublished+branch]
	for _, r := range t.Refs() {
		if r.Name == branch && r.Name != table.MainBranch && r.Kind == snapshot.RefBranch && r.CommittedAt != nil && published != strconv.FormatInt(r.SnapshotID, 10) {
			if ago := time.Since(*r.CommittedAt); ago < 10*time.Minute {
				recent = fmt.Sprintf("branch %s of %s was last committed %s ago", branch, t.Name(), ago.Round(time.Second))
			}
		}
	}
	if !opts.DryRun && recent != "" {
		slog.Warn(recent + ": a replay still writing it fails at its next commit, or writes the branch again")
	}
	d, err := t.DropRef(ctx, slog.Default(), name, opts)
	if err != nil && d.Table == "" {
		return err
	}
	out := cmd.OutOrStdout()
	if asJSON {
		printJSONLine(out, struct {
			Dropped bool `json:"dropped"`
			snapshot.DroppedRef
		}{!opts.DryRun && !d.NothingLeft(), d})
	} else {
		printDroppedRef(out, d, opts.DryRun)
	}
	if err != nil {
		return err
	}
	if opts.DryRun && !d.NothingLeft() {
		if recent != "" && !asJSON {
			fmt.Fprintf(out, "%s: stop the replay that writes it before dropping it\n", recent)
		}
		what := kind + " " + name + " of " + t.Name()
		for _, dlq := range d.DeadLetterTables {
			what += " and " + dlq.Table
		}
		return errors.New("nothing dropped: dropping " + what + " cannot be undone; pass --yes to drop")
	}
	return nil
}

// printDroppedRef prints what floe drop --branch or --tag dropped, or
// would drop in a dry run.
func printDroppedRef(w io.Writer, d snapshot.DroppedRef, dryRun bool) {
	ref := fmt.Sprintf("%s %s of %s", d.Ref.Kind, d.Ref.Name, d.Table)
	at := ""
	if d.Ref.CommittedAt != nil {
		at = ", committed " + d.Ref.CommittedAt.Format(time.RFC3339)
	}
	switch {
	case d.NothingLeft():
		fmt.Fprintf(w, "%s was dropped before: nothing of it is left to drop\n", ref)
	case d.Gone:
		fmt.Fprintf(w, "%s was dropped before, its drop cut short: finishing it\n", ref)
	case dryRun:
		fmt.Fprintf(w, "would drop %s (snapshot %d%s)\n", ref, d.Ref.SnapshotID, at)
	default:
		fmt.Fprintf(w, "dropped %s (snapshot %d%s)\n", ref, d.Ref.SnapshotID, at)
	}
	if d.Published {
		fmt.Fprintf(w, "  it was published as main: main keeps its commits, their dead letters and the history they began\n")
	}
	for _, dlq := range d.DeadLetterTables {
		switch {
		case dryRun:
			fmt.Fprintf(w, "would drop %s, the branch's dead-letter table (%s)\n", dlq.Table, dlq.Location)
		case dlq.FilesDeleted:
			fmt.Fprintf(w, "dropped %s, the branch's dead-letter table, and deleted its files (%s)\n", dlq.Table, dlq.Location)
		default:
			fmt.Fprintf(w, "dropped %s, the branch's dead-letter table; its files stay in %s\n", dlq.Table, dlq.Location)
		}
	}
	for _, n := range d.KeptDeadLetterTables {
		fmt.Fprintf(w, "  %s stays: %s (the same drop run again drops it once that no longer holds)\n", n, strings.Join(d.KeptBecause[n], "; "))
	}
	if !d.Gone && !dryRun {
		fmt.Fprintf(w, "  the snapshots only the %s kept are expired, and their files deleted, by the next floe maintain past its retention (--expire-older-than)\n", d.Ref.Kind)
	}
}
