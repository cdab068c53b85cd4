package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

type sinkFlags struct {
	tableFlags
	brokers       []string
	topic         string
	start         string
	flushRecords  int
	flushBytes    int64
	flushInterval time.Duration
	stopAtEnd     bool
	onDataLoss    string
	retryFor      time.Duration
	group         string
	dialTimeout   time.Duration
	opsFlags
}

func newSinkCmd() *cobra.Command {
	var f sinkFlags
	cmd := &cobra.Command{
		Use:   "sink --brokers HOST:PORT --topic NAME --table NAMESPACE.TABLE",
		Short: "Sink a Kafka topic into an Iceberg table, exactly once",
		Long: `Sink every partition of a topic into an Iceberg table. Each flush writes one Parquet file set
per partition and commits them in one snapshot whose summary records the offset ranges it
covers (the ledger). On start, each partition resumes from the ledger's next offset, so a
restart or a crash never duplicates or skips a record; consumer-group offsets are not used.

The table (and its namespace) is created when missing. Records are read with read_committed:
aborted transactions never reach the table, and transaction markers are accounted for in the
ledger. A flush happens when --flush-records, --flush-bytes or --flush-interval is reached,
whichever comes first. SIGINT or SIGTERM flushes, commits and exits 0.

If retention deleted records before they were sunk, the sink stops with an error naming the
lost offsets; --on-data-loss record writes them into the ledger as a lost range and goes on.

When storage, the catalog or the brokers fail transiently (an S3 outage, a catalog restarting),
the sink starts again from the ledger after a pause, for up to --retry-for without a commit,
then stops with exit code 2. Rejected credentials, a missing bucket and other errors that need a
person stop it at once.`,
		Example: `  floe sink --brokers localhost:9092 --topic orders --table lake.orders
  floe sink --brokers localhost:9092 --topic orders --table lake.orders --stop-at-end
  floe sink --config floe.yaml --metrics-addr :9464
  floe sink --brokers kafka:9092 --topic orders --table lake.orders \
    --catalog postgres://floe:secret@pg:5432/iceberg --warehouse s3://lake/warehouse --s3-endpoint http://minio:9000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSinks(cmd, &f)
		},
	}
	fs := cmd.Flags()
	f.tableFlags.register(fs)
	f.opsFlags.register(fs)
	fs.StringSliceVar(&f.brokers, "brokers", nil, "Kafka bootstrap brokers, HOST:PORT[,HOST:PORT] (required)")
	fs.StringVar(&f.topic, "topic", "", "topic to sink; every partition is consumed (required)")
	fs.StringVar(&f.start, "start", "earliest", "where partitions the ledger has never seen begin: earliest or latest")
	fs.Var(newPositiveInt(&f.flushRecords, connector.DefaultFlushRecords), "flush-records", "flush after this many records")
	fs.Var(newByteSize(&f.flushBytes, connector.DefaultFlushBytes), "flush-bytes", "flush after this many bytes of keys, values and headers: a number of bytes, or with a unit: 128MiB, 1GiB (powers of 1024), 500kB, 1GB (powers of 1000)")
	fs.Var(newPositiveDuration(&f.flushInterval, connector.DefaultFlushInterval), "flush-interval", "flush at most this long after the first unflushed record")
	fs.BoolVar(&f.stopAtEnd, "stop-at-end", false, "sink each partition up to its end offset as of start (last stable offset), commit and exit")
	fs.StringVar(&f.onDataLoss, "on-data-loss", "fail", "when retention deleted records before they were sunk: fail, or record the lost range in the ledger and go on")
	fs.DurationVar(&f.retryFor, "retry-for", connector.DefaultRetryFor,
		"how long to keep retrying when storage, the catalog or the brokers fail transiently (refused connections, timeouts, 5xx) before giving up; each retry resumes from the ledger; 0s never retries. Rejected credentials and other errors to fix fail at once")
	fs.StringVar(&f.group, "group", "", "mirror each commit's next offsets into this consumer group, for lag tooling only (resuming never reads them)")
	fs.DurationVar(&f.dialTimeout, "dial-timeout", connector.DefaultDialTimeout, "how long to wait for the brokers to answer at start")
	return cmd
}

func printSinkStats(cmd *cobra.Command, table string, s connector.Stats) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "sink %s: %d rows in %d commits (%d files)", table, s.Records, s.Commits, s.Files)
	if s.Fenced > 0 {
		fmt.Fprintf(w, ", fenced %d times by another writer", s.Fenced)
	}
	fmt.Fprintln(w)
	var parts []string
	for _, tp := range slices.SortedFunc(maps.Keys(s.Next), mapping.TopicPartition.Compare) {
		parts = append(parts, fmt.Sprintf("%s=%d", tp, s.Next[tp]))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "next offsets: %s\n", strings.Join(parts, " "))
	}
}
