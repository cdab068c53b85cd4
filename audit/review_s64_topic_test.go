package audit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
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
	tbl := retopicTable(t, e)
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

// TestReviewS64UpsertContentTopicColumnAltered: the upsert table's side of
// TestReviewS64ContentTopicColumnAltered. The content level's fold of an
// upsert table read every row of a one-topic table as the table's topic's
// (readUpsertRows set the topic of each row to it), so rows rewritten to
// name another topic were verified as the table's own.
func TestReviewS64UpsertContentTopicColumnAltered(t *testing.T) {
	e := newEnv(t)
	const topic = "uptopic"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.UpsertTable("lake." + topic)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "a%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))})
	}
	e.Produce(recs)
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil || len(files) != 1 {
		t.Fatalf("data files %+v, %v: want 1", files, err)
	}
	// The file's rows, the same in every column but kafka_topic.
	var rows arrow.RecordBatch
	err = tbl.ReadFiles(e.Ctx, []string{files[0].Path}, func(fb snapshot.FileBatch) error {
		if fb.Done {
			return nil
		}
		b := fb.Batch
		cols := b.Columns()
		out := make([]arrow.Array, len(cols))
		for i, c := range cols {
			if b.Schema().Field(i).Name != mapping.ColTopic {
				c.Retain()
				out[i] = c
				continue
			}
			sb := array.NewStringBuilder(memory.NewGoAllocator())
			for range b.NumRows() {
				sb.Append("ghost")
			}
			out[i] = sb.NewArray()
			sb.Release()
		}
		rows = array.NewRecordBatch(b.Schema(), out, b.NumRows())
		return nil
	})
	if err != nil || rows == nil || rows.NumRows() != 10 {
		t.Fatalf("read the file: %v (%v)", err, rows)
	}
	rewriteInPlace(t, tbl, files[0], rows)
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthFiles, Broker: e.Broker(), VerifyContent: true})
	if rep.Complete() {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Fatalf("audit --verify-content of an upsert table whose rows name topic ghost: COMPLETE\n%s", b.String())
	}
	for _, f := range rep.Findings {
		if f.Kind != audit.KindMissingRow || f.Partition.Topic != topic {
			continue
		}
		return
	}
	t.Fatalf("findings %q: want missing-row findings of %s/0", findings(rep), topic)
}
