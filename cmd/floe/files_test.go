package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// TestFilesCommand: floe files lists the current snapshot's data files as
// text and as JSON; every listed file exists, they hold every row, one
// partition each; an unknown --snapshot is an error naming it.
func TestFilesCommand(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders",
		"--stop-at-end", "--flush-records", "150"}, loc...)...)

	js := mustFloe(t, append([]string{"files", "--table", "lake.orders", "--json"}, loc[:2]...)...)
	var res lookup.FilesResult
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		t.Fatalf("files --json: %v\n%s", err, js)
	}
	if res.Table != "lake.orders" || res.SnapshotID == nil || res.Records != 300 || len(res.Files) < 3 {
		t.Fatalf("files --json: %+v; want the 300 rows in at least one file per partition", res)
	}
	parts := map[int32]int64{}
	for _, f := range res.Files {
		if f.Topic != "orders" || f.Partition == nil || f.MinOffset == nil || *f.MaxOffset < *f.MinOffset {
			t.Errorf("file %+v: want topic, partition and offsets", f)
			continue
		}
		parts[*f.Partition] += f.Records
		if fi, err := os.Stat(strings.TrimPrefix(f.Path, "file://")); err != nil || fi.Size() != f.SizeBytes {
			t.Errorf("listed file %s: %v (size %d listed)", f.Path, err, f.SizeBytes)
		}
	}
	if len(parts) != 3 || parts[0]+parts[1]+parts[2] != 300 {
		t.Errorf("rows per partition %v, want 3 partitions holding 300", parts)
	}

	text := mustFloe(t, append([]string{"files", "--table", "lake.orders"}, loc[:2]...)...)
	if !strings.Contains(text, "lake.orders snapshot ") || !strings.Contains(text, "300 rows") ||
		!strings.Contains(text, "TOPIC   PARTITION  OFFSETS") || strings.Count(text, ".parquet") != len(res.Files) {
		t.Errorf("files text:\n%s", text)
	}
	// --check says that it looked, also when every file is there (from a
	// new-user run: its output was the listing alone, as without it).
	if checked := mustFloe(t, append([]string{"files", "--table", "lake.orders", "--check"}, loc[:2]...)...); !strings.Contains(checked,
		fmt.Sprintf("checked: the storage has every one of the %d data files\n", len(res.Files))) {
		t.Errorf("files --check with every file there:\n%s", checked)
	}
	// Offsets are half-open like every range floe prints, not "0-149".
	for _, f := range res.Files {
		if want := fmt.Sprintf("  [%d, %d)  ", *f.MinOffset, *f.MaxOffset+1); !strings.Contains(text, want) {
			t.Errorf("files text lacks the offsets %q of %s:\n%s", want, f.Path, text)
		}
	}

	code, _, errs := floe(t, append([]string{"files", "--table", "lake.orders", "--snapshot", "42"}, loc[:2]...)...)
	if code != exitError || !strings.Contains(errs, "has no snapshot 42") {
		t.Errorf("unknown snapshot: exit %d, %q", code, errs)
	}
}

// TestFilesCommandGroups: a 40-partition topic sunk in small flushes and
// compacted by floe maintain --compact is one data file of a file group:
// floe files shows its partitions and "(group of 1 file, 40 spans)", its
// JSON the 40 spans, each partition's offsets [0, 10); floe where finds
// an offset's row in it; floe audit --deep finds the table complete.
func TestFilesCommandGroups(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "wide", 40, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("wide", 40, 400, time.Now().Add(-time.Hour), 1)); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "wide", "--table", "lake.wide",
		"--stop-at-end", "--flush-records", "100"}, loc...)...)
	mustFloe(t, append([]string{"maintain", "--table", "lake.wide", "--compact"}, loc[:2]...)...)

	js := mustFloe(t, append([]string{"files", "--table", "lake.wide", "--json"}, loc[:2]...)...)
	var res lookup.FilesResult
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		t.Fatalf("files --json: %v\n%s", err, js)
	}
	if len(res.Files) != 1 || res.Records != 400 || res.Files[0].Group == nil || res.Files[0].Partition != nil || res.Files[0].Topic != "wide" {
		t.Fatalf("files --json: %s; want one file of a group", js)
	}
	g := res.Files[0].Group
	var held int64
	for i, s := range g.Spans {
		if s.Topic != "wide" || s.Partition != int32(i) || s.Low != 0 || s.High < 1 {
			t.Errorf("span %d: %+v, want partition %d from offset 0", i, s, i)
		}
		held += s.High - s.Low
	}
	if g.Files != 1 || len(g.Spans) != 40 || held != 400 {
		t.Errorf("group %+v: want 1 file, 40 spans holding 400 offsets", g)
	}
	text := mustFloe(t, append([]string{"files", "--table", "lake.wide"}, loc[:2]...)...)
	if !strings.Contains(text, "wide   0-39       (group of 1 file, 40 spans)  400") {
		t.Errorf("files text:\n%s", text)
	}
	// The spans themselves, as the README says floe files shows the
	// offsets each file holds (from a new-user run): the first 16, then
	// how many more.
	first := g.Spans[0]
	if want := fmt.Sprintf("wide/%d [%d, %d)  ", first.Partition, first.Low, first.High); !strings.Contains(text, want) || !strings.Contains(text, "and 24 more (--json lists every span)") {
		t.Errorf("files text does not list the group's spans:\n%s", text)
	}
	// where finds a row in the compacted file.
	if out := mustFloe(t, append([]string{"where", "--table", "lake.wide", "--partition", "17", "--offset", "3"}, loc[:2]...)...); !strings.Contains(out, res.Files[0].Path) {
		t.Errorf("where of wide/17 offset 3 does not name the compacted file %s:\n%s", res.Files[0].Path, out)
	}
	mustFloe(t, append([]string{"audit", "--table", "lake.wide", "--deep"}, loc[:2]...)...)
}

