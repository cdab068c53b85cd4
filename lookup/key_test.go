package lookup_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// upsertEnv is topic u (one partition) sunk into the upsert table lake.u
// (keyed by the Kafka key) in three commits of 4 records:
//
//	commit 1: 0 a=a1, 1 b=b1, 2 c=c1, 3 d=d1
//	commit 2: 4 b=b2, 5 c deleted, 6 a=a2, 7 e=e1
//	commit 3: 8 d deleted, 9 e=e2, 10 b deleted, 11 b=b3
func upsertEnv(t *testing.T) (*floetest.Env, *snapshot.Table) {
	t.Helper()
	e := floetest.New(t)
	e.Topic("u", 1, nil)
	tbl, dlq := e.UpsertTable("lake.u")
	sinkKeyed(t, e, tbl, dlq, 4, "a=a1", "b=b1", "c=c1", "d=d1", "b=b2", "c", "a=a2", "e=e1", "d", "e=e2", "b", "b=b3")
	return e, tbl
}

// sinkKeyed produces to topic u a record per item of kvs, "key=value" or
// "key" (a tombstone), stamped a second apart, and sinks them into tbl in
// commits of flush records.
func sinkKeyed(t *testing.T, e *floetest.Env, tbl, dlq *snapshot.Table, flush int, kvs ...string) {
	t.Helper()
	var recs []*kgo.Record
	for i, kv := range kvs {
		k, v, upsert := strings.Cut(kv, "=")
		r := &kgo.Record{Topic: "u", Key: []byte(k), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*1000)}
		if upsert {
			r.Value = []byte(v)
		}
		recs = append(recs, r)
	}
	e.Produce(recs)
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "u", StopAtEnd: true, FlushRecords: flush, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestWhereKey looks keys of an upsert table up: a row names its record's
// offset and commit and its data file; a deleted key the commit whose
// equality-delete file holds it (and, with a broker, the deleting record's
// offset); a key no record had is never seen.
func TestWhereKey(t *testing.T) {
	e, tbl := upsertEnv(t)
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	snap := func(offset int64) int64 {
		c, _, ok := l.Locate(mapping.TopicPartition{Topic: "u"}, offset)
		if !ok {
			t.Fatalf("no commit holds offset %d", offset)
		}
		return c.SnapshotID
	}
	for _, c := range []struct {
		key     string
		broker  bool
		status  string
		offset  int64 // -1: none
		snap    int64 // offset whose commit it is; -1: none
		foundBy string
	}{
		{"a", false, lookup.KeyStatusRow, 6, 6, ""},
		{"b", false, lookup.KeyStatusRow, 11, 11, ""},
		{"e", false, lookup.KeyStatusRow, 9, 9, ""},
		{"c", false, lookup.KeyStatusDeleted, -1, 5, lookup.FoundByDeleteFiles},
		{"c", true, lookup.KeyStatusDeleted, 5, 5, lookup.FoundByDeleteFiles},
		{"d", true, lookup.KeyStatusDeleted, 8, 8, lookup.FoundByDeleteFiles},
		{"z", false, lookup.KeyStatusNeverSeen, -1, -1, ""},
		{"z", true, lookup.KeyStatusNeverSeen, -1, -1, ""},
	} {
		var b *connector.Broker
		if c.broker {
			b = e.Broker()
		}
		r, err := lookup.WhereKey(t.Context(), tbl, b, c.key)
		if err != nil {
			t.Fatalf("key %s: %v", c.key, err)
		}
		if r.Status != c.status || r.FoundBy != c.foundBy || (r.Offset == nil) != (c.offset < 0) || (r.Offset != nil && *r.Offset != c.offset) ||
			(r.SnapshotID == nil) != (c.snap < 0) || (r.SnapshotID != nil && *r.SnapshotID != snap(c.snap)) {
			t.Errorf("key %s (broker %v): %+v; want %s at offset %d, commit of offset %d, found by %q", c.key, c.broker, r, c.status, c.offset, c.snap, c.foundBy)
			continue
		}
		if (r.File != "") != (c.status != lookup.KeyStatusNeverSeen) || !strings.Contains(r.Explanation, "key "+c.key) {
			t.Errorf("key %s: file %q, explanation %q", c.key, r.File, r.Explanation)
		}
	}

	// A key of an append table, and a key that is not JSON for a table
	// keyed by columns, are refused.
	events := e.Table("lake.events")
	if _, err := lookup.WhereKey(t.Context(), events, nil, "a"); !errors.As(err, new(*lookup.NotUpsertError)) ||
		!strings.Contains(err.Error(), "mode append") || !strings.Contains(err.Error(), "--partition P --offset X") {
		t.Fatalf("append table: %v", err)
	}
}

