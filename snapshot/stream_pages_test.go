package snapshot_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestStreamPages checks that streamed files' value column is cut into
// pages of at most 2,048 rows (write.parquet.page-row-limit, with 256 KiB
// pages) unless the table sets its own page sizes, and that iceberg-go's
// scan reads every row of the committed files back as written.
func TestStreamPages(t *testing.T) {
	const rows, batch = 20_000, 8192
	for _, tc := range []struct {
		name  string
		props iceberg.Properties
		// maxPage is the most values a page of kafka_value may hold.
		maxPage int64
	}{
		{name: "floe's pages", maxPage: 2048},
		{name: "table's pages", maxPage: batch, props: iceberg.Properties{
			"write.parquet.page-row-limit":  "20000",
			"write.parquet.page-size-bytes": "1048576",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := openTestTable(t, tempCatalog(t), "lake.pages", snapshot.OpenOptions{Create: true})
			if tc.props != nil {
				tx := tbl.Iceberg().NewTransaction()
				if err := tx.SetProperties(tc.props); err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Commit(t.Context()); err != nil {
					t.Fatal(err)
				}
				tbl = openTestTable(t, tbl.Catalog(), "lake.pages", snapshot.OpenOptions{})
			}
			w, err := tbl.NewWriter(tbl.Iceberg(), nil)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
			if err != nil {
				t.Fatal(err)
			}
			defer rb.Release()
			st := w.Stream(t.Context(), tbl.ArrowSchema())
			var want []string
			for i := range rows {
				key := fmt.Sprintf("k%05d", i)
				// About 200 bytes, unlike from row to row.
				value := fmt.Sprintf(`{"id":%d,"note":"%0190x"}`, i, uint64(i)*0x9e3779b97f4a7c15)
				rb.Append(&kgo.Record{Topic: "t", Offset: int64(i), Key: []byte(key), Value: []byte(value)})
				want = append(want, fmt.Sprintf("0/%03d %s=%s", i, key, value))
				if rb.Rows() == batch {
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
			var most int64
			pages := 0
			for _, df := range files {
				r, col := openColumn(t, df, mapping.ColValue)
				for g := range r.NumRowGroups() {
					pr, err := r.RowGroup(g).GetColumnPageReader(col)
					if err != nil {
						t.Fatal(err)
					}
					for pr.Next() {
						if n := int64(pr.Page().NumValues()); n > 0 {
							most, pages = max(most, n), pages+1
						}
					}
					if err := pr.Err(); err != nil {
						t.Fatal(err)
					}
				}
				r.Close()
			}
			if most > tc.maxPage || most < tc.maxPage/2 {
				t.Errorf("kafka_value's largest page holds %d values, want %d at most (and more than half of it); %d pages", most, tc.maxPage, pages)
			}
			tp := mapping.TopicPartition{Topic: "t", Partition: 0}
			commitFlush(t, tbl, snapshot.Flush{Writer: w, Files: map[mapping.TopicPartition][]iceberg.DataFile{tp: files},
				Ranges: []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: rows}, Records: rows}}})
			got := snapshotRows(t, tbl, 0)
			slices.Sort(want)
			if len(got) != len(want) {
				t.Fatalf("scan read %d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("row %d read back as %q, want %q", i, got[i], want[i])
				}
			}
		})
	}
}
