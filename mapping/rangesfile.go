package mapping

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A commit of many ranges (a wide topic) keeps them out of its snapshot
// summary: every commit rewrites the whole metadata.json with every
// retained snapshot's summary, so inline ranges make each commit cost
// metadata in proportion to the partitions it touched, in every retained
// metadata version. Such a commit writes its ranges to a ranges file
// before the Iceberg commit, and its summary carries a fixed-size
// reference instead: the file's path, the SHA-256 of its bytes and the
// number of ranges it holds, under ledger version 3. The summary's other
// keys (version, commit id, writer) stay.
//
// A ranges file is JSON:
//
//	{"format": "floe.ledger-ranges/v1", "commit-id": "...",
//	 "properties": {"floe.ranges.orders": "0:0-1200:1187,...", ...}}
//
// whose properties are exactly the ledger properties the commit would
// have carried inline besides version, commit id and writer (ranges, lost
// and aborted ranges, topic IDs, dead-letter files and table, file
// groups), in the encoding above. The threshold is on those properties'
// encoded size (InlineSize), so a wide commit's file groups go to the file
// with its ranges. A ledger archive keeps a version 3 entry in that inline
// form, so version 3 properties may also carry their ranges inline.
const (
	KeyRangesFile   = "floe.ranges-file"
	KeyRangesSHA256 = "floe.ranges-sha256"
	KeyRangesCount  = "floe.ranges-count"

	// LedgerVersionRangesFile is the version of a commit that may
	// reference a ranges file. Commits with inline ranges are still
	// written as LedgerVersion, which floe before ranges files reads.
	LedgerVersionRangesFile = "3"

	// RangesFileFormat is a ranges file's format marker.
	RangesFileFormat = "floe.ledger-ranges/v1"
)

// ErrRangesFile is matched (errors.Is) by a *RangesFileError.
var ErrRangesFile = errors.New("ledger ranges file")

// RangesFileError reports a commit whose ranges file cannot be read, or is
// not the file its summary references (another digest, another commit,
// another count): the commit's ranges are unknown, and a ledger through it
// is never read without them.
type RangesFileError struct {
	SnapshotID int64
	Path       string
	Err        error
}

func (e *RangesFileError) Error() string {
	return fmt.Sprintf("snapshot %d keeps its ledger ranges in %s, which cannot be used: %v (a ranges file is written once and never changed: it was deleted or altered by something other than floe)",
		e.SnapshotID, e.Path, e.Err)
}

func (e *RangesFileError) Unwrap() error { return e.Err }

func (e *RangesFileError) Is(target error) bool { return target == ErrRangesFile }

// RangesRef is a summary's reference to its commit's ranges file.
type RangesRef struct {
	Path   string
	SHA256 string // hex of the file's SHA-256
	Count  int    // ranges the file holds
}

// rangesFile is the JSON form of a ranges file.
type rangesFile struct {
	Format     string            `json:"format"`
	CommitID   string            `json:"commit-id"`
	Properties map[string]string `json:"properties"`
}

// InlineSize is the number of bytes the ranges of props (Commit.Encode)
// take in a snapshot summary: every key and value besides the header.
func InlineSize(props map[string]string) int {
	n := 0
	for k, v := range props {
		if !isHeader(k) {
			n += len(k) + len(v)
		}
	}
	return n
}

// isHeader reports whether k is a ledger property a summary keeps when
// its ranges go to a ranges file.
func isHeader(k string) bool {
	return k == KeyVersion || k == KeyCommitID || k == KeyWriter
}

// EncodeRangesFile returns the summary properties of c that reference its
// ranges file at path, and the file's bytes.
func (c Commit) EncodeRangesFile(path string) (props map[string]string, file []byte, err error) {
	if path == "" {
		return nil, nil, errors.New("encode ledger: ranges file without a path")
	}
	inline, err := c.Encode()
	if err != nil {
		return nil, nil, err
	}
	f := rangesFile{Format: RangesFileFormat, CommitID: c.ID, Properties: map[string]string{}}
	for k, v := range inline {
		if !isHeader(k) {
			f.Properties[k] = v
		}
	}
	// encoding/json sorts map keys: the bytes, and so the digest, depend
	// on the commit only.
	if file, err = json.Marshal(f); err != nil {
		return nil, nil, fmt.Errorf("encode ledger: ranges file: %w", err)
	}
	sum := sha256.Sum256(file)
	props = map[string]string{
		KeyVersion:      LedgerVersionRangesFile,
		KeyCommitID:     c.ID,
		KeyWriter:       c.Writer,
		KeyRangesFile:   path,
		KeyRangesSHA256: hex.EncodeToString(sum[:]),
		KeyRangesCount:  strconv.Itoa(len(c.Ranges)),
	}
	return props, file, nil
}

