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
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
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

// whereResult is floe where's answer. Its JSON field names are stable.
type whereResult struct {
	Table     string `json:"table"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Status is row (a row holds the offset), no_row (a range covers the
	// offset but it produced no row), lost (recorded as lost to retention)
	// or unsunk (no range covers it).
	Status string `json:"status"`
	// Kind refines no_row when it can be told: marker, aborted (read from
	// the broker), absent (the broker has no record there: compacted or
	// deleted) or superseded (a state table's older value).
	Kind        string     `json:"kind,omitempty"`
	SnapshotID  *int64     `json:"snapshot_id,omitempty"`
	Low         *int64     `json:"low,omitempty"`
	High        *int64     `json:"high,omitempty"`
	Records     *int64     `json:"records,omitempty"`
	CommittedAt *time.Time `json:"committed_at,omitempty"`
	File        string     `json:"file,omitempty"`
	// TableFirst and TableNext bound the partition's coverage in the ledger.
	TableFirst *int64 `json:"table_first,omitempty"`
	TableNext  *int64 `json:"table_next,omitempty"`
	// LogStart and EndOffset are the broker's, with --brokers.
	LogStart  *int64 `json:"log_start,omitempty"`
	EndOffset *int64 `json:"end_offset,omitempty"`
	// Explanation says the same in a sentence.
	Explanation string `json:"explanation"`
}

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
				return snapshot.Explain(err)
			}
			broker, err := f.dial(ctx)
			if err != nil {
				return err
			}
			if broker != nil {
				defer broker.Close()
			}
			res, err := where(ctx, tbl, broker, mapping.TopicPartition{Topic: topic, Partition: partition}, offset)
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

// where answers for one position of tbl's main branch; broker may be nil.
func where(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, tp mapping.TopicPartition, offset int64) (whereResult, error) {
	res := whereResult{Table: tbl.Name(), Topic: tp.Topic, Partition: tp.Partition, Offset: offset}
	ledger, err := tbl.Ledger()
	if err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	loc := ledger.Where(tp, offset)
	if loc.Known {
		res.TableFirst, res.TableNext = &loc.First, &loc.Next
	}
	var wm *connector.Watermarks
	if broker != nil {
		all, err := broker.Watermarks(ctx, tp.Topic)
		if err != nil && !errors.Is(err, connector.ErrUnknownTopic) {
			return res, err
		}
		if w, ok := all[tp.Partition]; ok {
			wm = &w
			res.LogStart, res.EndOffset = &w.LogStart, &w.LastStable
		}
	}
	if loc.Status != mapping.StatusUnsunk {
		c, r := loc.Commit, loc.Range
		res.SnapshotID, res.Low, res.High, res.CommittedAt = &c.SnapshotID, &r.Low, &r.High, &c.CommittedAt
		if !r.Lost {
			res.Records = &r.Records
		}
	}
	at := fmt.Sprintf("%s offset %d", tp, offset)
	switch loc.Status {
	case mapping.StatusLost:
		res.Status = "lost"
		res.Explanation = fmt.Sprintf("%s was deleted by retention before it was sunk; snapshot %d records [%d, %d) as lost",
			at, loc.Commit.SnapshotID, loc.Range.Low, loc.Range.High)
	case mapping.StatusCovered:
		file, ok, err := tbl.RowAt(ctx, 0, tp, offset)
		if err != nil {
			return res, err
		}
		if ok {
			res.Status, res.File = "row", file
			res.Explanation = fmt.Sprintf("%s is a row, committed by snapshot %d in range [%d, %d), in data file %s",
				at, loc.Commit.SnapshotID, loc.Range.Low, loc.Range.High, file)
			break
		}
		res.Status = "no_row"
		res.Kind, res.Explanation, err = explainNoRow(ctx, tbl, broker, tp, offset)
		if err != nil {
			return res, err
		}
		res.Explanation = fmt.Sprintf("%s is accounted for by snapshot %d in range [%d, %d) but has no row: %s",
			at, loc.Commit.SnapshotID, loc.Range.Low, loc.Range.High, res.Explanation)
	default:
		res.Status = "unsunk"
		switch {
		case !loc.Known:
			res.Explanation = fmt.Sprintf("%s was never sunk: the table has nothing of %s", at, tp)
		case offset < loc.First:
			res.Explanation = fmt.Sprintf("%s was never sunk: the table holds %s from offset %d on", at, tp, loc.First)
		case offset < loc.Next:
			res.Explanation = fmt.Sprintf("%s is in a gap of the ledger, which covers %s from %d to %d: run floe audit", at, tp, loc.First, loc.Next)
		default:
			res.Explanation = fmt.Sprintf("%s is not sunk yet: the table has reached offset %d of %s", at, loc.Next, tp)
		}
		switch {
		case broker == nil:
		case wm == nil:
			res.Explanation += fmt.Sprintf("; the broker has no partition %s", tp)
		case offset < wm.LogStart:
			res.Explanation += fmt.Sprintf("; the broker no longer has it (its log starts at %d)", wm.LogStart)
		case offset >= wm.HighWatermark:
			res.Explanation += fmt.Sprintf("; the broker has no such offset yet (its log ends at %d)", wm.HighWatermark)
		default:
			res.Explanation += fmt.Sprintf("; the broker still retains it (log [%d, %d))", wm.LogStart, wm.HighWatermark)
		}
	}
	return res, nil
}

// explainNoRow says why a covered offset has no row: from the log when a
// broker is given, otherwise by listing what it can be.
func explainNoRow(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, tp mapping.TopicPartition, offset int64) (kind, why string, err error) {
	state := tbl.Fold() != ""
	if broker == nil {
		why = "a transaction marker, an aborted transactional record or an offset removed by compaction (pass --brokers to tell which)"
		if state {
			why = "this is a state table, so a value superseded by a later one for its key, deleted by a tombstone or without a key; or " + why
		}
		return "", why, nil
	}
	var rec *kgo.Record
	err = broker.ReadLog(ctx, tp.Topic, tp.Partition, offset, offset+1, func(r *kgo.Record, _ int64) bool {
		if r.Offset == offset {
			rec = r
		}
		return false
	})
	switch {
	case err != nil:
		return "", "", fmt.Errorf("read %s offset %d from the broker: %w", tp, offset, err)
	case rec == nil:
		return "absent", "the broker has no record there: removed by compaction, or deleted by retention since", nil
	case rec.Attrs.IsControl():
		return "marker", "it is a transaction marker (read from the broker)", nil
	case state:
		return "superseded", "it is a record the state table folded: superseded by a later value for its key, deleted by a tombstone, without a key, or aborted", nil
	default:
		return "aborted", "it is a record of an aborted transaction (read from the broker), which read_committed never delivers", nil
	}
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

// asOfPosition is one partition's cut in floe as-of's answer.
type asOfPosition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the cut: the table as of it holds the partition's records
	// below it.
	Offset int64 `json:"offset"`
	// Source is where the cut came from: given (--offsets), broker or
	// table (--time, from ListOffsets by timestamp or the table's own
	// timestamp column).
	Source string `json:"source"`
}

// asOfResult is floe as-of's answer. Its JSON field names are stable.
type asOfResult struct {
	Table       string         `json:"table"`
	SnapshotID  int64          `json:"snapshot_id"`
	CommittedAt time.Time      `json:"committed_at"`
	Time        *time.Time     `json:"time,omitempty"`
	Positions   []asOfPosition `json:"positions"`
	// RowCount and Output are set with --rows.
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
				return snapshot.Explain(err)
			}
			broker, err := f.dial(ctx)
			if err != nil {
				return err
			}
			if broker != nil {
				defer broker.Close()
			}
			res, cut, err := asOf(ctx, tbl, broker, offsets, at)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if !rows {
				return printAsOf(w, f.json, res)
			}
			if err := exactAt(tbl, res.SnapshotID, cut); err != nil {
				return err
			}
			if output == "" {
				return printAsOfRows(ctx, w, f.json, tbl, res, cut)
			}
			n, err := writeRows(ctx, tbl, res.SnapshotID, cut, output, format)
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

// asOf resolves --offsets or --time into a cut and the first snapshot
// covering it.
func asOf(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, offsets, at string) (asOfResult, mapping.Cut, error) {
	res := asOfResult{Table: tbl.Name()}
	ledger, err := tbl.Ledger()
	if err != nil {
		return res, nil, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	source := map[mapping.TopicPartition]string{}
	var cut mapping.Cut
	if offsets != "" {
		topics := map[string]bool{}
		for _, tp := range ledger.Partitions() {
			topics[tp.Topic] = true
		}
		def := ""
		if len(topics) == 1 {
			for t := range topics {
				def = t
			}
		}
		if cut, err = mapping.ParseCut(offsets, def); err != nil {
			return res, nil, fmt.Errorf("--offsets: %w", err)
		}
		for tp := range cut {
			source[tp] = "given"
		}
	} else {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return res, nil, fmt.Errorf("--time %q: want an RFC3339 time such as 2024-05-01T09:00:00Z", at)
		}
		res.Time = &t
		if cut, err = timeCut(ctx, tbl, broker, ledger, t, source); err != nil {
			return res, nil, err
		}
	}
	c, err := ledger.FirstCovering(cut)
	if err != nil {
		return res, nil, fmt.Errorf("%s as of %s: %w", tbl.Name(), cut, err)
	}
	res.SnapshotID, res.CommittedAt = c.SnapshotID, c.CommittedAt
	tps := make([]mapping.TopicPartition, 0, len(cut))
	for tp := range cut {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, mapping.TopicPartition.Compare)
	for _, tp := range tps {
		res.Positions = append(res.Positions, asOfPosition{Topic: tp.Topic, Partition: tp.Partition, Offset: cut[tp], Source: source[tp]})
	}
	return res, cut, nil
}

// timeCut maps a record time to a cut over every partition of the ledger:
// from the broker where it retains everything the table holds of a
// partition, else from the table's timestamp column.
func timeCut(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, ledger mapping.Ledger, t time.Time, source map[mapping.TopicPartition]string) (mapping.Cut, error) {
	cut := mapping.Cut{}
	var fromTable []mapping.TopicPartition
	byTopic := map[string]map[int32]int64{}
	starts := map[string]map[int32]connector.Watermarks{}
	for _, tp := range ledger.Partitions() {
		if broker != nil {
			if _, ok := byTopic[tp.Topic]; !ok {
				offs, err := broker.OffsetsForTime(ctx, tp.Topic, t)
				if err != nil {
					return nil, err
				}
				wm, err := broker.Watermarks(ctx, tp.Topic)
				if err != nil {
					return nil, err
				}
				byTopic[tp.Topic], starts[tp.Topic] = offs, wm
			}
			w, ok := starts[tp.Topic][tp.Partition]
			o, listed := byTopic[tp.Topic][tp.Partition]
			if ok && listed && w.LogStart <= mapping.Cover(ledger.Ranges(tp)).First {
				cut[tp], source[tp] = o, "broker"
				continue
			}
		}
		fromTable = append(fromTable, tp)
	}
	if len(fromTable) == 0 {
		return cut, nil
	}
	if tbl.Fold() != "" {
		return nil, fmt.Errorf("%s is a state table: its rows are only each key's latest value, so its timestamps cannot place --time; pass --brokers of a cluster that still retains the log", tbl.Name())
	}
	tc, err := tbl.TimeCut(ctx, 0, t)
	if err != nil {
		return nil, err
	}
	for _, tp := range fromTable {
		cut[tp], source[tp] = tc[tp], "table"
	}
	return cut, nil
}

// exactAt checks that a state table can be shown exactly as of the cut: its
// rows are folded per commit, so only a cut at a commit's end is exact.
func exactAt(tbl *snapshot.Table, snapshotID int64, cut mapping.Cut) error {
	if tbl.Fold() == "" {
		return nil
	}
	l, err := tbl.LedgerAt(snapshotID)
	if err != nil {
		return err
	}
	next := l.Next()
	for tp, o := range cut {
		rs := l.Ranges(tp)
		if len(rs) == 0 || o <= mapping.Cover(rs).First || o == next[tp] {
			continue
		}
		loc := l.Where(tp, o-1)
		return fmt.Errorf("%s is a state table: it is exact only at the end of a commit, and %s=%d lies inside range [%d, %d); use offset %d or %d",
			tbl.Name(), tp, o, loc.Range.Low, loc.Range.High, loc.Range.Low, loc.Range.High)
	}
	return nil
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
func printAsOfRows(ctx context.Context, w io.Writer, asJSON bool, tbl *snapshot.Table, r asOfResult, cut mapping.Cut) error {
	bw := bufio.NewWriter(w)
	var n int64
	if asJSON {
		head, err := json.Marshal(r)
		if err != nil {
			return err
		}
		bw.Write(head[:len(head)-1])
		bw.WriteString(`,"rows":[`)
		err = tbl.Rows(ctx, r.SnapshotID, cut, func(b arrow.RecordBatch) error {
			return eachRow(b, func(row jsonRow) error {
				if n > 0 {
					bw.WriteByte(',')
				}
				n++
				bw.WriteString("\n")
				bw.WriteString(row.String())
				return nil
			})
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
	err := tbl.Rows(ctx, r.SnapshotID, cut, func(b arrow.RecordBatch) error {
		return eachRow(b, func(row jsonRow) error {
			n++
			fmt.Fprintf(bw, "%-16s %-9d %-10d %-24s %-20s %s\n", row.Topic, row.Partition, row.Offset,
				row.Timestamp.Format(time.RFC3339Nano), clip(row.Key.text(), 20), clip(row.Value.text(), 80))
			return nil
		})
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
			err = tbl.Rows(ctx, snapshotID, cut, func(b arrow.RecordBatch) error {
				return eachRow(b, func(r jsonRow) error {
					n++
					hdrs, err := json.Marshal(r.Headers)
					if err != nil {
						return err
					}
					return cw.Write([]string{r.Topic, strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.Offset, 10),
						r.Timestamp.Format(time.RFC3339Nano), r.Key.text(), r.Value.text(), string(hdrs)})
				})
			})
		}
		cw.Flush()
		if err == nil {
			err = cw.Error()
		}
	default:
		err = tbl.Rows(ctx, snapshotID, cut, func(b arrow.RecordBatch) error {
			return eachRow(b, func(r jsonRow) error {
				n++
				bw.WriteString(r.String())
				return bw.WriteByte('\n')
			})
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

// eachRow calls fn with every row of a batch of floe columns.
func eachRow(b arrow.RecordBatch, fn func(jsonRow) error) error {
	col := func(name string) (arrow.Array, error) {
		idx := b.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("rows have no %s column", name)
		}
		return b.Column(idx[0]), nil
	}
	var cols [7]arrow.Array
	for i, name := range []string{mapping.ColTopic, mapping.ColPartition, mapping.ColOffset, mapping.ColTimestamp, mapping.ColKey, mapping.ColValue, mapping.ColHeaders} {
		c, err := col(name)
		if err != nil {
			return err
		}
		cols[i] = c
	}
	topic, ok1 := cols[0].(*array.String)
	part, ok2 := cols[1].(*array.Int32)
	off, ok3 := cols[2].(*array.Int64)
	ts, ok4 := cols[3].(*array.Timestamp)
	key, ok5 := cols[4].(*array.Binary)
	val, ok6 := cols[5].(*array.Binary)
	hdrs, ok7 := cols[6].(*array.List)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) {
		return fmt.Errorf("rows do not have floe's column types: %s", b.Schema())
	}
	hs, ok := hdrs.ListValues().(*array.Struct)
	if !ok || hs.NumField() != 2 {
		return fmt.Errorf("rows do not have floe's header type: %s", hdrs.DataType())
	}
	hk, ok1 := hs.Field(0).(*array.String)
	hv, ok2 := hs.Field(1).(*array.Binary)
	if !ok1 || !ok2 {
		return fmt.Errorf("rows do not have floe's header type: %s", hdrs.DataType())
	}
	unit := ts.DataType().(*arrow.TimestampType).Unit
	for i := range int(b.NumRows()) {
		r := jsonRow{
			Topic: topic.Value(i), Partition: part.Value(i), Offset: off.Value(i),
			Timestamp: ts.Value(i).ToTime(unit).UTC(),
			Key:       bin{b: key.Value(i), null: key.IsNull(i)},
			Value:     bin{b: val.Value(i), null: val.IsNull(i)},
			Headers:   []jsonHeader{},
		}
		start, end := hdrs.ValueOffsets(i)
		for j := int(start); j < int(end); j++ {
			r.Headers = append(r.Headers, jsonHeader{Key: hk.Value(j), Value: bin{b: hv.Value(j), null: hv.IsNull(j)}})
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
