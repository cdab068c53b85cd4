package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// upsertStack starts a local stack with topic of partitions holding recs,
// and returns it with the sink command line for it (--stop-at-end) and the
// catalog flags.
func upsertStack(t *testing.T, topic string, partitions int32, recs []*kgo.Record) (*localstack.Stack, []string, []string) {
	t.Helper()
	st, brokers, loc := partitionedStack(t, topic, partitions)
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	sink := append([]string{"sink", "-b", brokers, "-t", topic, "--stop-at-end"}, loc...)
	return st, sink, loc
}

// partitionedStack starts a local stack with topic of the given partitions,
// and returns it with its brokers (as -b takes them) and the catalog
// flags.
func partitionedStack(t *testing.T, topic string, partitions int32) (*localstack.Stack, string, []string) {
	t.Helper()
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, partitions, nil); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	return st, strings.Join(st.Brokers, ","), []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
}

// rec is a record of partition p with key k and value v (nil: none) at
// second ts.
func rec(topic string, p int32, k, v []byte, ts int) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Key: k, Value: v, Timestamp: time.Unix(int64(1_700_000_000+ts), 0)}
}

// stateOf reads table name with iceberg-go's scan (deletes applied) as
// key -> value, or key -> column col's value when col is set; a key seen
// twice fails the test.
func stateOf(t *testing.T, st *localstack.Stack, name, keyCol, col string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, r := range floetest.Rows(t, openTable(t, st.Catalog(), name)) {
		k, v := r.Key, r.Value
		if keyCol != "" {
			k = r.Columns[keyCol]
		}
		if col != "" {
			v = r.Columns[col]
		}
		if _, dup := got[k]; dup {
			t.Fatalf("%s: key %s has two rows", name, k)
		}
		got[k] = v
	}
	return got
}

