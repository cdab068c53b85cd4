package connector_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// checkRowIDs reads tbl with iceberg-go's scan and row lineage and fails
// on a null or shared _row_id.
func checkRowIDs(t *testing.T, tbl *table.Table) map[string]int64 {
	t.Helper()
	_, it, err := tbl.Scan(table.WithRowLineage()).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	seen := map[int64]string{}
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		col := func(n string) int { return b.Schema().FieldIndices(n)[0] }
		part := b.Column(col(mapping.ColPartition)).(*array.Int32)
		off := b.Column(col(mapping.ColOffset)).(*array.Int64)
		rid := b.Column(col("_row_id")).(*array.Int64)
		for i := range int(b.NumRows()) {
			pos := fmt.Sprintf("%d@%d", part.Value(i), off.Value(i))
			if rid.IsNull(i) {
				t.Fatalf("row %s has a null _row_id", pos)
			}
			if other, dup := seen[rid.Value(i)]; dup {
				t.Fatalf("rows %s and %s share _row_id %d", other, pos, rid.Value(i))
			}
			seen[rid.Value(i)] = pos
			out[pos] = rid.Value(i)
		}
		b.Release()
	}
	return out
}

// TestFormatV3GroupTwoWriters: two members of one group sink a topic into
// an append table of format 3, their commits racing: every offset once,
// the audit complete, every row a distinct _row_id (iceberg-go's scan with
// row lineage). From a review.
func TestFormatV3GroupTwoWriters(t *testing.T) {
	e := newEnv(t)
	topic, name, group := "v3shared", "lake.v3shared", "floe-v3shared"
	e.Topic(topic, 4, nil)
	opts := snapshot.OpenOptions{Create: true, Properties: map[string]string{"format-version": "3"}}
	tbl := e.OpenTable(name, opts)
	pr := e.produceRounds(4, 30*time.Millisecond, func(p int32, round int) []*kgo.Record {
		return records(topic, p, 20, fmt.Sprintf("r%d", round))
	})
	var members []*member
	for range 2 {
		cfg := groupConfig(topic, group)
		cfg.FlushInterval = 100 * time.Millisecond
		members = append(members, e.startMemberOn(e.OpenTable(name, snapshot.OpenOptions{}), cfg))
	}
	time.Sleep(6 * time.Second)
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, name, want, 60*time.Second)
	for _, m := range members {
		s := m.halt(t)
		t.Logf("member: %d rows in %d commits, %d retries", s.Records, s.Commits, s.Retries)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if v := tbl.Iceberg().Metadata().Version(); v != 3 {
		t.Fatalf("format %d", v)
	}
	rs := checkExactlyOnce(t, tbl, want)
	if int64(len(rs)) != produced {
		t.Fatalf("%d rows, want %d", len(rs), produced)
	}
	auditComplete(t, e, tbl)
	ids := checkRowIDs(t, tbl.Iceberg())
	if int64(len(ids)) != produced {
		t.Fatalf("%d rows with row ids, want %d", len(ids), produced)
	}
}
