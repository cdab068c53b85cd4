package lookup_test

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

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

// TestRowsInOffsetOrder (from a new-user run): rows come partition by
// partition in offset order, not in the order of the manifests (which
// listed the newest commit's file first: offsets 10-21, then 0-9).
func TestRowsInOffsetOrder(t *testing.T) {
	_, tbl := lookupEnv(t)
	var offsets []int64
	err := tbl.Rows(t.Context(), 0, nil, func(b arrow.RecordBatch) error {
		for i := range int(b.NumRows()) {
			offsets = append(offsets, b.Column(b.Schema().FieldIndices(mapping.ColOffset)[0]).(*array.Int64).Value(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(offsets) < 2 || !slices.IsSorted(offsets) {
		t.Errorf("rows at offsets %v, want them in offset order", offsets)
	}
}