// TestUpsertSinkCommand runs floe sink --mode upsert --key string on a
// topic whose key k1 moved from partition 0 to partition 1 (a
// repartitioned topic) beside updates and tombstones, and reads the table
// back with iceberg-go's scan: the latest value of each key, k1's from
// the partition whose latest record is later in time, deleted keys gone.
// The ledger counts the rows, deletes and dead letters. Then the
// refusals: an append table sunk in upsert mode, an upsert table in
// append mode, another key, a partition spec not on the key, and an
// upsert table of raw values keyed by value columns.
func TestUpsertSinkCommand(t *testing.T) {
	const topic = "accounts"
	b := func(s string) []byte { return []byte(s) }
	recs := []*kgo.Record{
		rec(topic, 0, b("k1"), b("a"), 1),
		rec(topic, 0, b("k2"), b("b"), 2),
		rec(topic, 0, b("k1"), b("c"), 3),
		rec(topic, 0, b("k3"), b("d"), 4),
		rec(topic, 0, b("k3"), nil, 5), // deletes k3
		rec(topic, 0, nil, b("no key"), 6),
		rec(topic, 0, b("k2"), b("e"), 7),
		// k1 in partition 1: later in time than k1's latest in partition
		// 0 (t=3), so it wins although partition 0's records come later
		// in the flush.
		rec(topic, 1, b("k1"), b("f"), 10),
		rec(topic, 1, b("k4"), b("g"), 11),
		rec(topic, 0, b("k4"), b("h"), 8), // k4: partition 1's (t=11) wins
	}
	st, sink, loc := upsertStack(t, topic, 2, recs)
	upsert := append(sink, "--table", "lake.accounts", "--mode", "upsert", "--key", "string")
	code, out, errs := floe(t, upsert...)
	// Its summary counts the records as the ledger does: partition 0's 6
	// upserts, a delete and a dead letter, partition 1's 2 upserts.
	if code != 0 || !strings.Contains(out, "sink lake.accounts (new table): 8 upserts, 1 delete (") || !strings.Contains(out, "rows written) and 1 dead letter") {
		t.Fatalf("upsert sink: exit %d\n%s\n%s", code, out, errs)
	}
	// The files count the equality-delete files too (a commit of only a
	// delete said "(0 files)"; from a new-user run).
	if !regexp.MustCompile(`\(\d+ files?, \d+ delete files?, 1 dead-letter file\)`).MatchString(out) {
		t.Errorf("upsert sink: the summary does not count its delete files:\n%s", out)
	}
	// An upsert sink holds its flush in memory: its default flush is
	// smaller than an append sink's.
	if !strings.Contains(errs, "flush_records=100000") {
		t.Errorf("upsert sink without --flush-records: want flush_records=100000 in its log\n%s", errs)
	}
	// --json counts an upsert table's records too (the run again: nothing new).
	if out := mustFloe(t, append(upsert, "--json")...); !strings.Contains(out, `"schema":"floe.sink/v1","table":"lake.accounts"`) ||
		!strings.Contains(out, `"rows":0,"upserts":0,"deletes":0,"skipped":0,"dead_letters":0`) || !strings.Contains(out, `"next":{"accounts/0":8,"accounts/1":2}`) {
		t.Errorf("upsert sink --json:\n%s", out)
	}
	// The audit's JSON counts the deletes beside the upserts (it had only
	// the upserts; from a new-user run).
	code, out, errs = floe(t, append([]string{"audit", "--table", "lake.accounts", "--json"}, loc...)...)
	doc := decodeAudit(t, out)
	if code != 0 || len(doc.Partitions) != 2 || doc.Partitions[0].Records != 6 || doc.Partitions[0].Deletes == nil || *doc.Partitions[0].Deletes != 1 ||
		doc.Partitions[0].Skipped == nil || *doc.Partitions[0].Skipped != 0 {
		t.Errorf("audit --json of the upsert table: exit %d\n%s\n%s", code, out, errs)
	}
	want := map[string]string{"k1": "f", "k2": "e", "k4": "g"}
	if got := stateOf(t, st, "lake.accounts", "", ""); !maps.Equal(got, want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	tbl := openTable(t, st.Catalog(), "lake.accounts")
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	p0 := mapping.Cover(l.Ranges(mapping.TopicPartition{Topic: topic, Partition: 0}))
	if p0.Records != 6 || p0.Deletes != 1 || p0.DeadLetters != 1 || p0.Next != 8 {
		t.Fatalf("partition 0: %+v, want 6 records (2 superseded), 1 delete, 1 dead letter over 8 offsets", p0)
	}
	if tbl.Mode() != mapping.ModeUpsert || tbl.Iceberg().Properties()[mapping.PropUpsertKey] != "kafka-key" {
		t.Fatalf("mode %s, properties %v", tbl.Mode(), tbl.Iceberg().Properties())
	}

	// An append table is not sunk in upsert mode, nor the upsert table in
	// append mode.
	code, _, errs = floe(t, append(sink, "--table", "lake.log")...)
	if code != 0 || !strings.Contains(errs, "flush_records=500000") {
		t.Fatalf("append sink: exit %d, want flush_records=500000 in its log\n%s", code, errs)
	}
	refused(t, st, "table lake.log is of mode append, and this run writes mode upsert", append(sink, "--table", "lake.log", "--mode", "upsert")...)
	// The mode before the layout: asked to pass --key raw, a user then met
	// the mode's refusal (from a new user).
	refused(t, st, "table lake.log is of mode append, and this run writes mode upsert", append(sink, "--table", "lake.log", "--mode", "upsert", "--key", "string")...)
	refused(t, st, "table lake.accounts is of mode upsert, and this run writes mode append", append(sink, "--table", "lake.accounts", "--mode", "append")...)
	// Another key: the key's bytes instead of its text.
	refused(t, st, "table lake.accounts keeps its keys as string, not raw", append(sink, "--table", "lake.accounts", "--mode", "upsert", "--key", "raw")...)
	refused(t, st, "an upsert table's partition spec cannot change once it holds files", append(sink, "--table", "lake.accounts", "--mode", "upsert", "--key", "string", "--partition-by", "identity(kafka_key)")...)
	// Partitioned by a column that is not the key; nothing is created.
	refused(t, st, "an upsert table is partitioned by key columns only (kafka_key)", append(sink, "--table", "lake.byday", "--mode", "upsert", "--key", "string", "--partition-by", "day(kafka_timestamp)")...)
	refused(t, st, "--id-columns names value columns, and a new table's values are raw (no --value)", append(sink, "--table", "lake.ids", "--mode", "upsert", "--id-columns", "id")...)
	refused(t, st, "add --mode upsert", append(sink, "--table", "lake.ids", "--id-columns", "id")...)
	refused(t, st, "--format-version 9: want 2 or 3", append(sink, "--table", "lake.v9", "--mode", "upsert", "--format-version", "9")...)
}

// TestUpsertSinkStructKey runs floe sink --mode upsert --key json --value
// json: the key {"id": N} gives the key column id, the same column as the
// value's id (a value whose id disagrees is a dead letter:
// TestUpsertKeyFieldDisagreesWithValue); a record whose key lacks id, or
// has another field, is a dead letter; a tombstone deletes. Then --id-columns
// on a v3 table: the value's tenant and id columns key it, a record
// without tenant is a dead letter; changing the key columns and a
// floating-point key column are refused.
func TestUpsertSinkStructKey(t *testing.T) {
	const topic = "customers"
	j := func(format string, a ...any) []byte { return fmt.Appendf(nil, format, a...) }
	var recs []*kgo.Record
	want := map[string]string{}
	for i := range 30 {
		id := i % 6
		name := fmt.Sprintf("n%d", i)
		recs = append(recs, rec(topic, int32(id%2), j(`{"id":%d}`, id), j(`{"id":%d,"tenant":"t%d","name":%q,"score":%d.5}`, id, id%2, name, i), i))
		want[fmt.Sprint(id)] = name
	}
	recs = append(recs,
		rec(topic, 1, j(`{"id":5}`), nil, 40),                         // deletes 5
		rec(topic, 0, j(`{"other":1}`), j(`{"id":1,"name":"x"}`), 41), // a field that is not the key's
		rec(topic, 0, nil, j(`{"id":1,"name":"y"}`), 42),              // no key
	)
	delete(want, "5")
	st, sink, _ := upsertStack(t, topic, 2, recs)
	code, out, errs := floe(t, append(sink, "--table", "lake.customers", "--mode", "upsert", "--key", "json", "--value", "json", "--flush-records", "7")...)
	if code != 0 || !strings.Contains(out, "2 dead letters") {
		t.Fatalf("struct key: exit %d\n%s\n%s", code, out, errs)
	}
	if got := stateOf(t, st, "lake.customers", "id", "name"); !maps.Equal(got, want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	tbl := openTable(t, st.Catalog(), "lake.customers")
	if cols, err := tbl.KeyColumns(); err != nil || tbl.UpsertKey().String() != "key:id" || !slices.Equal(cols, []string{"id"}) {
		t.Fatalf("key %s, key columns %v, %v", tbl.UpsertKey(), cols, err)
	}

	// --id-columns on a v3 table.
	ids := append(sink, "--table", "lake.bytenant", "--mode", "upsert", "--value", "json", "--id-columns", "tenant,name", "--format-version", "3")
	code, out, errs = floe(t, ids...)
	if code != 0 || !strings.Contains(out, "3 dead letters") {
		t.Fatalf("id columns: exit %d\n%s\n%s", code, out, errs)
	}
	tenants := openTable(t, st.Catalog(), "lake.bytenant")
	if v := tenants.Iceberg().Metadata().Version(); v != 3 {
		t.Fatalf("format v%d, want 3", v)
	}
	if n := len(floetest.Rows(t, tenants)); n != 30 {
		t.Fatalf("%d rows, want the 30 distinct (tenant, name)", n)
	}
	refused(t, st, "table lake.bytenant is keyed by --id-columns tenant,name, and this run keys by --id-columns name", append(sink, "--table", "lake.bytenant", "--mode", "upsert", "--value", "json", "--id-columns", "name")...)
	// Every record a dead letter (each would make the key column a
	// double); the sink stopped at the first, run after run.
	code, _, errs = floe(t, append(sink, "--table", "lake.byscore", "--mode", "upsert", "--value", "json", "--id-columns", "score", "--stop-at-end")...)
	if code != exitOnlyDeadLetters || !strings.Contains(errs, `key column "score" is a double`) || !strings.Contains(errs, "a column --id-columns names is of a type no key column can have") {
		t.Fatalf("float key: exit %d\n%s", code, errs)
	}
	// --id-columns ID for the column id: every record a dead letter, whose
	// reason names the spelling, and the advice --id-columns (it named
	// --value and --key; from a new-user run).
	code, _, errs = floe(t, append(sink, "--table", "lake.byID", "--mode", "upsert", "--value", "json", "--id-columns", "ID", "--stop-at-end")...)
	if code != exitOnlyDeadLetters || !strings.Contains(errs, "check that --id-columns names columns of the values") ||
		!strings.Contains(errs, "it has id: column names are case-sensitive") {
		t.Errorf("--id-columns ID: exit %d\n%s", code, errs)
	}
}

// TestUpsertPartitionByNotAKeyColumn: a table keyed by its key's fields
// checks --partition-by when its first commit names the key columns, after
// the run created the table and recorded the spec. The refusal said "leave
// --partition-by out", and a run without it was refused the same way (the
// table keeps its recorded spec). It names the recorded spec and the way
// out now, which works: a --partition-by of key columns. Found by a
// new-user run.
func TestUpsertPartitionByNotAKeyColumn(t *testing.T) {
	const topic = "customers-pb"
	st, sink, _ := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, []byte(`{"id":1}`), []byte(`{"name":"ann"}`), 0)})
	args := append(sink, "--table", "lake.cust_pb", "--mode", "upsert", "--key", "json", "--value", "json")
	for _, extra := range [][]string{{"--partition-by", "bucket(4,name)"}, nil} {
		code, _, errs := floe(t, append(slices.Clone(args), extra...)...)
		if code != exitError || !strings.Contains(errs, "the table records this spec (floe.partition-by)") || !strings.Contains(errs, "run with a --partition-by of key columns") {
			t.Fatalf("%v: exit %d\n%s", extra, code, errs)
		}
	}
	mustFloe(t, append(slices.Clone(args), "--partition-by", "bucket(4,id)")...)
	if got := stateOf(t, st, "lake.cust_pb", "id", "name"); !maps.Equal(got, map[string]string{"1": "ann"}) {
		t.Fatalf("table %v", got)
	}
}

