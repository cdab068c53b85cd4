package connector_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// paddedRecords is records with values of about 100 bytes.
func paddedRecords(topic string, partition int32, n int, tag string) []*kgo.Record {
	out := records(topic, partition, n, tag)
	for _, r := range out {
		if r.Value != nil {
			r.Value = fmt.Appendf(nil, "%-100s", r.Value)
		}
	}
	return out
}

// paddedTopic creates topic with partitions holding per padded records
// each, and returns each partition's end offset.
func paddedTopic(e *env, topic string, partitions int32, per int) map[mapping.TopicPartition]int64 {
	e.Topic(topic, partitions, nil)
	var recs []*kgo.Record
	want := map[mapping.TopicPartition]int64{}
	for p := range partitions {
		recs = append(recs, paddedRecords(topic, p, per, "a")...)
		want[mapping.TopicPartition{Topic: topic, Partition: p}] = int64(per)
	}
	e.Produce(recs)
	return want
}

// filesByCommit returns the live data files of tbl's head by the snapshot
// that added them, read from manifests.
func filesByCommit(t testing.TB, tbl *snapshot.Table) map[int64][]snapshot.DataFile {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	files, err := tbl.Files(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]snapshot.DataFile{}
	for _, f := range files {
		out[f.AddedBy] = append(out[f.AddedBy], f)
	}
	return out
}

// onlyDataCommit returns the one commit of tbl's ledger that added files
// (byCommit: filesByCommit), failing unless there is exactly one and it
// has one file group.
func onlyDataCommit(t testing.TB, tbl *snapshot.Table, byCommit map[int64][]snapshot.DataFile) *mapping.Commit {
	t.Helper()
	var c *mapping.Commit
	l := mustLedger(t, tbl)
	for i := range l.Commits {
		if len(byCommit[l.Commits[i].SnapshotID]) > 0 {
			if c != nil {
				t.Fatalf("two commits of data, want one flush")
			}
			c = &l.Commits[i]
		}
	}
	if c == nil || len(c.FileGroups) != 1 {
		t.Fatalf("commit %+v, want one file group", c)
	}
	return c
}

