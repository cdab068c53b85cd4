package audit_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/mapping"
)

// TestReviewS64ContentTopicColumnAltered: TestRowsTopicColumnAltered
// without --deep. A data file rewritten behind floe's back with another
// topic's name in its rows (same path, counts, partitions and offsets;
// the manifests' bounds unchanged) holds no row of the table's topic at
// offsets [40, 60) of partition 0: floe where and a query by topic miss
// them, and the rows level says so. The content level, which reads these
// rows where the log retains their records, filtered the rows by topic
// only in a table of several topics and attributed the other topic's rows
// to the table's own (the digest leaves topic, partition and offset out):
// floe audit --verify-content said COMPLETE.
func TestReviewS64ContentTopicColumnAltered(t *testing.T) {
	e := newEnv(t)
	const name = "retopic"
	tbl := sunkTable(t, e, name)
	f := fileOf(t, tbl, 0, 40)
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range records(name, 0, 20, "run2") {
		r.Topic, r.Offset = "ghost", int64(40+i)
		rb.Append(r)
	}
	rows := rb.NewBatch()
	rb.Release()
	rewriteInPlace(t, tbl, f, rows)
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthFiles, Broker: e.Broker(), VerifyContent: true})
	if rep.Complete() {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Fatalf("audit --verify-content of a table whose rows at retopic/0 [40, 60) name topic ghost: COMPLETE\n%s", b.String())
	}
	want := "content missing-row retopic/0 [40, 60)"
	if got := findings(rep); len(got) != 1 || got[0] != want {
		t.Fatalf("findings %q, want %q", got, want)
	}
}
