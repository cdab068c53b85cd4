package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

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
			var broker *connector.Broker
			if len(brokers) > 0 {
				if broker, err = connector.Dial(ctx, brokers, dialTimeout); err != nil {
					return err
				}
				defer broker.Close()
			}
			st, err := lookup.Status(ctx, tbl, broker, topics)
			if err != nil {
				return err
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

func printStatus(w io.Writer, st lookup.TableStatus) {
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
