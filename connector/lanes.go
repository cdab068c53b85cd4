package connector

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// A flush writes the rows of partitions that never reached a stream batch
// (streamBatchRows or streamBatchBytes) into shared lanes instead of a
// stream each: a lane coalesces the small partitions' rows into batches of
// a stream batch's worth and writes them to one stream, whose files
// iceberg-go rolls at write.target-file-size-bytes. A commit over 1,000
// quiet partitions then writes one file, not 1,000 (files by bytes). The
// lane's files are one file group of the ledger (mapping.FileGroup) whose
// spans are its partitions' ranges in the flush: a lost or aborted range
// between two ranges of a partition is in no span, so the file-level audit
// still sees that no row lies in it.
//
// A flush with lanePartitions small partitions or fewer writes them a
// stream each, as it writes large ones: a handful of files a commit is
// cheap, and a file of one partition is placed by its bounds alone.
//
// A flush uses two lanes when its small partitions' rows take at least
// twoLanesBytes of Arrow memory, so that both cores encode: below that,
// one encoder finishes within the time a second file's upload, manifest
// entry and planning cost readers; above it (two row groups' worth), the
// flush's encode time halves.
const twoLanesBytes = 2 * 8 << 20

// lanePartitions is the most small partitions a flush writes a stream each.
const lanePartitions = 4

// smallPartition is what a flush takes of a partition without a stream of
// its own: its rows, one batch per range with rows, and those ranges'
// offsets, the spans its lane holds rows of.
type smallPartition struct {
	p       int32
	batches []arrow.RecordBatch
	spans   []mapping.Span
	bytes   int64
}

// newSmallPartition returns the small partition of rows batches (owned
// from then on) of a flush's ranges.
func newSmallPartition(p int32, batches []arrow.RecordBatch, ranges []mapping.Range) smallPartition {
	sp := smallPartition{p: p, batches: batches}
	for _, b := range batches {
		sp.bytes += batchBytes(b)
	}
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

// lanes opens the lanes of a flush's small partitions (1, or 2 when their
// rows take twoLanesBytes or more), giving each lane consecutive
// partitions of about an equal share of the bytes. With lanePartitions
// small partitions or fewer, it writes each to a stream of its own
// instead, and returns no lane. It owns the small partitions' rows.
func (ss *session) lanes(ctx context.Context, small []smallPartition) ([]*lane, error) {
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
	var total int64
	for _, sp := range small {
		total += sp.bytes
	}
	n := 1
	if total >= twoLanesBytes && len(small) > 1 {
		n = 2
	}
	out := make([]*lane, 0, n)
	var sofar int64
	for _, sp := range small {
		if len(out) == 0 || (len(out) < n && sofar >= total*int64(len(out))/int64(n)) {
			st, err := ss.newStream(ctx)
			if err != nil {
				for _, l := range out {
					l.st.Abort(ctx, ss.s.log)
				}
				for _, sp := range small {
					releaseAll(sp.batches)
				}
				return nil, err
			}
			out = append(out, &lane{st: st})
		}
		l := out[len(out)-1]
		l.parts = append(l.parts, sp)
		sofar += sp.bytes
	}
	return out, nil
}

// write coalesces the lane's rows into batches of schema of about a
// stream batch each, writes them to its stream and closes it, returning
// its files as one group. It releases the rows, and on failure removes
// the files the stream wrote.
func (l *lane) write(ctx context.Context, ss *session, mem memory.Allocator, schema *arrow.Schema) (snapshot.WrittenGroup, error) {
	var (
		g        snapshot.WrittenGroup
		acc      []arrow.RecordBatch
		rows     int64
		bytes    int64
		writeErr error
	)
	flush := func() {
		if len(acc) == 0 {
			return
		}
		b, err := joinPieces(mem, schema, acc)
		acc, rows, bytes = nil, 0, 0
		if err == nil {
			err = l.st.Write(b)
		}
		writeErr = errors.Join(writeErr, err)
	}
	for _, sp := range l.parts {
		g.Spans = append(g.Spans, sp.spans...)
		for _, b := range sp.batches {
			if writeErr != nil {
				b.Release()
				continue
			}
			acc = append(acc, b)
			rows += b.NumRows()
			bytes += batchBytes(b)
			if rows >= streamBatchRows || bytes >= streamBatchBytes {
				flush()
			}
		}
	}
	if writeErr == nil {
		flush()
	}
	releaseAll(acc)
	files, err := l.st.Close()
	g.Files = files
	if err = errors.Join(writeErr, err); err != nil {
		ss.s.tbl.RemoveFiles(ctx, ss.s.log, files)
		return snapshot.WrittenGroup{}, fmt.Errorf("write the rows of %d small partitions: %w", len(l.parts), err)
	}
	return g, nil
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