// RangesRefOf returns the ranges file reference of a snapshot's summary
// properties, and ok false when it has none (its ranges are inline). A
// reference that is incomplete or malformed is a *MalformedError.
func RangesRefOf(snapshotID int64, props map[string]string) (ref RangesRef, ok bool, err error) {
	path, hasPath := props[KeyRangesFile]
	digest, hasDigest := props[KeyRangesSHA256]
	count, hasCount := props[KeyRangesCount]
	if !hasPath && !hasDigest && !hasCount {
		return RangesRef{}, false, nil
	}
	bad := func(key string, err error) (RangesRef, bool, error) {
		return RangesRef{}, false, &MalformedError{SnapshotID: snapshotID, Key: key, Err: err}
	}
	if props[KeyVersion] != LedgerVersionRangesFile {
		return bad(KeyVersion, fmt.Errorf("a ranges file reference needs version %s, not %q", LedgerVersionRangesFile, props[KeyVersion]))
	}
	if path == "" {
		return bad(KeyRangesFile, errors.New("empty path"))
	}
	if b, err := hex.DecodeString(digest); err != nil || len(b) != sha256.Size {
		return bad(KeyRangesSHA256, errors.New("want 64 hex digits"))
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return bad(KeyRangesCount, errors.New("want a positive count"))
	}
	for k := range props {
		if strings.HasPrefix(k, KeyPrefix) && !isHeader(k) && k != KeyRangesFile && k != KeyRangesSHA256 && k != KeyRangesCount {
			return bad(k, errors.New("ranges both inline and in a ranges file"))
		}
	}
	return RangesRef{Path: path, SHA256: digest, Count: n}, true, nil
}

// ResolveRangesFile returns a referencing summary's properties with the
// reference replaced by the ranges its file holds: the commit in inline
// form (version 3), which DecodeCommit decodes and a ledger archive keeps.
// file is the file's bytes; a file that is not the one referenced (another
// digest, format, commit or count) is a *RangesFileError.
func ResolveRangesFile(snapshotID int64, props map[string]string, file []byte) (map[string]string, error) {
	ref, ok, err := RangesRefOf(snapshotID, props)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("snapshot %d references no ranges file", snapshotID)
	}
	fail := func(err error) (map[string]string, error) {
		return nil, &RangesFileError{SnapshotID: snapshotID, Path: ref.Path, Err: err}
	}
	if sum := sha256.Sum256(file); hex.EncodeToString(sum[:]) != ref.SHA256 {
		return fail(fmt.Errorf("its SHA-256 is %x, the snapshot's summary says %s", sum, ref.SHA256))
	}
	var f rangesFile
	dec := json.NewDecoder(bytes.NewReader(file))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fail(fmt.Errorf("not a ranges file: %w", err))
	}
	if f.Format != RangesFileFormat {
		return fail(fmt.Errorf("format %q, this floe reads %q", f.Format, RangesFileFormat))
	}
	if f.CommitID != props[KeyCommitID] {
		return fail(fmt.Errorf("written for commit %s, not this snapshot's %s", f.CommitID, props[KeyCommitID]))
	}
	out := make(map[string]string, len(props)+len(f.Properties))
	for k, v := range props {
		if k != KeyRangesFile && k != KeyRangesSHA256 && k != KeyRangesCount {
			out[k] = v
		}
	}
	for k, v := range f.Properties {
		if !strings.HasPrefix(k, KeyPrefix) || isHeader(k) || k == KeyRangesFile || k == KeyRangesSHA256 || k == KeyRangesCount {
			return fail(fmt.Errorf("property %q does not belong in a ranges file", k))
		}
		out[k] = v
	}
	c, err := DecodeCommit(snapshotID, time.Time{}, out)
	if err != nil {
		return fail(err)
	}
	if len(c.Ranges) != ref.Count {
		return fail(fmt.Errorf("it holds %d ranges, the snapshot's summary says %d", len(c.Ranges), ref.Count))
	}
	return out, nil
}

// DecodeRangesFile decodes the ledger entry of a snapshot whose summary
// references a ranges file, from the file's bytes (ResolveRangesFile).
func DecodeRangesFile(snapshotID int64, committedAt time.Time, props map[string]string, file []byte) (Commit, error) {
	inline, err := ResolveRangesFile(snapshotID, props, file)
	if err != nil {
		return Commit{}, err
	}
	return DecodeCommit(snapshotID, committedAt, inline)
}
