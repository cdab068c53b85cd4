package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Upsert tables (floe sink --mode upsert) hold one row per key. These tests
// sink real logs through kfake with floe's own upsert sink (repeated keys,
// keys in two partitions, tombstones, records without a key, committed and
// aborted transactions) and check that the audit proves the table equal to
// the fold of its log; then change the table as another writer could and
// check that the audit names what changed.

// upsertedTopic writes a mixed log of 2 partitions (floetest.MixedLog:
// keys k0..k12 in both partitions, a tombstone every tenth record, no key
// every seventh, a committed and an aborted transaction) and sinks it into
// a new upsert table keyed by the Kafka key, 25 records per flush.
func upsertedTopic(t *testing.T, e *env, topic string) *snapshot.Table {
	t.Helper()
	e.MixedLog(topic, floetest.MixedLog{Partitions: 2, Records: 90, Committed: 10, Aborted: 7, Trailing: 25})
	tbl, dlq := e.UpsertTable("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 25, DeadLetters: dlq})
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func TestUpsertAuditComplete(t *testing.T) {
	e := newEnv(t)
	tbl := upsertedTopic(t, e, "accounts")
	rep := auditEveryLevel(t, e, tbl)
	if rep.Mode != mapping.ModeUpsert || rep.UpsertKey != "kafka-key" {
		t.Fatalf("report mode %q key %q", rep.Mode, rep.UpsertKey)
	}
	var rows, records, deletes, dead int64
	for _, p := range rep.Partitions {
		rows += p.Rows
		records += p.Records
		dead += p.DeadLetters
		for _, r := range p.LedgerRanges {
			deletes += r.Deletes
		}
	}
	c := contentTotals(rep)
	// 13 keys: every row is the copy of its key's winning record; every
	// other upsert and every delete was folded away; two markers and 7
	// aborted records per partition.
	if rows == 0 || rows > 13 || c.Verified != rows || c.Verified+c.Folded != records+deletes ||
		c.Markers != 4 || c.Aborted != 14 || c.DeadLetters != dead || dead == 0 || c.Unverifiable != 0 {
		t.Fatalf("content %+v for %d rows of %d records, %d deletes, %d dead letters", c, rows, records, deletes, dead)
	}
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "upsert table (key kafka-key)") || !strings.Contains(text.String(), "verdict: COMPLETE") {
		t.Fatalf("text report:\n%s", text.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Mode      string  `json:"mode"`
		UpsertKey *string `json:"upsert_key"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || doc.Mode != "upsert" || doc.UpsertKey == nil || *doc.UpsertKey != "kafka-key" {
		t.Fatalf("JSON mode %q key %v (%v)", doc.Mode, doc.UpsertKey, err)
	}
}

// upsertTamper is one change another writer makes to an upsert table,
// and what the audit must say about it.
type upsertTamper struct {
	name string
	// tamper changes tbl, whose rows (before) are given, and returns the
	// key the findings must name.
	tamper func(t *testing.T, e *env, tbl *snapshot.Table, rows []floetest.Row) string
	// want are the findings' "level kind" pairs, every one of them.
	want []string
}

// olderRecord returns the record of MixedLog's plain records that is the
// last committed upsert of row's key before row's own record, in row's
// partition: a record the row superseded.
func olderRecord(t *testing.T, row floetest.Row) *kgo.Record {
	t.Helper()
	recs := floetest.Records(row.TP.Topic, row.TP.Partition, 90, "a")
	for i := min(int(row.Offset), len(recs)) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Key != nil && r.Value != nil && string(r.Key) == row.Key {
			r.Offset = int64(i)
			return r
		}
	}
	t.Fatalf("no older record of key %q before %s@%d", row.Key, row.TP, row.Offset)
	return nil
}

// keptRow returns a row of the table whose key has an older upsert among
// MixedLog's plain records of its partition.
func keptRow(t *testing.T, rows []floetest.Row) floetest.Row {
	t.Helper()
	for _, r := range rows {
		if r.Offset > 20 {
			return r
		}
	}
	t.Fatalf("no row past offset 20 in %d rows", len(rows))
	return floetest.Row{}
}

var upsertTampers = []upsertTamper{
	{"row deleted behind floe's back", func(t *testing.T, e *env, tbl *snapshot.Table, rows []floetest.Row) string {
		r := keptRow(t, rows)
		floetest.ForeignDeleteKeys(t, tbl, r.Key)
		return r.Key
	}, []string{"files delete-files", "content missing-row"}},
	{"equality delete removed", func(t *testing.T, e *env, tbl *snapshot.Table, rows []floetest.Row) string {
		// The newest floe commit's deletes: the rows they replaced come
		// back beside the rows that replaced them.
		dels, err := tbl.DeleteFiles(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		for i := len(l.Commits) - 1; i >= 0; i-- {
			for _, d := range dels {
				if d.AddedBy == l.Commits[i].SnapshotID {
					floetest.DropDeleteFile(t, tbl, d.AddedBy)
					return ""
				}
			}
		}
		t.Fatal("no floe commit added a live delete file")
		return ""
	}, []string{"files missing-file", "rows duplicate-key", "content superseded-row"}},
	{"stale row re-added", func(t *testing.T, e *env, tbl *snapshot.Table, rows []floetest.Row) string {
		r := keptRow(t, rows)
		floetest.ForeignAddRecords(t, tbl, olderRecord(t, r))
		return r.Key
	}, []string{"files foreign-file", "rows duplicate-key", "content superseded-row"}},
	{"row replaced by an older record", func(t *testing.T, e *env, tbl *snapshot.Table, rows []floetest.Row) string {
		r := keptRow(t, rows)
		floetest.ForeignDeleteKeys(t, tbl, r.Key)
		floetest.ForeignAddRecords(t, tbl, olderRecord(t, r))
		return r.Key
	}, []string{"files delete-files", "files foreign-file", "content superseded-row", "content missing-row"}},
}

// TestUpsertAuditTampered changes a complete upsert table as another
// writer could and checks that the audit reports it at the levels that can
// see it, naming the key: each change makes findings of the wanted kinds,
// those of the files level also when it runs alone.
func TestUpsertAuditTampered(t *testing.T) {
	for _, c := range upsertTampers {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			tbl := upsertedTopic(t, e, "accounts")
			key := c.tamper(t, e, tbl, floetest.Rows(t, tbl))
			rep := e.audit(tbl, contentDepth(e))
			got := map[string]bool{}
			named := false
			for _, f := range rep.Findings {
				got[string(f.Level)+" "+string(f.Kind)] = true
				named = named || (key != "" && strings.Contains(f.Detail, fmt.Sprintf("key %q", key)))
			}
			var text strings.Builder
			_ = rep.WriteText(&text)
			for _, w := range c.want {
				if !got[w] {
					t.Fatalf("no %s finding:\n%s", w, text.String())
				}
			}
			if key != "" && !named {
				t.Fatalf("no finding names key %q:\n%s", key, text.String())
			}
			t.Logf("%s", text.String())
			// The files level alone, which reads only the commits that
			// added the live files, finds the same files findings.
			atFiles := map[string]bool{}
			for _, f := range e.audit(tbl, filesDepth).Findings {
				atFiles[string(f.Level)+" "+string(f.Kind)] = true
			}
			for _, w := range c.want {
				if strings.HasPrefix(w, "files ") && !atFiles[w] {
					t.Fatalf("no %s finding at the files level alone (%v)", w, atFiles)
				}
			}
		})
	}
}

// TestUpsertAuditCompacted sinks a compacted topic into an upsert table
// (checkCompactedAndTruncated: kfake's log compaction before and after the
// sink read it, then retention deleting the log's first offset):
// compaction keeps the latest record of every key, so the fold of the
// retained log is still the table and the audit finds it complete.
func TestUpsertAuditCompacted(t *testing.T) {
	e := newEnv(t)
	tbl, dlq := e.UpsertTable("lake.ucs")
	checkCompactedAndTruncated(t, e, "ucs", tbl, func() { e.sink(tbl, connector.Config{Topic: "ucs", DeadLetters: dlq}) }, 1)
}

// TestUpsertAuditRepartitionedKeys sinks keys that appear in two
// partitions, within one commit (the later record timestamp wins, then the
// higher partition) and across commits (the later commit wins whatever
// the timestamps): the audit's fold applies the sink's winner rule, and
// finds the table complete; the rows are the winners the rule names.
func TestUpsertAuditRepartitionedKeys(t *testing.T) {
	e := newEnv(t)
	const topic = "moved"
	e.Topic(topic, 2, nil)
	rec := func(p int32, k, v string, sec int64) *kgo.Record {
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Timestamp: time.Unix(1_700_000_000+sec, 0)}
		if v != "-" {
			r.Value = []byte(v)
		}
		return r
	}
	tbl, dlq := e.UpsertTable("lake.moved")
	e.Produce([]*kgo.Record{
		rec(0, "x", "x-p0-late", 10), rec(1, "x", "x-p1-early", 5),
		rec(0, "y", "y-p0-early", 5), rec(1, "y", "y-p1-late", 10),
		rec(0, "z", "z-p0", 7), rec(1, "z", "z-p1", 7),
		rec(0, "w", "w-p0", 9), rec(1, "w", "-", 3), // the upsert is later than the delete
	})
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 1000, DeadLetters: dlq})
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if rs := l.Commits[len(l.Commits)-1].Ranges; len(rs) != 2 || rs[0].Records+rs[1].Records != 7 {
		t.Fatalf("one commit of both partitions wanted, the last is %v", rs)
	}
	// A later commit: its record wins whatever its timestamp.
	e.Produce([]*kgo.Record{rec(1, "x", "x-p1-next-commit", 1)})
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 1000, DeadLetters: dlq})

	auditEveryLevel(t, e, tbl)
	got := map[string]string{}
	for _, r := range floetest.Rows(t, tbl) {
		got[r.Key] = r.Value
	}
	want := map[string]string{"x": "x-p1-next-commit", "y": "y-p1-late", "z": "z-p1", "w": "w-p0"}
	if !maps.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// TestUpsertAuditMiscounted commits a range whose ledger counts say two
// upserts where the log holds an upsert and a delete (a writer that
// counted a tombstone as a row): only the content level, which classifies
// every committed record of the range, can see it.
func TestUpsertAuditMiscounted(t *testing.T) {
	e := newEnv(t)
	tbl := upsertedTopic(t, e, "counted")
	tp := mapping.TopicPartition{Topic: "counted", Partition: 0}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	next := mapping.Cover(l.Ranges(tp)).Next
	up := &kgo.Record{Topic: tp.Topic, Key: []byte("new1"), Value: []byte("v"), Timestamp: time.UnixMilli(1_700_000_500_000)}
	del := &kgo.Record{Topic: tp.Topic, Key: []byte("new2"), Timestamp: time.UnixMilli(1_700_000_501_000)}
	e.Produce([]*kgo.Record{up, del})
	up.Offset = next
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	rb.Append(up)
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: next, High: next + 2}, Records: 2}}, rb.NewBatch())

	at := mapping.Interval{Low: next, High: next + 2}
	expectFindings(t, e.audit(tbl, rowsDepth))
	expectFindings(t, e.audit(tbl, contentDepth(e)), "content count-mismatch counted/0 "+at.String())
}
