package snapshot_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestStreamKeyDictionary checks that a stream writes the kafka_key column
// without a dictionary where its first batch's keys do not repeat, keeps
// one where they do, writes the topic, partition and header columns
// without one, and follows the table where it says how to encode a
// column; the rows are the same whichever way.
func TestStreamKeyDictionary(t *testing.T) {
	// Keys distinct in the first 2,048 rows, then a few repeated. Parquet's
	// writer gives up a column's dictionary after a row group's first batch
	// that it does not pay for, and tries again in the next row group: the
	// second row group (rows from 32,768) has a dictionary unless the
	// stream decided on none for the file.
	const rows = 40_000
	key := func(i int) string {
		if i < 2048 {
			return fmt.Sprintf("id-%06d", i)
		}
		return fmt.Sprintf("user-%d", i%5)
	}
	for _, tc := range []struct {
		name     string
		props    iceberg.Properties
		first    int
		wantDict bool
		// plainDict: whether the topic, partition and header columns have
		// one.
		plainDict bool
	}{
		{name: "distinct first batch", first: 2048, wantDict: false},
		{name: "first batch too small to tell", first: 500, wantDict: true},
		{name: "repeating within the first batch", first: 4096, wantDict: true},
		{name: "table says dictionary", first: 2048, wantDict: true, plainDict: true,
			props: iceberg.Properties{
				"write.parquet.dict-encoding-enabled.column." + mapping.ColKey:                             "true",
				"write.parquet.dict-encoding-enabled.column." + mapping.ColTopic:                           "true",
				"write.parquet.dict-encoding-enabled.column." + mapping.ColPartition:                       "true",
				"write.parquet.dict-encoding-enabled.column." + mapping.ColHeaders + ".list.element.key":   "true",
				"write.parquet.dict-encoding-enabled.column." + mapping.ColHeaders + ".list.element.value": "true",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl, w, rb := streamTable(t, "lake.keys", tc.props)
			st := w.Stream(t.Context(), tbl.ArrowSchema())
			for i := range rows {
				rb.Append(&kgo.Record{Topic: "t", Offset: int64(i), Key: []byte(key(i)), Value: []byte("v"),
					Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("text/plain")}}})
				if i+1 == tc.first || (i+1 > tc.first && rb.Rows() == 2048) {
					if err := st.Write(rb.NewBatch()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := st.Write(rb.NewBatch()); err != nil {
				t.Fatal(err)
			}
			files, err := st.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 1 {
				t.Fatalf("%d files, want 1", len(files))
			}
			dict, keys := keyColumn(t, files[0])
			if dict != tc.wantDict {
				t.Errorf("kafka_key has a dictionary: %v, want %v", dict, tc.wantDict)
			}
			for _, col := range []string{mapping.ColTopic, mapping.ColPartition,
				mapping.ColHeaders + ".list.element.key", mapping.ColHeaders + ".list.element.value"} {
				if got := hasDictionary(t, files[0], col); got != tc.plainDict {
					t.Errorf("%s has a dictionary: %v, want %v", col, got, tc.plainDict)
				}
			}
			if len(keys) != rows {
				t.Fatalf("%d keys read back, want %d", len(keys), rows)
			}
			for i, k := range keys {
				if k != key(i) {
					t.Fatalf("key %d is %q, want %q", i, k, key(i))
				}
			}
		})
	}
}

// streamTable creates a table with props set (nil: none), and returns it
// with a writer of its files and a row builder of its rows.
func streamTable(t *testing.T, name string, props iceberg.Properties) (*snapshot.Table, *snapshot.Writer, *mapping.RowBuilder) {
	t.Helper()
	tbl := openTestTable(t, tempCatalog(t), name, snapshot.OpenOptions{Create: true})
	if props != nil {
		tx := tbl.Iceberg().NewTransaction()
		if err := tx.SetProperties(props); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		tbl = openTestTable(t, tbl.Catalog(), name, snapshot.OpenOptions{})
	}
	w, err := tbl.NewWriter(tbl.Iceberg(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rb.Release)
	return tbl, w, rb
}

// openColumn opens a data file and finds one of its columns.
func openColumn(t *testing.T, df iceberg.DataFile, name string) (*file.Reader, int) {
	t.Helper()
	r, err := file.OpenParquetFile(strings.TrimPrefix(df.FilePath(), "file://"), false)
	if err != nil {
		t.Fatal(err)
	}
	col := r.MetaData().Schema.ColumnIndexByName(name)
	if col < 0 {
		r.Close()
		t.Fatalf("%s has no column %s", df.FilePath(), name)
	}
	return r, col
}

// hasDictionary reports whether any row group of a data file stores
// column name with a dictionary.
func hasDictionary(t *testing.T, df iceberg.DataFile, name string) bool {
	t.Helper()
	r, col := openColumn(t, df, name)
	defer r.Close()
	for g := range r.NumRowGroups() {
		md, err := r.RowGroup(g).MetaData().ColumnChunk(col)
		if err != nil {
			t.Fatal(err)
		}
		if md.HasDictionaryPage() {
			return true
		}
	}
	return false
}

// keyColumn reads the kafka_key column of a data file: whether any row
// group stores it with a dictionary, and its values in order.
func keyColumn(t *testing.T, df iceberg.DataFile) (dict bool, keys []string) {
	t.Helper()
	dict = hasDictionary(t, df, mapping.ColKey)
	r, col := openColumn(t, df, mapping.ColKey)
	defer r.Close()
	for g := range r.NumRowGroups() {
		rg := r.RowGroup(g)
		cr, err := rg.Column(col)
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]parquet.ByteArray, rg.NumRows())
		defLevels := make([]int16, rg.NumRows())
		n, _, err := cr.(*file.ByteArrayColumnChunkReader).ReadBatch(rg.NumRows(), vals, defLevels, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals[:n] {
			keys = append(keys, string(v))
		}
	}
	return dict, keys
}

// TestStreamReleasesFirstBatchOnFailure: a stream takes its first batch
// before iceberg-go's writer starts (to choose the key column's encoding);
// when the writer fails before reading any batch (here an Arrow schema the
// table does not have), the stream still releases it.
func TestStreamReleasesFirstBatchOnFailure(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.leak", snapshot.OpenOptions{Create: true})
	w, err := tbl.NewWriter(tbl.Iceberg(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	rb, err := mapping.NewRowBuilder(mem, tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		rb.Append(&kgo.Record{Topic: "t", Offset: int64(i), Key: []byte(fmt.Sprint(i)), Value: []byte("v")})
	}
	b := rb.NewBatch()
	rb.Release()
	bad := arrow.NewSchema(append(tbl.ArrowSchema().Fields(), arrow.Field{Name: "not_in_table", Type: arrow.BinaryTypes.String}), nil)
	st := w.Stream(t.Context(), bad)
	_ = st.Write(b) // the writer may have failed already
	if _, err := st.Close(); err == nil {
		t.Fatal("close: no error for a schema the table does not have")
	}
	mem.AssertSize(t, 0)
}
