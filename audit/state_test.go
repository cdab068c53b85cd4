package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// State tables (floe.fold=latest) keep each key's latest record. These
// tests fold real logs (tombstones, records without a key, transactions,
// compaction, retention) and check that the audit finds nothing, then
// inject faults a state table can suffer and check that the right level
// reports them exactly.

// stateOffsets returns the offsets of the rows a fold of recs keeps, sorted:
// each key's latest record unless it is a tombstone. recs were produced in
// one call to an empty partition, so their offsets are their indices.
func stateOffsets(recs []*kgo.Record) []int64 {
	latest := map[string]int{}
	for i, r := range recs {
		if r.Key != nil {
			latest[string(r.Key)] = i
		}
	}
	var out []int64
	for _, i := range latest {
		if recs[i].Value != nil {
			out = append(out, int64(i))
		}
	}
	slices.Sort(out)
	return out
}

// runs renders sorted offsets as merged intervals "[lo, hi)".
func runs(offsets []int64) []mapping.Interval {
	var out []mapping.Interval
	for _, o := range offsets {
		if n := len(out); n > 0 && out[n-1].High == o {
			out[n-1].High++
			continue
		}
		out = append(out, mapping.Interval{Low: o, High: o + 1})
	}
	return out
}

// foldedTopic produces 60 records (repeated keys, tombstones, records
// without a key) to partition 0 of a new topic and folds them into a
// legacy state table, 25 records per commit. It returns the table and the
// records; their offsets are their indices.
func foldedTopic(t *testing.T, e *env, name string) (*snapshot.Table, []*kgo.Record) {
	t.Helper()
	e.Topic(name, 1, nil)
	recs := records(name, 0, 60, "a")
	e.Produce(recs)
	tbl := e.LegacyStateTable("lake." + name)
	e.FoldLegacy(tbl, name, 25)
	return tbl, recs
}

