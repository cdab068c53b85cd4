package snapshot

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"slices"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/floe-dev/floe/mapping"
)

// Segments are read and written one entry at a time. An expiry merges the
// newest segments into a new one (planSegment), and once the history has
// grown by a quarter since the last such merge it absorbs the largest
// segment, which holds most of the table's history: decoded whole, with
// every range, it cost the sink memory in proportion to the table's age.
// Streamed, a merge holds an entry per segment it reads and the new
// segment's slim index.

// entryReader decodes a segment file one entry at a time.
type entryReader struct {
	dec          *json.Decoder
	tableUUID    string
	format, uuid string
	begun, in    bool // past the opening brace; in the array of entries
	// start and end are the byte span of the entry last returned: from
	// the end of the one before it (or of the array's opening bracket),
	// as segmentStream.entry records it, to its own end.
	start, end int64
}

func newEntryReader(r io.Reader, tableUUID string) *entryReader {
	return &entryReader{dec: json.NewDecoder(r), tableUUID: tableUUID}
}

// next returns the file's next entry, and false after the last one, once
// the file's format and table uuid are checked.
func (r *entryReader) next() (ArchivedSnapshot, bool, error) {
	var s ArchivedSnapshot
	if !r.begun {
		if err := expectDelim(r.dec, '{'); err != nil {
			return s, false, err
		}
		r.begun = true
	}
	for {
		if r.in {
			if r.dec.More() {
				r.start = r.end
				if err := r.dec.Decode(&s); err != nil {
					return s, false, err
				}
				r.end = r.dec.InputOffset()
				return s, true, nil
			}
			if err := expectDelim(r.dec, ']'); err != nil {
				return s, false, err
			}
			r.in = false
			continue
		}
		if !r.dec.More() {
			if err := expectDelim(r.dec, '}'); err != nil {
				return s, false, err
			}
			return s, false, r.check()
		}
		tok, err := r.dec.Token()
		if err != nil {
			return s, false, err
		}
		switch tok {
		case "format":
			err = r.dec.Decode(&r.format)
		case "table-uuid":
			err = r.dec.Decode(&r.uuid)
		case "snapshots":
			// floe writes the format and uuid first: a file of another
			// table fails before its entries are read.
			if r.format != "" || r.uuid != "" {
				err = r.check()
			}
			if err == nil {
				// An empty archive of floe before segments is null.
				r.in, err = openArray(r.dec)
				r.end = r.dec.InputOffset()
			}
		default:
			var skip json.RawMessage
			err = r.dec.Decode(&skip)
		}
		if err != nil {
			return s, false, err
		}
	}
}

// openArray reads the start of an array, or null (false).
func openArray(dec *json.Decoder) (bool, error) {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return false, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return false, fmt.Errorf("want an array of snapshots, found %v", tok)
	}
	return true, nil
}

func (r *entryReader) check() error {
	if r.format != ArchiveFormat {
		return fmt.Errorf("format %q, this floe reads %q", r.format, ArchiveFormat)
	}
	if r.uuid != r.tableUUID {
		return fmt.Errorf("written for table uuid %s, not this table's %s", r.uuid, r.tableUUID)
	}
	return nil
}

// segmentEntries yields the entries of the segment file at path in file
// order, reading it one entry at a time, and then checks that the file's
// SHA-256 is want, unless want is empty. An error ends it.
func segmentEntries(fsys iceio.IO, tableUUID, path, want string) iter.Seq2[ArchivedSnapshot, error] {
	return func(yield func(ArchivedSnapshot, error) bool) {
		f, err := fsys.Open(path)
		if err != nil {
			yield(ArchivedSnapshot{}, err)
			return
		}
		defer f.Close()
		h := sha256.New()
		in := io.TeeReader(f, h)
		r := newEntryReader(in, tableUUID)
		for {
			s, ok, err := r.next()
			if err == nil && !ok && want != "" {
				if _, err = io.Copy(io.Discard, in); err == nil {
					err = checkSum(h.Sum(nil), want)
				}
			}
			if err != nil {
				yield(s, err)
				return
			}
			if !ok || !yield(s, nil) {
				return
			}
		}
	}
}

// entryOrder is the order of a segment's entries: commit time, then
// snapshot id.
func entryOrder(x, y ArchivedSnapshot) int {
	return cmp.Or(cmp.Compare(x.TimestampMs, y.TimestampMs), cmp.Compare(x.SnapshotID, y.SnapshotID))
}

