package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// asOfResult is floe as-of's JSON document: the answer, and with --output
// how many rows went to which file. Its JSON field names are stable.
type asOfResult struct {
	lookup.AsOfResult
	// RowCount and Output are set with --rows --output.
	RowCount *int64 `json:"row_count,omitempty"`
	Output   string `json:"output,omitempty"`
	// Now is set for --time now: each position is its partition's next
	// offset in the table's ledger (source "now").
	Now bool `json:"now,omitempty"`
	// Rebuild is, when an upsert table's state is the boundary below the
	// position, the floe replay command that rebuilds the exact state as
	// of the position into a new table (rebuildCommand).
	Rebuild string `json:"rebuild,omitempty"`
	// rowsFromHeadWith is set, without --rows, when --rows would read
	// the rows of an expired snapshot from the current one
	// (lookup.RowsSnapshot): the text says that --rows exports them.
	rowsFromHeadWith bool
}

// sourceNow is the source of a position of --time now.
const sourceNow = "now"

func newAsOfCmd() *cobra.Command {
	var (
		f       lookupFlags
		offsets string
		at      string
		rows    bool
		output  string
		branch  string
	)
	cmd := &cobra.Command{
		Use:   "as-of --table NAMESPACE.TABLE [--branch NAME] (--offsets TOPIC/P=OFFSET[,...] | --time TIME) [--rows [-o FILE]] [--json]",
		Short: "Find the snapshot at which the table reached a position or a time, and the exact table then",
		Long: `Answer "what did the table look like as of offset N / time T". A position is a cut per partition:
the table as of it holds each named partition's records below the cut's offset (partitions not
named are taken as they are in the answer's snapshot). floe as-of prints the first snapshot at
which every position is covered (snapshot_id), and with --rows the exact table at the position:
that snapshot's rows filtered to offsets below each cut, printed, or written to --output as
Parquet (.parquet), CSV (.csv) or JSON lines (.jsonl, .ndjson, .json). An upsert table changes
commit by commit: its state as of a position is its state at the last commit at or below it (exact
in --json says whether a commit ends there; where none does, floe as-of prints the floe replay
--until the position that rebuilds it exactly, rebuild in --json). After a replay published onto
main (floe replay --branch --publish), main's history begins with the replay's commits: an upsert
table's position below its first boundary there is refused, since the state then is main's before
the publish; --branch TAG answers from a tag of main's earlier history (floe replay --tag-main),
which the refusal names. A snapshot that snapshot expiry removed is still found through the ledger
and said to have expired (expired in --json): --rows of an append table whose schema is still the
position's then reads the current snapshot below the position when it names every partition (the
same rows: floe's commits only add rows; rows_from_head in --json), and is refused otherwise; floe
replay --until rebuilds them.

--time means record time (RFC3339, or a duration back from now: --time 10m is ten minutes ago):
every partition is cut before its first record whose timestamp is at or after it (out-of-order
timestamps included), from the broker's ListOffsets by timestamp when --brokers is given and the
broker still retains what the table holds (on a compacted topic lowered to a record the table holds
that compaction removed), else from the table's own timestamp column. A time in the future is
refused: records at or after it may still arrive, so the table as of it is not known yet. --time
now is the table as it is: each partition at the next offset its ledger records (source now).

In JSON and JSON lines, keys, values and header values are strings when they are valid UTF-8,
null when null, and {"base64": "..."} otherwise. CSV writes null as an empty field.`,
		Example: `  floe as-of --table lake.orders --offsets orders/0=1200,orders/1=950
  floe as-of --table lake.orders --time 2024-05-01T09:00:00Z --rows --output orders-9am.parquet
  floe as-of --table lake.orders --time 2024-05-01T09:00:00Z --brokers localhost:9092 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			if (offsets == "") == (at == "") {
				return errors.New("give exactly one of --offsets TOPIC/P=OFFSET[,...] and --time TIME (RFC3339, a duration back from now, or now: --time now is the table as it is)")
			}
			// Writing the rows is what --output asks for.
			rows = rows || output != ""
			var format lookup.Format
			if output != "" {
				var err error
				if format, err = lookup.FormatOf(output); err != nil {
					return fmt.Errorf("--output %s: %w", output, err)
				}
			}
			q := lookup.AsOfQuery{Offsets: offsets}
			switch at {
			case "", "now":
				// now is the table as it is: each partition at the next
				// offset its ledger records, once the table is open. As a
				// record time it would cut before records stamped ahead
				// of the clock, and with --brokers at the log's end, which
				// a table behind it has not reached (found by review).
			default:
				// A duration is that long ago, as dead-letters --since
				// takes it (a new user's 10m was refused).
				t, _, ok := mapping.ParseWhen(at, time.Now())
				if !ok {
					return fmt.Errorf("--time %q: want %s; or now", at, mapping.TimeForms)
				}
				q.Time = &t
			}
			if at != "now" {
				if err := q.Validate(); err != nil {
					return err
				}
			}
			// A tag is read as a branch is: its ledger is its snapshot's
			// ancestry, the history a publish took off main (--tag-main).
			tbl, err := f.open(ctx, snapshot.OpenOptions{Branch: branch, ReadTag: true})
			if err != nil {
				return err
			}
			defer func() { err = changedWhileRead(ctx, tbl, err) }()
			if at == "now" {
				sum, err := tbl.Summary(ctx, 0)
				if err != nil {
					return fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
				}
				if len(sum.Next()) == 0 {
					if err := lookup.CheckDataTable(tbl, "no table as of a position or time"); err != nil {
						return err
					}
					return fmt.Errorf("%s has sunk nothing yet: it has no rows to show", tbl.Name())
				}
				q.Offsets = mapping.Cut(sum.Next()).String()
			}
			broker, err := f.dialOptional(ctx, true)
			if err != nil {
				return err
			}
			if broker != nil {
				defer broker.Close()
			}
			answer, err := lookup.AsOf(ctx, tbl, broker, q)
			if e, ok := errors.AsType[*lookup.BeforeHistoryError](err); ok {
				e.Rebuild = rebuildCommand(ctx, tbl, e.Cut)
			}
			if err != nil {
				return err
			}
			res := asOfResult{AsOfResult: answer, Now: at == "now"}
			if res.Mode == mapping.ModeUpsert && res.NextSnapshotID != nil {
				// The answer is the boundary below the position: say how
				// to get the state at the position itself, as the refusal
				// of an expired snapshot does (a new user's run).
				res.Rebuild = rebuildCommand(ctx, tbl, positionCut(ctx, tbl, res.AsOfResult))
			}
			if res.Now {
				// Given to the lookup as offsets, they are the table's
				// own (a new user read "the given offsets").
				for i := range res.Positions {
					res.Positions[i].Source = sourceNow
				}
			}
			w := cmd.OutOrStdout()
			if !rows {
				if res.Expired && !f.json {
					// Whether --rows would read them from the current
					// snapshot: the note says so, not that they are gone
					// (a new user's report).
					_, fromHead, err := lookup.RowsSnapshot(ctx, tbl, res.AsOfResult)
					if _, ok := errors.AsType[*lookup.ExpiredError](err); err != nil && !ok {
						return err
					}
					res.rowsFromHeadWith = fromHead
				}
				return printAsOf(w, f.json, res)
			}
			// An upsert table before its first record: no rows. A live
			// snapshot (the start commit) still gives --output its empty
			// file, as an append table's does.
			emptyState := res.Mode == mapping.ModeUpsert && res.Empty &&
				(output == "" || res.SnapshotID == 0 || tbl.Iceberg().Metadata().SnapshotByID(res.SnapshotID) == nil)
			if emptyState {
				if output != "" {
					return fmt.Errorf("--output %s: the state as of the position is the empty table, before its first commit: there are no rows to write", output)
				}
				if f.json {
					zero := int64(0)
					res.RowCount = &zero
					return printAsOf(w, true, res)
				}
				if err := printAsOf(w, false, res); err != nil {
					return err
				}
				_, err := fmt.Fprintln(w, "0 rows")
				return err
			}
			rowsFrom, fromHead, err := lookup.RowsSnapshot(ctx, tbl, res.AsOfResult)
			if e, ok := errors.AsType[*lookup.ExpiredError](err); ok {
				e.Rebuild = rebuildCommand(ctx, tbl, positionCut(ctx, tbl, res.AsOfResult))
			}
			if err != nil {
				return err
			}
			res.RowsFromHead = fromHead
			if err := lookup.ExactAt(ctx, tbl, rowsFrom, res.Cut); err != nil {
				return err
			}
			if output == "" {
				return printAsOfRows(ctx, w, f.json, tbl, rowsFrom, res)
			}
			n, err := lookup.Export(ctx, tbl, rowsFrom, res.Cut, output, format)
			if err != nil {
				return err
			}
			res.RowCount, res.Output = &n, output
			return printAsOf(w, f.json, res)
		},
	}
	f.register(cmd, ": map --time to offsets with ListOffsets by timestamp")
	fs := cmd.Flags()
	fs.StringVar(&offsets, "offsets", "", "position per partition, `TOPIC/P=OFFSET[,...]` (P=OFFSET when the table holds one topic)")
	fs.StringVar(&at, "time", "", "record `TIME`, RFC3339, e.g. 2024-05-01T09:00:00Z, or a duration back from now (10m, 24h); not in the future;\n"+
		"now is the table as it is (each partition at the table's next offset)")
	fs.StringVar(&branch, "branch", "", "answer from this branch's or tag's ledger (default main), such as the tag floe replay --tag-main gave main's history before a publish")
	fs.BoolVar(&rows, "rows", false, "also print (or write to --output) the table's rows as of the position")
	fs.StringVarP(&output, "output", "o", "", "write the rows to this `FILE`: .parquet, .csv, .jsonl/.ndjson/.json (mode 0644); implies --rows")
	return cmd
}

func printAsOf(w io.Writer, asJSON bool, r asOfResult) error {
	if asJSON {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "%s as of ", r.Table)
	switch {
	case r.Now:
		fmt.Fprint(w, "now (each partition at the next offset its ledger records)")
	case r.Time != nil:
		fmt.Fprintf(w, "record time %s", r.Time.Format(time.RFC3339Nano))
	default:
		fmt.Fprint(w, "the given offsets")
	}
	if r.Mode == mapping.ModeUpsert {
		printUpsertAsOf(w, r)
	} else {
		fmt.Fprintf(w, ": snapshot %d, committed %s%s\n", r.SnapshotID, r.CommittedAt.Format(time.RFC3339), expiredNote(r))
		printPositions(w, r.Positions, nil)
		if r.Empty {
			fmt.Fprintln(w, "the table held nothing then: each cut is at or below the first offset the table holds of its partition")
		}
	}
	for _, l := range r.Lost {
		fmt.Fprintf(w, "  lacks %s/%d %v: the ledger records those offsets as lost (retention deleted them before they were sunk)\n",
			l.Topic, l.Partition, mapping.Interval{Low: l.Low, High: l.High})
	}
	if p := r.Published; p != nil {
		printPublished(w, r.Table, r.Positions, *p)
	}
	if r.RowCount != nil {
		fmt.Fprintf(w, "wrote %d rows to %s\n", *r.RowCount, r.Output)
	}
	return nil
}

// printPublished says that the answer holds no rows below where main's
// history begins, a published replay's start: the publish warned, but a
// later as-of answered the replay's rows as the table then, without a
// word of those main may have held below (review s67).
func printPublished(w io.Writer, table string, at []lookup.Position, p lookup.HistoryStart) {
	starts := make([]string, len(p.Starts))
	for i, s := range p.Starts {
		starts[i] = fmt.Sprintf("%s/%d below %d", s.Topic, s.Partition, s.Offset)
	}
	fmt.Fprintf(w, "  lacks %s: main's history begins with the replay published from branch %s, which began there; rows main may have held below before the publish are not in it\n",
		strings.Join(starts, ", "), p.Branch)
	cut := mapping.Cut{}
	for _, pos := range at {
		cut[mapping.TopicPartition{Topic: pos.Topic, Partition: pos.Partition}] = pos.Offset
	}
	for _, tag := range p.Tags {
		fmt.Fprintf(w, "  tag %s holds main's history before the publish: floe as-of --table %s --branch %s --offsets %s\n", tag, table, tag, cut)
	}
}

// expiredNote says that the snapshot of r has expired, and what of its
// rows, or nothing.
func expiredNote(r asOfResult) string {
	const same = "its rows are the current snapshot's below the position, the same rows, since floe's commits only add rows to the table"
	const others = "; a writer other than floe that removed some since would show in floe audit"
	switch {
	case !r.Expired:
		return ""
	case r.RowsFromHead:
		return expiredSnapshot(same + others)
	case r.rowsFromHeadWith:
		return expiredSnapshot(same + ", and --rows exports them" + others)
	}
	return expiredSnapshot("the table no longer holds its rows; floe replay --until the position rebuilds them")
}

// expiredSnapshot is the note that follows the id of a snapshot that
// expired, in floe as-of and floe where: that snapshot expiry removed it
// (the ledger still names it), and then what, of its rows, that means.
func expiredSnapshot(what string) string {
	return " (expired: snapshot expiry removed it; " + what + ")"
}

// printUpsertAsOf prints the state of an upsert table as of a position:
// the commit boundary it stands on, and, when that is below the position,
// why.
func printUpsertAsOf(w io.Writer, r asOfResult) {
	if r.Empty {
		fmt.Fprintln(w, ": the empty table, before its first record")
	} else {
		fmt.Fprintf(w, ": the state at snapshot %d, committed %s%s\n", r.SnapshotID, r.CommittedAt.Format(time.RFC3339), expiredNote(r))
	}
	if len(r.Compacted) > 0 {
		fmt.Fprintf(w, "  not exact: %s compacts, and the broker's time index does not see a record compaction removed; one stamped at or after the time would cut lower, so this state may hold changes made at or after it (--offsets gives an exact position)\n",
			strings.Join(r.Compacted, ", "))
	}
	printPositions(w, r.Positions, r.Boundary)
	if r.NextSnapshotID != nil {
		fmt.Fprintf(w, "an upsert table changes commit by commit, and the next commit, snapshot %d, reaches past the position: the state as of the position is the state at the boundary below it, which holds no record at or past the position\n", *r.NextSnapshotID)
	}
	if r.Rebuild != "" {
		fmt.Fprintf(w, "rebuild the exact state as of the position into a new table with: %s\n", r.Rebuild)
	}
}

// printAsOfRows prints the summary and the rows of snapshot rowsFrom below
// the position: as one JSON document with a rows array, or as text lines.
func printAsOfRows(ctx context.Context, w io.Writer, asJSON bool, tbl *snapshot.Table, rowsFrom int64, r asOfResult) error {
	bw := bufio.NewWriter(w)
	var n int64
	if asJSON {
		head, err := lookup.MarshalJSON(r)
		if err != nil {
			return err
		}
		bw.Write(head[:len(head)-1])
		bw.WriteString(`,"rows":[`)
		err = lookup.JSONRows(ctx, tbl, rowsFrom, r.Cut, func(row []byte) error {
			if n > 0 {
				bw.WriteByte(',')
			}
			n++
			bw.WriteString("\n")
			bw.Write(row)
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, "\n],\"row_count\":%d}\n", n)
		return bw.Flush()
	}
	if err := printAsOf(bw, false, r); err != nil {
		return err
	}
	if tbl.Layout() != mapping.RawLayout {
		// A typed table's columns are the value's: one JSON object a row.
		err := lookup.JSONRows(ctx, tbl, rowsFrom, r.Cut, func(row []byte) error {
			n++
			bw.Write(row)
			return bw.WriteByte('\n')
		})
		if err != nil {
			return err
		}
		fmt.Fprintln(bw, plural(int(n), "row"))
		return bw.Flush()
	}
	fmt.Fprintf(bw, "%-16s %-9s %-10s %-24s %-20s %s\n", "TOPIC", "PARTITION", "OFFSET", "TIMESTAMP", "KEY", "VALUE")
	err := lookup.Rows(ctx, tbl, rowsFrom, r.Cut, func(row lookup.Row) error {
		n++
		fmt.Fprintf(bw, "%-16s %-9d %-10d %-24s %-20s %s\n", row.Topic, row.Partition, row.Offset,
			row.Timestamp.Format(time.RFC3339Nano), clip(row.Key.Text(), 20), clip(row.Value.Text(), 80))
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(bw, plural(int(n), "row"))
	return bw.Flush()
}

// positionCut is the position of answer r as a replay's --until: its
// positions, and the partitions it leaves out as the answer's snapshot has
// them. The replay stops there too, where --until without them took them
// to the log's end (a new user's report: the rebuilt table was not the
// table as of the position).
func positionCut(ctx context.Context, tbl *snapshot.Table, r lookup.AsOfResult) mapping.Cut {
	cut := mapping.Cut{}
	for _, p := range r.Positions {
		cut[mapping.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.Offset
	}
	if r.SnapshotID == 0 {
		return cut
	}
	if sum, err := tbl.SummaryOf(ctx, r.SnapshotID); err == nil {
		for tp, next := range sum.Next() {
			if _, named := cut[tp]; !named {
				cut[tp] = next
			}
		}
	}
	return cut
}

// rebuildCommand is the floe replay command that rebuilds tbl as of cut
// into a new table, TABLE_at (TABLE_at_2, _3, ... when the catalog has a
// table of that name, an earlier rebuild's, which the replay would
// refuse): the cut's topic, --until the cut and --like tbl, as a replay
// into a new table does not take tbl's layout and partition spec
// otherwise (the layout flags alone left a bucketed table's rebuild
// unpartitioned). A replay reads one topic into a new table: a cut of
// several topics gets one command per topic, each into a table of its
// own.
func rebuildCommand(ctx context.Context, tbl *snapshot.Table, cut mapping.Cut) string {
	until := map[string][]string{}
	for _, tp := range slices.SortedFunc(maps.Keys(cut), mapping.TopicPartition.Compare) {
		until[tp.Topic] = append(until[tp.Topic], fmt.Sprintf("%d=%d", tp.Partition, cut[tp]))
	}
	topics := slices.Sorted(maps.Keys(until))
	layout := "--like " + tbl.Name()
	cmds := make([]string, 0, len(topics))
	for _, topic := range topics {
		base := tbl.Name() + "_at"
		if len(topics) > 1 {
			base += "_" + strings.ReplaceAll(topic, ".", "_")
		}
		name := freeTableName(ctx, tbl.Catalog(), base)
		cmds = append(cmds, fmt.Sprintf("floe replay -t %s --table %s --until %s %s", topic, name, strings.Join(until[topic], ","), layout))
	}
	return strings.Join(cmds, "; ")
}

// freeTableName is base, or base_2, base_3, ... the first of them the
// catalog has no table of (base when it cannot tell).
func freeTableName(ctx context.Context, cat icecat.Catalog, base string) string {
	for n := 1; n < 100; n++ {
		name := base
		if n > 1 {
			name = fmt.Sprintf("%s_%d", base, n)
		}
		ident, err := catalog.ParseIdent(name)
		if err != nil {
			return base
		}
		exists, err := cat.CheckTableExists(ctx, ident)
		if err != nil {
			return base
		}
		if !exists {
			return name
		}
	}
	return base
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// printPositions prints the cuts of an as-of answer, one line each, with,
// for an upsert table (boundary), the commit boundary each stands on. The
// cuts floe found itself (now, a record time) of more than
// maxListedPositions partitions that need no more words (on a boundary,
// or an append table's) are summarised per source and topic, as a run's
// next offsets are: as-of --time now of a 500-partition topic printed 500
// lines before its answer (a user's run); --json lists each.
func printPositions(w io.Writer, positions, boundary []lookup.Position) {
	plain := map[string]map[mapping.TopicPartition]int64{} // by source
	for i, p := range positions {
		if p.Source != lookup.SourceGiven && (boundary == nil || boundary[i].Offset == p.Offset) {
			if plain[p.Source] == nil {
				plain[p.Source] = map[mapping.TopicPartition]int64{}
			}
			plain[p.Source][mapping.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.Offset
		}
	}
	summarised := func(p lookup.Position) bool {
		return len(plain[p.Source]) > maxListedPositions && p.Source != lookup.SourceGiven
	}
	for i, p := range positions {
		switch {
		case summarised(p) && (boundary == nil || boundary[i].Offset == p.Offset):
		case boundary == nil:
			fmt.Fprintf(w, "  %s/%d below offset %d (%s)\n", p.Topic, p.Partition, p.Offset, p.Source)
		case boundary[i].Offset == p.Offset:
			fmt.Fprintf(w, "  %s/%d below offset %d (%s): a commit boundary\n", p.Topic, p.Partition, p.Offset, p.Source)
		default:
			fmt.Fprintf(w, "  %s/%d below offset %d (%s): the commit boundary at or below it is offset %d\n", p.Topic, p.Partition, p.Offset, p.Source, boundary[i].Offset)
		}
	}
	for _, source := range slices.Sorted(maps.Keys(plain)) {
		if len(plain[source]) <= maxListedPositions {
			continue
		}
		note := ""
		if boundary != nil {
			note = ", each a commit boundary"
		}
		for _, r := range byTopic(plain[source]) {
			fmt.Fprintf(w, "  %s below offsets %d to %d (%s)%s; --json lists each partition\n", r, r.lo, r.hi, source, note)
		}
	}
}
