package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// partitionStatus is one row of floe status.
type partitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// LogStart, EndOffset (last stable offset) and HighWatermark are the
	// broker's; absent without --brokers.
	LogStart      *int64 `json:"log_start,omitempty"`
	EndOffset     *int64 `json:"end_offset,omitempty"`
	HighWatermark *int64 `json:"high_watermark,omitempty"`
	// TableNext is the ledger's next offset; absent when never sunk.
	TableNext *int64 `json:"table_next,omitempty"`
	// Lag is the retained offsets up to EndOffset that the table does not
	// have yet: EndOffset minus the later of TableNext and LogStart
	// (connector.Watermarks.Lag).
	Lag *int64 `json:"lag,omitempty"`
	// Lost is the offsets from TableNext up to LogStart: deleted by
	// retention before they were sunk (the next sink run fails on them, or
	// records them with --on-data-loss record). Absent when none.
	Lost       *int64     `json:"lost,omitempty"`
	LastCommit *time.Time `json:"last_commit,omitempty"`
}

type tableStatus struct {
	Table            string            `json:"table"`
	MetadataLocation string            `json:"metadata_location"`
	SnapshotID       *int64            `json:"snapshot_id,omitempty"`
	Partitions       []partitionStatus `json:"partitions"`
}

func newStatusCmd() *cobra.Command {
	var (
		f           tableFlags
		brokers     []string
		topics      []string
		format      string
		dialTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status --table NAMESPACE.TABLE [--brokers HOST:PORT]",
		Short: "Show per partition the broker's end offset, the table's next offset, the lag and the last commit",
		Long: `For every partition of the topics in the table's ledger (and of --topic), show the broker's log
start and end offset (the last stable offset, which is where a read_committed consumer ends),
the table's next offset from its ledger, the lag (retained offsets up to the end offset that the
table does not have yet), the offsets lost to retention before they were sunk (from the table's
next offset up to the log start) and when a commit last advanced the partition. Without --brokers only the table's side is shown. The table's current metadata
location is printed too: other engines (DuckDB's iceberg_scan, Spark) can read it directly.`,
		Example: `  floe status --table lake.orders --brokers localhost:9092
  floe status --config floe.yaml --table lake.orders --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q: want text or json", format)
			}
			tbl, err := f.open(ctx, snapshot.OpenOptions{})
			if err != nil {
				return err
			}
			ledger, err := tbl.Ledger()
			if err != nil {
				return fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
			}
			st := tableStatus{Table: tbl.Name(), MetadataLocation: tbl.Iceberg().MetadataLocation()}
			if h := tbl.Head(); h != nil {
				st.SnapshotID = &h.SnapshotID
			}
			rows := map[mapping.TopicPartition]*partitionStatus{}
			row := func(tp mapping.TopicPartition) *partitionStatus {
				if rows[tp] == nil {
					rows[tp] = &partitionStatus{Topic: tp.Topic, Partition: tp.Partition}
				}
				return rows[tp]
			}
			for tp, n := range ledger.Next() {
				row(tp).TableNext = &n
			}
			for _, c := range ledger.Commits {
				for _, r := range c.Ranges {
					at := c.CommittedAt
					row(r.TopicPartition).LastCommit = &at
				}
			}
			for _, tp := range ledger.Partitions() {
				if !slices.Contains(topics, tp.Topic) {
					topics = append(topics, tp.Topic)
				}
			}
			if len(brokers) > 0 {
				b, err := connector.Dial(ctx, brokers, dialTimeout)
				if err != nil {
					return err
				}
				defer b.Close()
				for _, topic := range topics {
					wm, err := b.Watermarks(ctx, topic)
					if err != nil {
						return err
					}
					for p, w := range wm {
						r := row(mapping.TopicPartition{Topic: topic, Partition: p})
						r.LogStart, r.EndOffset, r.HighWatermark = &w.LogStart, &w.LastStable, &w.HighWatermark
						next := w.LogStart // never sunk: everything retained is lag
						if r.TableNext != nil {
							next = *r.TableNext
						}
						lag := w.Lag(next)
						r.Lag = &lag
						if lost := w.Lost(next); lost > 0 {
							r.Lost = &lost
						}
					}
				}
			}
			for _, tp := range slicesSortedKeys(rows) {
				st.Partitions = append(st.Partitions, *rows[tp])
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	fs := cmd.Flags()
	f.register(fs)
	fs.StringSliceVar(&brokers, "brokers", nil, "Kafka bootstrap brokers, HOST:PORT[,HOST:PORT]; without them only the table's side is shown")
	fs.StringSliceVar(&topics, "topic", nil, "also show these topics' partitions that the ledger does not have yet")
	fs.StringVar(&format, "format", "text", "output: text or json")
	fs.DurationVar(&dialTimeout, "dial-timeout", connector.DefaultDialTimeout, "how long to wait for the brokers to answer")
	return cmd
}

func slicesSortedKeys(m map[mapping.TopicPartition]*partitionStatus) []mapping.TopicPartition {
	keys := make([]mapping.TopicPartition, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, mapping.TopicPartition.Compare)
	return keys
}

func printStatus(w io.Writer, st tableStatus) {
	fmt.Fprintf(w, "table %s\nmetadata %s\n", st.Table, st.MetadataLocation)
	if st.SnapshotID != nil {
		fmt.Fprintf(w, "snapshot %d\n", *st.SnapshotID)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLOG START\tEND OFFSET\tTABLE NEXT\tLAG\tLOST\tLAST COMMIT\t")
	opt := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatInt(*v, 10)
	}
	for _, p := range st.Partitions {
		last := "-"
		if p.LastCommit != nil {
			last = p.LastCommit.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.Topic, p.Partition, opt(p.LogStart), opt(p.EndOffset),
			opt(p.TableNext), opt(p.Lag), opt(p.Lost), last)
	}
	tw.Flush()
}
