package main

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/internal/text"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

func newFilesCmd() *cobra.Command {
	var (
		f          tableFlags
		snapshotID int64
		branch     string
		asJSON     bool
		check      bool
	)
	cmd := &cobra.Command{
		Use:   "files --table NAMESPACE.TABLE [--snapshot ID | --branch NAME] [--check] [--json]",
		Short: "List the data files of the table's current snapshot, for readers without Iceberg support",
		Long: `List the Parquet data files that make up the table's current snapshot (or --snapshot ID): per
file its path, the Kafka topic and partition of its rows, their offsets [low, high) (the text
shows [smallest, largest+1), the JSON min_offset and max_offset, both inclusive), the row
count and the size,
from the manifests (no data is read). A file that holds rows of several Kafka partitions (a commit
writes the small partitions of a flush into shared files; compaction merges small files across
partitions) is one of a file group: the text shows its partitions (when they do not fit in a
column, how many and the range they lie in: "441 partitions in 0-499") and "(group of N files, M
spans)", the JSON its group's spans, the offsets [low, high) of each partition that the group's
files together hold. A reader without Iceberg support
(DuckDB without its iceberg extension, pandas, Spark's plain Parquet reader) that reads exactly
these files sees exactly the snapshot. --branch lists the files of a branch's head instead of
main's: a floe replay --branch's, before it is published; or a tag's snapshot, read only, such
as the one floe replay --tag-main gave main's history before a publish.

Do not read every file of the table's data folder instead: the folder also holds files that are
not part of the snapshot (orphans of writers that were fenced or crashed before their commit,
files of other branches that floe replay --branch wrote, and files that a state table's fold or a
published replay replaced, kept until floe maintain expires their snapshots), so a glob such as
data/*.parquet counts rows twice or reads rows that were never committed.

A snapshot with row-level delete files lists them too, after its data files (delete_files in
JSON): rows of its data files may be deleted by them, so reading the data files alone gives rows
the table no longer holds. An upsert table (docs/upsert.md) has them after most commits (its
equality deletes): floe maintain --compact applies them in a new snapshot without delete files,
until a sink commits deletes again; its merged files hold rows of several Kafka partitions, shown
as the range of partitions and "(several partitions, compacted)" (JSON: min_partition,
max_partition and compacted; another engine's file of several partitions is "(several
partitions)"). A table of another mode has delete files only when another engine wrote them.

The manifests still list a file deleted from the storage behind floe's back (an aws s3 rm, a
lifecycle rule). --check looks for every listed file, data and delete files, in the storage (one
request per file), marks those it lacks "missing from storage" (JSON: "missing": true) and then
fails (exit 2) naming the ways out; when the storage has them all, the text ends saying so.`,
		Example: `  floe files --table lake.orders
  floe files --table lake.orders --json | jq -r '.files[].path'
  floe files --config ./floe-local/floe.yaml --table lake.orders --snapshot 3051729675574597004`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			if snapshotID != 0 && branch != "" {
				return errors.New("--snapshot names the snapshot to list, --branch the branch or tag whose head is listed: give one")
			}
			// A tag is read as a branch is, its snapshot its head.
			tbl, err := f.open(ctx, snapshot.OpenOptions{Branch: branch, ReadTag: true})
			if err != nil {
				return err
			}
			defer func() { err = changedWhileRead(ctx, tbl, err) }()
			res, err := lookup.Files(ctx, tbl, snapshotID)
			if err != nil {
				return err
			}
			var missing []string
			if check {
				if missing, err = res.Check(ctx, tbl); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			// Data files and, of an upsert table, delete files.
			noun, all := "data file", len(res.Files)
			if len(res.DeleteFiles) > 0 {
				noun, all = "data and delete file", all+len(res.DeleteFiles)
			}
			if asJSON {
				err = printJSON(w, res)
			} else {
				printFiles(w, res)
				if check && len(missing) == 0 && all > 0 {
					// Said: a listing alone does not tell that the files
					// were looked for (a new-user run could not tell).
					if all == 1 {
						fmt.Fprintf(w, "checked: the storage has the one %s\n", noun)
					} else {
						fmt.Fprintf(w, "checked: the storage has every one of the %s\n", plural(all, noun))
					}
				}
			}
			if err == nil && len(missing) > 0 {
				gone := fmt.Sprintf("%d of the %s are gone", len(missing), plural(all, noun))
				switch {
				case all == 1:
					gone = "the one data file is gone"
				case len(missing) == 1:
					gone = fmt.Sprintf("1 of the %s is gone", plural(all, noun))
				}
				// Named by a data file when one is gone; a delete file alone
				// is said to be one (it cannot be dropped: review s62).
				first := &snapshot.DataFileGoneError{Table: tbl.Name(), Path: missing[0], Delete: true, Err: iofs.ErrNotExist}
				for _, f := range res.Files {
					if slices.Contains(missing, f.Path) {
						first.Path, first.Delete = f.Path, false
						break
					}
				}
				err = fmt.Errorf("%s from the storage of %s (deleted outside floe): %w", gone, tbl.Name(), first)
			}
			return err
		},
	}
	fs := cmd.Flags()
	f.register(fs)
	fs.Int64Var(&snapshotID, "snapshot", 0, "list the files of this snapshot instead of the current one")
	fs.StringVar(&branch, "branch", "", "list the files of this branch's head or tag's snapshot (default main's), such as the tag floe replay --tag-main gave main's history before a publish")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	fs.BoolVar(&check, "check", false, "look for every file in the storage (one request per file) and fail naming those it no longer has")
	return cmd
}

