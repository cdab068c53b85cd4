package connector_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestSinkPartitionValuesSurviveBufferReuse: a sink of JSON values into a
// table partitioned by identity(region), a string column. The sink's
// encoders take the partition value of each data file from the first batch
// that has it (iceberg-go's fanout writer keeps arrow's String.Value, which
// aliases the batch's data buffer) and the batch is released long before
// the commit writes the manifest. The manifest must still name each file's
// region: a reader filtering on region prunes by it. With an allocator
// that reuses freed buffers (tried, see README "Performance") the
// manifests named later batches' regions.
func TestSinkPartitionValuesSurviveBufferReuse(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	l := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyString}
	pb, err := mapping.ParsePartitionBy("identity(region)")
	if err != nil {
		t.Fatal(err)
	}
	tbl := e.OpenTable("lake.orders", snapshot.OpenOptions{Create: true, Layout: l, PartitionBy: &pb})
	// Regions long enough that a batch's (8192 rows) region data is a
	// large buffer; the first batch has regions of its own.
	const n = 5 * 8192
	region := func(i int) string {
		if i < 8192 {
			return fmt.Sprintf("region-%d-%s", i%4, strings.Repeat("a", 40))
		}
		return fmt.Sprintf("region-%d-%s", i%4, strings.Repeat("b", 40))
	}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i),
			Value: fmt.Appendf(nil, `{"id":%d,"region":%q}`, i, region(i))}
	}
	e.Produce(recs)
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{{Topic: "orders", Partition: 0}: n})

	// The manifest's partition values.
	meta := tbl.Iceberg().Metadata()
	fsys, err := tbl.Iceberg().FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := tbl.Iceberg().CurrentSnapshot().Manifests(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range manifests {
		entries, err := m.FetchEntries(fsys, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range entries {
			spec := meta.PartitionSpecByID(int(en.DataFile().SpecID()))
			for _, f := range spec.Fields() {
				got = append(got, fmt.Sprint(en.DataFile().Partition()[f.FieldID]))
			}
		}
	}
	want := map[string]bool{}
	for i := range n {
		want[region(i)] = true
	}
	slices.Sort(got)
	got = slices.Compact(got)
	var wantList []string
	for r := range want {
		wantList = append(wantList, r)
	}
	slices.Sort(wantList)

	// What a reader sees: rows of the first batch's regions, by filter.
	r0 := region(0)
	_, it, err := tbl.Iceberg().Scan(table.WithRowFilter(iceberg.EqualTo(iceberg.Reference("region"), r0))).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var matched int64
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		matched += b.NumRows()
		b.Release()
	}
	if matched != 8192/4 {
		t.Errorf("a scan for region = %q read %d rows, want %d", r0, matched, 8192/4)
	}
	if !slices.Equal(got, wantList) {
		t.Fatalf("partition values in the manifests:\n%q\nwant\n%q", got, wantList)
	}
}