// whereFinds checks that floe where finds the row of each of offsets of tp
// in tbl, in a file listed by the commit that holds it.
func whereFinds(t testing.TB, e *env, tbl *snapshot.Table, tp mapping.TopicPartition, offsets ...int64) []string {
	t.Helper()
	var files []string
	for _, o := range offsets {
		res, err := lookup.Where(e.Ctx, tbl, e.Dial(), tp, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != lookup.StatusRow || res.File == "" {
			t.Fatalf("where %s@%d: %s (%s), want a row", tp, o, res.Status, res.Explanation)
		}
		files = append(files, res.File)
	}
	return files
}

// TestSinkFilesByBytes: a commit of 20,000 records of about 100 bytes
// spread over 1,000 partitions writes one data file, not 1,000: the small
// partitions share a lane whose file is one file group of the ledger,
// recorded (with the ranges) in the commit's ranges file. iceberg-go's scan
// reads the log back exactly once, the deepest audit is complete, and
// floe where finds offsets in the group's file.
func TestSinkFilesByBytes(t *testing.T) {
	e := newEnv(t)
	const topic, partitions, per = "thousand", 1000, 20
	want := paddedTopic(e, topic, partitions, per)
	tbl := e.Table("lake.thousand")
	st, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: partitions * per, FlushInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	byCommit := filesByCommit(t, tbl)
	l := mustLedger(t, tbl)
	var data *mapping.Commit
	for i, c := range l.Commits {
		if n := len(byCommit[c.SnapshotID]); n > 2 {
			t.Fatalf("commit %d wrote %d files, want at most 2", c.SnapshotID, n)
		}
		if len(byCommit[c.SnapshotID]) > 0 {
			data = &l.Commits[i]
		}
	}
	if data == nil || len(byCommit) != 1 || st.Files > 2 {
		t.Fatalf("files by commit %v (stats: %d files in %d commits), want one commit of data", byCommit, st.Files, st.Commits)
	}
	if len(data.FileGroups) != 1 || len(data.FileGroups[0].Spans) != partitions {
		t.Fatalf("commit %d has groups %+v, want one group spanning the %d partitions", data.SnapshotID, data.FileGroups, partitions)
	}
	head := tbl.Iceberg().Metadata().SnapshotByID(data.SnapshotID)
	if head.Summary.Properties[mapping.KeyRangesFile] == "" || head.Summary.Properties[mapping.KeyFileGroups] != "" {
		t.Fatalf("the groups of a 1,000-partition commit are in its summary, want them in its ranges file: %v", head.Summary.Properties)
	}
	checkExactlyOnce(t, tbl, want)
	fresh := e.OpenTable(tbl.Name(), snapshot.OpenOptions{})
	auditComplete(t, e, fresh)
	for _, f := range whereFinds(t, e, fresh, mapping.TopicPartition{Topic: topic, Partition: 517}, 0, 19) {
		if !slices.Contains(data.FileGroups[0].Files, f) {
			t.Fatalf("where names %s, not a file of the group %v", f, data.FileGroups[0].Files)
		}
	}
}

// TestSinkSmallFlushesGrouped: a live sink over 240 partitions commits
// small flushes (500 records): every commit writes at most 2 files, the
// table reads back exactly once and audits complete.
func TestSinkSmallFlushesGrouped(t *testing.T) {
	e := newEnv(t)
	const topic, partitions, per = "many", 240, 10
	want := paddedTopic(e, topic, partitions, per)
	tbl := e.Table("lake.many")
	st, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 500})
	if err != nil {
		t.Fatal(err)
	}
	byCommit := filesByCommit(t, tbl)
	grouped := 0
	for _, c := range mustLedger(t, tbl).Commits {
		if n := len(byCommit[c.SnapshotID]); n > 2 {
			t.Fatalf("commit %d wrote %d files for %d ranges, want at most 2", c.SnapshotID, n, len(c.Ranges))
		}
		if len(c.FileGroups) > 0 {
			grouped++
		}
	}
	if grouped < 3 {
		t.Fatalf("%d of %d commits have file groups, want the small flushes grouped", grouped, st.Commits)
	}
	checkExactlyOnce(t, tbl, want)
	auditComplete(t, e, tbl)
	whereFinds(t, e, tbl, mapping.TopicPartition{Topic: topic, Partition: 3}, 0, 5, 9)
}

// TestSinkLargePartitionsPure: in a flush of 3 partitions past a stream
// batch (8,192 rows) and 60 of 5 records each, the large partitions keep
// files of their own (one partition each, placed by their bounds) and the
// small ones share one file, the commit's only file group.
func TestSinkLargePartitionsPure(t *testing.T) {
	e := newEnv(t)
	const topic, large, small = "mixed", 3, 60
	e.Topic(topic, large+small, nil)
	var recs []*kgo.Record
	for p := range int32(large + small) {
		n := 5
		if p < large {
			n = 9000
		}
		recs = append(recs, records(topic, p, n, "a")...)
	}
	e.Produce(recs)
	tbl := e.Table("lake.mixed")
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100_000, FlushInterval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	byCommit := filesByCommit(t, tbl)
	c := onlyDataCommit(t, tbl, byCommit)
	pure := map[int32]int{}
	for _, f := range byCommit[c.SnapshotID] {
		switch {
		case slices.Contains(c.FileGroups[0].Files, f.Path):
			if f.PartitionMin != large || f.PartitionMax != large+small-1 {
				t.Errorf("group file %s holds partitions %d-%d, want %d-%d", f.Path, f.PartitionMin, f.PartitionMax, large, large+small-1)
			}
		case f.PartitionMin == f.PartitionMax && f.PartitionMin < large:
			pure[f.PartitionMin]++
		default:
			t.Errorf("file %s of partitions %d-%d is neither a large partition's nor the group's", f.Path, f.PartitionMin, f.PartitionMax)
		}
	}
	if len(pure) != large || len(c.FileGroups[0].Files) != 1 || len(c.FileGroups[0].Spans) != small {
		t.Fatalf("pure files by partition %v, group %+v: want the %d large partitions pure and one file for %d small ones", pure, c.FileGroups[0], large, small)
	}
	checkExactlyOnce(t, tbl, e.endOffsets(topic))
	auditComplete(t, e, tbl)
	whereFinds(t, e, tbl, mapping.TopicPartition{Topic: topic, Partition: 1}, 0, 8999)
	whereFinds(t, e, tbl, mapping.TopicPartition{Topic: topic, Partition: 40}, 0, 4)
}