// mergedEntries yields the union of fresh and the entries of the segments
// in entryOrder, each snapshot once: fresh and each file
// are in that order (every segment is written so), and a snapshot in two
// of them is the same immutable snapshot. A file that cannot be read ends
// it with a *segmentReadError.
func mergedEntries(fsys iceio.IO, tableUUID string, fresh []ArchivedSnapshot, segs []segment) iter.Seq2[ArchivedSnapshot, error] {
	return func(yield func(ArchivedSnapshot, error) bool) {
		type source struct {
			next func() (ArchivedSnapshot, error, bool)
			head ArchivedSnapshot
			path string
		}
		var live []*source
		advance := func(s *source) error {
			head, err, ok := s.next()
			switch {
			case err != nil:
				return &segmentReadError{Path: s.path, Err: err}
			case ok:
				s.head = head
				live = append(live, s)
			}
			return nil
		}
		srcs := []*source{{next: pullSlice(fresh)}}
		for _, sg := range segs {
			next, stop := iter.Pull2(segmentEntries(fsys, tableUUID, sg.path, sg.digest.segment))
			defer stop()
			srcs = append(srcs, &source{next: next, path: sg.path})
		}
		for _, s := range srcs {
			if err := advance(s); err != nil {
				yield(ArchivedSnapshot{}, err)
				return
			}
		}
		last, any := int64(0), false
		for len(live) > 0 {
			i := 0
			for j := range live {
				if entryOrder(live[j].head, live[i].head) < 0 {
					i = j
				}
			}
			s := live[i]
			live = slices.Delete(live, i, i+1)
			if !any || s.head.SnapshotID != last {
				if !yield(s.head, nil) {
					return
				}
				last, any = s.head.SnapshotID, true
			}
			if err := advance(s); err != nil {
				yield(ArchivedSnapshot{}, err)
				return
			}
		}
	}
}

// pullSlice returns the next of a slice's items at each call.
func pullSlice(items []ArchivedSnapshot) func() (ArchivedSnapshot, error, bool) {
	return func() (ArchivedSnapshot, error, bool) {
		if len(items) == 0 {
			return ArchivedSnapshot{}, nil, false
		}
		s := items[0]
		items = items[1:]
		return s, nil, true
	}
}

// segmentReadError reports a segment that a merge could not read.
type segmentReadError struct {
	Path string
	Err  error
}

func (e *segmentReadError) Error() string {
	return fmt.Sprintf("read the ledger archive segment %s: %v", e.Path, e.Err)
}
func (e *segmentReadError) Unwrap() error { return e.Err }

// writeSegment writes the union of fresh and the entries of the segments
// absorbed (mergedEntries) as a new segment file under the table's
// metadata location, and its index beside it, both streamed, and returns
// the segment's path, slim index and digest, which the table records with
// it. n is the number of entries
// expected, which the file's name carries. Each write
// goes to a new file, so a segment the table names is never overwritten:
// a run that fails after writing leaves only unreferenced files, which
// the caller removes (or staleArchives collects).
func writeSegment(ctx context.Context, tbl *table.Table, n int, fresh []ArchivedSnapshot, absorbed []segment) (string, *segmentIndex, segmentDigest, error) {
	path := fmt.Sprintf("%s/%05d-%s.json", archiveLocation(tbl.Metadata()), n, uuid.NewString())
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return path, nil, segmentDigest{}, err
	}
	wfs, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return path, nil, segmentDigest{}, errors.New("the table's storage cannot write files")
	}
	tableUUID := tbl.Metadata().TableUUID().String()
	ix := &segmentIndex{Format: indexFormat, TableUUID: tableUUID}
	var seg, idx, sums *segmentStream
	var sw *summariesWriter
	x := indexer{ix: ix, closed: func(bl int, b *indexBlock, s mapping.Summary) error {
		b.SHA256 = seg.spanSum()
		return sw.block(bl, b, s)
	}, light: func(bl int, s ArchivedSnapshot) error {
		e, err := ix.entry(bl, len(ix.entries), s)
		if err != nil {
			return err
		}
		ix.entries = append(ix.entries, e)
		_, err = idx.entry(s)
		return err
	}}
	err = func() error {
		var err error
		if seg, err = createStream(wfs, path); err != nil {
			return err
		}
		// The index is written before the commit that names the
		// segment, so that readers of that version find it.
		if idx, err = createStream(wfs, indexPath(path)); err != nil {
			return fmt.Errorf("index: %w", err)
		}
		if sums, err = createStream(wfs, summariesPath(path)); err != nil {
			return fmt.Errorf("summaries: %w", err)
		}
		sw = newSummariesWriter(sums)
		if err := seg.header(ArchiveFormat, tableUUID); err != nil {
			return err
		}
		seg.span = sha256.New() // blocks start after the header
		if err := idx.header(indexFormat, tableUUID); err != nil {
			return fmt.Errorf("index: %w", err)
		}
		for s, err := range mergedEntries(fsys, tableUUID, fresh, absorbed) {
			if err != nil {
				return err
			}
			start, err := seg.entry(s)
			if err != nil {
				return err
			}
			if err := x.add(s, start, seg.n); err != nil {
				return fmt.Errorf("index: %w", err)
			}
		}
		if err := x.close(); err != nil {
			return fmt.Errorf("index: %w", err)
		}
		if err := sw.finish(ix); err != nil {
			return fmt.Errorf("summaries: %w", err)
		}
		if ix.Size, err = seg.end(nil); err != nil {
			return err
		}
		// The index's blocks, the segment's summary, its partition
		// directory and size follow its entries.
		tail, err := json.Marshal(struct {
			Blocks     []indexBlock   `json:"blocks"`
			Summary    summaryJSON    `json:"summary"`
			Partitions []partitionDir `json:"partition-directory,omitempty"`
			Size       int64          `json:"size"`
		}{ix.Blocks, ix.Summary, ix.Partitions, ix.Size})
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		if _, err := idx.end(tail[1 : len(tail)-1]); err != nil {
			return fmt.Errorf("index: %w", err)
		}
		return nil
	}()
	for _, s := range []*segmentStream{seg, idx, sums} {
		if s == nil {
			continue
		}
		if cerr := s.close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		return path, nil, segmentDigest{}, err
	}
	ix.seal()
	return path, ix, segmentDigest{segment: hex.EncodeToString(seg.h.Sum(nil)), index: hex.EncodeToString(idx.h.Sum(nil))}, nil
}

