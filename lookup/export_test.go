package lookup_test

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

func TestBytesJSONAndText(t *testing.T) {
	for _, c := range []struct {
		b          lookup.Bytes
		json, text string
	}{
		{lookup.Bytes{B: []byte("héllo")}, `"héllo"`, "héllo"},
		{lookup.Bytes{Null: true}, `null`, ""},
		{lookup.Bytes{B: []byte{}}, `""`, ""},
		{lookup.Bytes{B: []byte{0xff, 0x00}}, `{"base64":"/wA="}`, "base64:/wA="},
	} {
		j, err := json.Marshal(c.b)
		if err != nil || string(j) != c.json || c.b.Text() != c.text {
			t.Errorf("%+v: json %s (%v), text %q; want %s, %q", c.b, j, err, c.b.Text(), c.json, c.text)
		}
	}
}

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]lookup.Format{
		"a.parquet": lookup.FormatParquet, "dir/A.CSV": lookup.FormatCSV,
		"a.jsonl": lookup.FormatJSONL, "a.ndjson": lookup.FormatJSONL, "a.json": lookup.FormatJSONL,
	} {
		if got, err := lookup.FormatOf(path); got != want || err != nil {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := lookup.FormatOf("rows.txt"); err == nil || !strings.Contains(err.Error(), `".txt"`) {
		t.Errorf("rows.txt: %v, want an error naming the extension", err)
	}
}

// TestExport writes the rows below a cut in every format, reads each file
// back, and checks the mode a user expects of a file they asked for.
func TestExport(t *testing.T) {
	_, tbl := lookupEnv(t)
	cut := mapping.Cut{{Topic: "w", Partition: 0}: 10}
	dir := t.TempDir()
	for _, name := range []string{"rows.parquet", "rows.csv", "rows.jsonl"} {
		path := filepath.Join(dir, name)
		format, err := lookup.FormatOf(path)
		if err != nil {
			t.Fatal(err)
		}
		n, err := lookup.Export(t.Context(), tbl, 0, cut, path, format)
		if err != nil || n != 10 {
			t.Fatalf("%s: %d rows, %v; want 10", name, n, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want -rw-r--r--", name, fi.Mode())
		}
		if got := countExported(t, path, format); got != 10 {
			t.Errorf("%s: read back %d rows, want 10", name, got)
		}
	}
	// Only the three files: no temporary file is left beside them.
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Fatalf("folder holds %d entries, want 3", len(entries))
	}
	// A failure leaves nothing, and never a partial file.
	if _, err := lookup.Export(t.Context(), tbl, 0, cut, filepath.Join(dir, "missing", "rows.csv"), lookup.FormatCSV); err == nil {
		t.Fatal("export into a missing folder succeeded")
	}
}

// countExported reads an exported file back and counts its rows.
func countExported(t *testing.T, path string, format lookup.Format) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	switch format {
	case lookup.FormatParquet:
		pf, err := file.NewParquetReader(f)
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		r, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := r.ReadTable(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tab.Release()
		if !tab.Schema().HasField(mapping.ColOffset) {
			t.Fatalf("parquet schema %s", tab.Schema())
		}
		return int(tab.NumRows())
	case lookup.FormatCSV:
		recs, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(recs[0], ",") != "topic,partition,offset,timestamp,key,value,headers" {
			t.Fatalf("csv header %v", recs[0])
		}
		return len(recs) - 1
	default:
		n := 0
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r struct {
				Offset  *int64            `json:"offset"`
				Headers []json.RawMessage `json:"headers"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Offset == nil || r.Headers == nil {
				t.Fatalf("json line %s: %v", sc.Bytes(), err)
			}
			n++
		}
		return n
	}
}
