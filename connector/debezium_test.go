package connector_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// cdcLayout is the layout of a Debezium table written with enc.
func cdcLayout(t testing.TB, enc floetest.CDCEncoding) mapping.Layout {
	t.Helper()
	l := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON, Envelope: mapping.EnvelopeDebezium}
	if enc.Registry() {
		l.Value, l.Key = mapping.ValueRegistry, mapping.KeyRegistry
	}
	if err := l.Normalize(); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDebeziumDecodeChanges decodes a Debezium capture of a customers
// table, in each converter's encoding, as a sink does (keys unwrapped and
// typed, the registry's Avro envelope included), and folds the changes key
// by key: the result is the table's final state.
func TestDebeziumDecodeChanges(t *testing.T) {
	e := floetest.New(t)
	for _, enc := range []floetest.CDCEncoding{floetest.CDCConnectJSON, floetest.CDCPlainJSON, floetest.CDCAvro, floetest.CDCJSONSchema, floetest.CDCProtobuf} {
		t.Run(enc.String(), func(t *testing.T) {
			c := floetest.NewCustomers("cdc-"+enc.String(), 1)
			c.Story(15, 60, 11)
			c.Truncate()
			l := cdcLayout(t, enc)
			rd, err := connector.NewRowDecoder(l, e.Registry(), l.Schema(), nil)
			if err != nil {
				t.Fatal(err)
			}
			recs := c.Records(t, enc, e.Stack.Registry)
			rows := map[int64]map[string]any{}
			counts := map[mapping.Change]int{}
			var beforeTruncate map[int64]map[string]any
			for i, r := range recs {
				key, value, change, dead, err := rd.DecodeChange(e.Ctx, r, mapping.UpsertKey{Source: mapping.KeyFromKeyFields})
				if err != nil || dead != nil {
					t.Fatalf("record %d: %v %v", i, dead, err)
				}
				counts[change]++
				switch change {
				case mapping.ChangeUpsert:
					rows[keyID(t, enc, key)] = value
					if keyID(t, enc, key) != keyID(t, enc, map[string]any{"id": value["id"]}) {
						t.Fatalf("record %d: key %v, row id %v", i, key, value["id"])
					}
				case mapping.ChangeDelete:
					delete(rows, keyID(t, enc, key))
				case mapping.ChangeTruncate:
					beforeTruncate = maps.Clone(rows)
					clear(rows)
				}
			}
			// A tombstone deletes its key again (log compaction may have
			// removed the delete before it).
			if counts[mapping.ChangeUpsert] != c.Upserts || counts[mapping.ChangeDelete] != c.Deletes+c.Tombstones ||
				counts[mapping.ChangeSkip] != 0 || counts[mapping.ChangeTruncate] != 1 {
				t.Fatalf("changes %v; the capture has %d upserts, %d deletes, %d tombstones, 1 truncate", counts, c.Upserts, c.Deletes, c.Tombstones)
			}
			if len(rows) != 0 {
				t.Fatalf("%d rows after the truncate", len(rows))
			}
			// The state before the truncate: replay without it.
			want := floetest.NewCustomers("x", 1)
			want.Story(15, 60, 11)
			state := want.State()
			if len(beforeTruncate) != len(state) {
				t.Fatalf("%d rows before the truncate, want %d", len(beforeTruncate), len(state))
			}
			for id, cu := range state {
				row := beforeTruncate[int64(id)]
				if row["email"] != cu.Email || row["first_name"] != cu.FirstName {
					t.Errorf("customer %d: %v, want %+v", id, row, cu)
				}
				if op := row[mapping.ColOp]; op != "r" && op != "c" && op != "u" {
					t.Errorf("customer %d: __op %v", id, op)
				}
			}
		})
	}
}

// keyID returns the id of a decoded key: an int (int32) with a Connect or
// Avro schema, a long (inferred, or a JSON Schema integer) otherwise.
func keyID(t *testing.T, enc floetest.CDCEncoding, key any) int64 {
	t.Helper()
	m, ok := key.(map[string]any)
	if !ok {
		t.Fatalf("key %T %v, want a struct", key, key)
	}
	switch id := m["id"].(type) {
	case int32:
		if enc == floetest.CDCPlainJSON || enc == floetest.CDCJSONSchema {
			t.Fatalf("%s key id typed int", enc)
		}
		return int64(id)
	case int64:
		if enc == floetest.CDCConnectJSON || enc == floetest.CDCAvro {
			t.Fatalf("%s key id is a long, the schema says int32", enc)
		}
		return id
	}
	t.Fatalf("key id %T", m["id"])
	return 0
}

