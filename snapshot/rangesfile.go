package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/mapping"
)

// PropInlineRangesMax is the table property that says how many bytes of
// ranges (mapping.InlineSize) a commit keeps in its snapshot summary; a
// commit whose ranges take more writes them to a ranges file under the
// metadata folder (rangesFolder) and references it (mapping ledger
// version 3). 0 puts every commit's ranges in a file.
//
// Every commit rewrites metadata.json with every retained snapshot's
// summary, so inline ranges cost each commit metadata in proportion to
// the partitions it touched, times the snapshots retained: a commit of
// 1,000 partitions adds about 15 KB. A reference costs about 300 bytes
// whatever the partitions, and one small file write before the commit.
// Below the threshold (about 45 ranges at the default) the ranges stay
// inline: a narrow topic's commits cost no file, stay readable by floe
// before ranges files, and show their ranges in the summary to any
// Iceberg engine.
const PropInlineRangesMax = "floe.ledger.inline-max-bytes"

// DefaultInlineRangesMax is PropInlineRangesMax for a table that does not
// set it.
const DefaultInlineRangesMax = 1024

// rangesFolder is the ranges files' folder under the metadata location:
// apart from metadata.json versions (iceberg-go deletes old ones) and the
// ledger archive (whose folder maintenance reads as archive files).
const rangesFolder = "floe-ranges"

// rangesParallelism bounds the ranges files read at once.
const rangesParallelism = 8

// rangesLocation is the folder of a table's ranges files.
func rangesLocation(meta table.Metadata) string {
	return metadataDir(meta) + "/" + rangesFolder
}

// inlineRangesMax returns the table's PropInlineRangesMax.
func (t *Table) inlineRangesMax() (int, error) {
	v, ok := t.tbl.Properties()[PropInlineRangesMax]
	if !ok {
		return DefaultInlineRangesMax, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("table %s: property %s=%q: want a non-negative integer", t.Name(), PropInlineRangesMax, v)
	}
	return n, nil
}

// rangesFiles are the ranges files that the snapshots of one table version
// reference, by SHA-256: read when the version is adopted, so that reading
// the ledger needs no I/O. Each table version holds only the files its live
// snapshots reference (an expiry archives the ranges of the snapshots it
// removes inline, in the archive segment), so the retention cap bounds it,
// not the table's history; a file already read for the version before is
// reused, never read again.
type rangesFiles struct {
	data map[string][]byte
	// errs are the files that could not be read, by SHA-256: the ledger
	// through a snapshot referencing one is that error.
	errs map[string]error
}

// commit decodes the ledger entry of snapshot s, a floe commit.
func (rf *rangesFiles) commit(s *table.Snapshot) (mapping.Commit, error) {
	props, at := s.Summary.Properties, time.UnixMilli(s.TimestampMs).UTC()
	ref, ok, err := mapping.RangesRefOf(s.SnapshotID, props)
	if err != nil || !ok {
		return mapping.DecodeCommit(s.SnapshotID, at, props)
	}
	b, err := rf.file(s.SnapshotID, ref)
	if err != nil {
		return mapping.Commit{}, err
	}
	return mapping.DecodeRangesFile(s.SnapshotID, at, props, b)
}

// inline returns the floe properties of snapshot s with the ranges of a
// ranges file it references inline: what the ledger archive keeps of it.
func (rf *rangesFiles) inline(s table.Snapshot) (map[string]string, error) {
	props := floeProperties(s)
	ref, ok, err := mapping.RangesRefOf(s.SnapshotID, props)
	if err != nil || !ok {
		return props, err
	}
	b, err := rf.file(s.SnapshotID, ref)
	if err != nil {
		return nil, err
	}
	return mapping.ResolveRangesFile(s.SnapshotID, props, b)
}

func (rf *rangesFiles) file(snapshotID int64, ref mapping.RangesRef) ([]byte, error) {
	if rf != nil {
		if err := rf.errs[ref.SHA256]; err != nil {
			return nil, &mapping.RangesFileError{SnapshotID: snapshotID, Path: ref.Path, Err: err}
		}
		if b, ok := rf.data[ref.SHA256]; ok {
			return b, nil
		}
	}
	// Every live snapshot's file is read when its table version is
	// adopted: this is a snapshot of no version adopted.
	return nil, &mapping.RangesFileError{SnapshotID: snapshotID, Path: ref.Path, Err: errors.New("not read with the table version")}
}

