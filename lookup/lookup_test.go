package lookup_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// lookupEnv is topic w (one partition) sunk into lake.w in two commits:
// offsets [0, 10) (every tenth value null from offset 3, a null key at 5),
// then a committed transaction (10-12, marker 13), an aborted one (14-15,
// marker 16) and five records (17-21). Three more (22-24) are not sunk.
func lookupEnv(t *testing.T) (*floetest.Env, *snapshot.Table) {
	t.Helper()
	e := floetest.New(t)
	e.Topic("w", 1, nil)
	tbl := e.Table("lake.w")
	sink := func() {
		t.Helper()
		if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "w", StopAtEnd: true}); err != nil {
			t.Fatal(err)
		}
	}
	e.Produce(floetest.Records("w", 0, 10, "a"))
	sink()
	e.Txn("wc", floetest.Records("w", 0, 3, "c"), true)
	e.Txn("wa", floetest.Records("w", 0, 2, "x"), false)
	e.Produce(floetest.Records("w", 0, 5, "d"))
	sink()
	e.Produce(floetest.Records("w", 0, 3, "e"))
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	return e, tbl
}

func TestWhere(t *testing.T) {
	e, tbl := lookupEnv(t)
	tp := mapping.TopicPartition{Topic: "w", Partition: 0}
	for _, c := range []struct {
		offset      int64
		broker      bool
		status      string
		kind        string
		low, high   int64
		explanation string
	}{
		{5, false, lookup.StatusRow, "", 0, 10, "is a row"},
		{12, false, lookup.StatusRow, "", 10, 22, "is a row"},
		{13, false, lookup.StatusNoRow, "", 10, 22, "pass --brokers"},
		{13, true, lookup.StatusNoRow, lookup.KindMarker, 10, 22, "transaction marker"},
		{14, true, lookup.StatusNoRow, lookup.KindAborted, 10, 22, "aborted transaction"},
		{23, true, lookup.StatusUnsunk, "", 0, 0, "still retains it"},
		{99, false, lookup.StatusUnsunk, "", 0, 0, "not sunk yet"},
		{99, true, lookup.StatusUnsunk, "", 0, 0, "no such offset yet"},
	} {
		var b *connector.Broker
		if c.broker {
			b = e.Broker()
		}
		r, err := lookup.Where(t.Context(), tbl, b, tp, c.offset)
		if err != nil {
			t.Fatalf("where %d: %v", c.offset, err)
		}
		if r.Table != "lake.w" || r.Offset != c.offset || r.Status != c.status || r.Kind != c.kind || !strings.Contains(r.Explanation, c.explanation) {
			t.Errorf("where %d (broker %v): %s/%s %q; want %s/%s mentioning %q", c.offset, c.broker, r.Status, r.Kind, r.Explanation, c.status, c.kind, c.explanation)
			continue
		}
		if r.TableFirst == nil || *r.TableFirst != 0 || *r.TableNext != 22 {
			t.Errorf("where %d: table coverage %v-%v, want [0, 22)", c.offset, r.TableFirst, r.TableNext)
		}
		if (r.LogStart != nil) != c.broker {
			t.Errorf("where %d: broker offsets %v with broker %v", c.offset, r.LogStart, c.broker)
		}
		if c.status == lookup.StatusUnsunk {
			if r.SnapshotID != nil || r.File != "" {
				t.Errorf("where %d: unsunk answer with a snapshot or file: %+v", c.offset, r)
			}
			continue
		}
		if r.SnapshotID == nil || r.CommittedAt == nil || *r.Low != c.low || *r.High != c.high || r.Records == nil {
			t.Errorf("where %d: range %v-%v snapshot %v; want [%d, %d)", c.offset, r.Low, r.High, r.SnapshotID, c.low, c.high)
		}
		if (r.File != "") != (c.status == lookup.StatusRow) {
			t.Errorf("where %d: file %q", c.offset, r.File)
		}
	}
}

func TestAsOf(t *testing.T) {
	e, tbl := lookupEnv(t)
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	// Commits[0] records where the sink started the partition.
	first, second := l.Commits[1].SnapshotID, l.Commits[2].SnapshotID

	r, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "0=5"})
	if err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: "w", Partition: 0}
	if r.SnapshotID != first || r.Time != nil || r.Cut[tp] != 5 || len(r.Positions) != 1 ||
		r.Positions[0] != (lookup.Position{Topic: "w", Partition: 0, Offset: 5, Source: lookup.SourceGiven}) {
		t.Fatalf("as of 0=5: %+v", r)
	}
	if r, err = lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "w/0=15"}); err != nil || r.SnapshotID != second {
		t.Fatalf("as of w/0=15: %+v, %v; want snapshot %d", r, err, second)
	}
	if _, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "0=23"}); err == nil || !strings.Contains(err.Error(), "22") {
		t.Fatalf("as of a position the table has not reached: %v", err)
	}
	if _, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{}); err == nil {
		t.Fatal("as of nothing: no error")
	}

	// A record time: offset 5 is the first record at or after base+5s.
	at := time.UnixMilli(1_700_000_000_000).Add(5 * time.Second)
	for _, b := range []*connector.Broker{nil, e.Broker()} {
		r, err := lookup.AsOf(t.Context(), tbl, b, lookup.AsOfQuery{Time: &at})
		want := lookup.SourceTable
		if b != nil {
			want = lookup.SourceBroker
		}
		if err != nil || r.Time == nil || !r.Time.Equal(at) || r.SnapshotID != first || len(r.Positions) != 1 ||
			r.Positions[0].Offset != 5 || r.Positions[0].Source != want {
			t.Fatalf("as of %s (broker %v): %+v, %v", at, b != nil, r, err)
		}
		if err := lookup.ExactAt(tbl, r.SnapshotID, r.Cut); err != nil {
			t.Fatalf("an event table is exact at any cut: %v", err)
		}
	}
}

