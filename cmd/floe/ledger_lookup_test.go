package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestLookupsReadOnlyTheirSegment: floe where, as-of and status on a
// table whose ledger archive is two segments read only the part of the
// ledger they need. With the file of the older segment gone, where and
// as-of of an offset of the newer commits still answer (the snapshot that
// holds it), and status still reports every partition's next offset;
// floe where of an offset only the missing segment holds fails, naming
// the file. Before segment indexes, every command read every segment and
// failed on the missing one.
func TestLookupsReadOnlyTheirSegment(t *testing.T) {
	st, loc := sinkStack(t)
	sink := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "40"}, loc...)
	mustFloe(t, sink...)
	maintain := append([]string{"maintain", "--table", "lake.orders", "--retain-last", "1"}, loc...)
	mustFloe(t, maintain...)
	older := segmentFiles(t, st)
	first, err := auditTable(t, st, "lake.orders").Summary(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := first.Partition(mapping.TopicPartition{Topic: "orders", Partition: 1})
	newer := fmt.Sprint(p1.High + 5)
	// A few more commits, archived by a second expiry into a segment too
	// small to absorb the first.
	recs := make([]*kgo.Record, 10)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "orders", Partition: 1, Value: []byte(`{"n":1}`)}
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, sink...)
	mustFloe(t, maintain...)
	segs := segmentFiles(t, st)
	if len(older) != 1 || len(segs) != 2 {
		t.Fatalf("segments %v, then %v: want one, then two", older, segs)
	}
	if err := os.Remove(strings.TrimPrefix(older[0], "file://")); err != nil {
		t.Fatal(err)
	}

	code, out, errs := floe(t, append([]string{"where", "--table", "lake.orders", "--partition", "1", "--offset", newer, "--json"}, loc...)...)
	var w lookup.WhereResult
	if err := json.Unmarshal([]byte(out), &w); code != exitOK || err != nil || w.Status != lookup.StatusRow || w.SnapshotID == nil {
		t.Fatalf("where of a newer offset: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	code, out, errs = floe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "orders/1=" + newer, "--json"}, loc...)...)
	var a lookup.AsOfResult
	if err := json.Unmarshal([]byte(out), &a); code != exitOK || err != nil || a.SnapshotID == 0 {
		t.Fatalf("as-of of a newer offset: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	code, out, errs = floe(t, append([]string{"status", "--table", "lake.orders", "--json"}, loc...)...)
	var s lookup.TableStatus
	if err := json.Unmarshal([]byte(out), &s); code != exitOK || err != nil || len(s.Partitions) != 3 || *s.Partitions[1].TableNext != p1.High+10 {
		t.Fatalf("status: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	code, out, errs = floe(t, append([]string{"where", "--table", "lake.orders", "--partition", "1", "--offset", "5"}, loc...)...)
	if code != exitError || !strings.Contains(errs, strings.TrimPrefix(older[0], "file://")) {
		t.Fatalf("where of an offset of the missing segment: exit %d, want %d naming it\n%s\n%s", code, exitError, out, errs)
	}
}

// segmentFiles returns the ledger archive segments the table names.
func segmentFiles(t *testing.T, st *localstack.Stack) []string {
	t.Helper()
	var out []string
	for k, v := range auditTable(t, st, "lake.orders").Iceberg().Properties() {
		if strings.HasPrefix(k, snapshot.PropLedgerSegmentPrefix) {
			out = append(out, v)
		}
	}
	return out
}