// appendUnfolded commits recs as the rows of a floe commit of range r that
// does not fold: a plain append carrying ledger properties, as a writer
// ignoring floe.fold would make.
func appendUnfolded(t *testing.T, tbl *snapshot.Table, r mapping.Range, recs ...*kgo.Record) {
	t.Helper()
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for _, rec := range recs {
		rb.Append(rec)
	}
	path := writeFile(t, tbl, rb.NewBatch())
	props, err := mapping.Commit{ID: uuid.NewString(), Writer: "unfolding", Ranges: []mapping.Range{r}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.Iceberg().NewTransaction()
	if err := txn.AddFiles(t.Context(), []string{path}, props, false); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// contentDepth is every level.
func contentDepth(e *env) audit.Options {
	return audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true}
}

func TestStateCleanFoldWithTransactions(t *testing.T) {
	e := newEnv(t)
	const topic = "kv"
	e.MixedLog(topic, floetest.MixedLog{Partitions: 2, Records: 90, Committed: 10, Aborted: 7, Trailing: 25})

	tbl := e.LegacyStateTable("lake.kv")
	e.FoldLegacy(tbl, topic, 40)
	rep := auditEveryLevel(t, e, tbl)
	if rep.Fold != mapping.FoldLatest {
		t.Fatalf("report fold %q, want %q", rep.Fold, mapping.FoldLatest)
	}
	var rows, records int64
	for _, p := range rep.Partitions {
		rows += p.Rows
		records += p.Records
	}
	c := contentTotals(rep)
	// Every row is its record's copy; every other committed record was
	// folded away; two markers per partition, 7 aborted records each.
	if rows == 0 || rows >= records || c.Verified != rows || c.Verified+c.Folded != records ||
		c.Markers != 4 || c.Aborted != 14 || c.Compacted != 0 || c.Unverifiable != 0 {
		t.Fatalf("content %+v for %d rows of %d records", c, rows, records)
	}

	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"state table (floe.fold=latest)", "folded away", "verdict: COMPLETE"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var doc struct {
		Fold       *string `json:"fold"`
		Partitions []struct {
			Content struct {
				Folded *int64 `json:"folded"`
			} `json:"content"`
		} `json:"partitions"`
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Fold == nil || *doc.Fold != "latest" || doc.Partitions[0].Content.Folded == nil {
		t.Fatalf("JSON: fold %v, partitions %+v\n%s", doc.Fold, doc.Partitions, js.String())
	}

	// The same topic sunk as events: fold is null, and the event-table
	// invariants hold.
	events := e.Table("lake.kv_events")
	e.sink(events, connector.Config{Topic: topic})
	rep = auditEveryLevel(t, e, events)
	js.Reset()
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if rep.Fold != "" || !strings.Contains(js.String(), `"fold": null`) {
		t.Fatalf("event table: fold %q\n%s", rep.Fold, js.String())
	}
}

// TestStateLegacyFoldedTwice: a legacy state table folded in two runs (the
// second from the first's ledger) audits COMPLETE at every level.
func TestStateLegacyFoldedTwice(t *testing.T) {
	e := newEnv(t)
	const topic = "resumed"
	e.Topic(topic, 2, nil)
	for p := range int32(2) {
		e.Produce(records(topic, p, 150, "a"))
	}
	tbl := e.LegacyStateTable("lake.resumed")
	e.FoldLegacy(tbl, topic, 40)
	auditEveryLevel(t, e, tbl)
	for p := range int32(2) {
		e.Produce(records(topic, p, 40, "b"))
	}
	e.FoldLegacy(tbl, topic, 30)
	rep := auditEveryLevel(t, e, tbl)
	for _, p := range rep.Partitions {
		if p.Next != 190 || p.Broker.Lag != 0 {
			t.Fatalf("%s: next %d lag %d, want 190 and 0", p.TopicPartition, p.Next, p.Broker.Lag)
		}
	}
}

func TestStateCleanCompactedAndTruncated(t *testing.T) {
	e := newEnv(t)
	tbl := e.LegacyStateTable("lake.cs")
	checkCompactedAndTruncated(t, e, "cs", tbl, func() { e.FoldLegacy(tbl, "cs", 100) }, 0)
}

// checkCompactedAndTruncated writes a compacted topic, sinks it into tbl
// with sink (a legacy state table's fold, or an upsert table's sink: both
// keep each key's latest record) before and after kfake's log compaction, compacts
// again and lets retention delete the log's first offset, then audits
// every level: the table is complete, and its rows' records are verified,
// compacted away or below the log start as the log says.
func checkCompactedAndTruncated(t *testing.T, e *env, topic string, tbl *snapshot.Table, sink func(), belowLogStart int64) {
	t.Helper()
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	// Each call is one batch; compaction never touches the last batch.
	// The value "-" makes a tombstone.
	batch := func(kvs ...string) {
		var recs []*kgo.Record
		for i := 0; i < len(kvs); i += 2 {
			r := &kgo.Record{Topic: topic, Key: []byte(kvs[i]), Value: []byte(kvs[i+1])}
			if kvs[i+1] == "-" {
				r.Value = nil
			}
			recs = append(recs, r)
		}
		e.Produce(recs)
	}
	batch("u", "1", "a", "1", "b", "1", "c", "1") // 0-3
	batch("a", "2", "b", "-")                     // 4-5
	batch("d", "1")                               // 6
	e.Stack.Cluster.Compact()                     // removes a@1 and b@2 before the sink reads them
	sink()
	batch("c", "2", "e", "1") // 7-8
	batch("a", "3")           // 9
	batch("f", "1")           // 10
	sink()
	batch("d", "2") // 11, never sunk: d@6 stays the table's row
	batch("g", "1") // 12
	// Removes c@3, a@4 and the row d@6's record (superseded by d@11,
	// outside the ranges), then retention deletes u@0, whose row stays.
	e.Stack.Cluster.Compact()
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 1); err != nil {
		t.Fatal(err)
	}

	rep := auditEveryLevel(t, e, tbl)
	p := rep.Partitions[0]
	c := *p.Content
	// Rows u@0 (below the log start: belowLogStart counts it unverifiable
	// where the content level holds every row, an upsert table's fold),
	// d@6 (compacted away: unverifiable), c@7, e@8, a@9 and f@10; b@5 is a
	// tombstone, folded away; offsets 1-4 were compacted away.
	if p.Rows != 6 || p.Next != 11 || p.Broker.Lag != 2 ||
		c.Verified != 4 || c.Unverifiable != 1+belowLogStart || c.Folded != 1 || c.Compacted != 4 {
		t.Fatalf("partition %+v content %+v", p, c)
	}
}

func TestStateCleanLossRecorded(t *testing.T) {
	e := newEnv(t)
	const topic = "statelossy"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "a"))
	tbl := e.LegacyStateTable("lake.statelossy")
	e.FoldLegacy(tbl, topic, 100)
	e.Produce(records(topic, 0, 100, "b"))
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 150); err != nil {
		t.Fatal(err)
	}
	e.FoldLegacy(tbl, topic, 100) // records [100, 150) as lost
	// The fold rewrote files across the lost range: rows below 100 and
	// from 150 share files. Only the loss itself is a finding.
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth, contentDepth(e)} {
		expectFindings(t, e.audit(tbl, opts), "ledger lost statelossy/0 [100, 150)")
	}
}

