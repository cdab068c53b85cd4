package connector_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

// The content level folds the truncates a sink applied (--on-truncate
// delete-all) as the sink applies them: a truncate's commit removes every
// row committed before it, and the rows of its own partition read before
// it in its flush; it keeps the rows of its flush read after it and the
// flush's rows of other partitions. The audit refused such tables ("cannot
// fold yet"); these tests sink real logs through kfake and prove them
// complete, and name what a table that deviates holds.

// auditContent runs audit --deep --verify-content of tbl, refreshed.
func auditContent(t *testing.T, e *env, tbl *snapshot.Table, reg *connector.Registry) *audit.Report {
	t.Helper()
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true, Registry: reg})
	if err != nil {
		t.Fatalf("audit --deep --verify-content: %v", err)
	}
	return rep
}

// requireComplete fails t, with the text report, unless rep is complete.
func requireComplete(t *testing.T, rep *audit.Report, what string) {
	t.Helper()
	if rep.Complete() {
		return
	}
	var text strings.Builder
	_ = rep.WriteText(&text)
	t.Fatalf("audit of %s: not complete\n%s", what, text.String())
}

// emails returns the table's rows as id → email.
func emails(t *testing.T, tbl *snapshot.Table) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range rows(t, tbl) {
		out[r.Columns["id"]] = r.Columns["email"]
	}
	return out
}

// TestAuditTruncateAlone: a truncate in a commit of its own, with and
// without a commit after it: complete at every level.
func TestAuditTruncateAlone(t *testing.T) {
	e := newEnv(t)
	for _, after := range []bool{false, true} {
		tbl, _ := truncatedTable(t, e, fmt.Sprint("trunc_audit_alone_", after), after)
		requireComplete(t, auditContent(t, e, tbl, nil), fmt.Sprint("a truncate in a commit of its own, a commit after it: ", after))
	}
}

