package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
)

// PropMaxSnapshots is the table property that caps the snapshots a sink's
// maintenance keeps on a branch, whatever their age: every commit
// rewrites the whole metadata.json, whose size (and so the commit's
// latency) grows with the snapshots it lists, and a sink catching up a
// backlog or flushing often commits far more than the age-based rule
// alone expires. 0 turns the cap off; a value below the table's
// min-snapshots-to-keep counts as that.
const PropMaxSnapshots = "floe.history.max-snapshots"

// floe's retention defaults, for tables that do not set the properties.
// Iceberg's own defaults (5 days, 1 snapshot) keep 14,400 snapshots of a
// sink flushing every 30 s, which makes every commit rewrite megabytes of
// metadata; the ledger, archived before expiry, does not need them.
const (
	// DefaultMaxSnapshotAge is floe's history.expire.max-snapshot-age-ms.
	DefaultMaxSnapshotAge = time.Hour
	// DefaultMinSnapshotsToKeep is floe's history.expire.min-snapshots-to-keep.
	DefaultMinSnapshotsToKeep = 50
	// DefaultMaxSnapshots is floe's PropMaxSnapshots: a commit then parses
	// and writes about 100 KB of metadata.json, at about 900 bytes per
	// snapshot of a raw table.
	DefaultMaxSnapshots = 100
)

// autoMaintainBatch is how many snapshots must be due for expiry before a
// sink's maintenance runs: each run is one more catalog commit and one
// more archive segment, so expiring one snapshot at a time would double
// the commits; 20 lets a table exceed the default cap by a fifth at most.
const autoMaintainBatch = 20

// Retention is how many snapshots a sink's maintenance keeps on each
// branch, from the table's properties (Table.Retention).
type Retention struct {
	// MaxAge: snapshots older than this are expired (Iceberg's
	// history.expire.max-snapshot-age-ms) ...
	MaxAge time.Duration
	// MinKeep ... except the newest MinKeep
	// (history.expire.min-snapshots-to-keep) ...
	MinKeep int
	// MaxSnapshots ... and snapshots beyond the newest MaxSnapshots are
	// expired whatever their age (PropMaxSnapshots; 0: no cap).
	MaxSnapshots int
}

// RetentionError reports a retention property whose value is not a number
// it can take.
type RetentionError struct {
	Table, Property, Value string
}

func (e *RetentionError) Error() string {
	return fmt.Sprintf("table %s: property %s=%q: want a non-negative integer", e.Table, e.Property, e.Value)
}

// Retention returns the table's retention: its Iceberg properties
// history.expire.max-snapshot-age-ms and history.expire.min-snapshots-to-keep
// and floe's PropMaxSnapshots, floe's defaults for those it does not set.
// A branch's own min-snapshots-to-keep and max-snapshot-age-ms still win
// over them, as in every Iceberg expiry.
func (t *Table) Retention() (Retention, error) {
	props := t.tbl.Properties()
	get := func(key string, def int64) (int64, error) {
		v, ok := props[key]
		if !ok {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, &RetentionError{Table: t.Name(), Property: key, Value: v}
		}
		return n, nil
	}
	age, err := get(table.MaxSnapshotAgeMsKey, DefaultMaxSnapshotAge.Milliseconds())
	if err != nil {
		return Retention{}, err
	}
	keep, err := get(table.MinSnapshotsToKeepKey, DefaultMinSnapshotsToKeep)
	if err != nil {
		return Retention{}, err
	}
	capped, err := get(PropMaxSnapshots, DefaultMaxSnapshots)
	if err != nil {
		return Retention{}, err
	}
	// Long.MAX_VALUE, Iceberg's "keep by age forever", is past what a
	// Duration holds: the product overflowed to a negative age, which
	// expired every snapshot beyond MinKeep.
	r := Retention{MaxAge: time.Duration(min(age, int64(math.MaxInt64/time.Millisecond))) * time.Millisecond, MinKeep: max(int(keep), 1), MaxSnapshots: int(capped)}
	if r.MaxSnapshots > 0 {
		r.MaxSnapshots = max(r.MaxSnapshots, r.MinKeep)
	}
	return r, nil
}

// due returns how many snapshots of the branch's live ancestry r expires
// at now, and the age cut-off that expires them with Iceberg's rule (older
// than the cut-off, beyond the newest MinKeep): MaxAge, lowered to the age
// of the first snapshot beyond the newest MaxSnapshots.
func (r Retention) due(meta table.Metadata, branch string, now time.Time) (int, time.Duration) {
	head := meta.SnapshotByName(branch)
	if head == nil {
		return 0, r.MaxAge
	}
	olderThan := r.MaxAge
	n := 0
	i := 0
	for s := head; s != nil; i++ {
		age := now.Sub(time.UnixMilli(s.TimestampMs))
		if r.MaxSnapshots > 0 && i == r.MaxSnapshots {
			// Iceberg expires what is strictly older than the cut-off, as
			// of a now that is later than this one.
			olderThan = max(min(olderThan, age-time.Millisecond), 0)
		}
		if i >= r.MinKeep && (age > r.MaxAge || (r.MaxSnapshots > 0 && i >= r.MaxSnapshots)) {
			n++
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return n, olderThan
}

// AutoMaintain is a sink's own maintenance, run between its commits: when
// at least autoMaintainBatch snapshots of the table's branch are due for
// expiry under the table's Retention, it runs Maintain with that
// retention (the ledger archived first, as floe maintain does) and
// deletes stale metadata and ledger archive files older than
// DefaultOrphanMinAge (crashed runs' segments among them). It reports
// whether Maintain ran. Its cost when nothing is due is a walk of the
// branch's live snapshots in memory. A table with gc.enabled=false (its
// files may be shared) is left alone.
func (t *Table) AutoMaintain(ctx context.Context, log *slog.Logger) (MaintainResult, bool, error) {
	if v, ok := t.tbl.Properties()[table.GCEnabledKey]; ok && strings.EqualFold(v, "false") {
		// Its files may be shared: Maintain refuses it, and a warning
		// after every commit would say nothing new.
		return MaintainResult{}, false, nil
	}
	r, err := t.Retention()
	if err != nil {
		return MaintainResult{}, false, err
	}
	n, olderThan := r.due(t.tbl.Metadata(), t.branch, time.Now())
	if n < autoMaintainBatch {
		return MaintainResult{}, false, nil
	}
	res, err := t.Maintain(ctx, MaintainOptions{
		Expire: true, ExpireOlderThan: olderThan, RetainLast: r.MinKeep,
		RemoveDebris: true, OrphanMinAge: DefaultOrphanMinAge, Logger: log,
	})
	return res, true, err
}