func TestStateFaultDuplicateKey(t *testing.T) {
	e := newEnv(t)
	tbl, recs := foldedTopic(t, e, "dupkey")
	old := stateOffsets(recs)[0]
	// A later record of the same key, committed without folding: the old
	// row stays beside the new one.
	rec := &kgo.Record{Topic: "dupkey", Key: recs[old].Key, Value: []byte("again"), Timestamp: time.UnixMilli(1_700_000_100_000)}
	e.Produce([]*kgo.Record{rec})
	rec.Offset = 60
	tp := mapping.TopicPartition{Topic: "dupkey", Partition: 0}
	appendUnfolded(t, tbl, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: 60, High: 61}, Records: 1}, rec)

	at := mapping.Interval{Low: old, High: old + 1}
	expectFindings(t, e.audit(tbl, ledgerOnly))
	expectFindings(t, e.audit(tbl, filesDepth))
	expectFindings(t, e.audit(tbl, rowsDepth), "rows duplicate-key dupkey/0 "+at.String())
	expectFindings(t, e.audit(tbl, contentDepth(e)), "rows duplicate-key dupkey/0 "+at.String(), "content superseded-row dupkey/0 "+at.String())
}

func TestStateFaultRowOutsideLedger(t *testing.T) {
	e := newEnv(t)
	tbl, _ := foldedTopic(t, e, "outside")
	rec := &kgo.Record{Topic: "outside", Key: []byte("fresh"), Value: []byte("v"), Timestamp: time.UnixMilli(1_700_000_100_000)}
	e.Produce([]*kgo.Record{rec})
	// The commit covers [60, 61), but its row claims offset 63.
	row := *rec
	row.Offset = 63
	tp := mapping.TopicPartition{Topic: "outside", Partition: 0}
	appendUnfolded(t, tbl, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: 60, High: 61}, Records: 1}, &row)

	expectFindings(t, e.audit(tbl, ledgerOnly))
	expectFindings(t, e.audit(tbl, filesDepth), "files stray-file outside/0 [63, 64)")
	expectFindings(t, e.audit(tbl, rowsDepth), "files stray-file outside/0 [63, 64)", "rows outside-ledger outside/0 [63, 64)")
	// Record 60 is its key's latest and has no row.
	expectFindings(t, e.audit(tbl, contentDepth(e)), "files stray-file outside/0 [63, 64)", "rows outside-ledger outside/0 [63, 64)",
		"content missing-row outside/0 [60, 61)")
}

func TestStateFaultNullKeyRow(t *testing.T) {
	e := newEnv(t)
	tbl, _ := foldedTopic(t, e, "nullkey")
	rec := &kgo.Record{Topic: "nullkey", Value: []byte("no key"), Timestamp: time.UnixMilli(1_700_000_100_000)}
	e.Produce([]*kgo.Record{rec})
	rec.Offset = 60
	tp := mapping.TopicPartition{Topic: "nullkey", Partition: 0}
	appendUnfolded(t, tbl, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: 60, High: 61}, Records: 1}, rec)

	expectFindings(t, e.audit(tbl, filesDepth))
	expectFindings(t, e.audit(tbl, rowsDepth), "rows null-key nullkey/0 [60, 61)")
	expectFindings(t, e.audit(tbl, contentDepth(e)), "rows null-key nullkey/0 [60, 61)", "content unexpected-row nullkey/0 [60, 61)")
}

func TestStateUnknownFold(t *testing.T) {
	e := newEnv(t)
	tbl, _ := foldedTopic(t, e, "sum")
	if err := tbl.SetProperties(e.Ctx, map[string]string{mapping.PropFold: "sum"}); err != nil {
		t.Fatal(err)
	}
	// The mode is read when the table is opened: an unknown fold is never
	// read as another mode.
	if _, err := snapshot.Open(e.Ctx, tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s=%q", mapping.PropFold, "sum")) {
		t.Fatalf("err %v, want the unknown fold named", err)
	}
}

// TestStateFaultMoreRowsThanFolded: a commit whose range counts fewer
// records than the rows its file adds leaves the partition's live files
// holding more rows than its ranges folded, which the files level tells
// from manifests, from the partition's coverage (the ledger is not held).
func TestStateFaultMoreRowsThanFolded(t *testing.T) {
	e := newEnv(t)
	tbl, _ := foldedTopic(t, e, "morerows")
	var recs []*kgo.Record
	for i := range 70 {
		recs = append(recs, &kgo.Record{Topic: "morerows", Key: fmt.Appendf(nil, "fresh-%d", i), Value: []byte("v"), Timestamp: time.UnixMilli(1_700_000_100_000)})
	}
	e.Produce(recs)
	for i, r := range recs {
		r.Offset = int64(60 + i)
	}
	tp := mapping.TopicPartition{Topic: "morerows", Partition: 0}
	appendUnfolded(t, tbl, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: 60, High: 130}, Records: 1}, recs...)

	expectFindings(t, e.audit(tbl, ledgerOnly))
	expectFindings(t, e.audit(tbl, filesDepth), "files count-mismatch morerows/0 [0, 130)")
}
