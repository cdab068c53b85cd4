package lookup_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// TestFilesCompactedAfterItsSnapshotExpired (review s61): an upsert
// table's compaction merges rows of both partitions into one file, listed
// as "(several partitions, compacted)" (JSON compacted). Once maintenance
// expired the compaction's snapshot (the file stays live), lookup.Files
// read the snapshot that added the file from the live metadata only and
// called it "(several partitions)", which floe files --help and the docs
// give as another engine's file. tbl.IsCompaction answers for archived
// snapshots too.
func TestFilesCompactedAfterItsSnapshotExpired(t *testing.T) {
	e := floetest.New(t)
	e.Topic("u", 2, nil)
	tbl, dlq := e.UpsertTable("lake.u")
	for round := range 2 {
		var recs []*kgo.Record
		for p := range int32(2) {
			for k := range 3 {
				recs = append(recs, &kgo.Record{Topic: "u", Partition: p, Key: fmt.Appendf(nil, "k%d-%d", p, k), Value: fmt.Appendf(nil, "v%d", round)})
			}
		}
		e.Produce(recs)
		if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "u", StopAtEnd: true, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	compactedFile := func() lookup.File {
		t.Helper()
		res, err := lookup.Files(t.Context(), tbl, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range res.Files {
			if f.MinPartition != nil && tbl.IsCompaction(f.AddedBy) {
				return f
			}
		}
		t.Fatalf("no file of several partitions added by the compaction: %+v", res.Files)
		return lookup.File{}
	}
	if f := compactedFile(); !f.Compacted {
		t.Fatalf("the compaction's file while its snapshot is live: %+v, want compacted", f)
	}
	// A commit after the compaction, then maintenance expires all but it.
	e.Produce([]*kgo.Record{{Topic: "u", Partition: 0, Key: []byte("k9"), Value: []byte("v")}})
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "u", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	f := compactedFile()
	if tbl.Iceberg().Metadata().SnapshotByID(f.AddedBy) != nil {
		t.Fatalf("maintenance kept the compaction's snapshot %d: the scenario needs it expired", f.AddedBy)
	}
	if !f.Compacted {
		t.Errorf("the compaction's file once its snapshot expired: %+v, want compacted (it is listed as another engine's: \"(several partitions)\")", f)
	}
}
