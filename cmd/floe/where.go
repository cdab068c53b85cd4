package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// lookupFlags are the flags where and as-of share.
type lookupFlags struct {
	tableFlags
	json        bool
	brokers     []string
	dialTimeout time.Duration
}

func (f *lookupFlags) register(cmd *cobra.Command, brokersUse string) {
	fs := cmd.Flags()
	f.tableFlags.register(fs)
	fs.BoolVar(&f.json, "json", false, "print JSON instead of text")
	fs.StringSliceVar(&f.brokers, "brokers", nil, brokersUse)
	fs.DurationVar(&f.dialTimeout, "dial-timeout", connector.DefaultDialTimeout, "how long to wait for the brokers to answer")
}

// dial connects to the brokers when they were given; nil otherwise.
func (f *lookupFlags) dial(ctx context.Context) (*connector.Broker, error) {
	if len(f.brokers) == 0 {
		return nil, nil
	}
	return connector.Dial(ctx, f.brokers, f.dialTimeout)
}

// whereResult is floe where's answer (its JSON is floe where --json).
type whereResult = lookup.WhereResult

func newWhereCmd() *cobra.Command {
	var (
		f         lookupFlags
		topic     string
		partition int32
		offset    int64
	)
	cmd := &cobra.Command{
		Use:   "where --table NAMESPACE.TABLE --topic NAME --partition P --offset X",
		Short: "Find the range, snapshot, commit time and data file holding an offset",
		Long: `Answer "which snapshot holds offset X": the ledger range [low, high) that consumed the offset,
the snapshot that committed it and when, and the data file that holds its row (found from the
manifests' bounds on the partition and offset columns; only that file's offset column is read
to confirm the row).

The answer is one of:
  row      a row holds the offset;
  no_row   a range consumed the offset, but it produced no row: a transaction marker, an
           aborted transactional record or an offset removed by compaction (with --brokers the
           log is read to tell which), or, in a state table, a value superseded since;
  lost     retention deleted the offset before it was sunk, and the ledger records the loss;
  unsunk   no range covers it: below the partition's first sunk offset, in a gap, or not sunk yet.`,
		Example: `  floe where --table lake.orders --topic orders --partition 0 --offset 1234
  floe where --table lake.orders --topic orders --partition 0 --offset 1234 --brokers localhost:9092 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			switch {
			case topic == "":
				return errors.New("missing --topic NAME")
			case !cmd.Flags().Changed("partition") || partition < 0:
				return errors.New("missing --partition P (a partition number)")
			case !cmd.Flags().Changed("offset") || offset < 0:
				return errors.New("missing --offset X (an offset, 0 or more)")
			}
			tbl, err := f.open(ctx, snapshot.OpenOptions{})
			if err != nil {
				return err
			}
			broker, err := f.dial(ctx)
			if err != nil {
				return err
			}
			if broker != nil {
				defer broker.Close()
			}
			res, err := lookup.Where(ctx, tbl, broker, mapping.TopicPartition{Topic: topic, Partition: partition}, offset)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if f.json {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			printWhere(w, res)
			return nil
		},
	}
	f.register(cmd, "Kafka brokers: tell a marker from an aborted or compacted offset, and show the broker's offsets")
	fs := cmd.Flags()
	fs.StringVar(&topic, "topic", "", "topic of the position (required)")
	fs.Int32Var(&partition, "partition", -1, "partition of the position (required)")
	fs.Int64Var(&offset, "offset", -1, "offset to look up (required)")
	return cmd
}

func printWhere(w io.Writer, r whereResult) {
	fmt.Fprintf(w, "%s/%d offset %d in %s: %s\n", r.Topic, r.Partition, r.Offset, r.Table, strings.ReplaceAll(r.Status, "_", " "))
	if r.SnapshotID != nil {
		fmt.Fprintf(w, "  range      [%d, %d)", *r.Low, *r.High)
		if r.Records != nil {
			fmt.Fprintf(w, ", %d records", *r.Records)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  snapshot   %d, committed %s\n", *r.SnapshotID, r.CommittedAt.Format(time.RFC3339))
	}
	if r.File != "" {
		fmt.Fprintf(w, "  file       %s\n", r.File)
	}
	if r.TableFirst != nil {
		fmt.Fprintf(w, "  table      [%d, %d) of %s/%d\n", *r.TableFirst, *r.TableNext, r.Topic, r.Partition)
	}
	if r.LogStart != nil {
		fmt.Fprintf(w, "  broker     log start %d, end offset %d\n", *r.LogStart, *r.EndOffset)
	}
	fmt.Fprintf(w, "  %s\n", r.Explanation)
}

// asOfResult is floe as-of's JSON document: the answer, and with --output
// how many rows went to which file. Its JSON field names are stable.
type asOfResult struct {
	lookup.AsOfResult
	// RowCount and Output are set with --rows --output.
	RowCount *int64 `json:"row_count,omitempty"`
	Output   string `json:"output,omitempty"`
}

func newAsOfCmd() *cobra.Command {
	var (
		f       lookupFlags
		offsets string
		at      string
		rows    bool
		output  string
	)
	cmd := &cobra.Command{
		Use:   "as-of --table NAMESPACE.TABLE (--offsets TOPIC/P=OFFSET[,...] | --time RFC3339) [--rows]",
		Short: "Find the snapshot at which the table reached a position or a time, and the exact table then",
		Long: `Answer "what did the table look like as of offset N / time T". A position is a cut per partition:
the table as of it holds each named partition's records below the cut's offset (partitions not
named are taken as they are in the answer's snapshot). floe as-of prints the first snapshot at
which every position is covered (snapshot_id), and with --rows the exact table at the position:
that snapshot's rows filtered to offsets below each cut, printed, or written to --output as
Parquet (.parquet), CSV (.csv) or JSON lines (.jsonl, .ndjson, .json).

--time means record time: every partition is cut before its first record whose timestamp is at
or after it (out-of-order timestamps included), from the broker's ListOffsets by timestamp when
--brokers is given and the broker still retains what the table holds, else from the table's own
timestamp column.

In JSON and JSON lines, keys, values and header values are strings when they are valid UTF-8,
null when null, and {"base64": "..."} otherwise. CSV writes null as an empty field.`,
		Example: `  floe as-of --table lake.orders --offsets orders/0=1200,orders/1=950
  floe as-of --table lake.orders --time 2024-05-01T09:00:00Z --rows --output orders-9am.parquet
  floe as-of --table lake.orders --time 2024-05-01T09:00:00Z --brokers localhost:9092 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if (offsets == "") == (at == "") {
				return errors.New("give exactly one of --offsets TOPIC/P=OFFSET[,...] and --time RFC3339")
			}
			if output != "" && !rows {
				return errors.New("--output writes rows: add --rows")
			}
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			tbl, err := f.open(ctx, snapshot.OpenOptions{})
			if err != nil {
				return err
			}
			broker, err := f.dial(ctx)
			if err != nil {
				return err
			}
			if broker != nil {
				defer broker.Close()
			}
			q := lookup.AsOfQuery{Offsets: offsets}
			if at != "" {
				t, err := time.Parse(time.RFC3339Nano, at)
				if err != nil {
					return fmt.Errorf("--time %q: want an RFC3339 time such as 2024-05-01T09:00:00Z", at)
				}
				q.Time = &t
			}
			answer, err := lookup.AsOf(ctx, tbl, broker, q)
			if err != nil {
				return err
			}
			res := asOfResult{AsOfResult: answer}
			w := cmd.OutOrStdout()
			if !rows {
				return printAsOf(w, f.json, res)
			}
			if err := lookup.ExactAt(tbl, res.SnapshotID, res.Cut); err != nil {
				return err
			}
			if output == "" {
				return printAsOfRows(ctx, w, f.json, tbl, res)
			}
			n, err := writeRows(ctx, tbl, res.SnapshotID, res.Cut, output, format)
			if err != nil {
				return err
			}
			res.RowCount, res.Output = &n, output
			return printAsOf(w, f.json, res)
		},
	}
	f.register(cmd, "Kafka brokers: map --time to offsets with ListOffsets by timestamp")
	fs := cmd.Flags()
	fs.StringVar(&offsets, "offsets", "", "position per partition, TOPIC/P=OFFSET[,...] (P=OFFSET when the table holds one topic)")
	fs.StringVar(&at, "time", "", "record time, RFC3339, e.g. 2024-05-01T09:00:00Z")
	fs.BoolVar(&rows, "rows", false, "also print (or write to --output) the table's rows as of the position")
	fs.StringVarP(&output, "output", "o", "", "write the rows to this file: .parquet, .csv, .jsonl/.ndjson/.json")
	return cmd
}

