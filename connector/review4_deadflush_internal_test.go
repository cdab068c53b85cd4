package connector

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReview4DropKeepsDeadBytes: a group member that gives a partition up
// without committing it (a loss, or a revocation whose commit did not make
// it in time: session.release -> drop) drops the partition's dead letters
// with its rows, and with them their bytes from what the session counts
// (deadHeld). When the session kept its own count, drop left them in it:
// the next flush ended early once the other partitions' dead letters took
// only what was left of the spill bytes (here 826 of 4,096).
func TestReview4DropKeepsDeadBytes(t *testing.T) {
	mem := memory.NewGoAllocator()
	ss := &session{s: &Sink{spillBytes: 4 << 10, alloc: mem}, parts: map[int32]*partition{},
		streams: map[int32]*snapshot.Stream{}, files: map[int32][]iceberg.DataFile{},
		gm: &groupMember{owned: map[int32]bool{}}}
	ss.rowSchema = rawSchema(t)
	sc, err := mapping.DeadLetterArrowSchema(mapping.DeadLetterSchema())
	if err != nil {
		t.Fatal(err)
	}
	ss.deadLetters = sc
	for p := range int32(2) {
		pt := newPartition(mapping.TopicPartition{Topic: "t", Partition: p}, 0, -1)
		if pt.rows, err = mapping.NewRowBuilder(mem, ss.rowSchema); err != nil {
			t.Fatal(err)
		}
		if pt.deadLetters, err = mapping.NewDeadLetterBuilder(mem, sc); err != nil {
			t.Fatal(err)
		}
		ss.parts[p] = pt
		ss.gm.owned[p] = true
	}
	// Partition 0 takes 3 KiB of dead letters, under the spill bytes.
	pt := ss.parts[0]
	for i := range 30 {
		r := &kgo.Record{Topic: "t", Partition: 0, Offset: int64(i), Value: make([]byte, 80)}
		if st, _, _ := pt.observe(r.Offset, false, 0); st != stepRow {
			t.Fatalf("step %v", st)
		}
		if err := ss.deadLetter(pt, r, errors.New("not json"), 0); err != nil {
			t.Fatal(err)
		}
	}
	held := ss.deadHeld()
	if held <= 0 || held >= ss.s.spillBytes {
		t.Fatalf("dead bytes %d, want between 0 and %d", held, ss.s.spillBytes)
	}
	// The group takes partition 0 away uncommitted.
	ss.drop(context.Background(), 0)
	delete(ss.gm.owned, 0)
	if n := ss.deadHeld(); n != 0 {
		t.Fatalf("after partition 0 was dropped with every dead letter the session held, the session counts %d bytes of them, want 0: %d more bytes of dead letters of partition 1 end a flush at the spill bytes (%d)",
			n, ss.s.spillBytes-n, ss.s.spillBytes)
	}
}
