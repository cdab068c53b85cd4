package snapshot_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestAutoMaintainBoundsSnapshots: committing on and on, with AutoMaintain
// after every commit as a sink runs it, the table keeps between
// floe.history.max-snapshots and that plus the batch of snapshots, the
// ledger reads whole, and a stray segment that a crashed run left is
// collected once it is old.
func TestAutoMaintainBoundsSnapshots(t *testing.T) {
	tbl, _ := maintainTable(t, 1)
	if err := tbl.SetProperties(t.Context(), map[string]string{
		table.MinSnapshotsToKeepKey: "3", snapshot.PropMaxSnapshots: "10",
	}); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	runs, most := 0, 0
	var stray string
	for i := 1; i < 90; i++ {
		commitRanges(t, tbl, i, i+1)
		if i == 40 {
			stray = killedMaintain(t, tbl)
			backdate(t, stray)
		}
		res, ran, err := tbl.AutoMaintain(t.Context(), quiet)
		if err != nil {
			t.Fatal(err)
		}
		if ran {
			runs++
			if len(res.Expired) < 20 {
				t.Fatalf("commit %d: a run expired %d snapshots, want at least the batch of 20", i, len(res.Expired))
			}
		}
		most = max(most, len(tbl.Iceberg().Metadata().Snapshots()))
	}
	if runs < 3 || most > 10+20 {
		t.Fatalf("%d maintenance runs, up to %d snapshots: want several runs and at most 30 snapshots", runs, most)
	}
	if exists(t, strings.TrimPrefix(stray, "file://")) {
		t.Fatalf("the stray segment %s of a crashed run was not collected", stray)
	}
	l := freshLedger(t, tbl)
	if len(l.Commits) != 90 || l.Next()[mapping.TopicPartition{Topic: "t", Partition: 0}] != 900 {
		t.Fatalf("ledger has %d commits, want 90 up to offset 900", len(l.Commits))
	}
}

// TestAutoMaintainHonoursAge: with the default cap out of reach, only
// snapshots older than history.expire.max-snapshot-age-ms and beyond
// history.expire.min-snapshots-to-keep are due; none is when they are
// young.
func TestAutoMaintainHonoursAge(t *testing.T) {
	tbl, _ := maintainTable(t, 30)
	quiet := slog.New(slog.DiscardHandler)
	if err := tbl.SetProperties(t.Context(), map[string]string{table.MinSnapshotsToKeepKey: "1"}); err != nil {
		t.Fatal(err)
	}
	if _, ran, err := tbl.AutoMaintain(t.Context(), quiet); err != nil || ran {
		t.Fatalf("ran %v, %v: 30 young snapshots are not due under the default age of 1h", ran, err)
	}
	if err := tbl.SetProperties(t.Context(), map[string]string{table.MaxSnapshotAgeMsKey: "0"}); err != nil {
		t.Fatal(err)
	}
	res, ran, err := tbl.AutoMaintain(t.Context(), quiet)
	if err != nil || !ran || len(res.Expired) != 29 {
		t.Fatalf("ran %v, %+v, %v: want 29 snapshots older than 0 ms expired, 1 kept", ran, res, err)
	}
	if l := freshLedger(t, tbl); len(l.Commits) != 30 {
		t.Fatalf("ledger has %d commits, want 30", len(l.Commits))
	}
}

// TestRetentionRejectsBadProperty: a retention property that is not a
// non-negative integer is a *RetentionError naming it, not a default.
func TestRetentionRejectsBadProperty(t *testing.T) {
	tbl, _ := maintainTable(t, 1)
	if err := tbl.SetProperties(t.Context(), map[string]string{snapshot.PropMaxSnapshots: "lots"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := tbl.AutoMaintain(t.Context(), slog.New(slog.DiscardHandler))
	var re *snapshot.RetentionError
	if !errors.As(err, &re) || re.Property != snapshot.PropMaxSnapshots {
		t.Fatalf("err %v, want a *RetentionError naming %s", err, snapshot.PropMaxSnapshots)
	}
	r := snapshot.Retention{}
	if err := tbl.SetProperties(t.Context(), map[string]string{snapshot.PropMaxSnapshots: "0"}); err != nil {
		t.Fatal(err)
	}
	if r, err = tbl.Retention(); err != nil || r != (snapshot.Retention{MaxAge: snapshot.DefaultMaxSnapshotAge, MinKeep: snapshot.DefaultMinSnapshotsToKeep}) {
		t.Fatalf("retention %+v, %v; want the default age and floor, no cap", r, err)
	}
}

// TestRetentionMaxAgeForever: a table that keeps its snapshots
// forever by age says so the way Iceberg tables do,
// history.expire.max-snapshot-age-ms=9223372036854775807 (Long.MAX_VALUE),
// with floe's cap off. Retention multiplies the milliseconds into a
// time.Duration, which overflows to -1ms: every snapshot beyond the
// newest 50 reads as due, and the sink's maintenance asks iceberg-go for
// an expiry with a negative age, which it refuses, after every commit.
func TestRetentionMaxAgeForever(t *testing.T) {
	tbl := wideTable(t, map[string]string{
		"history.expire.max-snapshot-age-ms": "9223372036854775807",
		snapshot.PropMaxSnapshots:            "0",
	})
	r, err := tbl.Retention()
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxAge <= 0 {
		t.Errorf("retention max age %v from %s", r.MaxAge, "9223372036854775807 ms")
	}
	for i := range 72 {
		commitWide(t, tbl, 1, i)
	}
	res, ran, err := tbl.AutoMaintain(t.Context(), nil)
	if err != nil || ran {
		t.Fatalf("sink maintenance of a table that keeps its snapshots forever: ran %v, expired %d, err %v", ran, len(res.Expired), err)
	}
}
