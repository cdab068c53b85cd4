package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/localstack"
)

// TestSinkSummaryAfterDropKeepFilesOtherWriter (from a review): the
// summary's "kept in the table's files" versus "gone with the dropped
// table" is decided by whether the metadata file the sink last loaded is
// still in storage. Tables keep 20 previous metadata files and delete older
// ones after each commit (write.metadata.previous-versions-max=20,
// delete-after-commit): when another writer (a second pipeline of another
// topic, a group member, floe maintain) committed more than 20 times since
// this sink last loaded the table, that file was deleted by an ordinary
// commit although every file of the table is kept. floe drop --keep-files
// then makes the sink say its rows are gone with the dropped table, and not
// name floe register, which puts them all back.
func TestSinkSummaryAfterDropKeepFilesOtherWriter(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "busy", 1, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	done := liveFloe(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.t", "--flush-interval", "200ms", "--lag-interval", "1s"}, loc...)...)
	waitFor(t, 30*time.Second, "the live sink's first rows", func() bool {
		code, out, _ := floe(t, append([]string{"files", "--table", "lake.t"}, loc[:2]...)...)
		return code == 0 && strings.Contains(out, ".parquet")
	})
	first := openTable(t, st.Catalog(), "lake.t").Iceberg().MetadataLocation()
	// Another writer of the table: 25 small commits of topic busy.
	for range 25 {
		produceRound(t, st.Brokers, "busy", 1, 1, map[int32]int64{})
		mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "busy", "--table", "lake.t", "--stop-at-end"}, loc...)...)
	}
	tbl := openTable(t, st.Catalog(), "lake.t")
	if missing, err := tbl.MissingFiles(t.Context(), []string{first}); err != nil || len(missing) == 0 {
		t.Fatalf("setup: the metadata file %s was not deleted by the other writer's commits (%v)", first, err)
	}
	mustFloe(t, append([]string{"drop", "--table", "lake.t", "--keep-files", "--yes"}, loc[:2]...)...)
	r := produceUntilStopped(ctx, t, st, done)
	msg := ""
	if r.err != nil {
		msg = withFlags(r.err)
	}
	if r.err == nil || strings.Contains(r.out, "gone with the dropped table") {
		t.Errorf("live sink after floe drop --keep-files, the table's files all kept (its newest metadata file is there; the file the sink last loaded was removed by another writer's commits, as every table keeps only 20): %q\nstdout:\n%s\nwant a summary that does not call the committed rows gone and names floe register", msg, r.out)
	}
}