func TestRows(t *testing.T) {
	_, tbl := lookupEnv(t)
	all, err := lookup.ReadRowSet(t.Context(), tbl, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: "w", Partition: 0}
	below, err := lookup.ReadRowSet(t.Context(), tbl, 0, mapping.Cut{tp: 5})
	if err != nil {
		t.Fatal(err)
	}
	again, err := lookup.ReadRowSet(t.Context(), tbl, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if all.Len() != 18 || below.Len() != 5 || !all.Equal(again) || all.Equal(below) {
		t.Fatalf("row sets: all %d, below 5: %d, equal to itself %v, to below %v", all.Len(), below.Len(), all.Equal(again), all.Equal(below))
	}

	seen := map[int64]lookup.Row{}
	err = lookup.Rows(t.Context(), tbl, 0, mapping.Cut{tp: 10}, func(r lookup.Row) error {
		r.Key.B, r.Value.B = []byte(string(r.Key.B)), []byte(string(r.Value.B)) // valid only in fn
		seen[r.Offset] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := floetest.Records("w", 0, 10, "a")
	for i, rec := range want {
		r, ok := seen[int64(i)]
		if !ok {
			t.Fatalf("no row at offset %d", i)
		}
		if r.Topic != "w" || r.Partition != 0 || !r.Timestamp.Equal(rec.Timestamp) ||
			!sameBytes(r.Key, rec.Key) || !sameBytes(r.Value, rec.Value) || len(r.Headers) != 2 ||
			r.Headers[0].Key != "h" || string(r.Headers[1].Value.B) != "2" {
			t.Errorf("offset %d: row %+v, record %+v", i, r, rec)
		}
	}
}

// sameBytes compares a row's value with a record's, null with nil.
func sameBytes(b lookup.Bytes, v []byte) bool {
	if v == nil {
		return b.Null
	}
	return !b.Null && string(b.B) == string(v)
}

// A state table is exact only at a commit's end.
func TestExactAtStateTable(t *testing.T) {
	e := floetest.New(t)
	e.Topic("s", 1, nil)
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, &kgo.Record{Topic: "s", Key: []byte{byte('a' + i%4)}, Value: []byte{byte(i)}})
	}
	e.Produce(recs)
	cat, err := catalog.Open(t.Context(), e.Stack.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Run(t.Context(), e.Broker(), cat, []string{"lake", "s"}, replay.Options{Topic: "s", Fold: snapshot.FoldLatest,
		Sink: connector.Config{FlushRecords: 10, Logger: floetest.QuietLogger()}}); err != nil {
		t.Fatal(err)
	}
	state, err := snapshot.Open(t.Context(), cat, []string{"lake", "s"}, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := state.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Commits) < 2 {
		t.Fatalf("%d commits, want several", len(l.Commits))
	}
	// Commits[0] records where the replay started the partition.
	first, head := l.Commits[1].SnapshotID, l.Commits[len(l.Commits)-1].SnapshotID
	r := l.Commits[1].Ranges[0]
	// As AsOf finds it: the first snapshot covering the cut.
	asOf, err := lookup.AsOf(t.Context(), state, nil, lookup.AsOfQuery{Offsets: mapping.Cut{r.TopicPartition: r.High}.String()})
	if err != nil || asOf.SnapshotID != first {
		t.Fatalf("as of the first commit's end: %+v, %v; want snapshot %d", asOf, err, first)
	}
	if err := lookup.ExactAt(state, first, asOf.Cut); err != nil {
		t.Fatalf("cut at the snapshot's end: %v", err)
	}
	if err := lookup.ExactAt(state, first, mapping.Cut{r.TopicPartition: r.Low}); err != nil {
		t.Fatalf("cut at the first offset: %v", err)
	}
	for _, c := range []struct {
		snapshot int64
		offset   int64
	}{{first, r.High - 1}, {head, r.High}} {
		err = lookup.ExactAt(state, c.snapshot, mapping.Cut{r.TopicPartition: c.offset})
		if err == nil || !strings.Contains(err.Error(), "state table") {
			t.Fatalf("cut %d in snapshot %d, which folded past it: %v", c.offset, c.snapshot, err)
		}
	}
	if _, err := lookup.AsOf(t.Context(), state, nil, lookup.AsOfQuery{Time: new(time.Now())}); err == nil || !strings.Contains(err.Error(), "state table") {
		t.Fatalf("a record time on a state table without a broker: %v", err)
	}
}
