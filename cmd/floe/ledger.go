package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/internal/text"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

func newLedgerCmd() *cobra.Command {
	var (
		f         tableFlags
		branch    string
		topic     string
		partition int32
		last      int
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "ledger --table NAMESPACE.TABLE [--branch NAME] [--topic TOPIC] [--partition P] [--last N] [--json]",
		Short: "Print the table's ledger: the Kafka offset ranges each snapshot committed",
		Long: `Print the ledger of the table (docs/concepts.md): each floe commit, oldest first, with its
snapshot, commit time and the offset ranges [low, high) it committed per partition, with the
records of each that became rows; then per partition the first offset the ledger covers, the next
one (where a sink resumes), its ranges and rows. A range reads P:[low, high) ROWS; a start (where
a sink began a partition, before it sank anything of it) P:start@OFFSET; offsets that retention
deleted before they were sunk P:[low, high) LOST, or DELETED-ABORTED when they held only aborted
transactions' records. A commit of more than 8 ranges (a wide topic's) is summarised per topic:
its partitions, ranges and rows, then its LOST and DELETED-ABORTED ranges. An upsert table's
ledger counts its records as floe audit does, by what they did to their keys: P:[low, high)
N upserts, D deletes, S skipped (rows are one per key). Commits whose
snapshots expired are read from the ledger's archive, a block at a time: the ledger of a table
of any age prints in bounded memory.

--topic and --partition keep the commits with ranges of that topic or partition, and only those
ranges; --last keeps the newest N commits. A table of several topics names each range's topic
(orders/0:[0, 40) 40). --branch reads a branch's ledger (a floe replay
--branch's, before it is published) or a tag's. --json prints one JSON document: commits (with
each commit's id, writer and dead-letter files) and partitions (records, and an upsert table's
deletes and skipped records).`,
		Example: `  floe ledger --table lake.orders
  floe ledger --table lake.orders --partition 0 --last 20
  floe ledger --table lake.orders --json | jq '.partitions'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			if last < 0 {
				return fmt.Errorf("--last %d: want a number of commits, or 0 for all", last)
			}
			// A tag is read as a branch is, its snapshot its head.
			tbl, err := f.open(ctx, snapshot.OpenOptions{Branch: branch, ReadTag: true})
			if err != nil {
				return err
			}
			defer func() { err = changedWhileRead(ctx, tbl, err) }()
			sel := ledgerSelection{topic: topic, last: last}
			if cmd.Flags().Changed("partition") {
				sel.partition = &partition
			}
			sum, err := tbl.Summary(ctx, 0)
			if err != nil {
				return fmt.Errorf("summarise the ledger of %s: %w", tbl.Name(), err)
			}
			if err := sel.check(tbl, sum); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printLedgerJSON(ctx, w, tbl, sum, sel)
			}
			return printLedger(ctx, w, tbl, sum, sel)
		},
	}
	fs := cmd.Flags()
	f.register(fs)
	fs.StringVar(&branch, "branch", "", "print the ledger of this branch or tag (default main), such as a floe replay --branch's before it is published")
	topicFlag(fs, &topic, "print the ranges of this topic only")
	fs.Int32Var(&partition, "partition", 0, "print the ranges of partition `P` only")
	fs.IntVar(&last, "last", 0, "print the newest `N` commits only (0: all); the per-partition lines cover every one")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

// ledgerSelection is what floe ledger prints of a ledger: the ranges of a
// topic and a partition (nil: every one), of the newest last commits (0:
// all).
type ledgerSelection struct {
	topic     string
	partition *int32
	last      int
}

// check refuses a selection that keeps nothing of tbl's ledger, whose
// summary is sum (a misspelt --topic printed an empty ledger of 0 rows),
// naming what the ledger holds.
func (s ledgerSelection) check(tbl *snapshot.Table, sum mapping.Summary) error {
	if s.topic == "" && s.partition == nil {
		return nil
	}
	var parts []string
	for _, tp := range sum.Partitions() {
		if s.keeps(tp) {
			return nil
		}
		if s.topic == "" && len(sum.Topics()) > 1 {
			parts = append(parts, tp.String())
		} else if s.topic == "" || tp.Topic == s.topic {
			parts = append(parts, fmt.Sprint(tp.Partition))
		}
	}
	if s.topic != "" && !slices.Contains(sum.Topics(), s.topic) {
		return fmt.Errorf("--topic %s: the ledger of %s holds no range of it; its topics: %s", s.topic, tbl.Name(), strings.Join(sum.Topics(), ", "))
	}
	return fmt.Errorf("--partition %d: the ledger of %s holds no range of it; its partitions: %s", *s.partition, tbl.Name(), strings.Join(parts, ", "))
}

func (s ledgerSelection) keeps(tp mapping.TopicPartition) bool {
	return (s.topic == "" || tp.Topic == s.topic) && (s.partition == nil || tp.Partition == *s.partition)
}

// commits yields the commits of tbl's ledger that s keeps, oldest first,
// each with only the ranges s keeps. With last, it holds that many
// commits; otherwise one archive block's at most (snapshot.Table.Commits).
func (s ledgerSelection) commits(ctx context.Context, tbl *snapshot.Table, yield func(mapping.Commit) error) error {
	var newest []mapping.Commit
	for c, err := range tbl.Commits(ctx, 0) {
		if err != nil {
			return fmt.Errorf("read the ledger of %s: %w", tbl.Name(), err)
		}
		kept := c.Ranges[:0:0]
		for _, r := range c.Ranges {
			if s.keeps(r.TopicPartition) {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			continue
		}
		c.Ranges = kept
		if s.last == 0 {
			if err := yield(c); err != nil {
				return err
			}
			continue
		}
		if len(newest) == s.last {
			newest = append(newest[:0], newest[1:]...)
		}
		newest = append(newest, c)
	}
	for _, c := range newest {
		if err := yield(c); err != nil {
			return err
		}
	}
	return nil
}

// printLedger prints each commit s keeps with its ranges, then a line per
// partition s keeps from the ledger's summary sum: floe ledger, and the
// demo.
func printLedger(ctx context.Context, w io.Writer, tbl *snapshot.Table, sum mapping.Summary, s ledgerSelection) error {
	// A table of several topics names each range's topic.
	topics := len(sum.Topics()) > 1
	// An upsert table's records are no rows: it keeps one per key, and
	// its deletes were left out (from a new user's run, whose floe audit
	// said UPSERTS and DELETES of the same table).
	upsert := tbl.Mode() == mapping.ModeUpsert
	counted := "rows"
	if upsert {
		counted = "upserts, deletes, skipped"
	}
	fmt.Fprintf(w, "%-20s %-20s %s\n", "SNAPSHOT", "COMMITTED", "RANGES [low, high) "+counted+" (start@OFFSET: where the sink began a partition)")
	var commits, summarised int
	err := s.commits(ctx, tbl, func(c mapping.Commit) error {
		commits++
		if len(c.Ranges) > maxListedPositions {
			summarised++
		}
		_, err := fmt.Fprintf(w, "%-20d %-20s %s\n", c.SnapshotID, c.CommittedAt.Format("2006-01-02 15:04:05"), ledgerCommitText(c, topics, upsert))
		return err
	})
	if err != nil {
		return err
	}
	if summarised > 0 {
		fmt.Fprintf(w, "(%s of more than %d ranges summarised per topic, lost and deleted-aborted ranges listed:\n"+
			" --partition P prints one partition's ranges, --json every range)\n", plural(summarised, "commit"), maxListedPositions)
	}
	// Columns as wide as their widest cell: a topic's name is as long as
	// its owner made it (dbserver1.inventory.customers/0 pushed a fixed
	// 12-character column's numbers out of line).
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if upsert {
		fmt.Fprintln(tw, "PARTITION\tFIRST\tNEXT\tRANGES\tUPSERTS\tDELETES\tSKIPPED")
	} else {
		fmt.Fprintln(tw, "PARTITION\tFIRST\tNEXT\tRANGES\tROWS")
	}
	var rows, deletes, skipped int64
	for _, tp := range sum.Partitions() {
		if !s.keeps(tp) {
			continue
		}
		p, _ := sum.Partition(tp)
		rows, deletes, skipped = rows+p.Records, deletes+p.Deletes, skipped+p.Skipped
		if upsert {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", tp, p.Low, p.High, p.Ranges, p.Records, p.Deletes, p.Skipped)
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", tp, p.Low, p.High, p.Ranges, p.Records)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	total := plural(sum.Commits, "commit")
	if s.last > 0 || s.topic != "" || s.partition != nil {
		total = fmt.Sprintf("%d shown of %s", commits, total)
	}
	counts := plural(int(rows), "row")
	if upsert {
		counts = upsertCounts(rows, deletes, skipped)
	}
	_, err = fmt.Fprintf(w, "%s, %s in the ledger\n", total, counts)
	return err
}

// upsertCounts is an upsert table's counts of records as floe ledger
// prints them: its upserts and deletes, and its skipped records if any.
func upsertCounts(upserts, deletes, skipped int64) string {
	s := fmt.Sprintf("%s, %s", plural(int(upserts), "upsert"), plural(int(deletes), "delete"))
	if skipped > 0 {
		s += fmt.Sprintf(", %d skipped", skipped)
	}
	return s
}

// ledgerCommitText is a commit's ranges as floe ledger prints them: each
// range when there are few; else per topic its partitions, ranges and
// rows, then the lost and deleted-aborted ranges one by one, which an
// operator reads the ledger for (a commit of a 500-partition topic was a
// line of 7,800 characters).
func ledgerCommitText(c mapping.Commit, topics, upsert bool) string {
	var parts []string
	if len(c.Ranges) <= maxListedPositions {
		for _, r := range c.Ranges {
			parts = append(parts, ledgerRangeText(r, topics, upsert))
		}
		return strings.Join(parts, "  ")
	}
	type sum struct {
		parts                  []int32
		ranges, starts         int
		rows, deletes, skipped int64
	}
	var order []string
	byTopic := map[string]*sum{}
	var marked []string
	for _, r := range c.Ranges {
		t := byTopic[r.Topic]
		if t == nil {
			t = &sum{}
			byTopic[r.Topic] = t
			order = append(order, r.Topic)
		}
		if n := len(t.parts); n == 0 || t.parts[n-1] != r.Partition {
			t.parts = append(t.parts, r.Partition)
		}
		t.ranges++
		t.rows, t.deletes, t.skipped = t.rows+r.Records, t.deletes+r.Deletes, t.skipped+r.Skipped
		switch ledgerRangeKind(r) {
		case "start":
			t.starts++
		case "lost", "deleted-aborted":
			marked = append(marked, ledgerRangeText(r, topics, upsert))
		}
	}
	for _, topic := range order {
		t := byTopic[topic]
		slices.Sort(t.parts)
		t.parts = slices.Compact(t.parts)
		p := fmt.Sprintf("%s/%s: ", topic, text.Ranges(t.parts))
		rows := plural(int(t.rows), "row")
		if upsert {
			rows = upsertCounts(t.rows, t.deletes, t.skipped)
		}
		switch {
		case t.starts == t.ranges:
			p += plural(t.starts, "start")
		case t.starts > 0:
			p += fmt.Sprintf("%s, %s, %s", plural(t.ranges, "range"), rows, plural(t.starts, "start"))
		default:
			p += fmt.Sprintf("%s, %s", plural(t.ranges, "range"), rows)
		}
		parts = append(parts, p)
	}
	return strings.Join(append(parts, marked...), "  ")
}

// ledgerRangeText is one range as floe ledger prints it, its partition
// named TOPIC/P with topic, else P, and an upsert table's counted as
// upserts, deletes and skipped records.
func ledgerRangeText(r mapping.Range, topic, upsert bool) string {
	p := fmt.Sprint(r.Partition)
	if topic {
		p = r.TopicPartition.String()
	}
	switch kind := ledgerRangeKind(r); kind {
	case "start":
		return fmt.Sprintf("%s:start@%d", p, r.Low)
	case "rows":
		if upsert {
			return fmt.Sprintf("%s:%s %s", p, r.Interval, upsertCounts(r.Records, r.Deletes, r.Skipped))
		}
		return fmt.Sprintf("%s:%s %d", p, r.Interval, r.Records)
	default:
		return fmt.Sprintf("%s:%s %s", p, r.Interval, strings.ToUpper(kind))
	}
}

// ledgerRangeKind is what range r is: rows, start, lost or
// deleted-aborted (a LOST or DELETED-ABORTED range in the text).
func ledgerRangeKind(r mapping.Range) string {
	switch {
	case r.Lost:
		return "lost"
	case r.Aborted:
		return "deleted-aborted"
	case r.IsStart():
		return "start"
	}
	return "rows"
}

// ledgerRangeJSON is a range in floe ledger --json.
type ledgerRangeJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Low       int64  `json:"low"`
	High      int64  `json:"high"`
	// Kind is rows, start, lost or deleted-aborted; an upsert table's
	// rows ranges count upserts in Records (kept so for the readers of
	// the field).
	Kind        string `json:"kind"`
	Records     int64  `json:"records"`
	DeadLetters int64  `json:"dead_letters,omitempty"`
	Deletes     int64  `json:"deletes,omitempty"`
	Skipped     int64  `json:"skipped,omitempty"`
}

// ledgerCommitJSON is a commit in floe ledger --json.
type ledgerCommitJSON struct {
	SnapshotID      int64             `json:"snapshot_id"`
	CommittedAt     time.Time         `json:"committed_at"`
	ID              string            `json:"commit_id"`
	Writer          string            `json:"writer,omitempty"`
	Ranges          []ledgerRangeJSON `json:"ranges"`
	DeadLetterTable string            `json:"dead_letter_table,omitempty"`
	DeadLetterFiles []string          `json:"dead_letter_files,omitempty"`
}

// ledgerPartitionJSON is a partition's line in floe ledger --json.
type ledgerPartitionJSON struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	First       int64  `json:"first"`
	Next        int64  `json:"next"`
	Ranges      int    `json:"ranges"`
	Records     int64  `json:"records"`
	DeadLetters int64  `json:"dead_letters,omitempty"`
	// Deletes and Skipped are an upsert table's, as in its ranges (the
	// summary had neither: from a new user's run).
	Deletes int64 `json:"deletes,omitempty"`
	Skipped int64 `json:"skipped,omitempty"`
}

// printLedgerJSON prints what printLedger does as one JSON document,
// {"table", "branch", "commits": [...], "partitions": [...]}, writing each
// commit as it is read.
func printLedgerJSON(ctx context.Context, w io.Writer, tbl *snapshot.Table, sum mapping.Summary, s ledgerSelection) error {
	head, err := json.Marshal(struct {
		Table  string `json:"table"`
		Branch string `json:"branch"`
	}{tbl.Name(), tbl.Branch()})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s,\n  \"commits\": [", strings.TrimSuffix(string(head), "}"))
	sep := "\n    "
	err = s.commits(ctx, tbl, func(c mapping.Commit) error {
		jc := ledgerCommitJSON{SnapshotID: c.SnapshotID, CommittedAt: c.CommittedAt, ID: c.ID, Writer: c.Writer,
			DeadLetterTable: c.DeadLetterTable, DeadLetterFiles: c.DeadLetterFiles, Ranges: make([]ledgerRangeJSON, len(c.Ranges))}
		for i, r := range c.Ranges {
			jc.Ranges[i] = ledgerRangeJSON{Topic: r.Topic, Partition: r.Partition, Low: r.Low, High: r.High, Kind: ledgerRangeKind(r),
				Records: r.Records, DeadLetters: r.DeadLetters, Deletes: r.Deletes, Skipped: r.Skipped}
		}
		b, err := json.Marshal(jc)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s%s", sep, b)
		sep = ",\n    "
		return err
	})
	if err != nil {
		return err
	}
	parts := []ledgerPartitionJSON{}
	for _, tp := range sum.Partitions() {
		if p, _ := sum.Partition(tp); s.keeps(tp) {
			parts = append(parts, ledgerPartitionJSON{Topic: tp.Topic, Partition: tp.Partition, First: p.Low, Next: p.High,
				Ranges: p.Ranges, Records: p.Records, DeadLetters: p.DeadLetters, Deletes: p.Deletes, Skipped: p.Skipped})
		}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "\n  ],\n  \"partitions\": %s\n}\n", b)
	return err
}
