package audit_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewS64ContentTagDeadLettersHideLostRows: a tag's dead letters
// are not main's. The content level took every row of a dead-letter table
// at an offset for that offset's dead letter, whatever commit it belongs
// to, while the rows level counts only the audited ledger's (by
// floe_commit_id).
//
// The story (docs/dead-letters.md): a registry table's records at offsets
// 1 and 2 became dead letters (commit c1: the registry did not have their
// schema yet); the operator tags main's head and rolls main back past c1
// to re-sink them now that they decode; the tag keeps c1's dead letters
// in lake.orders_dlq. The new sink (c2) makes rows of offsets 1 and 2 and
// a dead letter of offset 3 (so main's ledger names lake.orders_dlq).
// Then c2's data file is lost from the storage. floe audit
// --verify-content (without --deep) must find offsets 1 and 2 missing:
// the files level reads no data file, and the content level reads them
// where the log retains the records. It found the tag's dead letters at
// offsets 1 and 2, identical to the records, counted them as main's dead
// letters, and reported COMPLETE for a table that lost two rows.
func TestReviewS64ContentTagDeadLettersHideLostRows(t *testing.T) {
	e := newEnv(t)
	const topic = "orders"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	at := time.UnixMilli(1_700_000_000_000)
	rec := func(o int64, value string) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: 0, Offset: o, Timestamp: at.Add(time.Duration(o) * time.Second),
			Key: []byte{'k', byte('0' + o)}, Value: []byte(value)}
	}
	e.Produce([]*kgo.Record{rec(0, `{"id":0}`)})
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})
	c0 := tbl.Head().SnapshotID

	// c1: offsets [1,3) as dead letters, as a sink whose registry lacked
	// their schema made them; the operator keeps the rollback undoable with
	// a tag, and rolls main back past c1.
	recs := []*kgo.Record{rec(1, `{"id":1}`), rec(2, `{"id":2}`)}
	e.Produce(recs)
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	deadLettersThenRollBack(t, e, tbl, dlq, tp, recs, c0)

	// The sink again: offsets 1 and 2 decode now (rows), offset 3 is a
	// dead letter in main's dead-letter table.
	e.Produce([]*kgo.Record{rec(3, `{not json`)})
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})
	if l, err := tbl.Ledger(); err != nil || l.Next()[tp] != 4 {
		t.Fatalf("main's ledger: %v, next %v, want 4", err, l.Next())
	}
	clean := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if !clean.Complete() {
		var b strings.Builder
		_ = clean.WriteText(&b)
		t.Fatalf("main before the fault: not complete\n%s", b.String())
	}

	// c2's data file (offsets 1 and 2) is lost from the storage.
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, f := range files {
		if f.Offsets.Low == 1 {
			if err := os.Remove(strings.TrimPrefix(f.Path, "file://")); err != nil {
				t.Fatal(err)
			}
			lost++
		}
	}
	if lost != 1 {
		t.Fatalf("%d data files of offsets [1,3) in %+v, want 1", lost, files)
	}

	// Control: the rows level sees it.
	deep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if deep.Complete() {
		t.Fatalf("audit --deep --verify-content of a table that lost a data file: complete")
	}
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthFiles, Broker: e.Broker(), VerifyContent: true})
	var b strings.Builder
	_ = rep.WriteText(&b)
	if rep.Complete() {
		t.Fatalf("audit --verify-content of a table whose rows at offsets 1 and 2 are lost: COMPLETE (the tag's dead letters at those offsets taken for main's)\n%s", b.String())
	}
	missing := false
	for _, f := range rep.Findings {
		if f.Kind == audit.KindMissingRow && f.Partition == tp && f.Offsets == (mapping.Interval{Low: 1, High: 3}) {
			missing = true
		}
	}
	if !missing {
		t.Fatalf("want a missing-row finding at orders/0 [1,3)\n%s", b.String())
	}
}

