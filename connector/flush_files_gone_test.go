package connector_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestSinkFlushFilesDeletedBeforeCommit: a file a flush streamed is
// deleted before the flush's commit, as floe maintain --remove-orphans
// deletes an unreferenced file older than --orphan-min-age under a flush
// longer than that. The commit must not name the gone file (its rows
// would be lost while the ledger holds their offsets): the sink warns,
// reads the records again and commits them once (found by review s63).
func TestSinkFlushFilesDeletedBeforeCommit(t *testing.T) {
	e, logs, tbl := newGoneSink(t)
	s := goneSink(t, e, tbl, logs)
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() { _, err := s.Run(ctx); done <- err }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	deleted := map[string]bool{}
	waitFor(t, 20*time.Second, "a streamed data file", func() bool { return deleteDataFiles(t, tbl, deleted) > 0 })
	waitForNext(t, e, "lake.gone", goneTP, goneRecords)
	if !strings.Contains(logs.String(), "reading its records again") {
		t.Errorf("no warning of the deleted file; logs:\n%s", logs.String())
	}
	checkExactlyOnce(t, e.Table("lake.gone"), map[mapping.TopicPartition]int64{goneTP: goneRecords})
}

// TestSinkFlushFilesDeletedAgainStops: a sink whose flushes find a file
// deleted three times in a row stops with the error that names the flush
// interval and the orphan age, having committed none of them.
func TestSinkFlushFilesDeletedAgainStops(t *testing.T) {
	e, logs, tbl := newGoneSink(t)
	s := goneSink(t, e, tbl, logs)
	done := make(chan error, 1)
	go func() { _, err := s.Run(e.Ctx); done <- err }()
	deleted := map[string]bool{}
	var err error
	waitFor(t, time.Minute, "the sink to stop", func() bool {
		deleteDataFiles(t, tbl, deleted)
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	if _, ok := errors.AsType[*snapshot.FlushFilesGoneError](err); !ok || !strings.Contains(err.Error(), "--orphan-min-age") {
		t.Fatalf("sink stopped with %v, want a *snapshot.FlushFilesGoneError naming --orphan-min-age", err)
	}
	if n := strings.Count(logs.String(), "reading its records again"); n != 3 {
		t.Errorf("%d warnings of a deleted file before stopping, want 3", n)
	}
	if next := mustLedger(t, e.Table("lake.gone")).Next()[goneTP]; next != 0 {
		t.Errorf("ledger next %d of %s, want nothing committed", next, goneTP)
	}
}

const goneRecords = 20_000 // past a stream batch: the partition streams its own file

var goneTP = mapping.TopicPartition{Topic: "gone", Partition: 0}

// newGoneSink makes the topic and table of the gone-file tests, and their
// log.
func newGoneSink(t *testing.T) (*env, *floetest.SyncBuffer, *snapshot.Table) {
	e := newEnv(t)
	e.Topic(goneTP.Topic, 1, nil)
	e.Produce(records(goneTP.Topic, 0, goneRecords, "a"))
	return e, &floetest.SyncBuffer{}, e.Table("lake.gone")
}

// goneSink is a sink of the gone-file tests: a flush of 3 s whose commit
// always looks for its files.
func goneSink(t *testing.T, e *env, tbl *snapshot.Table, logs *floetest.SyncBuffer) *connector.Sink {
	cfg := connector.Config{Topic: goneTP.Topic, FlushRecords: 10 * goneRecords, FlushInterval: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	connector.SetLookForFilesAfter(s, -1)
	return s
}

// deleteDataFiles deletes the Parquet files under tbl's data folder that
// are not in deleted, as an orphan cleanup would, and returns how many.
func deleteDataFiles(t *testing.T, tbl *snapshot.Table, deleted map[string]bool) int {
	data := filepath.Join(strings.TrimPrefix(tbl.Iceberg().Location(), "file://"), "data")
	n := 0
	_ = filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".parquet") && !deleted[path] {
			if err := os.Remove(path); err != nil {
				t.Error(err)
			}
			deleted[path], n = true, n+1
		}
		return nil
	})
	return n
}