// segmentStream writes a segment file or its index: a header, entries one
// per line, and an end, counting the bytes written and digesting them.
type segmentStream struct {
	f iceio.FileWriter
	w *bufio.Writer
	n int64
	// h digests the file; span, when set, the bytes since spanSum.
	h, span hash.Hash
	// entries is the number of entries written.
	entries int
}

func createStream(wfs iceio.WriteFileIO, path string) (*segmentStream, error) {
	f, err := wfs.Create(path)
	if err != nil {
		return nil, err
	}
	return &segmentStream{f: f, w: bufio.NewWriterSize(f, 64<<10), h: sha256.New()}, nil
}

func (s *segmentStream) write(b []byte) error {
	n, err := s.w.Write(b)
	s.n += int64(n)
	s.h.Write(b[:n])
	if s.span != nil {
		s.span.Write(b[:n])
	}
	return err
}

// spanSum returns the SHA-256 of the bytes written since it was last
// called (or span was set), in hex.
func (s *segmentStream) spanSum() string {
	sum := hex.EncodeToString(s.span.Sum(nil))
	s.span.Reset()
	return sum
}

// header writes the file's format and table uuid and opens its array of
// snapshots.
func (s *segmentStream) header(format, tableUUID string) error {
	b, err := json.Marshal(struct {
		Format    string `json:"format"`
		TableUUID string `json:"table-uuid"`
	}{format, tableUUID})
	if err != nil {
		return err
	}
	return s.write(append(b[:len(b)-1], `,"snapshots":[`...))
}

// entry writes e and returns the offset it starts at: the end of the
// previous entry (or of the header), before the separator, where a JSON
// decoder of the file stands before it decodes e, so that an index built
// from the file (buildIndex) cuts the same blocks as the one written with
// it. Readers of a block skip a leading separator (readBlock).
func (s *segmentStream) entry(e ArchivedSnapshot) (int64, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return 0, err
	}
	sep := "\n"
	if s.entries > 0 {
		sep = ",\n"
	}
	start := s.n
	if err := s.write([]byte(sep)); err != nil {
		return 0, err
	}
	s.entries++
	return start, s.write(b)
}

// end closes the array of snapshots, writes the members of fields (JSON
// object members without braces) after it, ends the file and returns its
// size.
func (s *segmentStream) end(fields []byte) (int64, error) {
	b := []byte("\n]")
	if len(fields) > 0 {
		b = append(append(b, ','), fields...)
	}
	if err := s.write(append(b, '}')); err != nil {
		return 0, err
	}
	return s.n, s.w.Flush()
}

func (s *segmentStream) close() error { return s.f.Close() }
