package floetest

import (
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// LegacyStateTable opens (creating) a state table as floe made them before
// upsert tables: table property floe.fold=latest, written copy-on-write.
// floe no longer writes into one (FoldLegacy does, for tests of reading
// them).
func (e *Env) LegacyStateTable(name string) *snapshot.Table {
	e.T.Helper()
	return e.OpenTable(name, snapshot.OpenOptions{Create: true,
		Properties: map[string]string{mapping.PropFold: mapping.FoldLatest}})
}

// FoldLegacy folds topic's log into tbl, a LegacyStateTable, as floe's
// copy-on-write fold writer did: from the ledger's next offset of every
// partition (its log start when new, after a commit of the partitions'
// starts) to its last stable offset, flush records of a partition per
// commit. Per partition and key the table keeps the row of the latest
// record; a tombstone deletes the key, records without a key are dropped;
// ranges count every record read (Records: the records folded), and the
// offsets retention deleted since the ledger's next offset are recorded as
// lost. Every commit rewrites the data files of the partitions it folds,
// one file per partition, as that writer did; the rows kept come from the
// table itself, so a state whose records the log no longer holds stays.
func (e *Env) FoldLegacy(tbl *snapshot.Table, topic string, flush int) {
	t := e.T
	t.Helper()
	ctx := e.Ctx
	if err := tbl.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	state := map[int32]map[string]*kgo.Record{}
	files := map[int32][]iceberg.DataFile{}
	if tbl.Head() != nil {
		if err := lookup.Rows(ctx, tbl, 0, nil, func(r lookup.Row) error {
			rec := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
				Key: slices.Clone(r.Key.B), Value: slices.Clone(r.Value.B)}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value.B)})
			}
			if state[r.Partition] == nil {
				state[r.Partition] = map[string]*kgo.Record{}
			}
			state[r.Partition][string(rec.Key)] = rec
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		scan := tbl.Iceberg().Scan(table.WithSnapshotID(tbl.Head().SnapshotID))
		tasks, err := scan.PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		live, err := tbl.Files(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		part := map[string]int32{}
		for _, f := range live {
			part[f.Path] = f.PartitionMin
		}
		for _, task := range tasks {
			p := part[task.File.FilePath()]
			files[p] = append(files[p], task.File)
		}
	}
	ledger, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	next := ledger.Next()
	wm, err := e.Broker().Watermarks(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var starts []mapping.Range
	from := map[int32]int64{}
	pending := map[int32][]mapping.Range{}
	for _, p := range slices.Sorted(maps.Keys(wm)) {
		tp := mapping.TopicPartition{Topic: topic, Partition: p}
		n, ok := next[tp]
		switch {
		case !ok:
			n = wm[p].LogStart
			starts = append(starts, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: n, High: n}})
		case n < wm[p].LogStart:
			pending[p] = append(pending[p], mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: n, High: wm[p].LogStart}, Lost: true})
			n = wm[p].LogStart
		}
		from[p] = n
	}
	if len(starts) > 0 {
		ForceCommit(t, tbl, starts, nil)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsetsAt(from)}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := map[int32][]*kgo.Record{}
	done := func() bool {
		for p, n := range from {
			end := wm[p].LastStable
			if n < end && (len(recs[p]) == 0 || recs[p][len(recs[p])-1].Offset < end-1) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("fold %s: the log did not reach its last stable offsets within a minute", topic)
		}
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < wm[r.Partition].LastStable {
				recs[r.Partition] = append(recs[r.Partition], r)
			}
		})
	}

	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for round := 0; ; round++ {
		var ranges []mapping.Range
		var touched []int32
		for _, p := range slices.Sorted(maps.Keys(from)) {
			end := wm[p].LastStable
			if from[p] >= end {
				continue
			}
			chunk := recs[p][:min(flush, len(recs[p]))]
			recs[p] = recs[p][len(chunk):]
			r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: topic, Partition: p}, Interval: mapping.Interval{Low: from[p], High: end}}
			if len(recs[p]) > 0 {
				r.High = recs[p][0].Offset
			}
			if state[p] == nil {
				state[p] = map[string]*kgo.Record{}
			}
			for _, rec := range chunk {
				if rec.Attrs.IsControl() {
					continue
				}
				r.Records++
				switch {
				case rec.Key == nil:
				case rec.Value == nil:
					delete(state[p], string(rec.Key))
				default:
					state[p][string(rec.Key)] = rec
				}
			}
			from[p] = r.High
			ranges = append(ranges, append(pending[p], r)...)
			delete(pending, p)
			touched = append(touched, p)
		}
		if len(ranges) == 0 {
			break
		}
		var add, remove []iceberg.DataFile
		for _, p := range touched {
			remove = append(remove, files[p]...)
			files[p] = nil
			rows := slices.SortedFunc(maps.Values(state[p]), func(a, b *kgo.Record) int { return int(a.Offset - b.Offset) })
			if len(rows) == 0 {
				continue
			}
			for _, rec := range rows {
				rb.Append(rec)
			}
			b := rb.NewBatch()
			one := func(yield func(arrow.RecordBatch, error) bool) { yield(b, nil) }
			for df, err := range table.WriteRecords(ctx, tbl.Iceberg(), tbl.ArrowSchema(), one) {
				if err != nil {
					t.Fatal(err)
				}
				files[p] = append(files[p], df)
				add = append(add, df)
			}
			b.Release()
		}
		props, err := mapping.Commit{ID: uuid.NewString(), Writer: "legacy-fold", Ranges: ranges}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		txn := tbl.Iceberg().NewTransaction()
		switch {
		case len(remove) > 0:
			err = txn.ReplaceDataFilesWithDataFiles(ctx, remove, add, props)
		case len(add) > 0:
			err = txn.AddDataFiles(ctx, add, props)
		default:
			err = txn.AddFiles(ctx, nil, props, false)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tbl.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func offsetsAt(from map[int32]int64) map[int32]kgo.Offset {
	out := map[int32]kgo.Offset{}
	for p, n := range from {
		out[p] = kgo.NewOffset().At(n)
	}
	return out
}