// TestDebeziumDecodeBadEvents: records that are not Debezium change
// events, or deletes whose key cannot be told, are dead letters whose
// reason names the problem; a delete without a record key takes its key
// from the before image.
func TestDebeziumDecodeBadEvents(t *testing.T) {
	l := cdcLayout(t, floetest.CDCPlainJSON)
	rd, err := connector.NewRowDecoder(l, nil, l.Schema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rec := func(key, value string) *kgo.Record {
		r := &kgo.Record{Topic: "t"}
		if key != "" {
			r.Key = []byte(key)
		}
		if value != "" {
			r.Value = []byte(value)
		}
		return r
	}
	key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	// A delete without a key before any key was seen: no key columns yet.
	_, _, _, dead, _ := rd.DecodeChange(ctx, rec("", `{"before":{"id":3,"email":"x"},"after":null,"op":"d"}`), key)
	if dead == nil || !strings.Contains(dead.Error(), "cannot tell which of its before image's fields are the key") {
		t.Fatalf("delete without key, no key columns: %v", dead)
	}
	if _, _, ch, dead, err := rd.DecodeChange(ctx, rec(`{"id":1}`, `{"before":null,"after":{"id":1,"email":"a"},"op":"c","source":{"ts_ms":5}}`), key); ch != mapping.ChangeUpsert || dead != nil || err != nil {
		t.Fatalf("create: %v %v %v", ch, dead, err)
	}
	k, _, ch, dead, _ := rd.DecodeChange(ctx, rec("", `{"before":{"id":3,"email":"x"},"after":null,"op":"d"}`), key)
	if dead != nil || ch != mapping.ChangeDelete || k.(map[string]any)["id"] != int64(3) {
		t.Fatalf("delete without key: key %v change %v dead %v", k, ch, dead)
	}
	for _, c := range []struct{ name, key, value, want string }{
		{"delete without key or before", "", `{"before":null,"after":null,"op":"d"}`, "neither a record key nor a before image"},
		{"before without the key field", "", `{"before":{"email":"x"},"after":null,"op":"d"}`, "before image has no key field id"},
		{"no op", `{"id":1}`, `{"id":1,"email":"a"}`, "not a Debezium change event (--envelope debezium): no op field"},
		{"message op", `{"id":1}`, `{"op":"m","message":{"prefix":"p"}}`, `op "m" is not one of c, r, u, d, t`},
		{"update without after", `{"id":1}`, `{"before":{"id":1},"after":null,"op":"u"}`, `op "u" without an after image`},
	} {
		_, _, _, dead, err := rd.DecodeChange(ctx, rec(c.key, c.value), key)
		if err != nil || dead == nil || !strings.Contains(dead.Error(), c.want) {
			t.Errorf("%s: dead %v err %v, want a reason saying %q", c.name, dead, err, c.want)
		}
	}
}

// TestDebeziumLayoutRecorded: a Debezium table records its envelope, and
// a writer of another envelope is refused with one line naming both.
func TestDebeziumLayoutRecorded(t *testing.T) {
	e := floetest.New(t)
	l := cdcLayout(t, floetest.CDCPlainJSON)
	tbl, _ := e.TypedTable("lake.customers", l)
	if got := tbl.Layout(); got != l {
		t.Fatalf("layout %+v, want %+v", got, l)
	}
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	plain := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON}
	_, err = snapshot.Open(e.Ctx, cat, table.Identifier{"lake", "customers"}, snapshot.OpenOptions{Layout: plain})
	if err == nil || err.Error() != "table lake.customers keeps its envelope as debezium, not none (a table keeps the layout it was created with: pass --envelope debezium to write into it, or sink into a new table; it holds no rows: floe drop --table lake.customers --yes removes it (and its dead letters), and the next run creates it with the flags given)" {
		t.Fatalf("plain JSON writer of a Debezium table: %v", err)
	}
	if _, err := snapshot.Open(e.Ctx, cat, table.Identifier{"lake", "customers"}, snapshot.OpenOptions{}); err != nil {
		t.Fatalf("a reader that asks for no layout: %v", err)
	}
	e.TypedTable("lake.events", plain)
	_, err = snapshot.Open(e.Ctx, cat, table.Identifier{"lake", "events"}, snapshot.OpenOptions{Layout: l})
	if err == nil || !strings.Contains(err.Error(), "keeps its envelope as none, not debezium") {
		t.Fatalf("Debezium writer of a plain table: %v", err)
	}
	for _, bad := range []mapping.Layout{
		{Value: mapping.ValueRaw, Envelope: mapping.EnvelopeDebezium},
		{Value: mapping.ValueJSON, Key: mapping.KeyString, Envelope: mapping.EnvelopeDebezium},
	} {
		if err := bad.Normalize(); err == nil || !strings.Contains(err.Error(), "with --envelope debezium") {
			t.Errorf("layout %+v: %v", bad, err)
		}
	}
}

