package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/term"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// produceFlags are floe produce's, named as kcat's -P mode names them.
type produceFlags struct {
	brokerFlags
	topic     string
	delimiter string
	key       string
	nullEmpty bool
	partition int32
	headers   []string
	json      bool
}

func newProduceCmd() *cobra.Command {
	var f produceFlags
	cmd := &cobra.Command{
		Use:   "produce --topic NAME [--key-delimiter DELIM] [--null-empty] [--partition P] [--header NAME=VALUE] [FILE...]",
		Short: "Write records to a topic, one a line of standard input or one a file (as kcat -P)",
		Long: `Write records to a Kafka topic: one a line of standard input, or, given FILEs, one a file,
whatever bytes it holds (a record framed for a schema registry, say). floe produce is there so
that the local stack's walkthroughs and the docs' recipes need no producer installed; its flags
are kcat's (-b, -t, -K, -Z, -p, -k, -H; kcat's -P is taken too), and it reaches secured
brokers with the --kafka-* flags every floe command takes.

A line ends at \n or \r\n, and an empty line is no record (as kcat skips it; an empty value
comes from an empty FILE, or "k1:" with -K:).
--key-delimiter (-K) splits each line at its first DELIM into key and value ("k1:{...}" with
-K:; DELIM reads \t and \xNN as kcat does, and \r and \\: -K '\t' for tab-separated lines); a line
without it is refused, naming the line, where kcat would send it without a key.
--null-empty (-Z) sends an empty key or value as null: "k1:" with -K: -Z is a tombstone, which
deletes key k1 from an upsert table. --key (-k) gives every record one key.

Records go to partitions by the key's hash, as the Java client places them (murmur2), records
without a key spread; --partition (-p) sends every record to one. A topic the brokers lack is
created when they create topics on first use (a local stack does), and refused otherwise.
The records are acknowledged by every in-sync replica and written once each (an idempotent
producer), or fail after 30 s unacknowledged. The summary says which offsets of which
partitions they took, as floe where and floe as-of take positions. Ctrl-D ends typed input; an
interrupt (Ctrl-C) ends the reading at once, the records read before it are written and the
summary names them (exit 2).`,
		Example: `  for i in $(seq 1 1000); do echo "customer-$((i % 17)):{\"order\":$i}"; done | floe produce -t orders -K:
  printf 'a1:\n' | floe produce -t accounts -K: -Z          # a tombstone for key a1
  floe produce -t payments payment.bin                     # one record: the file's bytes`,
		RunE: func(cmd *cobra.Command, files []string) error {
			return runProduce(cmd, f, files)
		},
	}
	fs := cmd.Flags()
	f.brokerFlags.register(fs, " to produce to")
	topicFlag(fs, &f.topic, "topic `NAME` to write to")
	fs.StringVarP(&f.delimiter, "key-delimiter", "K", "", "split each line at its first `DELIM` into key and value")
	fs.StringVarP(&f.key, "key", "k", "", "`KEY` of every record")
	fs.BoolVarP(&f.nullEmpty, "null-empty", "Z", false, "send an empty key or value as null (an empty value is then a tombstone)")
	fs.Int32VarP(&f.partition, "partition", "p", 0, "`PARTITION` of every record (default: by the key's hash)")
	fs.StringArrayVarP(&f.headers, "header", "H", nil, "header `NAME=VALUE` of every record (NAME alone: without a value, as kcat), repeatable")
	fs.BoolVar(&f.json, "json", false, "print the summary as JSON")
	// kcat's -P, its produce mode, which floe produce is: a kcat line with
	// floe produce for kcat keeps it (it was an unknown flag).
	fs.BoolP("produce", "P", false, "kcat's produce mode, which floe produce is: taken, and changes nothing")
	_ = fs.MarkHidden("produce")
	return cmd
}