// TestUpsertKeyAloneTakesTablesValue (from a review): --key without
// --value takes the table's value mode in an upsert run too (the value
// was taken for raw before the key was worked out, and the run refused
// as if the table held raw values); a new table given --id-columns
// without --value is refused before it is created, its values being raw.
func TestUpsertKeyAloneTakesTablesValue(t *testing.T) {
	const topic = "acct"
	b := func(s string) []byte { return []byte(s) }
	recs := []*kgo.Record{
		rec(topic, 0, b(`{"id":1}`), b(`{"id":1,"name":"a"}`), 0),
		rec(topic, 0, b(`{"id":2}`), b(`{"id":2,"name":"b"}`), 1),
	}
	st, sink, _ := upsertStack(t, topic, 1, recs)
	for _, create := range [][]string{
		{"--table", "lake.acct", "--mode", "upsert", "--value", "json", "--key", "json"},
		{"--table", "lake.acctid", "--mode", "upsert", "--value", "json", "--key", "string", "--id-columns", "id"},
	} {
		if code, out, errs := floe(t, slices.Concat(sink, create)...); code != 0 {
			t.Fatalf("create %v: exit %d\n%s\n%s", create, code, out, errs)
		}
	}
	for _, c := range [][]string{
		{"--table", "lake.acct", "--mode", "upsert", "--key", "json"},
		{"--table", "lake.acctid", "--mode", "upsert", "--key", "string", "--id-columns", "id"},
		{"--table", "lake.acctid", "--mode", "upsert", "--id-columns", "id"},
	} {
		if code, out, errs := floe(t, slices.Concat(sink, c)...); code != 0 {
			t.Errorf("%v (no --value, the table's json): exit %d\n%s\n%s", c, code, out, errs)
		}
	}
	code, _, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.acctnew", "--mode", "upsert", "--id-columns", "id"})...)
	if code != exitError || !strings.Contains(errs, "a new table's values are raw") || replayTableExists(t, st, "lake.acctnew") {
		t.Errorf("--id-columns without --value into a new table: exit %d, %s", code, errs)
	}
}

// TestUpsertStructKeyWithoutValueNewTable: a new upsert table given --key
// json without --value (its values would be raw) is refused before it is
// created, with the fix; the refusal read as a failure to load the table
// ("load table lake.c2: upsert key: ...", from a new-user run).
func TestUpsertStructKeyWithoutValueNewTable(t *testing.T) {
	const topic = "customers-kv"
	st, sink, _ := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, []byte(`{"id":1}`), []byte(`{"name":"ann"}`), 0)})
	code, _, errs := floe(t, append(sink, "--table", "lake.c2", "--mode", "upsert", "--key", "json")...)
	if code != exitError || strings.Contains(errs, "load table") || !strings.Contains(errs, "use --value json or registry with it") {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if replayTableExists(t, st, "lake.c2") {
		t.Error("the refused run created the table")
	}
}
