package connector

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// heldPartition returns partition p with n rows of raw records in its open
// range, counted as held the way session.place counts them.
func heldPartition(t *testing.T, ss *session, p int32, n int) *partition {
	t.Helper()
	tp := mapping.TopicPartition{Topic: "t", Partition: p}
	pt := newPartition(tp, 0, -1)
	rows, err := mapping.NewRowBuilder(memory.NewGoAllocator(), ss.rowSchema)
	if err != nil {
		t.Fatal(err)
	}
	pt.rows = rows
	for i := range n {
		r := &kgo.Record{Topic: "t", Partition: p, Offset: int64(i), Value: []byte("value")}
		if st, _, _ := pt.observe(r.Offset, false, 0); st != stepRow {
			t.Fatalf("step %v", st)
		}
		pt.rows.Append(r)
		size := mapping.RecordSize(r)
		pt.held += size
		ss.held += size
	}
	return pt
}

func rawSchema(t *testing.T) *arrow.Schema {
	t.Helper()
	sc, err := mapping.ArrowSchema(mapping.Schema())
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestReviewResetLeavesHeldNegative: session.reset used to zero ss.held
// and then drop every partition, and drop subtracted each partition's held
// bytes again: after a reset the session's held bytes were the negative of
// what its partitions held, so the next spill came that much later (and
// repeated resets without a flush between them pushed it further).
func TestReviewResetLeavesHeldNegative(t *testing.T) {
	ss := &session{s: &Sink{spillBytes: defaultSpillBytes}, parts: map[int32]*partition{},
		streams: map[int32]*snapshot.Stream{}, files: map[int32][]iceberg.DataFile{},
		gm: &groupMember{owned: map[int32]bool{}}}
	ss.rowSchema = rawSchema(t)
	for p := range int32(3) {
		ss.parts[p] = heldPartition(t, ss, p, 10)
	}
	if ss.held <= 0 {
		t.Fatalf("held %d before the reset", ss.held)
	}
	before := ss.held
	if err := ss.reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ss.held != 0 {
		t.Fatalf("after a reset that dropped every partition (%d bytes held), the session's held bytes are %d, want 0", before, ss.held)
	}
}

// TestReviewSpillRowsFailureKeepsLaneCommittable: when spillRows fails to
// join one partition's rows (mapping.Conform), it releases those rows and
// every later batch without writing them. It used to leave the partitions
// laned, their ranges in place, and the spill lane open with a healthy
// stream: the session's final flush (consume flushes after a poll failure
// that is not a brokenRowsError) then committed the lane's file group
// spanning ranges whose rows were not in it. Now the lane is dropped and
// the failure is a brokenRowsError: the session ends without its flush.
func TestReviewSpillRowsFailureKeepsLaneCommittable(t *testing.T) {
	mem := memory.NewGoAllocator()
	ss := &session{s: &Sink{spillBytes: 1, alloc: mem}, parts: map[int32]*partition{},
		streams: map[int32]*snapshot.Stream{}, files: map[int32][]iceberg.DataFile{}}
	ss.rowSchema = rawSchema(t)
	// Partition 0's open range holds a piece that cannot conform to the
	// row schema (a column of another type: what a bug in schema
	// evolution, or an allocator failure in Concatenate, would give).
	bad := heldPartition(t, ss, 0, 2)
	fields := ss.rowSchema.Fields()
	odd := make([]arrow.Field, len(fields))
	copy(odd, fields)
	odd[len(odd)-1] = arrow.Field{Name: fields[len(fields)-1].Name, Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	oddSchema := arrow.NewSchema(odd, nil)
	b := array.NewRecordBuilder(mem, oddSchema)
	for _, f := range b.Fields() {
		f.AppendNull()
	}
	bad.pieces = append(bad.pieces, b.NewRecordBatch())
	b.Release()
	ss.parts[0] = bad
	ss.parts[1] = heldPartition(t, ss, 1, 5)
	// A spill lane already open (its stream is never reached: the first
	// join fails and the batcher drops what follows).
	ss.spill, ss.laned = &lane{}, map[int32]bool{}
	err := ss.spillRows(context.Background())
	if err == nil {
		t.Fatal("spillRows succeeded")
	}
	if _, broken := errors.AsType[*brokenRowsError](err); !broken {
		t.Fatalf("spillRows: %v, want a brokenRowsError (the session ends without its final flush)", err)
	}
	lost := 0
	for p, pt := range ss.parts {
		if pt.rows.Rows() == 0 && len(pt.pieces) == 0 && len(pt.batches) == 0 && pt.dirty() && ss.laned[p] {
			lost++
		}
	}
	if ss.spill != nil && lost > 0 {
		t.Fatalf("after a failed spill, %d partitions are laned with their ranges to commit and none of their rows anywhere, and the spill lane is still open for the flush to commit (partition 1's 5 good rows were dropped too)", lost)
	}
}

// TestReserveStopCountsItsRow: a row that takes the held rows to the spill
// bytes while the flush's columns wait for a reservation stops the poll
// (errSchemaReserve) with the row built. place left the row out of the held
// bytes, so the spill after the reservation came one record late, and the
// flush's count stayed a record short until it ended.
func TestReserveStopCountsItsRow(t *testing.T) {
	ss := &session{s: &Sink{spillBytes: 1 << 10, reserveSchema: true}, parts: map[int32]*partition{},
		streams: map[int32]*snapshot.Stream{}, files: map[int32][]iceberg.DataFile{}, laned: map[int32]bool{},
		streaming: true, writerSchema: mapping.Schema(), builtAt: 1}
	ss.rowSchema = rawSchema(t)
	pt := heldPartition(t, ss, 0, 0)
	var want int64
	for i := range 1000 {
		r := &kgo.Record{Topic: "t", Offset: int64(i), Value: make([]byte, 100)}
		if st, _, _ := pt.observe(r.Offset, false, 0); st != stepRow {
			t.Fatalf("step %v", st)
		}
		pt.rows.Append(r)
		size := mapping.RecordSize(r)
		want += size
		err := ss.place(context.Background(), pt, size)
		if err == nil {
			continue
		}
		if !errors.Is(err, errSchemaReserve) {
			t.Fatalf("place: %v", err)
		}
		if want < ss.s.spillBytes {
			t.Fatalf("the poll stopped at %d held bytes, under the spill bytes %d", want, ss.s.spillBytes)
		}
		if ss.held != want || pt.held != want {
			t.Fatalf("the poll stopped for a reservation with %d bytes of rows built; the session counts %d held, the partition %d", want, ss.held, pt.held)
		}
		return
	}
	t.Fatal("no reservation stopped the poll")
}
