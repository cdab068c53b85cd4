package connector_test

import (
	"errors"
	"maps"
	"os"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"

	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestLostCompactedFileOfOnePartition: a topic of two partitions,
// two sink commits each with a dead letter in both partitions, into a
// dead-letter table whose files hold one Kafka partition each (an older
// floe's layout: partitionByKafkaPartition), so each compacted file holds
// part of both commits' dead letters. The storage
// loses the compacted file of partition 1; the commits' own files are all
// still there. floe maintain --drop-missing-dead-letter-files drops the
// lost file and promises that commits whose own files are still there get
// their dead letters back: every dead letter is recoverable here, and each
// commit, left with its partition 0 row only, gets its rows replaced by
// its own files (DeadLetterState.Short), where it was a count mismatch
// nothing could repair (from a review).
func TestLostCompactedFileOfOnePartition(t *testing.T) {
	e := newEnv(t)
	tbl, dlq, _ := e.loseCompactedPartition(`oops`, `oops again`)
	res, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true})
	if len(res.DroppedDeadLetterFiles) != 1 || res.DeadLetters.Refilled != 2 {
		t.Errorf("maintain dropped %v and refilled %d commits; want the lost file, and both commits", res.DroppedDeadLetterFiles, res.DeadLetters.Refilled)
	}
	if err != nil {
		t.Errorf("maintain after the drop: %v; want none (both commits' own files are there)", err)
	}
	e.checkDeadLettersExact(tbl, dlq, map[int32]int{0: 2, 1: 2})
}

// loseCompactedPartition sinks, into a typed table lake.orders of a topic
// orders of two partitions, a row and a dead letter in each partition per
// bad value, compacts (the dead-letter table's files are merged per Kafka
// partition, partitionByKafkaPartition, so each compacted file holds dead
// letters of every commit), and deletes from the storage, behind the
// table's back, the dead-letter files holding partition 1's: it returns
// the tables and those files.
func (e *env) loseCompactedPartition(bad ...string) (tbl, dlq *snapshot.Table, lost []string) {
	t := e.T
	t.Helper()
	e.Topic("orders", 2, nil)
	tbl, dlq = e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	e.partitionByKafkaPartition(dlq)
	for _, b := range bad {
		e.Produce(slices.Concat(jsonRecords("orders", 0, `{"id":1}`, b), jsonRecords("orders", 1, `{"id":1}`, b)))
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
	if err != nil || len(files) != 2 {
		t.Fatalf("dead-letter files after compaction %v, %v; want one per Kafka partition", files, err)
	}
	for _, f := range files {
		if slices.Contains(rowsOfFile(t, dlq, f.Path), 1) {
			lost = append(lost, f.Path)
			if err := os.Remove(strings.TrimPrefix(f.Path, "file://")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(lost) != 1 {
		t.Fatalf("dead-letter files of partition 1 after compaction: %v; want one", lost)
	}
	return tbl, dlq, lost
}

// partitionByKafkaPartition partitions the dead-letter table dlq by
// identity(kafka_partition), as another engine may: its writes and its
// compactions then keep each Kafka partition's dead letters in files of
// their own, the layout of a dead-letter table an older floe wrote and
// compacted (a file per partition per commit, merged per partition), in
// which a lost compacted file takes part of several commits' dead letters.
func (e *env) partitionByKafkaPartition(dlq *snapshot.Table) {
	t := e.T
	t.Helper()
	txn := dlq.Iceberg().NewTransaction()
	upd := txn.UpdateSpec(true)
	upd.AddField(mapping.ColPartition, iceberg.IdentityTransform{}, "kafka_partition")
	if err := upd.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
}

// checkDeadLettersExact checks that dlq holds want dead letters per Kafka
// partition (rows reads it again) and that the audit of tbl, rows level
// included, finds the table complete.
func (e *env) checkDeadLettersExact(tbl, dlq *snapshot.Table, want map[int32]int) {
	t := e.T
	t.Helper()
	dead := map[int32]int{}
	for _, r := range rows(t, dlq) {
		dead[r.TP.Partition]++
	}
	if !maps.Equal(dead, want) {
		t.Errorf("dead letters by partition %v, want %v", dead, want)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil || !rep.Complete() {
		t.Errorf("audit: %v %+v; want complete", err, rep)
	}
}

// rowsOfFile returns the Kafka partitions of the rows of data file path
// of tbl's head.
func rowsOfFile(t testing.TB, tbl *snapshot.Table, path string) []int32 {
	t.Helper()
	var out []int32
	err := tbl.ScanFiles(t.Context(), 0, snapshot.ScanOptions{Columns: []string{mapping.ColPartition}}, func(fb snapshot.FileBatch) error {
		if fb.Done || fb.Path != path {
			return nil
		}
		col := fb.Batch.Column(0).(*array.Int32)
		for i := range col.Len() {
			out = append(out, col.Value(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLostFileDryRun: floe maintain --dry-run
// --drop-missing-dead-letter-files on a table whose dead-letter table lost
// a file names the file the real run drops, where it said nothing and
// succeeded (from a review).
func TestLostFileDryRun(t *testing.T) {
	e := newEnv(t)
	tbl, _, lost := e.loseDeadLetterFile()
	res, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DryRun: true, DropMissingDeadLetterFiles: true})
	if err == nil && !slices.Contains(res.DroppedDeadLetterFiles, lost) {
		t.Errorf("dry run with DropMissingDeadLetterFiles: no error and would drop %v; want %s reported (the real run drops it)", res.DroppedDeadLetterFiles, lost)
	}
	res, err = tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true})
	t.Logf("real run: dropped %v, err %v", res.DroppedDeadLetterFiles, err)
}

// TestLostFileCompaction: after the dead-letter table's storage lost a
// file, floe compact (CompactAll) of the data table failed on the
// dead-letter table with the storage's bare "no such file"; it now names
// --drop-missing-dead-letter-files (from a review).
func TestLostFileCompaction(t *testing.T) {
	e := newEnv(t)
	tbl, dlq, _ := e.loseDeadLetterFile()
	for _, bad := range []string{`oops 2`, `oops 3`} {
		e.Produce(jsonRecords("orders", 0, `{"id":2}`, bad))
		if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := tbl.CompactAll(e.Ctx, snapshot.CompactOptions{})
	var lostErr *snapshot.DeadLetterFilesLostError
	if err != nil && !errors.As(err, &lostErr) && !strings.Contains(err.Error(), "--drop-missing-dead-letter-files") {
		t.Errorf("compaction of a table whose dead-letter table lost a file: %v; want it to go on (or a DeadLetterFilesLostError naming the way out)", err)
	}
}

// TestLostFileRestoredAfterDrop: the lost own file of a commit restored
// after the drop comes back once, not twice.
func TestLostFileRestoredAfterDrop(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce(jsonRecords("orders", 0, `{"id":1}`, `oops`))
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	files, _ := dlq.Files(e.Ctx, 0)
	p := strings.TrimPrefix(files[0].Path, "file://")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if res, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true}); err != nil || res.DeadLetters.RecordedLost != 1 {
		t.Fatalf("drop: %v, recorded the dead letters of %d commits as lost; want 1", err, res.DeadLetters.RecordedLost)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true}); err != nil {
			t.Fatalf("maintain after the restore: %v", err)
		}
		e.Produce(jsonRecords("orders", 0, `{"id":2}`))
		if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(rows(t, dlq)); n != 1 {
		t.Errorf("%d dead letters after the restore, want 1", n)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil || !rep.Complete() {
		t.Errorf("audit: %v %+v", err, rep)
	}
}