// TestSinkGroupedFlushWithLoss: retention deletes offsets of partition 0
// while a flush of 8 small partitions reads it (a lost range closes
// partition 0's range mid-flush, --on-data-loss record). The flush's
// group file holds partition 0's rows on both sides of the loss, and its
// spans leave the lost range out: the files and rows levels are clean and
// the only findings are the recorded loss. The same with every row moved
// to the flush's spill lane as it is read.
func TestSinkGroupedFlushWithLoss(t *testing.T) {
	for _, spill := range []int64{0, 1} {
		t.Run(fmt.Sprintf("spill=%d", spill), func(t *testing.T) {
			for attempt := 1; !groupedFlushWithLoss(t, spill); attempt++ {
				if attempt == 3 {
					t.Fatalf("in %d runs the fetches never reached partition 0 before the deletion", attempt)
				}
			}
		})
	}
}

// groupedFlushWithLoss is TestSinkGroupedFlushWithLoss with the sink's spill
// bytes set to spill (0: the default, above the flush). It returns false,
// having checked nothing, when the fetches had read no row of partition 0
// when its offsets were deleted (the order of the fetches decides; a
// loaded machine made one run read 24 records of the others first).
func groupedFlushWithLoss(t *testing.T, spill int64) bool {
	e := newEnv(t)
	const topic, partitions = "lossy-grouped", 8
	e.Topic(topic, partitions, nil)
	for p := range int32(partitions) {
		e.produceOneByOne(records(topic, p, 40, "a"))
	}
	tbl := e.Table("lake.lossy_grouped")
	lost, c, ok := sinkLosingPartition0(t, e, tbl, connector.Config{Topic: topic}, spill)
	if !ok {
		return false
	}
	tp0 := mapping.TopicPartition{Topic: topic, Partition: 0}
	var spans []mapping.Interval
	for _, s := range c.FileGroups[0].Spans {
		if s.TopicPartition == tp0 {
			spans = append(spans, s.Interval)
		}
	}
	if !slices.Equal(spans, []mapping.Interval{{Low: 0, High: lost.Low}, {Low: 30, High: 40}}) {
		t.Fatalf("partition 0 spans %v, want [0, %d) and [30, 40) around the loss", spans, lost.Low)
	}
	want := e.endOffsets(topic)
	checkExactlyOnce(t, tbl, want)
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Kind != audit.KindLost {
			t.Errorf("finding %s %s: %s", f.Level, f.Kind, f.Detail)
		}
	}
	if !strings.Contains(fmt.Sprint(rep.Findings), "lost") {
		t.Fatalf("findings %+v, want the loss", rep.Findings)
	}
	return true
}