func printFiles(w io.Writer, r lookup.FilesResult) {
	if r.SnapshotID == nil {
		fmt.Fprintf(w, "%s has no snapshot yet: no data files\n", r.Table)
		return
	}
	rows := plural(int(r.Records), "row")
	if len(r.DeleteFiles) > 0 {
		rows += " before deletes"
	}
	fmt.Fprintf(w, "%s snapshot %d, committed %s: %s, %s, %s", r.Table, *r.SnapshotID,
		r.CommittedAt.Format(time.RFC3339), plural(len(r.Files), "data file"), rows, humanize.IBytes(uint64(r.SizeBytes)))
	if len(r.DeleteFiles) > 0 {
		fmt.Fprintf(w, "; and %s", plural(len(r.DeleteFiles), "delete file"))
	}
	fmt.Fprintln(w)
	defer printDeleteFiles(w, r)
	if len(r.Files) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSETS\tROWS\tBYTES\tPATH")
	opt := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, f := range r.Files {
		topic, part, offsets := opt(f.Topic), "-", "-"
		switch {
		case f.Group != nil:
			topic, part = groupPartitions(f.Group.Spans)
			spans := "1 span"
			if n := len(f.Group.Spans); n != 1 {
				spans = humanize.Comma(int64(n)) + " spans"
			}
			offsets = fmt.Sprintf("(group of %s, %s)", plural(f.Group.Files, "file"), spans)
		case f.Partition != nil:
			part = strconv.Itoa(int(*f.Partition))
			// Half-open like every range floe prints: the file's rows lie
			// in [smallest, largest+1).
			offsets = fmt.Sprintf("[%d, %d)", *f.MinOffset, *f.MaxOffset+1)
		case f.MinPartition != nil:
			// Merged across partitions by a compaction that applied
			// deletes, or another engine's: no offsets of one partition
			// to give.
			part = fmt.Sprintf("%d-%d", *f.MinPartition, *f.MaxPartition)
			offsets = "(several partitions)"
			if f.Compacted {
				offsets = "(several partitions, compacted)"
			}
		}
		path := f.Path
		if f.Missing {
			path += "  (missing from storage)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", topic, part, offsets, f.Records, f.SizeBytes, path)
	}
	tw.Flush()
	printGroupSpans(w, r.Files)
}

// printDeleteFiles says that r's snapshot has row-level delete files,
// what that means for a reader of its data files alone, and lists them.
func printDeleteFiles(w io.Writer, r lookup.FilesResult) {
	if len(r.DeleteFiles) == 0 {
		return
	}
	whose := "written by another engine"
	if r.Upsert {
		whose = "the deletes of an upsert table"
	}
	fmt.Fprintf(w, "\nthe snapshot also has %s (%s): rows of the data files above may be deleted by them, so reading those files alone gives rows the table no longer holds; read the table with an Iceberg reader",
		plural(len(r.DeleteFiles), "row-level delete file"), whose)
	if r.Upsert {
		fmt.Fprintf(w, ", or run floe maintain --table %s --compact, which applies the deletes in a new snapshot without delete files (until a sink commits deletes again)", r.Table)
	}
	fmt.Fprintln(w, ":")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tDELETES\tBYTES\tPATH")
	for _, d := range r.DeleteFiles {
		path := d.Path
		if d.Missing {
			path += "  (missing from storage)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", strings.ReplaceAll(d.Kind, "_", " "), d.Records, d.SizeBytes, path)
	}
	tw.Flush()
}

// maxTextSpans bounds the spans printed of one file group; --json has all.
const maxTextSpans = 16

// printGroupSpans prints, under the table, the offsets of each partition a
// file group's files hold, where the table could give them no column.
func printGroupSpans(w io.Writer, files []lookup.File) {
	header := false
	for _, f := range files {
		if f.Group == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nthe offsets [low, high) each partition has in a file group (all of its files together):")
			header = true
		}
		spans := make([]string, 0, min(len(f.Group.Spans), maxTextSpans))
		for _, sp := range f.Group.Spans[:min(len(f.Group.Spans), maxTextSpans)] {
			spans = append(spans, fmt.Sprintf("%s/%d [%d, %d)", sp.Topic, sp.Partition, sp.Low, sp.High))
		}
		line := strings.Join(spans, "  ")
		if more := len(f.Group.Spans) - len(spans); more > 0 {
			line += fmt.Sprintf("  and %s more (--json lists every span)", humanize.Comma(int64(more)))
		}
		fmt.Fprintf(w, "  %s\n    %s\n", f.Path, line)
	}
}

// maxPartitionsText bounds the PARTITION column of a file group in floe
// files' text: a longer list of runs is said as a count and a range.
const maxPartitionsText = 40

// groupPartitions names the topics and the partitions of a file group's
// spans: "orders" and "0-999", or "a,b" and "0-3,7" (runs of consecutive
// partitions joined); runs longer than maxPartitionsText are "441
// partitions in 0-499" (a group of a flush of a wide topic, whose
// partitions skip some: its list padded every row of the table to
// hundreds of columns, found by a user; --json and the spans under the
// table name each).
func groupPartitions(spans []lookup.Span) (topics, partitions string) {
	var ts []string
	var ps []int32
	for _, s := range spans {
		if !slices.Contains(ts, s.Topic) {
			ts = append(ts, s.Topic)
		}
		if !slices.Contains(ps, s.Partition) {
			ps = append(ps, s.Partition)
		}
	}
	slices.Sort(ps)
	list := text.Ranges(ps)
	if len(list) > maxPartitionsText {
		list = fmt.Sprintf("%s partitions in %d-%d", humanize.Comma(int64(len(ps))), ps[0], ps[len(ps)-1])
	}
	return strings.Join(ts, ","), list
}
