package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
)

// keyedStack starts a local stack (upsertStack) with topic u (one
// partition) holding twelve keyed records, and sinks it with floe sink
// --mode upsert --key string, 4 records per commit, into each of tables:
//
//	commit 1: 0 a=a1, 1 b=b1, 2 c=c1, 3 d=d1
//	commit 2: 4 b=b2, 5 c deleted, 6 a=a2, 7 e=e1
//	commit 3: 8 d deleted, 9 e=e2, 10 b deleted, 11 b=b3
func keyedStack(t *testing.T, tables ...string) (*localstack.Stack, []string) {
	t.Helper()
	var recs []*kgo.Record
	for i, kv := range []string{"a=a1", "b=b1", "c=c1", "d=d1", "b=b2", "c", "a=a2", "e=e1", "d", "e=e2", "b", "b=b3"} {
		k, v, upsert := strings.Cut(kv, "=")
		r := rec("u", 0, []byte(k), nil, i)
		if upsert {
			r.Value = []byte(v)
		}
		recs = append(recs, r)
	}
	st, sink, loc := upsertStack(t, "u", 1, recs)
	for _, name := range tables {
		mustFloe(t, append(slices.Clone(sink), "--table", name, "--mode", "upsert", "--key", "string", "--flush-records", "4")...)
	}
	return st, loc
}

// auditFindingKinds returns the "level kind" pairs of a JSON audit report.
func auditFindingKinds(t *testing.T, out string) []string {
	t.Helper()
	var doc struct {
		Mode     string `json:"mode"`
		Findings []struct {
			Level  string `json:"level"`
			Kind   string `json:"kind"`
			Detail string `json:"detail"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if doc.Mode != "upsert" {
		t.Fatalf("report mode %q, want upsert", doc.Mode)
	}
	var kinds []string
	for _, f := range doc.Findings {
		kinds = append(kinds, f.Level+" "+f.Kind)
	}
	return kinds
}

// TestAuditCommandUpsertTable audits upsert tables sunk by floe sink
// --mode upsert: a complete one exits 0 at every level; each change
// another writer makes (a key's row deleted, an equality delete removed, a
// stale row re-added, a key's row replaced by an older record) exits 1
// with findings of the kinds that show it, naming the key.
func TestAuditCommandUpsertTable(t *testing.T) {
	tampers := []struct {
		table string
		// tamper changes the table and returns the key findings name.
		tamper func(t *testing.T, st *localstack.Stack, name string) string
		want   []string
	}{
		{"lake.deleted", func(t *testing.T, st *localstack.Stack, name string) string {
			floetest.ForeignDeleteKeys(t, openFloeTable(t, st, name), "a")
			return "a"
		}, []string{"files delete-files", "content missing-row"}},
		{"lake.undeleted", func(t *testing.T, st *localstack.Stack, name string) string {
			// Commit 3's deletes: rows a commit 2 wrote for b and e, and d's
			// of commit 1, come back.
			tbl := openFloeTable(t, st, name)
			l, err := tbl.Ledger()
			if err != nil {
				t.Fatal(err)
			}
			floetest.DropDeleteFile(t, tbl, l.Commits[len(l.Commits)-1].SnapshotID)
			return "b"
		}, []string{"files missing-file", "rows duplicate-key", "content superseded-row"}},
		{"lake.stale", func(t *testing.T, st *localstack.Stack, name string) string {
			floetest.ForeignAddRecords(t, openFloeTable(t, st, name),
				&kgo.Record{Topic: "u", Offset: 0, Key: []byte("a"), Value: []byte("a1"), Timestamp: time.UnixMilli(1_700_000_000_000)})
			return "a"
		}, []string{"files foreign-file", "rows duplicate-key", "content superseded-row"}},
		{"lake.replaced", func(t *testing.T, st *localstack.Stack, name string) string {
			tbl := openFloeTable(t, st, name)
			floetest.ForeignDeleteKeys(t, tbl, "e")
			floetest.ForeignAddRecords(t, tbl, &kgo.Record{Topic: "u", Offset: 7, Key: []byte("e"), Value: []byte("e1"), Timestamp: time.UnixMilli(1_700_000_007_000)})
			return "e"
		}, []string{"files delete-files", "files foreign-file", "content superseded-row", "content missing-row"}},
	}
	tables := []string{"lake.u"}
	for _, c := range tampers {
		tables = append(tables, c.table)
	}
	st, loc := keyedStack(t, tables...)
	brokers := strings.Join(st.Brokers, ",")
	audit := func(name string, extra ...string) (int, string, string) {
		return floe(t, append(append([]string{"audit", "--table", name, "--deep", "--brokers", brokers, "--verify-content"}, loc...), extra...)...)
	}

	code, out, errs := audit("lake.u")
	if code != exitOK || !strings.Contains(out, "upsert table (key kafka-key)") || !strings.Contains(out, "verdict: COMPLETE") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	checkWidth(t, out)
	code, out, _ = audit("lake.u", "--json")
	if kinds := auditFindingKinds(t, out); code != exitOK || len(kinds) > 0 {
		t.Fatalf("exit %d, findings %v", code, kinds)
	}

	for _, c := range tampers {
		t.Run(c.table, func(t *testing.T) {
			key := c.tamper(t, st, c.table)
			code, out, errs := audit(c.table, "--json")
			kinds := auditFindingKinds(t, out)
			if code != exitFindings {
				t.Fatalf("exit %d, want %d; findings %v\n%s", code, exitFindings, kinds, errs)
			}
			for _, w := range c.want {
				if !slices.Contains(kinds, w) {
					t.Fatalf("no %s finding in %v\n%s", w, kinds, out)
				}
			}
			if !strings.Contains(out, fmt.Sprintf(`key \"%s\"`, key)) {
				t.Fatalf("no finding names key %q:\n%s", key, out)
			}
		})
	}
}