// referenced reports whether some snapshot of the version references the
// file of SHA-256 digest.
func (rf *rangesFiles) referenced(digest string) bool {
	if rf == nil {
		return false
	}
	_, data := rf.data[digest]
	_, failed := rf.errs[digest]
	return data || failed
}

// floeProperties returns the floe. properties of a snapshot's summary.
func floeProperties(s table.Snapshot) map[string]string {
	var props map[string]string
	if s.Summary == nil {
		return nil
	}
	for k, v := range s.Summary.Properties {
		if strings.HasPrefix(k, mapping.KeyPrefix) {
			if props == nil {
				props = map[string]string{}
			}
			props[k] = v
		}
	}
	return props
}

// readRangesFiles reads the ranges files the snapshots of tbl reference,
// reusing those of the version adopted before (t.ranges) and the one this
// process just wrote (t.written). A file that cannot be read is kept as an
// error for the snapshots referencing it; gone reports whether one does
// not exist (an expiry may have archived its snapshot and collected it
// after tbl was loaded, which a reload tells).
func (t *Table) readRangesFiles(ctx context.Context, tbl *table.Table) (rf *rangesFiles, gone bool) {
	rf = &rangesFiles{data: map[string][]byte{}, errs: map[string]error{}}
	want := map[string]string{} // path by digest, of the files to read
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary == nil {
			continue
		}
		ref, ok, err := mapping.RangesRefOf(s.SnapshotID, s.Summary.Properties)
		if err != nil || !ok {
			// A malformed reference fails its decoding.
			continue
		}
		switch {
		case t.ranges != nil && t.ranges.data[ref.SHA256] != nil:
			rf.data[ref.SHA256] = t.ranges.data[ref.SHA256]
		case t.written.digest == ref.SHA256:
			rf.data[ref.SHA256] = t.written.data
		default:
			want[ref.SHA256] = ref.Path
		}
	}
	if len(want) == 0 {
		return rf, false
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		for digest := range want {
			rf.errs[digest] = fmt.Errorf("open the table's storage: %w", err)
		}
		return rf, false
	}
	var mu sync.Mutex
	g := errgroup.Group{}
	g.SetLimit(rangesParallelism)
	for digest, path := range want {
		g.Go(func() error {
			b, err := readAll(fsys, path)
			if err == nil {
				err = checkSHA256(b, digest)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rf.errs[digest] = err
				gone = gone || errors.Is(err, fs.ErrNotExist)
				return nil
			}
			rf.data[digest] = b
			return nil
		})
	}
	_ = g.Wait() // the goroutines keep their errors per file
	return rf, gone
}

// readAll returns the bytes of a file of the table's storage.
func readAll(fsys iceio.IO, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writtenRanges is the ranges file a commit of this process wrote, so that
// adopting the table version it produced does not read it back.
type writtenRanges struct {
	digest string
	data   []byte
}

// encodeCommit returns the summary properties of commit c: its ranges
// inline or, when they take more than the table's PropInlineRangesMax,
// a reference to the ranges file it writes first (path; "" when inline).
// The file is written before the commit that references it, so a reader
// of that commit always finds it; a commit that never lands leaves it
// unreferenced, and maintenance collects it (staleRangesFiles).
func (t *Table) encodeCommit(ctx context.Context, c mapping.Commit) (props iceberg.Properties, path string, err error) {
	inline, err := c.Encode()
	if err != nil {
		return nil, "", err
	}
	limit, err := t.inlineRangesMax()
	if err != nil {
		return nil, "", err
	}
	if mapping.InlineSize(inline) <= limit {
		return inline, "", nil
	}
	path = rangesLocation(t.tbl.Metadata()) + "/" + c.ID + ".json"
	props, file, err := c.EncodeRangesFile(path)
	if err != nil {
		return nil, "", err
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("write the ranges file of commit %s to %s: %w", c.ID, t.Name(), err)
	}
	wfs, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return nil, "", fmt.Errorf("write the ranges file of commit %s to %s: the table's storage cannot write files", c.ID, t.Name())
	}
	if err := wfs.WriteFile(path, file); err != nil {
		return nil, "", fmt.Errorf("write the ranges file %s of commit %s to %s: %w", path, c.ID, t.Name(), err)
	}
	t.written = writtenRanges{digest: props[mapping.KeyRangesSHA256], data: file}
	return props, path, nil
}