// debeziumTable creates the upsert table name for Debezium events written
// with enc (--envelope debezium: keyed by the record key's fields), with
// its dead-letter table.
func (e *env) debeziumTable(name string, enc floetest.CDCEncoding) (tbl, dlq *snapshot.Table) {
	e.T.Helper()
	l := cdcLayout(e.T, enc)
	key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	return e.TableWithDeadLetters(name, snapshot.OpenOptions{Create: true, Layout: l, Mode: mapping.ModeUpsert, Key: &key})
}

// TestDebeziumSink sinks a Debezium capture of a customers table (a
// snapshot, then inserts, updates, deletes with their tombstones), in
// each converter's encoding, through kfake into an upsert table in many
// flushes, and reads it back with iceberg-go's scan (equality deletes
// applied): exactly the customers table, column by column, each row with
// the kafka_* columns, __op and __source_ts_ms of the event that wrote it.
// The ledger counts every event: upserts as records, deletes and their
// tombstones as deletes.
func TestDebeziumSink(t *testing.T) {
	e := newEnv(t)
	for i, enc := range []floetest.CDCEncoding{floetest.CDCConnectJSON, floetest.CDCPlainJSON, floetest.CDCAvro, floetest.CDCJSONSchema, floetest.CDCProtobuf} {
		t.Run(enc.String(), func(t *testing.T) {
			topic := "dbserver1.inventory.customers-" + enc.String()
			e.Topic(topic, 2, nil)
			c := floetest.NewCustomers(topic, 2)
			c.Story(40, 160, uint64(i+1))
			recs := c.Records(t, enc, e.Stack.Registry)
			e.Produce(recs)
			tbl, dlq := e.debeziumTable(fmt.Sprintf("lake.customers_%d", i), enc)
			stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 37, DeadLetters: dlq, Registry: e.Registry()})
			if err != nil {
				t.Fatal(err)
			}
			if stats.Commits < 4 || stats.DeadLetters != 0 {
				t.Fatalf("%d commits, %d dead letters (%s): want several flushes and none", stats.Commits, stats.DeadLetters, stats.FirstDeadLetter)
			}
			c.CheckTable(t, rows(t, tbl), enc, true)
			checkCounts(t, tbl, topic, int64(len(recs)), int64(c.Upserts), int64(c.Deletes+c.Tombstones), 0, 0)
		})
	}
}

// checkCounts checks the ledger of tbl for topic: offsets [0, offsets)
// covered without gaps or overlaps, with these counts.
func checkCounts(t *testing.T, tbl *snapshot.Table, topic string, offsets, records, deletes, skipped, dead int64) {
	t.Helper()
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	var sum mapping.Coverage
	var covered int64
	for _, tp := range l.Partitions() {
		if tp.Topic != topic {
			continue
		}
		c := mapping.Cover(l.Ranges(tp))
		if len(c.Gaps)+len(c.Overlaps) > 0 || c.First != 0 {
			t.Fatalf("%s: coverage %+v", tp, c)
		}
		covered += c.Next
		sum.Records += c.Records
		sum.Deletes += c.Deletes
		sum.Skipped += c.Skipped
		sum.DeadLetters += c.DeadLetters
	}
	if covered != offsets || sum.Records != records || sum.Deletes != deletes || sum.Skipped != skipped || sum.DeadLetters != dead {
		t.Fatalf("ledger: %d offsets, %d records, %d deletes, %d skipped, %d dead letters; want %d, %d, %d, %d, %d",
			covered, sum.Records, sum.Deletes, sum.Skipped, sum.DeadLetters, offsets, records, deletes, skipped, dead)
	}
}

