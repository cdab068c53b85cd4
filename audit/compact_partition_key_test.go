package audit_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestCompactPartitionsThatPrintAlike: identity(region) with rows whose
// region is null and rows whose region is the string "<nil>": two Iceberg
// partitions. Compaction grouped files by their partition values as fmt
// prints them, so both partitions shared a group; every merge then wrote
// one file per partition, as many as it replaced, and every compaction
// (the sink's hourly one too) rewrote them again. After compaction each
// partition's files hold only its own rows, a second compaction has
// nothing to do, and a reader filtering region IS NULL finds exactly the
// null ones (from a review).
func TestCompactPartitionsThatPrintAlike(t *testing.T) {
	e := newEnv(t)
	topic := "nils"
	e.Topic(topic, 1, nil)
	pb, err := mapping.ParsePartitionBy("identity(region)")
	if err != nil {
		t.Fatal(err)
	}
	l := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyString}
	tbl := e.OpenTable("lake.nils", snapshot.OpenOptions{Create: true, Layout: l, PartitionBy: &pb})
	var recs []*kgo.Record
	nulls := 0
	for i := range 40 {
		v := fmt.Sprintf(`{"id":%d,"region":"<nil>"}`, i)
		if i%2 == 0 {
			v = fmt.Sprintf(`{"id":%d,"region":null}`, i)
			nulls++
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)})
	}
	e.Produce(recs)
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 4})
	before := sortedRows(t, tbl)
	auditEveryLevel(t, e, tbl)
	res, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compact %+v", res)
	if after := sortedRows(t, tbl); !reflect.DeepEqual(after, before) {
		t.Fatal("rows changed by compaction")
	}
	res2, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second compact %+v", res2)
	// Two Iceberg partitions of 20 small rows each: one file each.
	if res.FilesAfter > 2 || res2.Replaced > 0 && res2.FilesAfter >= res2.FilesBefore {
		t.Errorf("compaction of 2 Iceberg partitions (region null and region '<nil>') left %d files (replaced %d, added %d), and the next one rewrote %d files into %d: its bins key partitions by fmt %%v, null and \"<nil>\" share one bin",
			res.FilesAfter, res.Replaced, res.Added, res2.Replaced, res2.Added)
	}
	n := 0
	for _, b := range liveRows(t, tbl, iceberg.IsNull(iceberg.Reference("region"))) {
		n += int(b.NumRows())
	}
	m := 0
	for _, b := range liveRows(t, tbl, iceberg.EqualTo(iceberg.Reference("region"), "<nil>")) {
		m += int(b.NumRows())
	}
	if n != nulls || m != 40-nulls {
		t.Errorf("after compaction a scan for region IS NULL reads %d rows, want %d; region = '<nil>' reads %d, want %d", n, nulls, m, 40-nulls)
	}
	auditEveryLevel(t, e, tbl)
}
