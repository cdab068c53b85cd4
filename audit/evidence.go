package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"maps"
	"slices"
	"strconv"

	"github.com/floe-dev/floe/mapping"
)

// evidenceHeader opens the canonical form; its version changes whenever
// the form does.
const evidenceHeader = "floe-audit-evidence/2\n"

// Canonical returns the canonical form of a ledger that the evidence
// digest hashes: UTF-8 text, one item per line, each line ending in "\n":
//
//	floe-audit-evidence/2
//	metadata <metadata location>
//	commit <snapshot id> <commit time, Unix ms> <commit id, quoted> <writer, quoted>
//	topic-id <topic> <topic id>
//	range <topic> <partition> <low> <high> <records> [<dead letters> [<deletes> <skipped>]]
//	lost <topic> <partition> <low> <high>
//	aborted <topic> <partition> <low> <high>
//
// with one commit line per ledger commit, oldest first, each followed by
// the topic IDs it recorded, sorted by topic, then its ranges sorted by
// topic, partition and low offset. A range line carries its dead letters
// when it has any, and its dead letters, deletes and skipped records when
// it has deletes or skipped records (an upsert table's). Quoting is Go's
// strconv.Quote. A commit's file groups and dead-letter files say where
// rows are, not which offsets the ledger covers, and are not in it.
// Anyone can rebuild it from the table's metadata.json (and,
// for snapshots floe maintain expired, the ledger archive it names) and
// check the digest with sha256sum.
func Canonical(metadataLocation string, l mapping.Ledger) []byte {
	b := canonicalHeader(metadataLocation)
	var rs []mapping.Range
	for _, c := range l.Commits {
		b, rs = appendCanonical(b, rs, c)
	}
	return b
}

// canonicalHeader is the start of the canonical form, before the commits.
func canonicalHeader(metadataLocation string) []byte {
	b := []byte(evidenceHeader)
	b = append(b, "metadata "...)
	b = append(b, metadataLocation...)
	return append(b, '\n')
}

// appendCanonical appends the canonical lines of commit c to b; rs is
// scratch space for sorting its ranges, returned for reuse.
func appendCanonical(b []byte, rs []mapping.Range, c mapping.Commit) ([]byte, []mapping.Range) {
	num := func(b []byte, n int64) []byte { return strconv.AppendInt(append(b, ' '), n, 10) }
	{
		b = append(b, "commit"...)
		b = num(b, c.SnapshotID)
		b = num(b, c.CommittedAt.UnixMilli())
		b = strconv.AppendQuote(append(b, ' '), c.ID)
		b = strconv.AppendQuote(append(b, ' '), c.Writer)
		b = append(b, '\n')
		for _, topic := range slices.Sorted(maps.Keys(c.TopicIDs)) {
			b = append(b, "topic-id "...)
			b = append(b, topic...)
			b = append(append(b, ' '), c.TopicIDs[topic]...)
			b = append(b, '\n')
		}
		rs = append(rs[:0], c.Ranges...)
		mapping.SortRanges(rs)
		for _, r := range rs {
			switch {
			case r.Lost:
				b = append(b, "lost "...)
			case r.Aborted:
				b = append(b, "aborted "...)
			default:
				b = append(b, "range "...)
			}
			b = append(b, r.Topic...)
			b = num(b, int64(r.Partition))
			b = num(b, r.Low)
			b = num(b, r.High)
			if !r.Deleted() {
				b = num(b, r.Records)
				switch {
				case r.Deletes > 0 || r.Skipped > 0:
					b = num(num(num(b, r.DeadLetters), r.Deletes), r.Skipped)
				case r.DeadLetters > 0:
					b = num(b, r.DeadLetters)
				}
			}
			b = append(b, '\n')
		}
	}
	return b, rs
}

// evidence computes the evidence of an audit of ledger l, read from the
// metadata at metadataLocation whose branch head is headID.
func evidence(metadataLocation string, headID int64, l mapping.Ledger) Evidence {
	e := newEvidenceHash(metadataLocation)
	for _, c := range l.Commits {
		e.add(c)
	}
	return e.evidence(headID)
}

// evidenceHash hashes the canonical form of a ledger given one commit at
// a time, holding one commit's lines.
type evidenceHash struct {
	h        hash.Hash
	location string
	commits  int
	buf      []byte
	rs       []mapping.Range
}

func newEvidenceHash(metadataLocation string) *evidenceHash {
	e := &evidenceHash{h: sha256.New(), location: metadataLocation}
	e.h.Write(canonicalHeader(metadataLocation))
	return e
}

func (e *evidenceHash) add(c mapping.Commit) {
	e.commits++
	e.buf, e.rs = appendCanonical(e.buf[:0], e.rs, c)
	e.h.Write(e.buf)
}

func (e *evidenceHash) evidence(headID int64) Evidence {
	return Evidence{
		Digest:           "sha256:" + hex.EncodeToString(e.h.Sum(nil)),
		MetadataLocation: e.location,
		SnapshotID:       headID,
		Commits:          e.commits,
	}
}