func runProduce(cmd *cobra.Command, f produceFlags, files []string) error {
	ctx := cmd.Context()
	switch {
	case f.topic == "":
		return errors.New("missing --topic NAME (-t), the topic to write to")
	case f.delimiter != "" && cmd.Flags().Changed("key"):
		return errors.New("--key gives every record one key, --key-delimiter takes each line's own: give one or the other")
	case f.delimiter != "" && len(files) > 0:
		return fmt.Errorf("--key-delimiter splits lines of standard input; a FILE (%s) is one record, whole: give it its key with --key", files[0])
	case cmd.Flags().Changed("partition") && f.partition < 0:
		return fmt.Errorf("--partition %d: want a partition number, 0 or more; leave --partition out to place records by key (kcat's -p -1)", f.partition)
	}
	if len(f.brokers) == 0 {
		return errNoBrokers
	}
	delimiter, err := parseDelimiter(f.delimiter)
	if err != nil {
		return err
	}
	headers, err := parseHeaders(f.headers)
	if err != nil {
		return err
	}
	// A FILE that cannot be read is refused before the brokers are asked
	// for the topic, which they may create on first use.
	for _, name := range files {
		if st, err := os.Stat(name); err != nil {
			return fmt.Errorf("record file: %w", err)
		} else if st.IsDir() {
			return fmt.Errorf("record file %s is a folder: give the files in it (%s/*)", name, name)
		}
	}
	broker, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer broker.Close()
	var key []byte
	if cmd.Flags().Changed("key") {
		key = emptyAsNull([]byte(f.key), f.nullEmpty)
	}
	recordOf := func(value []byte) *kgo.Record {
		return &kgo.Record{Key: key, Value: emptyAsNull(value, f.nullEmpty), Headers: headers}
	}
	var records iter.Seq2[*kgo.Record, error]
	if len(files) > 0 {
		records = fileRecords(files, recordOf)
	} else {
		if in, ok := cmd.InOrStdin().(*os.File); ok && isTerminal(in) {
			slog.Info("reading records from standard input, one a line; Ctrl-D ends")
		}
		records = lineRecords(ctx, cmd.InOrStdin(), delimiter, f.nullEmpty, recordOf)
	}
	partition := connector.ByKey
	if cmd.Flags().Changed("partition") {
		partition = f.partition
	}
	done, err := broker.Produce(ctx, f.topic, partition, records)
	switch {
	case errors.Is(err, connector.ErrNoPartition):
		err = fmt.Errorf("%w: give one of those with --partition (-p), or leave --partition out to place records by key", err)
	case errors.Is(err, kerr.MessageTooLarge):
		// franz-go's own limit (a batch of 1,000,012 bytes, as Kafka's
		// default max.message.bytes) or the topic's: its error said
		// neither, nor which record.
		err = fmt.Errorf("%w: a record is larger than floe produce sends (about 1 MB, Kafka's default max.message.bytes) or the topic takes; the summary names the records written before it, the rest were not", err)
	}
	if done.Records == 0 && err != nil {
		return err
	}
	report := producedReport(f.topic, done)
	if f.json {
		if jerr := printJSON(cmd.OutOrStdout(), report); jerr != nil {
			return errors.Join(err, jerr)
		}
		return err
	}
	printProduced(cmd.OutOrStdout(), report)
	return err
}

// produced is floe produce --json's summary.
type produced struct {
	Topic   string `json:"topic"`
	Records int64  `json:"records"`
	// Partitions are the offsets the records took, [low, high) a
	// partition.
	Partitions []producedRange `json:"partitions"`
}

type producedRange struct {
	Partition int32 `json:"partition"`
	Low       int64 `json:"low"`
	High      int64 `json:"high"`
}

func producedReport(topic string, p connector.Produced) produced {
	r := produced{Topic: topic, Records: p.Records, Partitions: []producedRange{}}
	for _, tp := range slices.SortedFunc(maps.Keys(p.Offsets), mapping.TopicPartition.Compare) {
		iv := p.Offsets[tp]
		r.Partitions = append(r.Partitions, producedRange{Partition: tp.Partition, Low: iv.Low, High: iv.High})
	}
	return r
}

// isTerminal reports whether f is a terminal: a user who ran floe produce
// without piping records in is told it waits for them.
// A character device is not enough: /dev/null is one, and a script's
// </dev/null was told to press Ctrl-D.
func isTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}

// emptyAsNull is b, or null when it is empty and --null-empty was given.
func emptyAsNull(b []byte, nullEmpty bool) []byte {
	if nullEmpty && len(b) == 0 {
		return nil
	}
	return b
}

// parseDelimiter reads --key-delimiter as kcat reads -K: \t, \n and \xNN
// (and \r and \\, which kcat leaves as they are) stand for the byte they
// name, so that -K '\t' splits tab-separated lines (taken literally, every
// line was refused).
func parseDelimiter(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			out = append(out, s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			out = append(out, '\t')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case '\\':
			out = append(out, '\\')
		case 'x':
			j := i + 1
			for j < len(s) && j < i+3 && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[j])) {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("--key-delimiter %q: \\x wants a hex byte (\\x09 is a tab)", s)
			}
			b, _ := strconv.ParseUint(s[i+1:j], 16, 8)
			out = append(out, byte(b))
			i = j - 1
		default:
			out = append(out, '\\', s[i])
		}
	}
	if bytes.Contains(out, []byte("\n")) {
		return nil, fmt.Errorf("--key-delimiter %q holds a newline, which ends each line before it", s)
	}
	return out, nil
}