// sinkLosingPartition0 sinks cfg's topic into tbl to its end with
// one-byte fetches, --on-data-loss record and one flush, deleting offsets
// [0, 30) of partition 0 once 24 records were read, so that a lost range
// closes partition 0's range mid-flush (spill: the sink's spill bytes, 0
// for the default). It returns that loss and the commit recording it,
// which must have one file group; ok is false, having checked nothing,
// when no row of partition 0 was read before the deletion (the order of
// the fetches decides: run again).
func sinkLosingPartition0(t *testing.T, e *env, tbl *snapshot.Table, cfg connector.Config, spill int64) (lost *mapping.Range, c mapping.Commit, ok bool) {
	t.Helper()
	slow, err := connector.Dial(e.Ctx, e.Stack.Brokers, 5*time.Second, kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	var (
		once sync.Once
		read atomic.Int64
	)
	cfg.StopAtEnd, cfg.OnDataLoss, cfg.Logger = true, connector.LossRecord, quietLogger()
	cfg.FlushRecords, cfg.FlushInterval = 100_000, time.Minute
	cfg.OnRecords = func(n int64) {
		if read.Add(n) >= 24 {
			once.Do(func() {
				if err := e.Stack.Cluster.DeleteRecords(cfg.Topic, 0, 30); err != nil {
					t.Error(err)
				}
			})
		}
	}
	s, err := connector.NewSink(slow, tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if spill > 0 {
		connector.SetSpillBytes(s, spill)
	}
	if _, err := s.Run(e.Ctx); err != nil {
		t.Fatal(err)
	}
	tp0 := mapping.TopicPartition{Topic: cfg.Topic, Partition: 0}
	l := mustLedger(t, tbl)
	for _, cc := range l.Commits {
		for _, r := range cc.Ranges {
			if r.TopicPartition == tp0 && r.Lost {
				lost, c = &r, cc
			}
		}
	}
	if lost != nil && lost.Low == 0 && lost.High == 30 {
		t.Logf("partition 0 ranges %v: no row read before the deletion, run again", l.Ranges(tp0))
		return nil, c, false
	}
	if lost == nil || lost.Low == 0 || lost.High != 30 {
		t.Fatalf("partition 0 ranges %v: want a loss ending at 30 after rows were read", l.Ranges(tp0))
	}
	if len(c.FileGroups) != 1 {
		t.Fatalf("the commit of the loss has groups %+v, want one", c.FileGroups)
	}
	return lost, c, true
}

// TestSinkSpillLane: a flush whose small partitions (20 of 8,000 records,
// each under a stream batch) take more than the sink's spill bytes (16
// MiB) moves their rows into its spill lane while it reads them: one file
// group holding every partition once; the table reads back exactly once,
// audits complete, and floe where finds offsets in the group's files. The
// same with a spill at every row, and with 12 busy partitions (20,000 records each) among 40
// quiet ones, where at most maxOwnStreams (8) partitions get files of their
// own and the others share the lane.
func TestSinkSpillLane(t *testing.T) {
	for _, tc := range []struct {
		name         string
		busy, quiet  int32
		perBusy, per int
		spill        int64
	}{
		{name: "default", quiet: 20, per: 8000},
		{name: "every-row", quiet: 20, per: 300, spill: 1},
		{name: "busy", busy: 12, perBusy: 20000, quiet: 40, per: 30, spill: 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			topic := "spill-" + tc.name
			e.Topic(topic, tc.busy+tc.quiet, nil)
			var recs []*kgo.Record
			for p := range tc.busy + tc.quiet {
				n := tc.per
				if p < tc.busy {
					n = tc.perBusy
				}
				recs = append(recs, paddedRecords(topic, p, n, "a")...)
			}
			e.Produce(recs)
			want := e.endOffsets(topic)
			tbl := e.Table("lake.spill_" + strings.ReplaceAll(tc.name, "-", "_"))
			s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger(),
				FlushRecords: len(recs), FlushInterval: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if tc.spill > 0 {
				connector.SetSpillBytes(s, tc.spill)
			}
			if _, err := s.Run(e.Ctx); err != nil {
				t.Fatal(err)
			}
			byCommit := filesByCommit(t, tbl)
			c := onlyDataCommit(t, tbl, byCommit)
			laned := map[int32]bool{}
			for _, sp := range c.FileGroups[0].Spans {
				laned[sp.Partition] = true
			}
			own := map[int32]bool{}
			for _, f := range byCommit[c.SnapshotID] {
				if slices.Contains(c.FileGroups[0].Files, f.Path) {
					continue
				}
				if f.PartitionMin != f.PartitionMax || laned[f.PartitionMin] {
					t.Errorf("file %s of partitions %d-%d is neither the lane's nor one partition's own", f.Path, f.PartitionMin, f.PartitionMax)
				}
				own[f.PartitionMin] = true
			}
			if len(own) > 8 || len(own)+len(laned) != int(tc.busy+tc.quiet) {
				t.Fatalf("%d partitions with files of their own and %d in the lane, want at most 8 own and every partition once", len(own), len(laned))
			}
			t.Logf("%d partitions with files of their own, %d in the lane", len(own), len(laned))
			checkExactlyOnce(t, tbl, want)
			auditComplete(t, e, tbl)
			last := tc.busy + tc.quiet - 1
			for _, f := range whereFinds(t, e, tbl, mapping.TopicPartition{Topic: topic, Partition: last}, 0, int64(tc.per-1)) {
				if !slices.Contains(c.FileGroups[0].Files, f) {
					t.Fatalf("where names %s, not a file of the lane %v", f, c.FileGroups[0].Files)
				}
			}
		})
	}
}

// TestSinkLanedPartitionStaysInLane: a live sink reads 39 quiet
// partitions, then 1,000 records of partition 0, whose rows take the
// partitions' held rows past the spill bytes: every partition's rows move
// to the flush's spill lane. Then partition 0 gets 20,000 records, a stream
// batch and more, in the same flush. Its rows stay in the lane, whose file
// group spans its ranges, rather than going to a file of its own beside
// it: the commit has one file group spanning every partition and no other
// file.
func TestSinkLanedPartitionStaysInLane(t *testing.T) {
	e := newEnv(t)
	const topic, partitions = "laned-busy", 40
	e.Topic(topic, partitions, nil)
	var (
		quiet []*kgo.Record
		held  int64
	)
	for p := int32(1); p < partitions; p++ {
		quiet = append(quiet, paddedRecords(topic, p, 900, "quiet")...)
	}
	for _, r := range quiet {
		held += mapping.RecordSize(r)
	}
	e.Produce(quiet)
	first := paddedRecords(topic, 0, 1000, "first")
	tbl := e.Table("lake.laned_busy")
	var read atomic.Int64
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, Logger: quietLogger(),
		FlushRecords: 1_000_000, FlushInterval: time.Hour, OnRecords: func(n int64) { read.Add(n) }})
	if err != nil {
		t.Fatal(err)
	}
	// The quiet rows stay under it; partition 0's first 100 take them past.
	connector.SetSpillBytes(s, held+100*mapping.RecordSize(first[0]))
	ctx, stop := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() { _, err := s.Run(ctx); done <- err }()
	waitFor(t, 30*time.Second, "the quiet partitions read", func() bool { return read.Load() == int64(len(quiet)) })
	e.Produce(first)
	waitFor(t, 30*time.Second, "partition 0's first records read", func() bool { return read.Load() == int64(len(quiet)+len(first)) })
	e.Produce(paddedRecords(topic, 0, 20_000, "busy"))
	waitFor(t, 30*time.Second, "partition 0 read", func() bool { return read.Load() == int64(len(quiet)+len(first))+20_000 })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	byCommit := filesByCommit(t, tbl)
	l := mustLedger(t, tbl)
	for _, c := range l.Commits {
		files := byCommit[c.SnapshotID]
		if len(files) == 0 {
			continue
		}
		if len(c.FileGroups) != 1 || len(c.FileGroups[0].Spans) != partitions || len(c.FileGroups[0].Files) != len(files) {
			t.Fatalf("commit %d has %d files and groups %+v, want one group of every file spanning the %d partitions", c.SnapshotID, len(files), c.FileGroups, partitions)
		}
	}
	checkExactlyOnce(t, tbl, e.endOffsets(topic))
	auditComplete(t, e, tbl)
}

// TestCompactGroupsMetricsNone: a table whose column metrics are off
// (write.metadata.metrics.default=none, an Iceberg setting) holds a sink's
// file groups. Compaction checks each file it wrote against the position
// columns' bounds before committing it, so floe's writers keep those
// bounds whatever the table says: without them every compaction of the
// groups was refused, having rewritten them for nothing. From a review.
func TestCompactGroupsMetricsNone(t *testing.T) {
	e := newEnv(t)
	const topic, parts = "nometrics", 12
	want := paddedTopic(e, topic, parts, 5)
	tbl := e.Table("lake.nometrics")
	if err := tbl.SetProperties(e.Ctx, map[string]string{"write.metadata.metrics.default": "none"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000}); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for p := range int32(parts) {
			recs = append(recs, paddedRecords(topic, p, 5, "b")...)
			want[mapping.TopicPartition{Topic: topic, Partition: p}] += 5
		}
		e.Produce(recs)
	}
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000}); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, tbl, want)
	res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
	if err != nil || res.Replaced == 0 {
		t.Fatalf("compaction of a table of file groups without column metrics: %+v, %v", res, err)
	}
	checkExactlyOnce(t, tbl, want)
	auditComplete(t, e, tbl)
}