// TestAuditTruncateInFlush: truncates in the middle of flushes of two
// partitions. Commit 2 reads, in partition 0, an update of id 1, an insert
// of id 7, the truncate, then ids 3 and 2; in partition 1 ids 6, 5 and 7
// again (an earlier timestamp than partition 0's, which would win were it
// not truncated). The table keeps partition 0's rows after the truncate
// and every row of partition 1 in the flush: 2, 3, 5, 6 and 7 from
// partition 1. Commit 3 holds two truncates in partition 0 (the rows after
// the last stay) and a row of partition 1. Each state, and each after a
// compaction, is complete.
func TestAuditTruncateInFlush(t *testing.T) {
	e := newEnv(t)
	const name = "trunc_audit_flush"
	topic := "dbserver1.inventory." + name
	e.Topic(topic, 2, nil)
	tbl, dlq := e.debeziumTable("lake."+name, floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	ev := func(p int32, op string, id int, email string, sec int) *kgo.Record {
		r := dbzEvent(topic, op, id, email, sec)
		r.Partition = p
		return r
	}
	trunc := func(sec int) *kgo.Record { return dbzTruncate(topic, sec) }
	commit := func(recs ...*kgo.Record) {
		t.Helper()
		e.Produce(recs)
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		if rs := l.Commits[len(l.Commits)-1].Ranges; len(rs) != 2 {
			t.Fatalf("one commit of both partitions wanted, the last has ranges %v", rs)
		}
	}
	check := func(what string, want map[string]string) {
		t.Helper()
		if got := emails(t, tbl); !maps.Equal(got, want) {
			t.Fatalf("%s: rows %v, want %v", what, got, want)
		}
		requireComplete(t, auditContent(t, e, tbl, nil), what)
	}
	compact := func() {
		t.Helper()
		if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}

	commit(ev(0, "c", 1, "one@x", 0), ev(0, "c", 2, "two@x", 1), ev(1, "c", 5, "five@x", 2))
	commit(ev(0, "u", 1, "one@y", 10), ev(0, "c", 7, "seven@p0", 20), trunc(21), ev(0, "c", 3, "three@x", 22), ev(0, "u", 2, "two@y", 23),
		ev(1, "c", 6, "six@x", 11), ev(1, "u", 5, "five@y", 12), ev(1, "c", 7, "seven@p1", 5))
	after2 := map[string]string{"2": "two@y", "3": "three@x", "5": "five@y", "6": "six@x", "7": "seven@p1"}
	check("a truncate in a flush of two partitions", after2)
	compact()
	check("a truncate in a flush of two partitions, compacted", after2)

	commit(ev(0, "c", 8, "eight@x", 30), trunc(31), ev(0, "c", 9, "nine@x", 32), trunc(33), ev(0, "c", 10, "ten@x", 34),
		ev(1, "c", 11, "eleven@x", 30))
	after3 := map[string]string{"10": "ten@x", "11": "eleven@x"}
	check("two truncates in one flush", after3)
	compact()
	check("two truncates in one flush, compacted", after3)
}

// TestAuditTruncateAvro: a capture in Avro through the registry (a
// snapshot, changes, a truncate, then inserts, an update and a delete),
// sunk in one flush and in flushes of 9 records: complete.
func TestAuditTruncateAvro(t *testing.T) {
	e := newEnv(t)
	for i, flush := range []int{1000, 9} {
		t.Run(fmt.Sprint("flush=", flush), func(t *testing.T) {
			topic := fmt.Sprint("dbserver1.inventory.trunc-avro-", flush)
			e.Topic(topic, 1, nil)
			c := floetest.NewCustomers(topic, 1)
			c.Story(10, 25, uint64(i+3))
			c.Truncate()
			c.Insert(floetest.Customer{ID: 900, FirstName: "Ada", LastName: "Lovelace", Email: "ada@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
			c.Insert(floetest.Customer{ID: 901, FirstName: "Alan", LastName: "Turing", Email: "alan@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)})
			c.Update(900, func(cu *floetest.Customer) { cu.Email = "ada@example.org" })
			c.Delete(901)
			e.Produce(c.Records(t, floetest.CDCAvro, e.Stack.Registry))
			tbl, dlq := e.debeziumTable(fmt.Sprint("lake.trunc_avro_", flush), floetest.CDCAvro)
			reg := e.Registry()
			if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: flush, DeadLetters: dlq, Registry: reg, OnTruncate: connector.TruncateDeleteAll}); err != nil {
				t.Fatal(err)
			}
			c.CheckTable(t, rows(t, tbl), floetest.CDCAvro, true)
			requireComplete(t, auditContent(t, e, tbl, reg), "an Avro capture with a truncate")
		})
	}
}

// TestAuditTruncateDeviations: tables that differ from what the sink made
// of a truncate are not complete, and the content level says where. The
// table of truncatedTable (ids 1 and 2 at offsets 0 and 1, the truncate at
// 2, id 3 at 3) gets back, from another writer, the data files the
// truncate removed; or loses the row of id 3, which the truncate left.
func TestAuditTruncateDeviations(t *testing.T) {
	e := newEnv(t)
	t.Run("truncated rows re-added", func(t *testing.T) {
		tbl, _ := truncatedTable(t, e, "trunc_readded", true)
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		before, err := tbl.Files(e.Ctx, l.Commits[len(l.Commits)-3].SnapshotID)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range before {
			paths = append(paths, f.Path)
		}
		txn := tbl.Iceberg().NewTransaction()
		if err := txn.AddFiles(e.Ctx, paths, nil, false); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(e.Ctx); err != nil {
			t.Fatal(err)
		}
		rep := auditContent(t, e, tbl, nil)
		for _, off := range []int64{0, 1} {
			requireFinding(t, rep, audit.KindSupersededRow, off, "which the truncate at dbserver1.inventory.trunc_readded/0@2 removed")
		}
	})
	t.Run("kept row deleted", func(t *testing.T) {
		tbl, _ := truncatedTable(t, e, "trunc_lost", true)
		floetest.ForeignEqualityDelete(t, tbl.Iceberg(), 0, 3)
		requireFinding(t, auditContent(t, e, tbl, nil), audit.KindMissingRow, 3, `key "{\"id\":3}"`)
	})
}

// requireFinding fails t unless rep has a content finding of kind at
// offset of partition 0 whose detail says want.
func requireFinding(t *testing.T, rep *audit.Report, kind audit.Kind, offset int64, want string) {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Level == audit.LevelContent && f.Kind == kind && f.Partition.Partition == 0 && f.Offsets.Contains(offset) && strings.Contains(f.Detail, want) {
			return
		}
	}
	var text strings.Builder
	_ = rep.WriteText(&text)
	t.Fatalf("no content %s finding at offset %d saying %q:\n%s", kind, offset, want, text.String())
}