// parseHeaders reads --header NAME=VALUE items, and NAME alone as kcat's
// -H NAME: a header without a value (null), where NAME= has an empty one.
func parseHeaders(items []string) ([]kgo.RecordHeader, error) {
	var out []kgo.RecordHeader
	for _, h := range items {
		name, value, ok := strings.Cut(h, "=")
		if name == "" {
			return nil, fmt.Errorf("--header %q: want NAME=VALUE, or NAME for a header without a value", h)
		}
		hd := kgo.RecordHeader{Key: name}
		if ok {
			hd.Value = []byte(value)
		}
		out = append(out, hd)
	}
	return out, nil
}

// lineRecords yields a record of each line of r (its newline, or \r\n,
// left out; the last line may lack one; an empty line none, as kcat),
// split at its first delimiter into key and value when delimiter is set.
// A line without the delimiter is an error naming it: kcat sends it
// without a key, which an upsert table then refuses as a dead letter far
// from the typo. r is read by a goroutine of its own, so that an
// interrupt (ctx) ends a wait for a terminal's next line, which a read is
// deaf to: the records read before it are still written.
func lineRecords(ctx context.Context, r io.Reader, delimiter []byte, nullEmpty bool, recordOf func(value []byte) *kgo.Record) iter.Seq2[*kgo.Record, error] {
	type read struct {
		line []byte
		err  error
	}
	return func(yield func(*kgo.Record, error) bool) {
		lines, stop := make(chan read, 256), make(chan struct{})
		defer close(stop)
		go func() {
			br := bufio.NewReaderSize(r, 1<<16)
			for {
				line, err := br.ReadBytes('\n')
				select {
				case lines <- read{line, err}:
				case <-stop:
					return
				}
				if err != nil {
					return
				}
			}
		}()
		for n := 1; ; n++ {
			var l read
			select {
			case <-ctx.Done():
				yield(nil, fmt.Errorf("interrupted before the end of the input (Ctrl-D ends typed input), %w: the summary names the records written, the rest were not", context.Cause(ctx)))
				return
			case l = <-lines:
			}
			if rec, err := lineRecord(l.line, n, delimiter, nullEmpty, recordOf); rec != nil || err != nil {
				if !yield(rec, err) || err != nil {
					return
				}
			}
			if l.err != nil {
				if l.err != io.EOF {
					yield(nil, fmt.Errorf("read standard input: %w", l.err))
				}
				return
			}
		}
	}
}

// lineRecord is the record of line n of standard input (lineRecords),
// none for an empty line.
func lineRecord(line []byte, n int, delimiter []byte, nullEmpty bool, recordOf func(value []byte) *kgo.Record) (*kgo.Record, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	// A Windows line ending is the line's end too: its \r kept would end
	// every value, and "k1:\r" with -K: -Z would upsert k1 rather than
	// delete it.
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) == 0 {
		// An empty line is no record, as kcat skips it: a blank line at
		// a file's end made an empty record.
		return nil, nil
	}
	if len(delimiter) == 0 {
		return recordOf(line), nil
	}
	k, v, ok := bytes.Cut(line, delimiter)
	if !ok {
		return nil, fmt.Errorf("line %d has no key delimiter %q (--key-delimiter): %.60q", n, delimiter, line)
	}
	rec := recordOf(v)
	rec.Key = emptyAsNull(k, nullEmpty)
	return rec, nil
}

// fileRecords yields a record of each file, its value the file's bytes.
func fileRecords(files []string, recordOf func(value []byte) *kgo.Record) iter.Seq2[*kgo.Record, error] {
	return func(yield func(*kgo.Record, error) bool) {
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				yield(nil, fmt.Errorf("read record file: %w", err))
				return
			}
			if !yield(recordOf(b), nil) {
				return
			}
		}
	}
}

// printProduced says how many records went to the topic, and which
// offsets of which partitions they took.
func printProduced(w io.Writer, r produced) {
	fmt.Fprintf(w, "produced %s to %s", plural(int(r.Records), "record"), r.Topic)
	for i, p := range r.Partitions {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(w, "%s%s %v", sep, mapping.TopicPartition{Topic: r.Topic, Partition: p.Partition}, mapping.Interval{Low: p.Low, High: p.High})
	}
	fmt.Fprintln(w)
}
