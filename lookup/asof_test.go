package lookup_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

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
		if err := lookup.ExactAt(t.Context(), tbl, r.SnapshotID, r.Cut); err != nil {
			t.Fatalf("an event table is exact at any cut: %v", err)
		}
	}
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
	state := e.LegacyStateTable("lake.s")
	e.FoldLegacy(state, "s", 10)
	l, err := state.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Commits) < 2 {
		t.Fatalf("%d commits, want several", len(l.Commits))
	}
	// Commits[0] records where the fold started the partition.
	first, head := l.Commits[1].SnapshotID, l.Commits[len(l.Commits)-1].SnapshotID
	r := l.Commits[1].Ranges[0]
	// As AsOf finds it: the first snapshot covering the cut.
	asOf, err := lookup.AsOf(t.Context(), state, nil, lookup.AsOfQuery{Offsets: mapping.Cut{r.TopicPartition: r.High}.String()})
	if err != nil || asOf.SnapshotID != first {
		t.Fatalf("as of the first commit's end: %+v, %v; want snapshot %d", asOf, err, first)
	}
	if err := lookup.ExactAt(t.Context(), state, first, asOf.Cut); err != nil {
		t.Fatalf("cut at the snapshot's end: %v", err)
	}
	if err := lookup.ExactAt(t.Context(), state, first, mapping.Cut{r.TopicPartition: r.Low}); err != nil {
		t.Fatalf("cut at the first offset: %v", err)
	}
	for _, c := range []struct {
		snapshot int64
		offset   int64
	}{{first, r.High - 1}, {head, r.High}} {
		err = lookup.ExactAt(t.Context(), state, c.snapshot, mapping.Cut{r.TopicPartition: c.offset})
		if err == nil || !strings.Contains(err.Error(), "state table") {
			t.Fatalf("cut %d in snapshot %d, which folded past it: %v", c.offset, c.snapshot, err)
		}
	}
	if _, err := lookup.AsOf(t.Context(), state, nil, lookup.AsOfQuery{Time: new(time.Now())}); err == nil || !strings.Contains(err.Error(), "state table") {
		t.Fatalf("a record time on a state table without a broker: %v", err)
	}
}

// TestAsOfRefusesTheFuture: a record time still to come has no answer yet
// (records at or after it may still arrive), with or without a broker.
func TestAsOfRefusesTheFuture(t *testing.T) {
	e, tbl := lookupEnv(t)
	future := time.Now().Add(time.Hour)
	for _, broker := range []*connector.Broker{nil, e.Broker()} {
		_, err := lookup.AsOf(t.Context(), tbl, broker, lookup.AsOfQuery{Time: &future})
		var qe *lookup.QueryError
		if !errors.As(err, &qe) || qe.Setting != lookup.SettingTime || !strings.Contains(err.Error(), "has passed") {
			t.Errorf("as of %s (broker %v): %v; want a QueryError on the time", future, broker != nil, err)
		}
	}
}

// TestAsOfExpired: as of a position whose snapshot has expired, as-of
// named the snapshot as if it could be read (floe as-of exited 0 with "the
// state at snapshot N", and --rows then failed naming no way out). It
// says the snapshot expired now; its rows are the head's below the
// position. Found by new-user runs.
func TestAsOfExpired(t *testing.T) {
	_, tbl := lookupEnv(t)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "0=5"})
	if err != nil || !r.Expired {
		t.Fatalf("as of 0=5 after expiry: %+v, %v; want the snapshot expired", r, err)
	}
	// The rows of an append table as of that position are the head's
	// below it: floe's commits only add rows past each partition's next
	// offset (--rows refused them; from a new-user run).
	id, fromHead, err := lookup.RowsSnapshot(t.Context(), tbl, r)
	if err != nil || id != 0 || !fromHead {
		t.Fatalf("rows as of 0=5 after expiry: snapshot %d, from the head %v, %v", id, fromHead, err)
	}
	n := 0
	if err := lookup.Rows(t.Context(), tbl, id, r.Cut, func(lookup.Row) error { n++; return nil }); err != nil || n != 5 {
		t.Fatalf("rows below 0=5 from the head: %d, %v; want 5", n, err)
	}
	// Not for a position that leaves out a partition of the table: the
	// head holds that partition's later rows.
	partial := r
	partial.Cut = mapping.Cut{{Topic: "other", Partition: 0}: 1}
	var expired *lookup.ExpiredError
	if _, _, err := lookup.RowsSnapshot(t.Context(), tbl, partial); !errors.As(err, &expired) {
		t.Fatalf("rows as of a position leaving out w/0: %v, want an ExpiredError", err)
	}
	if r, err = lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "0=22"}); err != nil || r.Expired {
		t.Fatalf("as of the head's position: %+v, %v; want a live snapshot", r, err)
	}
}

// TestAsOfTimeDeadLetterOutOfOrder (from a review): a JSON table whose
// records have out-of-order timestamps: offset 0 at T+100s, offset 1 at
// T+300s (not JSON: a dead letter), offset 2 at T+150s, offset 3 at
// T+400s. As of T+200s, Kafka's ListOffsets by timestamp (floe as-of with
// a broker) cuts at offset 1, the first record at or after the time. The
// table's own timestamps (without a broker) give the same cut: the dead
// letter's timestamp counts, where only the rows' did and the cut was 3.
func TestAsOfTimeDeadLetterOutOfOrder(t *testing.T) {
	e := floetest.New(t)
	e.Topic("dj", 1, nil)
	tbl, dlq := e.TypedTable("lake.dj", mapping.Layout{Value: mapping.ValueJSON})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	e.Produce([]*kgo.Record{
		{Topic: "dj", Value: []byte(`{"n":0}`), Timestamp: at(100)},
		{Topic: "dj", Value: []byte(`not json`), Timestamp: at(300)},
		{Topic: "dj", Value: []byte(`{"n":2}`), Timestamp: at(150)},
		{Topic: "dj", Value: []byte(`{"n":3}`), Timestamp: at(400)},
	})
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "dj", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	q := at(200)
	withBroker, err := lookup.AsOf(t.Context(), tbl, e.Broker(), lookup.AsOfQuery{Time: &q})
	if err != nil {
		t.Fatal(err)
	}
	withoutBroker, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Time: &q})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with broker %+v; without %+v", withBroker.Positions, withoutBroker.Positions)
	if withBroker.Positions[0].Offset != 1 {
		t.Fatalf("the broker's cut is %d, want 1", withBroker.Positions[0].Offset)
	}
	if withoutBroker.Positions[0].Offset != withBroker.Positions[0].Offset {
		t.Fatalf("as of %s: the table's own timestamps cut at %d (%s), the log at %d (%s)", q, withoutBroker.Positions[0].Offset, withoutBroker.Positions[0].Source,
			withBroker.Positions[0].Offset, withBroker.Positions[0].Source)
	}
}
