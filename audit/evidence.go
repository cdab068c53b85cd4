package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/floe-dev/floe/mapping"
)

// evidenceHeader opens the canonical form; its version changes whenever
// the form does.
const evidenceHeader = "floe-audit-evidence/1\n"

// Canonical returns the canonical form of a ledger that the evidence
// digest hashes: UTF-8 text, one item per line, each line ending in "\n":
//
//	floe-audit-evidence/1
//	metadata <metadata location>
//	commit <snapshot id> <commit time, Unix ms> <commit id, quoted> <writer, quoted>
//	range <topic> <partition> <low> <high> <records>
//	lost <topic> <partition> <low> <high>
//
// with one commit line per ledger commit, oldest first, each followed by
// its ranges sorted by topic, partition and low offset. Quoting is Go's
// strconv.Quote. Anyone can rebuild it from the table's metadata.json and
// check the digest with sha256sum.
func Canonical(metadataLocation string, l mapping.Ledger) []byte {
	b := []byte(evidenceHeader)
	b = fmt.Appendf(b, "metadata %s\n", metadataLocation)
	for _, c := range l.Commits {
		b = fmt.Appendf(b, "commit %d %d %s %s\n", c.SnapshotID, c.CommittedAt.UnixMilli(), strconv.Quote(c.ID), strconv.Quote(c.Writer))
		rs := append([]mapping.Range(nil), c.Ranges...)
		mapping.SortRanges(rs)
		for _, r := range rs {
			if r.Lost {
				b = fmt.Appendf(b, "lost %s %d %d %d\n", r.Topic, r.Partition, r.Low, r.High)
				continue
			}
			b = fmt.Appendf(b, "range %s %d %d %d %d\n", r.Topic, r.Partition, r.Low, r.High, r.Records)
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