// TestWhereKeyCommand looks keys of an upsert table up with floe where
// --key: a row, a deleted key (the commit found in its equality-delete
// file; with --brokers the deleting offset), a key never seen; and refuses
// --key with a position, and on a table that is not an upsert table.
func TestWhereKeyCommand(t *testing.T) {
	st, loc := keyedStack(t, "lake.u")
	brokers := strings.Join(st.Brokers, ",")
	where := func(key string, extra ...string) (int, string, string) {
		return floe(t, append(append([]string{"where", "--table", "lake.u", "--key", key}, loc...), extra...)...)
	}
	code, out, errs := where("b")
	if code != exitOK || !strings.Contains(out, "key b in lake.u: row") || !strings.Contains(out, "u/0 offset 11") ||
		!strings.Contains(out, "range [8, 12)") || !strings.Contains(out, ".parquet") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, c := range []struct {
		key     string
		brokers bool
		status  string
		offset  *int64
		foundBy string
	}{
		{"a", false, lookup.KeyStatusRow, new(int64(6)), ""},
		{"c", false, lookup.KeyStatusDeleted, nil, lookup.FoundByDeleteFiles},
		{"c", true, lookup.KeyStatusDeleted, new(int64(5)), lookup.FoundByDeleteFiles},
		{"d", true, lookup.KeyStatusDeleted, new(int64(8)), lookup.FoundByDeleteFiles},
		{"zz", true, lookup.KeyStatusNeverSeen, nil, ""},
	} {
		var extra []string
		if c.brokers {
			extra = []string{"--brokers", brokers}
		}
		code, out, errs := where(c.key, append(extra, "--json")...)
		var r lookup.KeyResult
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != exitOK {
			t.Fatalf("key %s: exit %d, %v\n%s\n%s", c.key, code, err, out, errs)
		}
		if r.Status != c.status || r.FoundBy != c.foundBy || (r.Offset == nil) != (c.offset == nil) || (r.Offset != nil && *r.Offset != *c.offset) {
			t.Errorf("key %s (brokers %v): %+v; want %s at %v found by %q", c.key, c.brokers, r, c.status, c.offset, c.foundBy)
		}
		if c.status == lookup.KeyStatusDeleted && (r.SnapshotID == nil || !strings.HasSuffix(r.File, ".parquet")) {
			t.Errorf("key %s: a delete without its snapshot or delete file: %+v", c.key, r)
		}
	}
	code, out, errs = where("c")
	if code != exitOK || !strings.Contains(out, "deleted") || !strings.Contains(out, "pass --brokers") {
		t.Fatalf("deleted key without brokers: exit %d\n%s\n%s", code, out, errs)
	}

	// Refused, in one line naming the problem and the fix.
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "u", "--table", "lake.events", "--stop-at-end"}, loc...)...)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"where", "--table", "lake.events", "--key", "a"}, "lake.events is a table of mode append, which has no key: --key looks up upsert tables only; look a record up by its position (--partition P --offset X)"},
		{[]string{"where", "--table", "lake.u", "--key", "a", "--partition", "0"}, "--key looks a key up; --partition is for a position: give one or the other"},
	} {
		code, out, errs := floe(t, append(c.args, loc...)...)
		if code != exitError || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s\nwant one line with %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestAsOfCommandUpsert asks floe as-of for an upsert table's state: on a
// commit boundary the state is exact; inside a commit's range floe names
// the boundary below and the commit past the position, and --rows prints
// the state at that boundary, never a row of a record at or past the
// position.
func TestAsOfCommandUpsert(t *testing.T) {
	_, loc := keyedStack(t, "lake.u")
	asOf := func(offsets string, extra ...string) string {
		return mustFloe(t, append(append([]string{"as-of", "--table", "lake.u", "--offsets", offsets}, loc...), extra...)...)
	}
	out := asOf("u/0=8", "--rows")
	if !strings.Contains(out, "u/0 below offset 8 (given): a commit boundary") || !strings.Contains(out, "4 rows") ||
		!strings.Contains(out, `"kafka_key":"e"`) || strings.Contains(out, "reaches past") {
		t.Fatalf("boundary:\n%s", out)
	}
	out = asOf("u/0=10", "--rows")
	if !strings.Contains(out, "u/0 below offset 10 (given): the commit boundary at or below it is offset 8") ||
		!strings.Contains(out, "reaches past the position") || !strings.Contains(out, "4 rows") ||
		!strings.Contains(out, `"kafka_key":"d"`) { // d@8 deletes d: not in the state below the boundary
		t.Fatalf("inside a range:\n%s", out)
	}
	var res struct {
		SnapshotID     int64 `json:"snapshot_id"`
		Mode           string
		Exact          *bool
		NextSnapshotID *int64 `json:"next_snapshot_id"`
		Boundary       []lookup.Position
		RowCount       int64 `json:"row_count"`
	}
	if err := json.Unmarshal([]byte(asOf("u/0=10", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Mode != "upsert" || res.Exact == nil || *res.Exact || res.NextSnapshotID == nil || len(res.Boundary) != 1 || res.Boundary[0].Offset != 8 || res.Boundary[0].Source != "commit" {
		t.Fatalf("JSON: %+v", res)
	}
	out = asOf("u/0=2", "--rows")
	if !strings.Contains(out, "the commit boundary at or below it is offset 0") || !strings.Contains(out, "\n0 rows") {
		t.Fatalf("below the first commit:\n%s", out)
	}
}

// TestUpsertStructKeyReadCommands audits and looks up upsert tables keyed
// by decoded columns: a JSON key {"id": N} (floe sink --key json --value
// json) and value columns (--id-columns tenant,name). The audit proves
// both equal to the fold of the log (exit 0 at every level); floe where
// --key takes the key as a JSON object of the key columns, and refuses a
// malformed one in one line naming the key columns.
func TestUpsertStructKeyReadCommands(t *testing.T) {
	const topic = "customers"
	j := func(format string, a ...any) []byte { return fmt.Appendf(nil, format, a...) }
	var recs []*kgo.Record
	for i := range 30 {
		id := i % 6
		recs = append(recs, rec(topic, int32(id%2), j(`{"id":%d}`, id), j(`{"id":%d,"tenant":"t%d","name":"n%d"}`, id, id%2, i), i))
	}
	recs = append(recs,
		rec(topic, 1, j(`{"id":5}`), nil, 40),            // deletes 5
		rec(topic, 0, nil, j(`{"id":1,"name":"y"}`), 42), // no key: a dead letter
	)
	st, sink, loc := upsertStack(t, topic, 2, recs)
	mustFloe(t, append(slices.Clone(sink), "--table", "lake.customers", "--mode", "upsert", "--key", "json", "--value", "json", "--flush-records", "7")...)
	mustFloe(t, append(slices.Clone(sink), "--table", "lake.bytenant", "--mode", "upsert", "--value", "json", "--id-columns", "tenant,name", "--flush-records", "7")...)
	brokers := strings.Join(st.Brokers, ",")
	for _, name := range []string{"lake.customers", "lake.bytenant"} {
		code, out, errs := floe(t, append([]string{"audit", "--table", name, "--deep", "--brokers", brokers, "--verify-content"}, loc...)...)
		if code != exitOK || !strings.Contains(out, "verdict: COMPLETE") || !strings.Contains(out, "upsert table (key ") {
			t.Fatalf("%s: exit %d\n%s\n%s", name, code, out, errs)
		}
	}
	where := func(name, key string) (int, lookup.KeyResult, string) {
		code, out, errs := floe(t, append([]string{"where", "--table", name, "--key", key, "--json"}, loc...)...)
		var r lookup.KeyResult
		if code == exitOK {
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
		}
		return code, r, errs
	}
	for _, c := range []struct {
		table, key, status string
		offset             int64
	}{
		{"lake.customers", `{"id":3}`, lookup.KeyStatusRow, 13}, // i=27: partition 1, its 14th record
		{"lake.customers", `{"id": 5}`, lookup.KeyStatusDeleted, -1},
		{"lake.customers", `{"id":9}`, lookup.KeyStatusNeverSeen, -1},
		{"lake.bytenant", `{"tenant":"t1","name":"n7"}`, lookup.KeyStatusRow, 3},
	} {
		code, r, errs := where(c.table, c.key)
		if code != exitOK || r.Status != c.status || (c.offset >= 0 && (r.Offset == nil || *r.Offset != c.offset)) {
			t.Errorf("%s %s: exit %d %+v %s; want %s at %d", c.table, c.key, code, r, errs, c.status, c.offset)
		}
	}
	// With --brokers the log is searched for a key of decoded columns as
	// for a Kafka key: the deleting record is named (it was not).
	code, out, errs := floe(t, append([]string{"where", "--table", "lake.customers", "--key", `{"id":5}`, "--brokers", brokers, "--json"}, loc...)...)
	var r lookup.KeyResult
	if code != exitOK || json.Unmarshal([]byte(out), &r) != nil || r.Status != lookup.KeyStatusDeleted || r.Partition == nil || *r.Partition != 1 || r.Offset == nil || *r.Offset != 15 {
		t.Errorf(`--key {"id":5} --brokers: exit %d %s %s; want deleted by partition 1 offset 15`, code, out, errs)
	}
	for _, c := range []struct{ key, want string }{
		{`{"id":`, `--key "{\"id\":": want a JSON object of the key columns id, e.g. {"id":0}`},
		{`3`, `want a JSON object of the key columns id`},
		// Not encoding/json's "invalid character 'o' in literal null" (a
		// new user's report).
		{`notjson`, `--key "notjson": want a JSON object of the key columns id, e.g. {"id":0}`},
		{`{"id":"x"}`, "key column id is an integer: give it as a JSON number"},
		{`{"id":3,"name":"x"}`, "name is not a key column"},
		{`{}`, "key column id is missing"},
	} {
		code, _, errs := where("lake.customers", c.key)
		if code != exitError || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, c.want) {
			t.Errorf("--key %s: exit %d, stderr %q; want one line with %q", c.key, code, errs, c.want)
		}
	}
}
