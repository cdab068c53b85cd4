package audit

import (
	"crypto/sha256"
	"encoding/hex"
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
// strconv.Quote. Anyone can rebuild it from the table's metadata.json (and,
// for snapshots floe maintain expired, the ledger archive it names) and
// check the digest with sha256sum.
func Canonical(metadataLocation string, l mapping.Ledger) []byte {
	b := []byte(evidenceHeader)
	b = append(b, "metadata "...)
	b = append(b, metadataLocation...)
	b = append(b, '\n')
	num := func(b []byte, n int64) []byte { return strconv.AppendInt(append(b, ' '), n, 10) }
	var rs []mapping.Range
	for _, c := range l.Commits {
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
	return b
}

// evidence computes the evidence of an audit of ledger l, read from the
// metadata at metadataLocation whose branch head is headID.
func evidence(metadataLocation string, headID int64, l mapping.Ledger) Evidence {
	sum := sha256.Sum256(Canonical(metadataLocation, l))
	return Evidence{
		Digest:           "sha256:" + hex.EncodeToString(sum[:]),
		MetadataLocation: metadataLocation,
		SnapshotID:       headID,
		Commits:          len(l.Commits),
	}
}