// TestDebeziumTruncate: a truncate event in the middle of a flush, on a
// topic of one partition (Debezium's default). With --on-truncate
// delete-all the table ends with the rows written after it only (rows of
// earlier commits and those read before it in the same flush go), counted
// as a delete; without, the truncate is a dead letter naming the flag, and
// the table keeps its rows. The content audit proves either table complete.
func TestDebeziumTruncate(t *testing.T) {
	e := newEnv(t)
	for _, deleteAll := range []bool{true, false} {
		t.Run(fmt.Sprint("delete-all=", deleteAll), func(t *testing.T) {
			topic := fmt.Sprint("dbserver1.inventory.customers-truncate-", deleteAll)
			e.Topic(topic, 1, nil)
			c := floetest.NewCustomers(topic, 1)
			c.Story(10, 25, 3)
			c.Truncate()
			c.Insert(floetest.Customer{ID: 900, FirstName: "Ada", LastName: "Lovelace", Email: "ada@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
			c.Insert(floetest.Customer{ID: 901, FirstName: "Alan", LastName: "Turing", Email: "alan@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)})
			c.Update(900, func(cu *floetest.Customer) { cu.Email = "ada@example.org" })
			c.Delete(901)
			recs := c.Records(t, floetest.CDCConnectJSON, "")
			e.Produce(recs)
			tbl, dlq := e.debeziumTable("lake.truncated_"+fmt.Sprint(deleteAll), floetest.CDCConnectJSON)
			cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: dlq}
			if deleteAll {
				cfg.OnTruncate = connector.TruncateDeleteAll
			}
			stats, err := e.sink(tbl, cfg)
			if err != nil {
				t.Fatal(err)
			}
			c.CheckTable(t, rows(t, tbl), floetest.CDCConnectJSON, deleteAll)
			if deleteAll {
				if stats.DeadLetters != 0 {
					t.Fatalf("%d dead letters, want none", stats.DeadLetters)
				}
				checkCounts(t, tbl, topic, int64(len(recs)), int64(c.Upserts), int64(c.Deletes+c.Tombstones+1), 0, 0)
			} else {
				if stats.DeadLetters != 1 || !strings.Contains(stats.FirstDeadLetter, "--on-truncate delete-all") {
					t.Fatalf("%d dead letters, first %q: want the truncate, naming --on-truncate delete-all", stats.DeadLetters, stats.FirstDeadLetter)
				}
				checkCounts(t, tbl, topic, int64(len(recs)), int64(c.Upserts), int64(c.Deletes+c.Tombstones), 0, 1)
			}
			// The content level folds the applied truncate as the sink
			// applied it, and checks the dead-lettered one as the dead
			// letter it is; it refused the table in both cases (the
			// second from a new-user run).
			rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
			if err != nil || !rep.Complete() {
				t.Fatalf("audit --deep --verify-content of a table whose truncate is applied (%v) or a dead letter: %v, findings %+v", deleteAll, err, rep)
			}
		})
	}
}

// TestDebeziumTruncateSeveralPartitionsWarns (from a new-user run):
// --on-truncate delete-all on a topic of several partitions left rows of
// other partitions that the source wrote before the truncate, silently: a
// sink says at WARN that the table can differ from the source.
func TestDebeziumTruncateSeveralPartitionsWarns(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.customers"
	e.Topic(topic, 2, nil)
	c := floetest.NewCustomers(topic, 2)
	c.Story(4, 2, 1)
	e.Produce(c.Records(t, floetest.CDCConnectJSON, ""))
	tbl, dlq := e.debeziumTable("lake.customers", floetest.CDCConnectJSON)
	for _, policy := range []connector.OnTruncate{connector.TruncateDeadLetter, connector.TruncateDeleteAll} {
		var log bytes.Buffer
		cfg := connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, OnTruncate: policy,
			Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
		if warned := strings.Contains(log.String(), "--on-truncate delete-all on a topic of several partitions"); warned != (policy == connector.TruncateDeleteAll) {
			t.Errorf("--on-truncate %s on 2 partitions: warned %v\n%s", policy, warned, log.String())
		}
	}
}

// TestDebeziumColumnAdded: a column added to the source table (ALTER TABLE
// ADD COLUMN) arrives as a new field of after: the table gains an optional
// column in the commit of its first row, rows written before read null
// there, and an update of an older row fills it.
func TestDebeziumColumnAdded(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.customers"
	e.Topic(topic, 1, nil)
	c := floetest.NewCustomers(topic, 1)
	c.Story(8, 10, 4)
	recs := c.Records(t, floetest.CDCPlainJSON, "")
	state := c.State()
	var updated int32
	for id := range state {
		updated = max(updated, id)
	}
	event := func(op string, id int32, phone string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, `{"id":%d}`, id), Timestamp: time.Date(2026, 12, 1, 0, 0, int(id%60), 0, time.UTC),
			Value: fmt.Appendf(nil, `{"before":null,"after":{"id":%d,"first_name":"N","last_name":"N","email":"n@example.com","phone":%q},"source":{"ts_ms":1796000000000},"op":%q,"ts_ms":1796000000100}`, id, phone, op)}
	}
	recs = append(recs, event("c", 5000, "+31 20 555 0100"), event("u", updated, "+31 20 555 0101"))
	e.Produce(recs)
	tbl, dlq := e.debeziumTable("lake.customers_added", floetest.CDCPlainJSON)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 9, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	f, ok := tbl.Iceberg().Schema().FindFieldByName("phone")
	if !ok || f.Required || !f.Type.Equals(iceberg.PrimitiveTypes.String) {
		t.Fatalf("column phone: %+v (found %v), want an optional string", f, ok)
	}
	got := rows(t, tbl)
	if len(got) != len(state)+1 {
		t.Fatalf("%d rows, want %d", len(got), len(state)+1)
	}
	for _, r := range got {
		want := "(null)"
		switch r.Columns["id"] {
		case "5000":
			want = "+31 20 555 0100"
		case fmt.Sprint(updated):
			want = "+31 20 555 0101"
		}
		if r.Columns["phone"] != want {
			t.Errorf("customer %s: phone %q, want %q", r.Columns["id"], r.Columns["phone"], want)
		}
	}
}

// TestDebeziumDeadLetters: records of a Debezium topic that are not change
// events floe can apply go to the dead-letter table, each with a reason
// naming the problem, counted in the ledger; the events around them are
// applied.
func TestDebeziumDeadLetters(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.customers"
	e.Topic(topic, 1, nil)
	c := floetest.NewCustomers(topic, 1)
	c.Story(6, 12, 8)
	recs := c.Records(t, floetest.CDCPlainJSON, "")
	bad := []struct{ key, value, reason string }{
		{`{"id":1}`, `{"id":1,"first_name":"no envelope"}`, "not a Debezium change event (--envelope debezium): no op field"},
		{`{"id":1}`, `{"op":"m","message":{"prefix":"audit","content":"aGk="}}`, `op "m" is not one of c, r, u, d, t`},
		{`{"id":1}`, `{"before":null,"after":null,"op":"c","source":{"ts_ms":1}}`, `op "c" without an after image`},
		{``, `{"before":null,"after":{"id":77,"email":"x"},"op":"c","source":{"ts_ms":1}}`, "the change event has no key"},
		{`{"id":1}`, `{"op":"u","after":{"id":"one"}}`, "field id"},
	}
	for i, b := range bad {
		r := &kgo.Record{Topic: topic, Value: []byte(b.value), Timestamp: time.Date(2026, 12, 1, 0, 0, i, 0, time.UTC)}
		if b.key != "" {
			r.Key = []byte(b.key)
		}
		recs = append(recs, r)
	}
	e.Produce(recs)
	tbl, dlq := e.debeziumTable("lake.customers_dlq_test", floetest.CDCPlainJSON)
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 10, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	if stats.DeadLetters != int64(len(bad)) {
		t.Fatalf("%d dead letters, want %d", stats.DeadLetters, len(bad))
	}
	c.CheckTable(t, rows(t, tbl), floetest.CDCPlainJSON, true)
	dead := rows(t, dlq)
	slices.SortFunc(dead, func(a, b floetest.Row) int { return int(a.Offset - b.Offset) })
	for i, b := range bad {
		if got := dead[i].Columns[mapping.ColError]; !strings.Contains(got, b.reason) {
			t.Errorf("dead letter %d: reason %q, want one saying %q", i, got, b.reason)
		}
	}
	checkCounts(t, tbl, topic, int64(len(recs)), int64(c.Upserts), int64(c.Deletes+c.Tombstones), 0, int64(len(bad)))
}

// TestDebeziumTruncateFilesAudit: a truncate in a commit of its own
// removes every data file and adds none. The files level of an upsert
// table reads only the commits that added the live files, and must still
// know the truncate for a floe commit (the table's history says so), not
// report its removals as another writer's.
func TestDebeziumTruncateFilesAudit(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.customers-truncated"
	e.Topic(topic, 1, nil)
	c := floetest.NewCustomers(topic, 1)
	c.Story(10, 25, 3)
	e.Produce(c.Records(t, floetest.CDCConnectJSON, ""))
	tbl, dlq := e.debeziumTable("lake.truncated_alone", floetest.CDCConnectJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	before := len(c.Records(t, floetest.CDCConnectJSON, ""))
	c.Truncate()
	e.Produce(c.Records(t, floetest.CDCConnectJSON, "")[before:])
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if n := len(rows(t, tbl)); n != 0 {
		t.Fatalf("%d rows after the truncate, want none", n)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthFiles})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("files level finding: %s %s: %s", f.Level, f.Kind, f.Detail)
	}
}