// TestFilesReadsNoOldHistory (from a review): floe files of a head whose
// files are a compaction's and one live commit's needs none of the
// archived history, also when two topics share partition numbers (where
// the ledger tells a file's topic): it decoded every archived block, so
// its time grew with the ledger's age. The archive's files are deleted to
// show it; every file names the topic it named before.
func TestFilesReadsNoOldHistory(t *testing.T) {
	for _, topics := range [][]string{{"payments"}, {"orders", "payments"}} {
		t.Run(strings.Join(topics, "+"), func(t *testing.T) {
			st, loc := sinkStack(t)
			if err := localstack.CreateTopic(t.Context(), st.Brokers, "payments", 3, nil); err != nil {
				t.Fatal(err)
			}
			sink := func() {
				args := []string{"sink", "--brokers", st.Brokers[0], "--table", "lake.both", "--stop-at-end", "--flush-records", "50", "--maintain=false"}
				for _, topic := range topics {
					args = append(args, "--topic", topic)
				}
				mustFloe(t, append(args, loc...)...)
			}
			produceRound(t, st.Brokers, "payments", 3, 300, map[int32]int64{})
			sink()
			mustFloe(t, append([]string{"maintain", "--table", "lake.both", "--compact"}, loc[:2]...)...)
			mustFloe(t, append([]string{"maintain", "--table", "lake.both", "--expire-older-than", "0s", "--retain-last", "1"}, loc[:2]...)...)
			// One live commit adding files of partitions 0-2 (of both topics).
			produceRound(t, st.Brokers, "payments", 3, 30, map[int32]int64{})
			sink()
			tbl := openTable(t, st.Catalog(), "lake.both")
			before, err := lookup.Files(t.Context(), tbl, 0)
			if err != nil {
				t.Fatal(err)
			}
			removed := 0
			for k, v := range tbl.Iceberg().Properties() {
				if (k == snapshot.PropLedgerArchive || strings.HasPrefix(k, snapshot.PropLedgerSegmentPrefix)) && strings.HasPrefix(v, "file://") {
					if err := os.Remove(strings.TrimPrefix(v, "file://")); err != nil {
						t.Fatal(err)
					}
					removed++
				}
			}
			if removed == 0 {
				t.Fatal("no archive segment: the test needs the history archived")
			}
			after, err := lookup.Files(t.Context(), openTable(t, st.Catalog(), "lake.both"), 0)
			if err != nil {
				t.Fatalf("floe files read the archived history, which no live file needs: %v", err)
			}
			named := 0
			for i, f := range after.Files {
				if f.Topic != before.Files[i].Topic {
					t.Errorf("file %s: topic %q, before the archive was deleted %q", f.Path, f.Topic, before.Files[i].Topic)
				}
				if f.Topic != "" {
					named++
				}
			}
			if named < 3 {
				t.Errorf("%d of %d files name their topic, want the live commit's 3 at least:\n%+v", named, len(after.Files), after.Files)
			}
		})
	}
}

// TestFilesUpsertListsDeletes (from a new user's run): floe files on an
// upsert table exited 2 for its equality deletes. It lists the data files
// and the delete files, saying that rows of the data files may be deleted;
// after a compaction, whose merged file holds rows of several partitions
// in no file group, that file shows its partitions and that it was
// compacted, not dashes.
func TestFilesUpsertListsDeletes(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.customers", "--stop-at-end",
		"--flush-records", "40", "--mode", "upsert", "--key", "string"}, loc)...)
	deletes := openTable(t, st.Catalog(), "lake.customers").Head().Summary.Properties["total-delete-files"]
	files := slices.Concat([]string{"files", "--table", "lake.customers"}, loc)
	out := mustFloe(t, files...)
	for _, want := range []string{
		" rows before deletes, ",
		"; and " + deletes + " delete files\n",
		"\nthe snapshot also has " + deletes + " row-level delete files (the deletes of an upsert table): rows of the data files above may be deleted by them",
		"floe maintain --table lake.customers --compact",
		"\nKIND      DELETES  BYTES  PATH\nequality  ",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("floe files of an upsert table: want %q\n%s", want, out)
		}
	}
	// The JSON as a reader sees it.
	type listing struct {
		Files []struct {
			Topic        string `json:"topic"`
			MinPartition *int32 `json:"min_partition"`
			MaxPartition *int32 `json:"max_partition"`
		} `json:"files"`
		DeleteFiles []struct {
			Kind string `json:"kind"`
		} `json:"delete_files"`
	}
	var res listing
	if err := json.Unmarshal([]byte(mustFloe(t, append(files, "--json")...)), &res); err != nil || strconv.Itoa(len(res.DeleteFiles)) != deletes || res.DeleteFiles[0].Kind != "equality" {
		t.Fatalf("--json: %v, %d delete files, want %s equality ones", err, len(res.DeleteFiles), deletes)
	}

	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.customers", "--compact"}, loc)...)
	out = mustFloe(t, files...)
	if !regexp.MustCompile(`\norders +0-2 +\(several partitions, compacted\) +218 `).MatchString(out) || strings.Contains(out, "delete") {
		t.Fatalf("floe files after the compaction:\n%s", out)
	}
	res = listing{}
	if err := json.Unmarshal([]byte(mustFloe(t, append(files, "--json")...)), &res); err != nil || len(res.Files) != 1 || res.Files[0].Topic != "orders" ||
		res.Files[0].MinPartition == nil || *res.Files[0].MinPartition != 0 || *res.Files[0].MaxPartition != 2 || res.DeleteFiles != nil {
		t.Fatalf("--json after the compaction: %v, %+v", err, res)
	}
}