// TestWhereKeyBeforeKeyColumns: a table keyed by the key's fields names
// its key columns at its first commit with a row. Before that (every record
// went to the dead-letter table, or none came yet), a lookup by key says
// so; it indexed the first key column, and panicked. It names floe
// dead-letters, which lists the records that went to the dead-letter table
// (a new-user run was sent to floe status, which counts them only, and
// read "no record has been sunk" after a sink of two dead letters).
func TestWhereKeyBeforeKeyColumns(t *testing.T) {
	e := floetest.New(t)
	key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	tbl, _ := e.TableWithDeadLetters("lake.cdc", snapshot.OpenOptions{Create: true,
		Layout: mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON, Envelope: mapping.EnvelopeDebezium},
		Mode:   mapping.ModeUpsert, Key: &key})
	for _, text := range []string{`{"id":2}`, "x"} {
		_, err := lookup.WhereKey(t.Context(), tbl, nil, text)
		if err == nil || !strings.Contains(err.Error(), "has no key columns yet") || !strings.Contains(err.Error(), "floe dead-letters --table lake.cdc") {
			t.Fatalf("key %s of a table without key columns: %v", text, err)
		}
	}
}

// upsertState reads a snapshot of an upsert table keyed by the Kafka key
// as key=value pairs, sorted.
func upsertState(t *testing.T, tbl *snapshot.Table, snapshotID int64) []string {
	t.Helper()
	var out []string
	err := tbl.Rows(t.Context(), snapshotID, nil, func(b arrow.RecordBatch) error {
		keys := b.Column(b.Schema().FieldIndices(mapping.ColKey)[0]).(*array.String)
		vals := b.Column(b.Schema().FieldIndices(mapping.ColValue)[0]).(*array.Binary)
		for i := range int(b.NumRows()) {
			out = append(out, keys.Value(i)+"="+string(vals.Value(i)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestAsOfUpsert asks for the state of an upsert table at positions on and
// between its commit boundaries: on a boundary the state is exact; inside
// a commit's range it is the state at the boundary below, named, with the
// commit that reaches past the position; below every commit that holds
// records, the empty table (the sink's start commit, or no snapshot).
func TestAsOfUpsert(t *testing.T) {
	_, tbl := upsertEnv(t)
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	data := l.Commits[len(l.Commits)-3:] // the start commit first, when there is one
	for _, c := range []struct {
		offsets  string
		exact    bool
		boundary int64
		commit   int // index into data; -1: before the first data commit
		next     int // index into data; -1: none
		state    string
	}{
		{"u/0=4", true, 4, 0, -1, "a=a1 b=b1 c=c1 d=d1"},
		{"u/0=6", false, 4, 0, 1, "a=a1 b=b1 c=c1 d=d1"},
		{"u/0=8", true, 8, 1, -1, "a=a2 b=b2 d=d1 e=e1"},
		{"u/0=11", false, 8, 1, 2, "a=a2 b=b2 d=d1 e=e1"},
		{"u/0=12", true, 12, 2, -1, "a=a2 b=b3 e=e2"},
		{"u/0=2", false, 0, -1, 0, ""},
	} {
		res, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: c.offsets})
		if err != nil {
			t.Fatalf("%s: %v", c.offsets, err)
		}
		if res.Mode != mapping.ModeUpsert || res.Exact == nil || *res.Exact != c.exact || len(res.Boundary) != 1 || res.Boundary[0].Offset != c.boundary ||
			res.Cut != nil {
			t.Errorf("%s: %+v; want exact %v, boundary %d", c.offsets, res, c.exact, c.boundary)
			continue
		}
		if (res.NextSnapshotID == nil) != (c.next < 0) || (c.next >= 0 && *res.NextSnapshotID != data[c.next].SnapshotID) {
			t.Errorf("%s: next snapshot %v, want commit %d", c.offsets, res.NextSnapshotID, c.next)
		}
		if c.commit < 0 {
			if !res.Empty && len(upsertState(t, tbl, res.SnapshotID)) > 0 {
				t.Errorf("%s: snapshot %d holds rows; want the empty table", c.offsets, res.SnapshotID)
			}
			continue
		}
		if res.SnapshotID != data[c.commit].SnapshotID {
			t.Errorf("%s: snapshot %d, want commit %d's", c.offsets, res.SnapshotID, c.commit)
		}
		if got := strings.Join(upsertState(t, tbl, res.SnapshotID), " "); got != c.state {
			t.Errorf("%s: state %q, want %q", c.offsets, got, c.state)
		}
	}
	// Before the first record the table held nothing, as an append
	// table's as-of says (a new-user run saw empty false here).
	if res, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "u/0=0"}); err != nil || !res.Empty {
		t.Errorf("as of u/0=0: empty %v (%v); want the empty table", res.Empty, err)
	}
	// A record time needs the broker: an upsert table's rows hold only each
	// key's latest timestamp.
	at := time.UnixMilli(1_700_000_005_000)
	if _, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Time: &at}); !errors.As(err, new(*lookup.CheckError)) {
		t.Fatalf("time without a broker: %v", err)
	}
}