// TestDebeziumUnavailableValue: updates of a PostgreSQL table whose REPLICA
// IDENTITY leaves an unchanged TOASTed column out carry Debezium's
// placeholder in its stead. Each such event is a dead letter naming the
// column and REPLICA IDENTITY FULL, in every converter's encoding; the key
// keeps its previous row (the table never holds the placeholder), a later
// complete update of it applies, and the ledger counts the events as dead
// letters.
func TestDebeziumUnavailableValue(t *testing.T) {
	e := newEnv(t)
	for i, enc := range []floetest.CDCEncoding{floetest.CDCConnectJSON, floetest.CDCPlainJSON, floetest.CDCAvro, floetest.CDCJSONSchema, floetest.CDCProtobuf} {
		t.Run(enc.String(), func(t *testing.T) {
			topic := "dbserver1.inventory.toasted-" + enc.String()
			e.Topic(topic, 2, nil)
			c := floetest.NewCustomers(topic, 2)
			c.Story(20, 40, uint64(i+1))
			ids := slices.Sorted(maps.Keys(c.State()))
			for _, id := range ids[:4] {
				c.UpdateUnavailable(id, func(cu *floetest.Customer) { cu.FirstName = "Toasted" })
			}
			c.Update(ids[0], func(cu *floetest.Customer) { cu.LastName = "Repaired" })
			recs := c.Records(t, enc, e.Stack.Registry)
			e.Produce(recs)
			tbl, dlq := e.debeziumTable(fmt.Sprintf("lake.toasted_%d", i), enc)
			stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 13, DeadLetters: dlq, Registry: e.Registry()})
			if err != nil {
				t.Fatal(err)
			}
			if stats.DeadLetters != int64(c.Unavailable) {
				t.Fatalf("%d dead letters, want %d (%s)", stats.DeadLetters, c.Unavailable, stats.FirstDeadLetter)
			}
			c.CheckTable(t, rows(t, tbl), enc, true)
			for _, d := range rows(t, dlq) {
				if reason := d.Columns[mapping.ColError]; !strings.Contains(reason, "after.email") || !strings.Contains(reason, "REPLICA IDENTITY FULL") {
					t.Errorf("dead letter at offset %d: %q, want it to name after.email and REPLICA IDENTITY FULL", d.Offset, reason)
				}
			}
			checkCounts(t, tbl, topic, int64(len(recs)), int64(c.Upserts), int64(c.Deletes+c.Tombstones), 0, int64(c.Unavailable))
		})
	}
}

