package lookup_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

// TestAsOfTimeAcrossLostRange: offsets 0-24 are stamped
// +100s.. (a producer clock ahead), 25-59 +0s..+34s. Retention deletes
// [0, 25) before the sink reads; the sink records [0, 25) as lost. The
// log's first record stamped at or after +100s is offset 0, so the table as
// of +100s held nothing (every row is at or above 25). floe as-of --time
// +100s, with and without --brokers, answers from the table's column (no
// row at or after the time) and cuts at the table's next offset: all 35
// rows, exit 0. The records of a lost range have unknown times, like dead
// letters the table no longer holds, for which as-of refuses (exit 2).
// It is refused now, naming the lost range (from a review).
func TestAsOfTimeAcrossLostRange(t *testing.T) {
	e := floetest.New(t)
	const topic = "lostts"
	e.Topic(topic, 1, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 60 {
		ts := base.Add(time.Duration(i-25) * time.Second)
		if i < 25 {
			ts = base.Add(time.Duration(100+i) * time.Second)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i), Timestamp: ts})
	}
	e.Produce(recs)
	// Truth, from the log as produced: the first offset stamped at or
	// after +100s.
	at := base.Add(100 * time.Second)
	truth := int64(-1)
	for i, r := range recs {
		if !r.Timestamp.Before(at) {
			truth = int64(i)
			break
		}
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 25); err != nil {
		t.Fatal(err)
	}
	tbl := e.Table("lake.lostts")
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: topic, StopAtEnd: true, RecordHeadLoss: true, OnDataLoss: connector.LossRecord}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*connector.Broker{nil, e.Broker()} {
		r, err := lookup.AsOf(t.Context(), tbl, b, lookup.AsOfQuery{Time: &at})
		if err != nil {
			if !strings.Contains(err.Error(), "offsets [0, 25) of lostts/0 as lost to retention") {
				t.Errorf("brokers %v: refused: %v; want the lost range named", b != nil, err)
			}
			continue
		}
		n := 0
		if err := lookup.Rows(t.Context(), tbl, r.SnapshotID, r.Cut, func(lookup.Row) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		var want int
		for o := int64(25); o < 60; o++ {
			if o < truth {
				want++
			}
		}
		if n != want {
			t.Errorf("as-of --time +100s (brokers %v): cut %+v, %d rows, empty %v, exit 0; the log's first record stamped at or after it is offset %d (in the lost range [0, 25)), so the table as of it holds %d rows — or, the lost records' times being unknown, the answer should be refused as for dead letters not held",
				b != nil, r.Positions, n, r.Empty, truth, want)
		}
	}
	// A time whose cut the table places at the end of the loss is
	// answered: any cut within the loss gives the same rows, none.
	early := base
	r, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Time: &early})
	if err != nil || len(r.Positions) != 1 || r.Positions[0].Offset != 25 {
		t.Errorf("as-of --time at the first retained record: %+v, %v; want the cut at 25", r.Positions, err)
	}
	_ = mapping.TopicPartition{}
}

// TestAsOfNamesLostRangeBelowPosition: the ledger records [0, 25) as lost;
// the table as of offset 40, or now, lacks those records, and the answer
// said nothing of it (found by the last session, left open then). It lists
// them, cut at the position; a position at or below the loss's start has
// nothing to list.
func TestAsOfNamesLostRangeBelowPosition(t *testing.T) {
	e := floetest.New(t)
	const topic = "lostpos"
	e.Topic(topic, 2, nil)
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)})
	}
	e.Produce(recs)
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 25); err != nil {
		t.Fatal(err)
	}
	tbl := e.Table("lake.lostpos")
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: topic, StopAtEnd: true, RecordHeadLoss: true, OnDataLoss: connector.LossRecord}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		offsets string
		want    []lookup.LostRange
	}{
		{"0=30,1=30", []lookup.LostRange{{Topic: topic, Partition: 0, Low: 0, High: 25}}},
		{"0=10,1=30", []lookup.LostRange{{Topic: topic, Partition: 0, Low: 0, High: 10}}},
		{"0=0,1=30", nil},
	} {
		r, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: c.offsets})
		if err != nil {
			t.Fatalf("as-of %s: %v", c.offsets, err)
		}
		if fmt.Sprint(r.Lost) != fmt.Sprint(c.want) {
			t.Errorf("as-of %s: lost %+v, want %+v", c.offsets, r.Lost, c.want)
		}
	}
}
