package lookup_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

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
		{13, false, lookup.StatusNoRow, "", 10, 22, "removed by compaction"},
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

// TestWhereRefusesNegativePositions: no record has a negative offset or
// partition; the error names the value.
func TestWhereRefusesNegativePositions(t *testing.T) {
	_, tbl := lookupEnv(t)
	for _, c := range []struct {
		tp      mapping.TopicPartition
		offset  int64
		setting lookup.Setting
		value   string
	}{
		{mapping.TopicPartition{Topic: "w", Partition: 0}, -5, lookup.SettingOffset, "-5"},
		{mapping.TopicPartition{Topic: "w", Partition: -1}, 3, lookup.SettingPartition, "-1"},
	} {
		_, err := lookup.Where(t.Context(), tbl, nil, c.tp, c.offset)
		var qe *lookup.QueryError
		if !errors.As(err, &qe) || qe.Setting != c.setting || qe.Value != c.value {
			t.Errorf("where %s offset %d: %v; want a QueryError naming %s %s", c.tp, c.offset, err, c.setting, c.value)
		}
	}
}

// TestWhereMissingRow (from a new-user run): a committed record of an
// event table that a range covers and that has no row (here a commit
// forced without its rows; a damaged or edited table) is named missing
// with --brokers, where it was called a record of an aborted transaction.
// A transactional record counts as aborted only when its marker aborts
// it.
func TestWhereMissingRow(t *testing.T) {
	e, tbl := lookupEnv(t) // offsets 22-24 are produced, not sunk
	e.Txn("wm", floetest.Records("w", 0, 2, "m"), true)
	tp := mapping.TopicPartition{Topic: "w", Partition: 0}
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 22, High: 28}}}, nil)
	for _, c := range []struct {
		offset int64
		kind   string
	}{{23, lookup.KindMissing}, {25, lookup.KindMissing}, {27, lookup.KindMarker}, {14, lookup.KindAborted}} {
		r, err := lookup.Where(t.Context(), tbl, e.Broker(), tp, c.offset)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != lookup.StatusNoRow || r.Kind != c.kind {
			t.Errorf("where %d: %s/%s %q; want no_row/%s", c.offset, r.Status, r.Kind, r.Explanation, c.kind)
		}
	}
}
