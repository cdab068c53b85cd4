package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/snapshot"
)

func newDropCmd() *cobra.Command {
	var (
		f         tableFlags
		yes       bool
		keepFiles bool
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "drop --table NAMESPACE.TABLE [--keep-files] --yes [--json]",
		Short: "Drop a table and its dead-letter tables, with their files",
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
running it again.`,
		Example: `  floe drop --table lake.ordres               # lists what would go
  floe drop --table lake.ordres --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
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
				return err
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
	fs.BoolVar(&keepFiles, "keep-files", false, "drop the catalog entries only; the tables' files stay under their locations")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of text: dropped (whether anything was) and tables (table, location, files_deleted)")
	return cmd
}