// TestDebeziumCustomPlaceholder: a connector given another
// unavailable.value.placeholder writes that for an unchanged TOASTed
// value; floe recognised Debezium's default only, so the rows held the
// connector's placeholder where the source holds the value, and the
// content audit (decoding as the sink did) agreed. Given the placeholder
// (Config.UnavailablePlaceholder, --unavailable-placeholder), such events
// are dead letters; the table records it, so that a run without it, and
// the content audit, read the events alike. A placeholder for a table
// that holds no Debezium events, or one that cannot be, is refused.
func TestDebeziumCustomPlaceholder(t *testing.T) {
	e := newEnv(t)
	const placeholder = "<unchanged toast>"
	for i, enc := range []floetest.CDCEncoding{floetest.CDCConnectJSON, floetest.CDCAvro} {
		t.Run(enc.String(), func(t *testing.T) {
			topic := "dbserver1.inventory.custom-toast-" + enc.String()
			e.Topic(topic, 1, nil)
			c := floetest.NewCustomers(topic, 1)
			c.Placeholder = placeholder
			c.Story(12, 20, uint64(i+7))
			ids := slices.Sorted(maps.Keys(c.State()))
			toast := func(ids []int32) {
				for _, id := range ids {
					c.UpdateUnavailable(id, func(cu *floetest.Customer) { cu.FirstName = "Toasted" })
				}
			}
			toast(ids[:2])
			recs := c.Records(t, enc, e.Stack.Registry)
			e.Produce(recs)
			tbl, dlq := e.debeziumTable(fmt.Sprintf("lake.custom_toast_%d", i), enc)
			cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 7, DeadLetters: dlq, Registry: e.Registry(), UnavailablePlaceholder: placeholder}
			if _, err := e.sink(tbl, cfg); err != nil {
				t.Fatal(err)
			}
			// A restart without the setting: the table's is used.
			toast(ids[2:3])
			all := c.Records(t, enc, e.Stack.Registry)
			e.Produce(all[len(recs):])
			cfg.UnavailablePlaceholder = ""
			if _, err := e.sink(tbl, cfg); err != nil {
				t.Fatal(err)
			}
			if err := tbl.Refresh(e.Ctx); err != nil {
				t.Fatal(err)
			}
			if got := tbl.Iceberg().Properties()[mapping.PropPlaceholder]; got != placeholder {
				t.Errorf("table property %s = %q, want %q", mapping.PropPlaceholder, got, placeholder)
			}
			c.CheckTable(t, rows(t, tbl), enc, true)
			dead := rows(t, dlq)
			if len(dead) != 3 {
				t.Fatalf("%d dead letters, want 3 (the events holding the placeholder)", len(dead))
			}
			for _, d := range dead {
				if reason := d.Columns[mapping.ColError]; !strings.Contains(reason, "after.email") || !strings.Contains(reason, placeholder) {
					t.Errorf("dead letter at offset %d: %q, want it to name after.email and the placeholder", d.Offset, reason)
				}
			}
			rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true, Registry: e.Registry()})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Complete() {
				t.Errorf("content audit: %+v", rep.Findings)
			}
		})
	}

	plain, _ := e.UpsertTable("lake.not_debezium")
	if _, err := connector.NewSink(e.Broker(), plain, connector.Config{Topic: "t", UnavailablePlaceholder: placeholder}); err == nil || !strings.Contains(err.Error(), "Debezium") {
		t.Errorf("a placeholder for a table of no Debezium events: %v, want it refused", err)
	}
	if _, err := connector.NewSink(e.Broker(), plain, connector.Config{Topic: "t", UnavailablePlaceholder: "hex:0g"}); err == nil || !strings.Contains(err.Error(), "unavailable.value.placeholder") {
		t.Errorf("placeholder hex:0g: %v, want it refused", err)
	}
}
