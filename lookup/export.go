package lookup

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Format is a file format rows are exported in.
type Format string

// Export formats.
const (
	// FormatParquet writes the table's own Arrow schema, so any Parquet
	// reader sees the same columns and types as the Iceberg table.
	FormatParquet Format = "parquet"
	// FormatCSV writes a header line and one line per row: topic,
	// partition, offset, timestamp (RFC 3339), key, value (Bytes.Text) and
	// headers (a JSON array).
	FormatCSV Format = "csv"
	// FormatJSONL writes one Row per line, as Row.JSON.
	FormatJSONL Format = "jsonl"
)

// csvHeader names the CSV columns.
var csvHeader = []string{"topic", "partition", "offset", "timestamp", "key", "value", "headers"}

// FormatOf picks the export format from a file name's extension: .parquet,
// .csv, or .jsonl, .ndjson and .json for JSON lines.
func FormatOf(path string) (Format, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".parquet":
		return FormatParquet, nil
	case ".csv":
		return FormatCSV, nil
	case ".jsonl", ".ndjson", ".json":
		return FormatJSONL, nil
	default:
		return "", fmt.Errorf("unknown extension %q; want .parquet, .csv, .jsonl, .ndjson or .json", ext)
	}
}

// Export writes the rows of a snapshot of tbl (0: the branch head) below
// cut (nil: every row) to the file path in format, and returns how many it
// wrote. The file is written beside its final name and renamed at the end,
// so a failure never leaves a partial file, nor replaces an existing one.
// It gets mode 0644 like any file a user writes (the temporary file it
// starts as is private to the writer).
func Export(ctx context.Context, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut, path string, format Format) (n int64, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("export rows to %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriter(tmp)
	switch format {
	case FormatParquet:
		n, err = writeParquet(ctx, bw, tbl, snapshotID, cut)
	case FormatCSV:
		n, err = writeCSV(ctx, bw, tbl, snapshotID, cut)
	case FormatJSONL:
		n, err = writeJSONLines(ctx, bw, tbl, snapshotID, cut)
	default:
		err = fmt.Errorf("unknown format %q", format)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, fmt.Errorf("export rows to %s: %w", path, err)
	}
	return n, nil
}

// writeJSONLines writes the rows of a snapshot of tbl below cut to w, one
// Row.JSON per line, and returns how many it wrote.
func writeJSONLines(ctx context.Context, w io.Writer, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut) (n int64, err error) {
	err = JSONRows(ctx, tbl, snapshotID, cut, func(row []byte) error {
		n++
		if _, err := w.Write(row); err != nil {
			return err
		}
		_, err := io.WriteString(w, "\n")
		return err
	})
	return n, err
}

func writeParquet(ctx context.Context, w io.Writer, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut) (n int64, err error) {
	var pw *pqarrow.FileWriter
	err = tbl.Rows(ctx, snapshotID, cut, func(b arrow.RecordBatch) error {
		if pw == nil {
			if pw, err = pqarrow.NewFileWriter(b.Schema(), w, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps()); err != nil {
				return err
			}
		}
		n += b.NumRows()
		return pw.WriteBuffered(b)
	})
	if err == nil && pw == nil {
		// No rows: still a valid Parquet file with the table's columns.
		pw, err = pqarrow.NewFileWriter(tbl.ArrowSchema(), w, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	}
	if pw != nil {
		if cerr := pw.Close(); err == nil {
			err = cerr
		}
	}
	return n, err
}

func writeCSV(ctx context.Context, w io.Writer, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut) (n int64, err error) {
	cw := csv.NewWriter(w)
	if tbl.Layout() != mapping.RawLayout {
		return writeTypedCSV(ctx, cw, tbl, snapshotID, cut)
	}
	if err := cw.Write(csvHeader); err != nil {
		return 0, err
	}
	err = Rows(ctx, tbl, snapshotID, cut, func(r Row) error {
		n++
		hdrs, err := MarshalJSON(r.Headers)
		if err != nil {
			return err
		}
		return cw.Write([]string{r.Topic, strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.Offset, 10),
			r.Timestamp.Format(time.RFC3339Nano), r.Key.Text(), r.Value.Text(), string(hdrs)})
	})
	cw.Flush()
	if err == nil {
		err = cw.Error()
	}
	return n, err
}

// writeTypedCSV writes the rows of a typed table: a column per column of
// the snapshot's schema (as JSON lines and Parquet exports have them; the
// table's current schema gave a snapshot older than a column added since
// a column more than its rows), binary values as Bytes.Text, nested values
// (structs, lists, maps) as JSON (binary in them as Bytes marshals it),
// nulls empty.
func writeTypedCSV(ctx context.Context, cw *csv.Writer, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut) (n int64, err error) {
	var (
		head []string
		rec  []string
	)
	writeHead := func(schema *arrow.Schema) error {
		head = make([]string, schema.NumFields())
		for i, f := range schema.Fields() {
			head[i] = f.Name
		}
		rec = make([]string, len(head))
		return cw.Write(head)
	}
	err = tbl.Rows(ctx, snapshotID, cut, func(b arrow.RecordBatch) error {
		if head == nil {
			if err := writeHead(b.Schema()); err != nil {
				return err
			}
		}
		for i := range int(b.NumRows()) {
			n++
			for j := range rec {
				rec[j] = ""
				if j < int(b.NumCols()) && b.Column(j).IsValid(i) {
					if rec[j], err = csvValue(b.Column(j), i); err != nil {
						return err
					}
				}
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && head == nil {
		// No rows: the header alone, of the table's columns.
		err = writeHead(tbl.ArrowSchema())
	}
	cw.Flush()
	if err == nil {
		err = cw.Error()
	}
	return n, err
}

// csvValue is value i of a, valid, as writeTypedCSV writes it.
func csvValue(a arrow.Array, i int) (string, error) {
	switch c := a.(type) {
	case *array.Binary:
		return Bytes{B: c.Value(i)}.Text(), nil
	case *array.LargeBinary:
		return Bytes{B: c.Value(i)}.Text(), nil
	case *array.Decimal128:
		return decimalText(c, i), nil
	case *array.Struct, *array.List, *array.Map:
		b, err := MarshalJSON(jsonValue(a, i))
		return string(b), err
	}
	return a.ValueStr(i), nil
}
