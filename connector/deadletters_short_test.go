package connector_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestShortWithOwnFileLive (from a review): commit 1 has a dead letter in
// partitions 0 and 1, commit 2 in partition 1 only, into a dead-letter
// table whose files hold one Kafka partition each (an older floe's layout:
// partitionByKafkaPartition). Compaction merges partition 1's files
// (commit 1's and commit 2's) and leaves commit 1's lone partition-0 file
// live. The compacted file is lost and dropped:
// commit 1 is short with one of its own files still live.
func TestShortWithOwnFileLive(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 2, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	e.partitionByKafkaPartition(dlq)
	batches := [][]string{{`oops0`, `oops1`}, {``, `oops again`}}
	for _, b := range batches {
		var recs = jsonRecords("orders", 1, `{"id":1}`, b[1])
		if b[0] != "" {
			recs = slices.Concat(jsonRecords("orders", 0, `{"id":1}`, b[0]), recs)
		}
		e.Produce(recs)
		if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tbl.CompactAll(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	files, err := dlq.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lost string
	for _, f := range files {
		ps := rowsOfFile(t, dlq, f.Path)
		t.Logf("file %s partitions %v", f.Path, ps)
		if len(ps) == 2 && ps[0] == 1 && ps[1] == 1 {
			lost = f.Path
		}
	}
	if lost == "" || len(files) != 2 {
		t.Fatalf("layout after compaction not as planned: %d files", len(files))
	}
	if err := os.Remove(strings.TrimPrefix(lost, "file://")); err != nil {
		t.Fatal(err)
	}
	res, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true})
	t.Logf("maintain: dropped %v refilled %d added %d err %v", res.DroppedDeadLetterFiles, res.DeadLetters.Refilled, res.DeadLetters.Added, err)
	if err != nil {
		t.Errorf("maintain after the drop: %v; want none", err)
	}
	e.checkDeadLettersExact(tbl, dlq, map[int32]int{0: 1, 1: 2})
}

// TestShortConcurrentRepairs (from a review): two processes' floe maintain
// --drop-missing-dead-letter-files (and sink sessions) at once after a
// compacted file of one partition is lost: the short commits must be
// refilled once, not twice.
func TestShortConcurrentRepairs(t *testing.T) {
	e := newEnv(t)
	tbl, dlq, _ := e.loseCompactedPartition(`oops`, `oops again`, `oops 3`)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			other, _ := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
			_, err := other.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true})
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Logf("maintain: %v", err)
		}
	}
	e.checkDeadLettersExact(tbl, dlq, map[int32]int{0: 3, 1: 3})
}

// TestShortRepairBesideWriter (from a review): a repair of short commits while a
// sink keeps committing dead letters.
func TestShortRepairBesideWriter(t *testing.T) {
	e := newEnv(t)
	tbl, dlq, _ := e.loseCompactedPartition(`oops`, `oops again`)
	done := make(chan error, 1)
	go func() {
		w, wd := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
		for i := range 8 {
			e.Produce(slices.Concat(jsonRecords("orders", 0, `{"id":1}`, "bad"+string(rune('a'+i))), jsonRecords("orders", 1, `{"id":1}`, "bad")))
			if _, err := e.sink(w, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: wd, Logger: quietLogger()}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 4 {
		other, _ := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
		if _, err := other.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true}); err != nil {
			t.Logf("maintain: %v", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	other, _ := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	if _, err := other.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true}); err != nil {
		t.Logf("final maintain: %v", err)
	}
	e.checkDeadLettersExact(tbl, dlq, map[int32]int{0: 10, 1: 10})
}

// TestAuditShortBeforeDrop (from a review): the compacted dead-letter
// file of partition 1 is lost and not dropped yet. The audit's
// count-mismatch finding for each commit left short said "the next floe
// sink session or floe maintain replaces its rows by them", which neither
// does while the lost file is listed (DeadLetterFilesLostError): it names
// --drop-missing-dead-letter-files now.
func TestAuditShortBeforeDrop(t *testing.T) {
	e := newEnv(t)
	tbl, _, _ := e.loseCompactedPartition(`oops`, `oops again`)
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// What the finding promises, checked: a maintain without the drop.
	_, merr := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger()})
	t.Logf("maintain without --drop-missing-dead-letter-files: %v", merr)
	mismatches := 0
	for _, f := range rep.Findings {
		if f.Kind != audit.KindCountMismatch {
			continue
		}
		mismatches++
		if strings.Contains(f.Detail, "the next floe sink session or floe maintain replaces") || !strings.Contains(f.Detail, "--drop-missing-dead-letter-files") {
			t.Errorf("finding: %s\nbut floe maintain (and a sink session) repairs nothing while the lost file is listed (%v)", f.Detail, merr)
		}
	}
	if mismatches == 0 {
		t.Errorf("no count-mismatch finding: %+v", rep.Findings)
	}
}
