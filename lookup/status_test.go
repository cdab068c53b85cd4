package lookup_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestStatus: the table's side from its ledger, and with a broker the log's
// offsets and the lag; the JSON document keeps its field names.
func TestStatus(t *testing.T) {
	e, tbl := lookupEnv(t)
	e.Topic("other", 2, nil)
	st, err := lookup.Status(t.Context(), tbl, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Table != "lake.w" || st.MetadataLocation == "" || st.SnapshotID == nil || len(st.Partitions) != 1 {
		t.Fatalf("status without broker: %+v", st)
	}
	p := st.Partitions[0]
	if *p.TableNext != 22 || p.LastCommit == nil || p.LogStart != nil || p.Lag != nil {
		t.Fatalf("partition without broker: %+v", p)
	}

	st, err = lookup.Status(t.Context(), tbl, e.Broker(), []string{"other"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Partitions) != 3 || st.Partitions[0].Topic != "other" || st.Partitions[2].Topic != "w" {
		t.Fatalf("status with broker and another topic: %+v", st.Partitions)
	}
	w := st.Partitions[2]
	// Offsets 22-24 are produced but not sunk.
	if *w.LogStart != 0 || *w.EndOffset != 25 || *w.HighWatermark != 25 || *w.Lag != 3 || w.Lost != nil || *w.DeadLetters != 0 {
		t.Fatalf("partition w/0 with broker: %+v", w)
	}
	if o := st.Partitions[0]; o.TableNext != nil || *o.Lag != 0 || o.LastCommit != nil || o.DeadLetters != nil {
		t.Fatalf("never sunk partition: %+v", o)
	}

	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range doc["partitions"].([]any)[2].(map[string]any) {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"dead_letters", "end_offset", "high_watermark", "lag", "last_commit", "log_start", "partition", "table_next", "topic"}
	if !slices.Equal(keys, want) || doc["table"] != "lake.w" || doc["metadata_location"] == nil || doc["snapshot_id"] == nil {
		t.Fatalf("status JSON %s; partition keys %v, want %v", js, keys, want)
	}
}

// TestStatusDeadLetters: the dead letters of a partition are the sum of its
// ranges' in the ledger.
func TestStatusDeadLetters(t *testing.T) {
	e, tbl := lookupEnv(t)
	tp := mapping.TopicPartition{Topic: "w", Partition: 0}
	for _, r := range []mapping.Range{
		{TopicPartition: tp, Interval: mapping.Interval{Low: 22, High: 24}, Records: 0, DeadLetters: 2},
		{TopicPartition: tp, Interval: mapping.Interval{Low: 24, High: 25}, Records: 0, DeadLetters: 1},
	} {
		floetest.ForceCommit(t, tbl, []mapping.Range{r}, nil)
	}
	st, err := lookup.Status(t.Context(), tbl, e.Broker(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Partitions[0]; *p.DeadLetters != 3 || *p.TableNext != 25 || *p.Lag != 0 {
		t.Fatalf("status: dead letters %d, next %d, lag %d; want 3, 25, 0", *p.DeadLetters, *p.TableNext, *p.Lag)
	}
}

// TestStatusOfDeadLetterTable: the status of a dead-letter table names it
// as one and the table whose status counts its dead letters, where it
// printed an empty table (from a new-user run).
func TestStatusOfDeadLetterTable(t *testing.T) {
	e := floetest.New(t)
	_, dlq := e.TableWithDeadLetters("lake.st", snapshot.OpenOptions{Create: true})
	_, err := lookup.Status(t.Context(), dlq, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "is the dead-letter table of lake.st") || !strings.Contains(err.Error(), "floe status --table lake.st") {
		t.Fatalf("status of a dead-letter table: %v", err)
	}
}
