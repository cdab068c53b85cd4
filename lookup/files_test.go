package lookup_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// parquetIn lists the Parquet files under a table's data folder, as a
// glob such as data/*.parquet would.
func parquetIn(t *testing.T, tbl *snapshot.Table) []string {
	t.Helper()
	var out []string
	root := strings.TrimPrefix(tbl.Iceberg().Location(), "file://") + "/data"
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			out = append(out, "file://"+p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFilesSkipsOrphans: Files lists the files of the snapshot only, with
// their partition, offsets, rows and size; a Parquet file in the data
// folder that was written but never committed (a fenced or crashed
// writer's, here a copy of a committed file, whose rows a glob would count
// twice) is not among them. An older snapshot has fewer files.
func TestFilesSkipsOrphans(t *testing.T) {
	_, tbl := lookupEnv(t)
	res, err := lookup.Files(t.Context(), tbl, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Table != "lake.w" || res.SnapshotID == nil || *res.SnapshotID != tbl.Head().SnapshotID || len(res.Files) != 2 || res.Records != 18 {
		t.Fatalf("files of the head: %+v; want the head's 2 files with 18 rows", res)
	}
	var size int64
	for i, f := range res.Files {
		lo, hi := []int64{0, 10}[i], []int64{9, 21}[i]
		if f.Topic != "w" || f.Partition == nil || *f.Partition != 0 || *f.MinOffset != lo || *f.MaxOffset != hi || f.SizeBytes <= 0 || f.AddedBy == 0 {
			t.Errorf("file %d: %+v; want w/0 offsets %d-%d", i, f, lo, hi)
		}
		size += f.SizeBytes
	}
	if res.SizeBytes != size || res.Files[0].Records+res.Files[1].Records != 18 {
		t.Errorf("totals %d rows %d bytes; files %+v", res.Records, res.SizeBytes, res.Files)
	}

	committed := strings.TrimPrefix(res.Files[1].Path, "file://")
	body, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(filepath.Dir(committed), "00000-0-orphan.parquet")
	if err := os.WriteFile(orphan, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := len(parquetIn(t, tbl)); n != 3 {
		t.Fatalf("%d Parquet files in the data folder, want the 2 live ones and the orphan", n)
	}
	again, err := lookup.Files(t.Context(), tbl, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Files) != 2 || again.Records != 18 {
		t.Fatalf("with an orphan in the data folder: %+v", again)
	}
	for _, f := range again.Files {
		if strings.Contains(f.Path, "orphan") {
			t.Errorf("the orphan is listed: %s", f.Path)
		}
	}

	first, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	var older int64
	for _, c := range first.Commits {
		if len(c.Ranges) > 0 && c.Ranges[0].High == 10 {
			older = c.SnapshotID
		}
	}
	old, err := lookup.Files(t.Context(), tbl, older)
	if err != nil || len(old.Files) != 1 || old.Records != 10 || *old.SnapshotID != older {
		t.Fatalf("files of snapshot %d (offsets [0, 10)): %+v, %v", older, old, err)
	}
	var unknown *snapshot.UnknownSnapshotError
	if _, err := lookup.Files(t.Context(), tbl, 42); !errors.As(err, &unknown) {
		t.Errorf("unknown snapshot: %v", err)
	}
}

// TestFilesOfAStateTable: a state table's fold replaces the files it
// rewrites, so its data folder holds more files than its snapshot; Files
// lists only the live ones, whose rows are exactly the table's.
func TestFilesOfAStateTable(t *testing.T) {
	e := floetest.New(t)
	e.Topic("s", 1, nil)
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Topic: "s", Key: []byte{byte('a' + i%4)}, Value: []byte{byte(i)}})
	}
	e.Produce(recs)
	state := e.LegacyStateTable("lake.s")
	e.FoldLegacy(state, "s", 10)
	res, err := lookup.Files(t.Context(), state, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := floetest.Rows(t, state)
	if res.Records != int64(len(rows)) || len(rows) != 4 {
		t.Fatalf("the live files hold %d rows, the table %d; want 4 (one per key)", res.Records, len(rows))
	}
	if all := parquetIn(t, state); len(all) <= len(res.Files) {
		t.Fatalf("data folder: %d files, live: %d; a fold of 4 flushes should have replaced files", len(all), len(res.Files))
	}
	for _, f := range res.Files {
		if f.Topic != "s" || f.Partition == nil || *f.Partition != 0 {
			t.Errorf("file %+v: want topic s partition 0", f)
		}
	}
}

// TestFilesOfACompactedTable: a table of two topics at the same offsets
// compacts into one file, listed with its file group: each topic's
// partition and offsets.
func TestFilesOfACompactedTable(t *testing.T) {
	e := floetest.New(t)
	tbl := e.Table("lake.two")
	for _, topic := range []string{"alpha", "beta"} {
		e.Topic(topic, 1, nil)
		for range 3 {
			e.Produce(floetest.Records(topic, 0, 5, "r"))
			if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	res, err := lookup.Files(t.Context(), tbl, 0)
	if err != nil {
		t.Fatal(err)
	}
	// One file of both topics, in a file group whose spans are each
	// topic's offsets.
	want := []lookup.Span{{Topic: "alpha", Partition: 0, Low: 0, High: 15}, {Topic: "beta", Partition: 0, Low: 0, High: 15}}
	if len(res.Files) != 1 || res.Records != 30 {
		t.Fatalf("files: %+v", res)
	}
	f := res.Files[0]
	if f.Topic != "" || f.Partition != nil || f.MinOffset != nil || !tbl.IsCompaction(f.AddedBy) || f.Group == nil || f.Group.Files != 1 || !slices.Equal(f.Group.Spans, want) {
		t.Errorf("file %+v (group %+v), want a group of 1 file with spans %v added by the compaction", f, f.Group, want)
	}
	// A position without its topic names the table's topics (from a new
	// user).
	if _, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "0=1"}); err == nil || !strings.Contains(err.Error(), "holds the topics alpha, beta") {
		t.Errorf("as-of 0=1 on a table of two topics: %v, want the topics named", err)
	}
}

// TestFilesReadsNoArchivedRange: listing the files of a table of one topic
// reads the ledger's summary, not its ranges. With the ledger archive's
// segment files gone (their indexes stay), a fresh reader lists every
// live file with its topic, while the whole ledger fails on the missing
// files. Before, Files decoded the whole ledger, archive included.
func TestFilesReadsNoArchivedRange(t *testing.T) {
	e := floetest.New(t)
	tbl := e.Table("lake.long")
	e.Topic("t", 1, nil)
	for range 4 {
		e.Produce(floetest.Records("t", 0, 5, "r"))
		if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "t", StopAtEnd: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	floetest.RemoveArchiveSegments(t, tbl)
	fresh, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := lookup.Files(t.Context(), fresh, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 4 || res.Records != 20 {
		t.Fatalf("files: %+v; want 4 files of 20 rows", res)
	}
	for _, f := range res.Files {
		if f.Topic != "t" || f.Partition == nil || *f.Partition != 0 {
			t.Errorf("file %+v: want topic t partition 0", f)
		}
	}
	if _, err := fresh.Ledger(); err == nil {
		t.Fatal("the whole ledger read without its archive segments")
	}
}

// TestFilesOfADeadLetterTable (from a new-user run): floe files of a
// dead-letter table showed topic "-" for its files: it has no ledger of
// its own, and its data table's names the topic.
func TestFilesOfADeadLetterTable(t *testing.T) {
	e := floetest.New(t)
	e.Topic("orders", 2, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce([]*kgo.Record{
		{Topic: "orders", Partition: 0, Value: []byte(`{"id":1}`)},
		{Topic: "orders", Partition: 1, Value: []byte(`oops`)},
	})
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := lookup.Files(t.Context(), dlq, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 1 || res.Files[0].Topic != "orders" || res.Files[0].Partition == nil || *res.Files[0].Partition != 1 {
		t.Errorf("files of the dead-letter table: %+v; want one of orders/1", res.Files)
	}
}