// TestReviewS64UpsertContentTagDeadLetterNotMains: the upsert side of
// TestReviewS64ContentTagDeadLettersHideLostRows, on a correct table. A
// JSON upsert table's records at offsets 1 and 2 (key a) were dead
// letters of c1, kept by a tag when main was rolled back past c1; main
// re-sank them as upserts (offset 2 wins key a, offset 1 is superseded and
// has no row, rightly). The content level took the tag's dead letter at
// offset 1 for main's, counted the range's records as one dead letter
// more and one upsert fewer than the ledger, and reported a count-mismatch
// on a table equal to the fold of its log: NOT COMPLETE for as long as the
// tag lives.
func TestReviewS64UpsertContentTagDeadLetterNotMains(t *testing.T) {
	e := newEnv(t)
	const topic = "orders"
	e.Topic(topic, 1, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	tbl, dlq := e.TableWithDeadLetters("lake.orders", snapshot.OpenOptions{Create: true,
		Layout: mapping.Layout{Key: mapping.KeyString, Value: mapping.ValueJSON}, Mode: mapping.ModeUpsert, Key: &key})
	at := time.UnixMilli(1_700_000_000_000)
	rec := func(o int64, k, value string) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: 0, Offset: o, Timestamp: at.Add(time.Duration(o) * time.Second),
			Key: []byte(k), Value: []byte(value)}
	}
	e.Produce([]*kgo.Record{rec(0, "z", `{"id":0}`)})
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})
	c0 := tbl.Head().SnapshotID

	recs := []*kgo.Record{rec(1, "a", `{"id":1}`), rec(2, "a", `{"id":2}`)}
	e.Produce(recs)
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	deadLettersThenRollBack(t, e, tbl, dlq, tp, recs, c0)
	e.Produce([]*kgo.Record{rec(3, "b", `{not json`)})
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})

	for _, depth := range []audit.Depth{audit.DepthFiles, audit.DepthRows} {
		rep := e.audit(tbl, audit.Options{Depth: depth, Broker: e.Broker(), VerifyContent: true})
		if !rep.Complete() {
			var b strings.Builder
			_ = rep.WriteText(&b)
			t.Errorf("audit --verify-content (depth %v) of a correct upsert table whose tag keeps dead letters at offsets main re-sank: not complete\n%s", depth, b.String())
		}
	}
}

// deadLettersThenRollBack commits recs, of tp, as dead letters of a
// registry that lacked their schema (through the commit path a sink
// takes), then tags that commit and rolls main back to snapshot back, as
// an operator re-sinking them once they decode does (docs/dead-letters.md).
func deadLettersThenRollBack(t *testing.T, e *env, tbl, dlq *snapshot.Table, tp mapping.TopicPartition, recs []*kgo.Record, back int64) {
	t.Helper()
	sc, err := mapping.DeadLetterArrowSchema(dlq.Iceberg().Schema())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := mapping.NewDeadLetterBuilder(memory.DefaultAllocator, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for _, r := range recs {
		if err := rb.AppendDeadLetter(r, "schema registry: schema 1 not found", 1); err != nil {
			t.Fatal(err)
		}
	}
	low := recs[0].Offset
	c, err := tbl.Commit(e.Ctx, snapshot.Flush{
		Ranges:      []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: low, High: low + int64(len(recs))}, DeadLetters: int64(len(recs))}},
		DeadLetters: map[mapping.TopicPartition][]arrow.RecordBatch{tp: {rb.NewBatch()}},
	}, snapshot.CommitOptions{Writer: "test", DeadLetters: dlq, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	updates := []table.Update{
		table.NewSetSnapshotRefUpdate("before-rollback", c.Commit.SnapshotID, table.TagRef, -1, -1, -1),
		table.NewSetSnapshotRefUpdate(table.MainBranch, back, table.BranchRef, -1, -1, -1),
	}
	if _, _, err := tbl.Catalog().CommitTable(e.Ctx, tbl.Identifier(), nil, updates); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
}
