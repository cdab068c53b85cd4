package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// A flush writes the rows of partitions without a stream of their own
// (they never reached a stream batch, streamBatchRows or streamBatchBytes,
// or the flush had maxOwnStreams streams already) into a shared lane
// instead of a stream each: the lane coalesces their rows into batches of
// a stream batch's worth and writes them to one stream, whose files
// iceberg-go rolls at write.target-file-size-bytes. A commit over 1,000
// quiet partitions then writes one file, not 1,000 (files by bytes). The
// lane's files are one file group of the ledger (mapping.FileGroup) whose
// spans are its partitions' ranges in the flush: a lost or aborted range
// between two ranges of a partition is in no span, so the file-level audit
// still sees that no row lies in it.
//
// The lane opens while the flush is read, as the flush's spill lane, once
// the rows such partitions hold reach the sink's spill bytes
// (session.spillRows): their rows then move to it as they come, and the
// sink holds a bounded amount of them however many partitions a flush
// covers. Otherwise it opens at the flush; a flush with lanePartitions
// such partitions or fewer then writes them a stream each, as it writes
// large ones: a handful of files a commit is cheap, and a file of one
// partition is placed by its bounds alone.
//
// lanePartitions is the most small partitions a flush writes a stream each.
const lanePartitions = 4

// smallPartition is what a flush takes of a partition without a stream of
// its own: its rows left (what it did not spill), one batch per range with
// rows, and those ranges' offsets, the spans its lane holds rows of.
type smallPartition struct {
	p       int32
	batches []arrow.RecordBatch
	spans   []mapping.Span
}

// newSmallPartition returns the small partition of rows batches (owned
// from then on) of a flush's ranges.
func newSmallPartition(p int32, batches []arrow.RecordBatch, ranges []mapping.Range) smallPartition {
	sp := smallPartition{p: p, batches: batches}
	for _, r := range ranges {
		if !r.Deleted() && r.Records > 0 {
			sp.spans = append(sp.spans, mapping.Span{TopicPartition: r.TopicPartition, Interval: r.Interval})
		}
	}
	return sp
}

// lane is one stream of a flush shared by small partitions.
type lane struct {
	st    *snapshot.Stream
	parts []smallPartition
}

// lane returns the lane of a flush's small partitions when it has no
// spill lane. With lanePartitions small partitions or fewer, it writes
// each to a stream of its own instead, and returns no lane. It owns the
// small partitions' rows.
func (ss *session) lane(ctx context.Context, small []smallPartition) (*lane, error) {
	if len(small) <= lanePartitions {
		var err error
		for _, sp := range small {
			for i, b := range sp.batches {
				st, serr := ss.stream(ctx, ss.parts[sp.p])
				if serr != nil {
					b.Release()
					err = errors.Join(err, serr)
					continue
				}
				err = errors.Join(err, st.Write(b))
				if i < len(sp.batches)-1 {
					// A lost or aborted range follows: no file spans it.
					delete(ss.streams, sp.p)
					fs, cerr := st.Close()
					ss.files[sp.p] = append(ss.files[sp.p], fs...)
					err = errors.Join(err, cerr)
				}
			}
		}
		return nil, err
	}
	st, err := ss.newStream(ctx)
	if err != nil {
		for _, sp := range small {
			releaseAll(sp.batches)
		}
		return nil, err
	}
	return &lane{st: st, parts: small}, nil
}

// write coalesces the lane's rows into batches of schema of about a
// stream batch each, writes them to its stream and closes it, returning
// its files as one group. It releases the rows, and on failure removes
// the files the stream wrote.
func (l *lane) write(ctx context.Context, ss *session, mem memory.Allocator, schema *arrow.Schema) (snapshot.WrittenGroup, error) {
	var g snapshot.WrittenGroup
	w := batcher{st: l.st, mem: mem, schema: schema}
	for _, sp := range l.parts {
		g.Spans = append(g.Spans, sp.spans...)
		for _, b := range sp.batches {
			w.add(b)
		}
	}
	writeErr := w.write()
	files, err := l.st.Close()
	g.Files = files
	if err = errors.Join(writeErr, err); err != nil {
		ss.s.tbl.RemoveFiles(ctx, ss.s.log, files)
		return snapshot.WrittenGroup{}, fmt.Errorf("write the rows of %d small partitions: %w", len(l.parts), err)
	}
	return g, nil
}

// batcher coalesces batches of rows into batches of schema of about a
// stream batch each (streamBatchRows or streamBatchBytes), and writes them
// to a stream. It owns what it is given; after a failure it releases
// what it is given without writing it.
type batcher struct {
	st     *snapshot.Stream
	mem    memory.Allocator
	schema *arrow.Schema
	acc    []arrow.RecordBatch
	rows   int64
	bytes  int64
	err    error
}

func (w *batcher) add(b arrow.RecordBatch) {
	if w.err != nil {
		b.Release()
		return
	}
	w.acc = append(w.acc, b)
	w.rows += b.NumRows()
	w.bytes += batchBytes(b)
	if w.rows >= streamBatchRows || w.bytes >= streamBatchBytes {
		w.write()
	}
}

// write writes what the batcher holds, and returns its first error.
func (w *batcher) write() error {
	if len(w.acc) == 0 {
		return w.err
	}
	b, err := joinPieces(w.mem, w.schema, w.acc)
	w.acc, w.rows, w.bytes = nil, 0, 0
	if err == nil {
		err = w.st.Write(b)
	}
	w.err = errors.Join(w.err, err)
	return w.err
}

// spillRows moves the rows that partitions without a stream of their own
// hold into the flush's spill lane, opening it at the first spill: the
// rows such partitions hold then stay under the sink's spill bytes however
// many partitions a flush covers (1,000 quiet partitions would otherwise
// hold a whole flush's rows until it ends). A partition that spilled stays
// in the lane until the flush ends (laned): the lane's file group spans
// its ranges, so none of its rows may go to a file of its own.
func (ss *session) spillRows(ctx context.Context) error {
	if ss.spill == nil {
		st, err := ss.newStream(ctx)
		if err != nil {
			return err
		}
		ss.spill, ss.laned = &lane{st: st}, map[int32]bool{}
	}
	w := batcher{st: ss.spill.st, mem: ss.s.alloc, schema: ss.rowSchema}
	for _, p := range slices.Sorted(maps.Keys(ss.parts)) {
		pt := ss.parts[p]
		if pt.held == 0 {
			continue
		}
		rows := pt.takeRows()
		if len(rows) == 0 {
			continue
		}
		ss.laned[p] = true
		// The batcher conforms pieces built for earlier writer schemas as
		// it joins them.
		for _, g := range rows {
			for _, b := range g {
				w.add(b)
			}
		}
	}
	ss.held = 0
	if err := w.write(); err != nil {
		// Rows left their partitions without all reaching the lane: the
		// flush must not be committed, so the session ends without it and
		// the next reads them again from the ledger.
		if st := ss.spill.st; st != nil {
			st.Abort(ctx, ss.s.log)
		}
		ss.spill, ss.laned = nil, nil
		return &brokenRowsError{fmt.Errorf("move the rows of partitions without a stream into the flush's spill lane: %w", err)}
	}
	return nil
}

// batchBytes is the Arrow memory b's columns take.
func batchBytes(b arrow.RecordBatch) int64 {
	var n int64
	for _, c := range b.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, buf := range d.Buffers() {
		if buf != nil {
			n += int64(buf.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