// TestUpsertRowsAsText: an upsert table keeps the raw value in a binary
// column. Its rows in JSON and CSV give values as text when they are UTF-8
// and {"base64": ...} (base64:... in CSV) otherwise, as for tables of raw
// values; they were Arrow's base64 of every value, text or not.
func TestUpsertRowsAsText(t *testing.T) {
	e, tbl := upsertEnv(t)
	e.Produce([]*kgo.Record{{Topic: "u", Key: []byte("f"), Value: []byte{0xff, 0x00}, Timestamp: time.UnixMilli(1_700_000_100_000)}})
	dlq := e.Table(strings.Join(snapshot.DeadLetterName([]string{"lake", "u"}), "."))
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "u", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := lookup.JSONRows(t.Context(), tbl, 0, nil, func(row []byte) error {
		var r struct {
			Key   string          `json:"kafka_key"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(row, &r); err != nil {
			return fmt.Errorf("%s: %w", row, err)
		}
		got = append(got, r.Key+"="+string(r.Value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{`a="a2"`, `b="b3"`, `e="e2"`, `f={"base64":"/wA="}`}; !slices.Equal(got, want) {
		t.Fatalf("rows as JSON: %v, want %v", got, want)
	}
	out := filepath.Join(t.TempDir(), "rows.csv")
	if _, err := lookup.Export(t.Context(), tbl, 0, nil, out, lookup.FormatCSV); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{",a2\n", ",b3\n", ",base64:/wA=\n"} {
		if !strings.Contains(string(csv), want) {
			t.Fatalf("rows as CSV lack %q:\n%s", want, csv)
		}
	}
}

// TestWhereKeyTransactionMarkerPastRange (from a review): the deleting
// record of a key is in a transaction whose commit marker lies past the
// range that holds it (--flush-records 3 ends the range before the
// marker). where --key --brokers reads on to the marker and names the
// record, where it read the range alone, never saw the transaction commit
// and said the log no longer held the record. Then a transaction's record
// of a key (offset 4) is followed by another producer's tombstone of it
// (offset 5) before the transaction commits (marker 6): the sink took
// the tombstone last (offset order), and so does the lookup, where it
// took the transaction's record last (marker order) and found no delete.
func TestWhereKeyTransactionMarkerPastRange(t *testing.T) {
	e := floetest.New(t)
	e.Topic("ut", 1, nil)
	tbl, dlq := e.UpsertTable("lake.ut")
	ts := time.UnixMilli(1_700_000_000_000)
	e.Produce([]*kgo.Record{{Topic: "ut", Key: []byte("a"), Value: []byte("a1"), Timestamp: ts}})
	e.Txn("tx", []*kgo.Record{
		{Topic: "ut", Key: []byte("k"), Value: []byte("k1"), Timestamp: ts},
		{Topic: "ut", Key: []byte("k"), Timestamp: ts},
	}, true)
	sink := func() {
		t.Helper()
		if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "ut", StopAtEnd: true, FlushRecords: 3, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
		if err := tbl.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	wantDeletedAt := func(key string, want int64) {
		t.Helper()
		r, err := lookup.WhereKey(t.Context(), tbl, e.Broker(), key)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != lookup.KeyStatusDeleted || r.Offset == nil || *r.Offset != want {
			t.Errorf("where --key %s: status %s, found by %s; want deleted at offset %d: %s", key, r.Status, r.FoundBy, want, r.Explanation)
		}
	}
	sink()
	wantDeletedAt("k", 2)

	txn := e.OpenTxn("open-ut")
	if err := txn.ProduceSync(e.Ctx, &kgo.Record{Topic: "ut", Key: []byte("j"), Value: []byte("j1"), Timestamp: ts}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{{Topic: "ut", Key: []byte("j"), Timestamp: ts}})
	if err := txn.EndTransaction(e.Ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	sink()
	wantDeletedAt("j", 5)
}

// TestAsOfUpsertEmptyExpired (from a review): the empty state of an upsert
// table (at its first offset) is not an expired snapshot once expiry
// removed the start commit's: as-of --rows gives no rows, where it failed
// that the snapshot had expired.
func TestAsOfUpsertEmptyExpired(t *testing.T) {
	_, tbl := upsertEnv(t)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "u/0=0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("as of u/0=0: empty %v, expired %v, snapshot %d", res.Empty, res.Expired, res.SnapshotID)
	if !res.Empty || res.Expired {
		t.Fatalf("as of u/0=0: empty %v, expired %v; want the empty table, not an expired snapshot", res.Empty, res.Expired)
	}
	if _, _, err := lookup.RowsSnapshot(t.Context(), tbl, res); err != nil {
		t.Errorf("as of u/0=0 is the empty table, but RowsSnapshot (what floe as-of --rows calls first) fails: %v", err)
	}
}

// TestWhereKeyAfterCompaction: compaction applied the upsert table's
// deletes and dropped them. Without a broker a key without a row is
// unknown (it may have been deleted: from a new-user run, a deleted key
// read never_seen); with one, the log tells: deleted (found in the log) or
// never seen.
func TestWhereKeyAfterCompaction(t *testing.T) {
	e, tbl := upsertEnv(t)
	if _, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key             string
		broker          bool
		status, foundBy string
	}{
		{"a", false, lookup.KeyStatusRow, ""},
		{"c", false, lookup.KeyStatusUnknown, ""},
		{"z", false, lookup.KeyStatusUnknown, ""},
		{"c", true, lookup.KeyStatusDeleted, lookup.FoundByLog},
		{"z", true, lookup.KeyStatusNeverSeen, ""},
	} {
		var b *connector.Broker
		if c.broker {
			b = e.Broker()
		}
		r, err := lookup.WhereKey(t.Context(), tbl, b, c.key)
		if err != nil {
			t.Fatalf("key %s: %v", c.key, err)
		}
		if r.Status != c.status || r.FoundBy != c.foundBy {
			t.Errorf("key %s (broker %v) after compaction: %s found by %q; want %s found by %q", c.key, c.broker, r.Status, r.FoundBy, c.status, c.foundBy)
		}
	}
}