func printAsOf(w io.Writer, asJSON bool, r asOfResult) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "%s as of ", r.Table)
	if r.Time != nil {
		fmt.Fprintf(w, "record time %s", r.Time.Format(time.RFC3339Nano))
	} else {
		fmt.Fprint(w, "the given offsets")
	}
	fmt.Fprintf(w, ": snapshot %d, committed %s\n", r.SnapshotID, r.CommittedAt.Format(time.RFC3339))
	for _, p := range r.Positions {
		fmt.Fprintf(w, "  %s/%d below offset %d (%s)\n", p.Topic, p.Partition, p.Offset, p.Source)
	}
	if r.RowCount != nil {
		fmt.Fprintf(w, "wrote %d rows to %s\n", *r.RowCount, r.Output)
	}
	return nil
}

// printAsOfRows prints the summary and the rows: as one JSON document with
// a rows array, or as text lines.
func printAsOfRows(ctx context.Context, w io.Writer, asJSON bool, tbl *snapshot.Table, r asOfResult) error {
	bw := bufio.NewWriter(w)
	var n int64
	if asJSON {
		head, err := json.Marshal(r)
		if err != nil {
			return err
		}
		bw.Write(head[:len(head)-1])
		bw.WriteString(`,"rows":[`)
		err = lookup.Rows(ctx, tbl, r.SnapshotID, r.Cut, func(lr lookup.Row) error {
			if n > 0 {
				bw.WriteByte(',')
			}
			n++
			bw.WriteString("\n")
			bw.WriteString(jsonRowOf(lr).String())
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
	fmt.Fprintf(bw, "%-16s %-9s %-10s %-24s %-20s %s\n", "TOPIC", "PARTITION", "OFFSET", "TIMESTAMP", "KEY", "VALUE")
	err := lookup.Rows(ctx, tbl, r.SnapshotID, r.Cut, func(lr lookup.Row) error {
		row := jsonRowOf(lr)
		n++
		fmt.Fprintf(bw, "%-16s %-9d %-10d %-24s %-20s %s\n", row.Topic, row.Partition, row.Offset,
			row.Timestamp.Format(time.RFC3339Nano), clip(row.Key.text(), 20), clip(row.Value.text(), 80))
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(bw, "%d rows\n", n)
	return bw.Flush()
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// outputFormat picks the --output format from the file extension.
func outputFormat(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".parquet":
		return "parquet", nil
	case ".csv":
		return "csv", nil
	case ".jsonl", ".ndjson", ".json":
		return "jsonl", nil
	default:
		return "", fmt.Errorf("--output %s: unknown extension %q; want .parquet, .csv, .jsonl, .ndjson or .json", path, ext)
	}
}

// writeRows writes the rows of a snapshot below the cut to a file and
// returns how many it wrote. The file is written beside its final name and
// renamed at the end, so a failure never leaves a partial file.
func writeRows(ctx context.Context, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut, path, format string) (n int64, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("--output %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriter(tmp)
	switch format {
	case "parquet":
		var pw *pqarrow.FileWriter
		err = tbl.Rows(ctx, snapshotID, cut, func(b arrow.RecordBatch) error {
			if pw == nil {
				if pw, err = pqarrow.NewFileWriter(b.Schema(), bw, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps()); err != nil {
					return err
				}
			}
			n += b.NumRows()
			return pw.WriteBuffered(b)
		})
		if err == nil && pw == nil {
			pw, err = pqarrow.NewFileWriter(tbl.ArrowSchema(), bw, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
		}
		if pw != nil {
			if cerr := pw.Close(); err == nil {
				err = cerr
			}
		}
	case "csv":
		cw := csv.NewWriter(bw)
		err = cw.Write([]string{"topic", "partition", "offset", "timestamp", "key", "value", "headers"})
		if err == nil {
			err = lookup.Rows(ctx, tbl, snapshotID, cut, func(lr lookup.Row) error {
				r := jsonRowOf(lr)
				n++
				hdrs, err := json.Marshal(r.Headers)
				if err != nil {
					return err
				}
				return cw.Write([]string{r.Topic, strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.Offset, 10),
					r.Timestamp.Format(time.RFC3339Nano), r.Key.text(), r.Value.text(), string(hdrs)})
			})
		}
		cw.Flush()
		if err == nil {
			err = cw.Error()
		}
	default:
		err = lookup.Rows(ctx, tbl, snapshotID, cut, func(lr lookup.Row) error {
			n++
			bw.WriteString(jsonRowOf(lr).String())
			return bw.WriteByte('\n')
		})
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, fmt.Errorf("write rows to %s: %w", path, err)
	}
	return n, nil
}

// bin is a binary value in JSON: a string when valid UTF-8, null when null,
// {"base64": "..."} otherwise.
type bin struct {
	b    []byte
	null bool
}

func (v bin) MarshalJSON() ([]byte, error) {
	switch {
	case v.null:
		return []byte("null"), nil
	case utf8.Valid(v.b):
		return json.Marshal(string(v.b))
	default:
		return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(v.b)})
	}
}

// text renders the value for text and CSV output: as is when valid UTF-8,
// base64:... otherwise, empty when null.
func (v bin) text() string {
	switch {
	case v.null:
		return ""
	case utf8.Valid(v.b):
		return string(v.b)
	default:
		return "base64:" + base64.StdEncoding.EncodeToString(v.b)
	}
}

type jsonHeader struct {
	Key   string `json:"key"`
	Value bin    `json:"value"`
}

// jsonRow is one table row as floe as-of writes it.
type jsonRow struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp time.Time    `json:"timestamp"`
	Key       bin          `json:"key"`
	Value     bin          `json:"value"`
	Headers   []jsonHeader `json:"headers"`
}

// String is the row as one line of JSON. Every field of a row marshals, so
// there is no error to report.
func (r jsonRow) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// jsonRowOf renders a row for JSON, JSON lines, CSV and text output.
func jsonRowOf(r lookup.Row) jsonRow {
	bytes := func(b lookup.Bytes) bin { return bin{b: b.B, null: b.Null} }
	out := jsonRow{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: bytes(r.Key), Value: bytes(r.Value), Headers: make([]jsonHeader, 0, len(r.Headers)),
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, jsonHeader{Key: h.Key, Value: bytes(h.Value)})
	}
	return out
}
