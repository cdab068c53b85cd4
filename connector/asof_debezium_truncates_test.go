package connector_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// cdcFold folds Connect-JSON Debezium events of one partition below
// offset n: id -> offset of the record whose row the key holds. A truncate
// empties the state, a delete or tombstone removes the key.
func cdcFold(t *testing.T, recs []*kgo.Record, n int64) map[string]int64 {
	t.Helper()
	state := map[string]int64{}
	for _, r := range recs {
		if r.Offset >= n {
			break
		}
		var key struct {
			Payload struct {
				ID json.Number `json:"id"`
			} `json:"payload"`
		}
		if r.Key != nil {
			if err := json.Unmarshal(r.Key, &key); err != nil {
				t.Fatal(err)
			}
		}
		id := key.Payload.ID.String()
		if r.Value == nil {
			delete(state, id)
			continue
		}
		var v struct {
			Payload struct {
				Op string `json:"op"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		switch v.Payload.Op {
		case "t":
			clear(state)
		case "d":
			delete(state, id)
		default:
			state[id] = r.Offset
		}
	}
	return state
}

// snapshotState reads snapshot id of tbl (deletes applied): id -> offset.
func snapshotState(t *testing.T, tbl *snapshot.Table, id int64) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	_, it, err := tbl.Iceberg().Scan(table.WithSnapshotID(id)).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		ids := b.Column(b.Schema().FieldIndices("id")[0])
		off := b.Column(b.Schema().FieldIndices(mapping.ColOffset)[0]).(*array.Int64)
		for i := range int(b.NumRows()) {
			k := ids.ValueStr(i)
			if _, dup := out[k]; dup {
				t.Errorf("snapshot %d holds key %s twice", id, k)
			}
			out[k] = off.Value(i)
		}
		b.Release()
	}
	return out
}

// TestAsOfDebeziumTruncates (from a review): floe as-of --offsets on a
// Debezium table sunk with --on-truncate delete-all, in flushes of 7
// events (truncates inside flushes), with a compaction after the first
// truncate and more changes and a second truncate after it: for every
// offset of the partition, the state as-of answers (its snapshot, read
// with deletes applied) is the fold of the log below its boundary, and
// the boundary is exact where a commit ends.
func TestAsOfDebeziumTruncates(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.customers-asof"
	e.Topic(topic, 1, nil)
	c := floetest.NewCustomers(topic, 1)
	c.Story(12, 30, 5)
	c.Truncate()
	c.Insert(floetest.Customer{ID: 900, FirstName: "Ada", LastName: "Lovelace", Email: "ada@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	c.Update(900, func(cu *floetest.Customer) { cu.Email = "ada@example.org" })
	recs := c.Records(t, floetest.CDCConnectJSON, "")
	e.Produce(recs)
	tbl, dlq := e.debeziumTable("lake.asof_truncate", floetest.CDCConnectJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 7, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	// More: inserts, a delete, a second truncate, inserts.
	c2 := floetest.NewCustomers(topic, 1)
	c2.Insert(floetest.Customer{ID: 901, FirstName: "Alan", LastName: "Turing", Email: "alan@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)})
	c2.Insert(floetest.Customer{ID: 902, FirstName: "Grace", LastName: "Hopper", Email: "grace@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 7, 0, time.UTC)})
	c2.Delete(901)
	c2.Truncate()
	c2.Insert(floetest.Customer{ID: 903, FirstName: "Edsger", LastName: "Dijkstra", Email: "ed@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 8, 0, time.UTC)})
	more := c2.Records(t, floetest.CDCConnectJSON, "")
	for i, r := range more {
		r.Offset = int64(len(recs) + i)
	}
	e.Produce(more)
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		r.Offset = int64(i)
	}
	all := append(recs, more...)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	boundaries := map[int64]bool{0: true}
	l := mustLedger(t, tbl)
	for _, cm := range l.Commits {
		for _, r := range cm.Ranges {
			boundaries[r.High] = true
		}
	}
	end := int64(len(all))
	t.Logf("%d offsets, %d commits, boundaries %v", end, len(l.Commits), boundaries)
	for n := int64(0); n <= end; n++ {
		res, err := lookup.AsOf(e.Ctx, tbl, nil, lookup.AsOfQuery{Offsets: "0=" + strconv.FormatInt(n, 10)})
		if err != nil {
			t.Fatalf("as-of 0=%d: %v", n, err)
		}
		at := res.Boundary[0].Offset
		if exact := res.Exact != nil && *res.Exact; exact != boundaries[n] || (exact && at != n) {
			t.Errorf("as-of 0=%d: exact %v at %d, want exact %v", n, exact, at, boundaries[n])
		}
		want := cdcFold(t, all, at)
		var got map[string]int64
		if res.Empty {
			got = map[string]int64{}
		} else {
			got = snapshotState(t, tbl, res.SnapshotID)
		}
		if !maps.Equal(got, want) {
			t.Errorf("as-of 0=%d (boundary %d, snapshot %d): the state holds %s, the fold of the log below %d holds %s", n, at, res.SnapshotID, fmt.Sprint(got), at, fmt.Sprint(want))
		}
	}
}
