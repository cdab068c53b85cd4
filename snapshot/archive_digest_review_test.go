package snapshot_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestRepairMergeChecksSegmentDigest: the repair of a
// truncated ledger (repairLedger -> mergeArchives) reads the named
// segments with readSegment -> readArchiveFile, which passes no digest to
// segmentEntries: a named segment altered since floe wrote it (its
// recorded SHA-256 no longer matches) is merged as it reads, and the merge
// is committed with a fresh digest of the altered content. Every later
// reader then takes the alteration as the ledger. An expiry that would
// merge the same segment fails (TestMergeOfAlteredSegment); the repair
// must too.
func TestRepairMergeChecksSegmentDigest(t *testing.T) {
	tbl, segs := twoSegments(t)
	// The older segment altered in the storage, same length.
	alterFile(t, segs[0], `"0:100-110:0"`, `"0:100-119:0"`)
	var ae *snapshot.ArchiveError
	if _, err := freshTable(t, tbl).Ledger(); !errors.As(err, &ae) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("ledger of the altered segment: %v; want the SHA-256 mismatch", err)
	}
	// The newer segment unnamed (a truncated ledger the repair merges;
	// its file stays in the archive folder).
	txn := tbl.Iceberg().NewTransaction()
	var keys []string
	for k, v := range tbl.Iceberg().Properties() {
		id := strings.TrimSuffix(segs[1][strings.LastIndexByte(segs[1], '/')+1:], ".json")
		if v == segs[1] || k == snapshot.PropLedgerDigestPrefix+id {
			keys = append(keys, k)
		}
	}
	if len(keys) != 2 {
		t.Fatalf("properties of the newer segment: %v", keys)
	}
	if err := txn.RemoveProperties(keys); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := freshTable(t, tbl).Maintain(t.Context(), snapshot.MaintainOptions{Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		l, lerr := freshTable(t, tbl).Ledger()
		t.Fatalf("repair merged a segment whose SHA-256 does not match the table's record: result %+v, no error; the ledger now reads without error (%v) and holds the altered range: %v",
			res.TruncatedRefs, lerr, strings.Contains(strings.Join(fmtRanges(l), " "), "100-119"))
	}
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("repair: %v; want an *ArchiveError naming the SHA-256", err)
	}
}

func fmtRanges(l mapping.Ledger) []string {
	var out []string
	for _, c := range l.Commits {
		for _, r := range c.Ranges {
			out = append(out, fmt.Sprintf("%d-%d", r.Low, r.High))
		}
	}
	return out
}

// TestBuiltIndexBlocksChecked: a segment whose digest the table
// records but whose index file is gone is decoded and checked whole when
// the table is opened (readIndex -> indexSegmentFile), and the index built
// that way is kept (digested: never rewritten) with blocks that carry no
// SHA-256. Every later block read (Locate, Ledger) reads the segment file
// again, unchecked: an alteration after the open is taken as the ledger,
// where a handle whose index file is intact fails on the block's digest.
// A sink or `floe where` process holding the handle (ArchiveCache shares
// it across handles) reads the altered bytes.
func TestBuiltIndexBlocksChecked(t *testing.T) {
	for _, withIndex := range []bool{true, false} {
		t.Run(fmt.Sprint("index=", withIndex), func(t *testing.T) {
			tbl, segs := twoSegments(t)
			tp := mapping.TopicPartition{Topic: "t", Partition: 0}
			if !withIndex {
				if err := os.Remove(indexFiles(t, segs[1:])[0]); err != nil {
					t.Fatal(err)
				}
			}
			fresh := freshTable(t, tbl) // checks what it reads at open
			alterFile(t, segs[1], `"0:210-220:0"`, `"0:210-229:0"`)
			got, err := fresh.Locate(t.Context(), 0, tp, 225)
			if err == nil || !strings.Contains(err.Error(), "SHA-256") {
				t.Fatalf("offset 225 after the segment was altered under an open handle: %+v, %v; want the SHA-256 mismatch", got, err)
			}
		})
	}
}

// TestDigestPropertyLeftByOlderFloe: during an upgrade a sink of
// the floe before digests (in the same consumer group, running its own
// maintenance) merges segments the new floe wrote: it removes their
// floe.ledger-segment.ID properties, not the floe.ledger-segment-sha256.ID
// it does not know. Simulated: the table's two digested segments merged
// into one segment without digest, named alone, as that floe commits it.
// No later run of the new floe removes the digests of segments the table
// no longer names: they stay in every metadata file of the table for good.
func TestDigestPropertyLeftByOlderFloe(t *testing.T) {
	tbl, segs := twoSegments(t)
	var merged snapshot.Archive
	for _, s := range segs {
		a := readArchiveFile(t, s)
		merged.Format, merged.TableUUID = a.Format, a.TableUUID
		merged.Snapshots = append(merged.Snapshots, a.Snapshots...)
	}
	b, err := json.Marshal(&merged)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(metadataDir(tbl), "floe-ledger", "00024-00000000-0000-0000-0000-000000000000.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	txn := tbl.Iceberg().NewTransaction()
	var keys []string
	for k := range tbl.Iceberg().Properties() {
		if strings.HasPrefix(k, snapshot.PropLedgerSegmentPrefix) {
			keys = append(keys, k)
		}
	}
	if err := txn.RemoveProperties(keys); err != nil {
		t.Fatal(err)
	}
	if err := txn.SetProperties(map[string]string{snapshot.PropLedgerSegmentPrefix + "00024-00000000-0000-0000-0000-000000000000": "file://" + path}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	fresh := freshTable(t, tbl)
	commitRanges(t, fresh, 26, 40)
	for range 3 {
		if _, err := fresh.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2, RemoveDebris: true, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
	}
	props := freshTable(t, tbl).Iceberg().Properties()
	var orphans []string
	for k := range props {
		if id, ok := strings.CutPrefix(k, snapshot.PropLedgerDigestPrefix); ok {
			if _, named := props[snapshot.PropLedgerSegmentPrefix+id]; !named {
				orphans = append(orphans, k)
			}
		}
	}
	if len(orphans) > 0 {
		t.Errorf("digest properties of segments the table no longer names, after three maintain runs of the new floe: %v", orphans)
	}
}
