package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
)

// DropRefOptions configure DropRef.
type DropRefOptions struct {
	// Tag drops a tag; otherwise a branch.
	Tag bool
	// KeepFiles drops the branch's dead-letter tables from the catalog
	// only (DropOptions.KeepFiles).
	KeepFiles bool
	// DryRun lists what would be dropped and changes nothing.
	DryRun bool
	// Properties are table properties that describe the branch alone (a
	// replay's recorded bounds), removed with a branch that was never
	// published; those of a published one stay, as main's history reads
	// them.
	Properties []string
}

// DroppedRef is what DropRef dropped (or, in a dry run, would drop).
type DroppedRef struct {
	Table string `json:"table"`
	Ref   Ref    `json:"ref"`
	// Gone is set when the branch was dropped before: by a drop cut short
	// after its commit (its dead-letter tables left to drop), or by one
	// that kept them (KeptDeadLetterTables says why they stay).
	Gone bool `json:"gone,omitempty"`
	// Published is set for a branch a publish once made main's head
	// (PropPublished): main's history holds its commits, which stay.
	Published bool `json:"published"`
	// DeadLetterTables are the branch's dead-letter tables that nothing
	// else names, dropped with it.
	DeadLetterTables []Dropped `json:"dead_letter_tables"`
	// KeptDeadLetterTables are the branch's dead-letter tables that stay:
	// another ref's ledger names them (main's, once the branch was
	// published), or main's writers write them. KeptBecause says, for
	// each, why: what holds it, of all that can.
	KeptDeadLetterTables []string            `json:"kept_dead_letter_tables"`
	KeptBecause          map[string][]string `json:"kept_because"`

	// dropping is the branch's PropDroppingPrefix record as this drop
	// read or wrote it: the one its end removes.
	dropping string
}

// NothingLeft reports a drop run again for a branch dropped before whose
// dead-letter tables all stay: it drops nothing.
func (d DroppedRef) NothingLeft() bool { return d.Gone && len(d.DeadLetterTables) == 0 }

// PropDroppingPrefix, followed by a branch's name, is a property of a
// data table whose branch DropRef dropped and whose dead-letter tables it
// has still to drop: their names, comma-separated. Set in the commit that
// drops the branch, removed once they are dropped (by the drop that read
// or wrote that value: not another's since), so that a drop cut
// short between the two finds them when run again, also those the
// branch's ledger named (a replay's --dlq-table), which nothing else
// names once the branch is gone.
const PropDroppingPrefix = "floe.dropping-dead-letters."

// DropRef drops the branch or tag name of the table (opts.Tag) in one
// metadata commit that asserts the ref's head (and, for a branch, every
// branch's): what was decided on the table as read is what the commit
// changes. main is refused, and so is a name the table has no ref of that
// kind by, naming the refs it has, and a branch a publish is swapping onto
// main (PropPublishHold).
//
// The snapshots only the ref kept become unreferenced: the next floe
// maintain expires them by its retention rules and deletes their files.
// A branch's dead-letter tables (those its ledger names, and
// BranchDeadLetterName's, which a replay creates before a dead letter
// needs it) are dropped after the commit, with their files unless
// opts.KeepFiles, when no other ref's ledger names them and main's writers
// do not write them: a published branch's commits are main's, and so are
// their dead letters, also while main is rolled back below them and the
// head the publish made main's is still a snapshot of the table
// (keepRolledBack). The table's dead-letter tables are then reconciled
// with the ledgers left (ReconcileDeadLetterTables). A drop cut short
// after its commit is finished by running it again, which finds the
// branch gone and the dead-letter tables its commit recorded
// (PropDroppingPrefix) left (DroppedRef.Gone).
func (t *Table) DropRef(ctx context.Context, log *slog.Logger, name string, opts DropRefOptions) (DroppedRef, error) {
	kind := RefBranch
	if opts.Tag {
		kind = RefTag
	}
	if name == table.MainBranch {
		return DroppedRef{}, fmt.Errorf("drop %s %s of %s: main is the table itself; floe drop --table %s drops the table", kind, name, t.Name(), t.Name())
	}
	var (
		out       DroppedRef
		committed bool
	)
	err := retryConflicts(ctx, func(attempt int) error {
		if err := t.Refresh(ctx); err != nil {
			return err
		}
		var err error
		out, committed, err = t.dropRef(ctx, name, kind, opts)
		return err
	})
	if err != nil && !committed {
		return DroppedRef{}, err
	}
	if err != nil {
		return out, err
	}
	if opts.DryRun {
		return out, nil
	}
	for i, dlq := range out.DeadLetterTables {
		deleted, err := drop(ctx, t.cat, identOf(dlq.Table), opts.KeepFiles)
		if err != nil {
			return out, fmt.Errorf("drop %s, the dead-letter table of branch %s of %s, which is dropped (run the same command again to drop it): %w", dlq.Table, name, t.Name(), err)
		}
		out.DeadLetterTables[i].FilesDeleted = deleted
	}
	if err := t.removeDropping(ctx, name, out.dropping, out.DeadLetterTables); err != nil {
		return out, fmt.Errorf("dropped %s %s of %s and its dead-letter tables: %w", kind, name, t.Name(), err)
	}
	// The dead letters of commits only the ref's ledger had (a tag of
	// main's history before a publish) belong to no ledger now: removed
	// here, or the audit finds them stray until the next sink session or
	// maintenance. Damage reconciling cannot repair is the audit's to say.
	err = t.ReconcileDeadLetterTables(ctx, log)
	if IsDeadLetterDamage(err) {
		log.Warn("dropped; a dead-letter table does not match the ledger and reconciling cannot repair it (floe audit reports it)", "table", t.Name(), "err", err)
		err = nil
	}
	if _, truncated := errors.AsType[*TruncatedLedgerError](err); truncated {
		// Another ref's ledger another tool truncated, which floe
		// maintain reports: dropping that ref too is the way out.
		log.Warn("dropped; the dead-letter tables are not reconciled: another branch's or tag's ledger is truncated (floe maintain names it; drop it too)", "table", t.Name(), "err", err)
		err = nil
	}
	if err != nil {
		return out, fmt.Errorf("dropped %s %s of %s; reconcile its dead-letter tables (floe maintain does it again): %w", kind, name, t.Name(), err)
	}
	return out, nil
}

// dropRef is one attempt of DropRef's commit, on t as just loaded, and
// reports whether it committed.
func (t *Table) dropRef(ctx context.Context, name, kind string, opts DropRefOptions) (DroppedRef, bool, error) {
	out := DroppedRef{Table: t.Name(), Ref: Ref{Name: name, Kind: kind}, DeadLetterTables: []Dropped{}, KeptDeadLetterTables: []string{},
		KeptBecause: map[string][]string{}, dropping: t.tbl.Properties()[PropDroppingPrefix+name]}
	i := slices.IndexFunc(t.Refs(), func(r Ref) bool { return r.Name == name })
	if i < 0 {
		if kind == RefBranch {
			// A drop cut short after its commit left the branch's own
			// dead-letter table: this run finishes it.
			dlqs, kept, why, err := t.refDeadLetterTables(ctx, name, nil)
			if err != nil {
				return out, false, err
			}
			dlqs, kept = t.keepRolledBack(name, dlqs, kept, why)
			// Its dead-letter tables that stay are said too: the drop's
			// output told to run it again to drop them (review s61). Only
			// for a branch that was published (whose drop keeps them):
			// another branch's table of the same default name (a_b's for
			// a-b) says nothing of a name the table never had.
			props := t.tbl.Properties()
			_, dropping := props[PropDroppingPrefix+name]
			_, published := props[PropPublished+name]
			if dropping || len(dlqs) > 0 || len(kept) > 0 && published {
				out.Gone, out.DeadLetterTables, out.KeptDeadLetterTables, out.KeptBecause = true, dlqs, kept, why
				return out, false, nil
			}
		}
		return out, false, fmt.Errorf("%s has no %s named %s; its refs are %s", t.Name(), kind, name, refList(t.Refs()))
	}
	out.Ref = t.Refs()[i]
	if out.Ref.Kind != kind {
		return out, false, fmt.Errorf("%s of %s is a %s, not a %s: floe drop --%s %s drops it", name, t.Name(), out.Ref.Kind, kind, out.Ref.Kind, name)
	}
	props := t.tbl.Properties()
	if h, ok := parsePublishHold(props[PropPublishHold]); ok && h.Branch == name && time.Now().Before(h.Until) {
		return out, false, fmt.Errorf("drop branch %s of %s: a replay is publishing it as main (it asked main's writers to hold until %s): let the publish end, then drop it (a hold a publish that died left ends then)",
			name, t.Name(), h.Until.UTC().Format(time.RFC3339))
	}
	var removeProps []string
	if kind == RefBranch {
		_, out.Published = props[PropPublished+name]
		head := out.Ref.SnapshotID
		var err error
		if out.DeadLetterTables, out.KeptDeadLetterTables, out.KeptBecause, err = t.refDeadLetterTables(ctx, name, &head); err != nil {
			return out, false, err
		}
		out.DeadLetterTables, out.KeptDeadLetterTables = t.keepRolledBack(name, out.DeadLetterTables, out.KeptDeadLetterTables, out.KeptBecause)
		for _, d := range out.DeadLetterTables {
			if _, ok := props[PropDeadLetterTablePrefix+d.Table]; ok {
				removeProps = append(removeProps, PropDeadLetterTablePrefix+d.Table)
			}
		}
		if !out.Published {
			for _, p := range opts.Properties {
				if _, ok := props[p]; ok {
					removeProps = append(removeProps, p)
				}
			}
		}
	}
	if opts.DryRun {
		return out, false, nil
	}
	meta := t.tbl.Metadata()
	head := out.Ref.SnapshotID
	reqs := []table.Requirement{
		table.AssertTableUUID(meta.TableUUID()),
		table.AssertRefSnapshotID(name, &head),
	}
	if kind == RefBranch {
		// Which dead-letter tables go was decided on every branch's
		// ledger as read: a publish of this branch, or a commit naming one
		// of them, since makes this attempt look again.
		reqs = append(reqs, branchHeads(meta)...)
	}
	updates := []table.Update{table.NewRemoveSnapshotRefUpdate(name)}
	if len(out.DeadLetterTables) > 0 {
		names := make([]string, len(out.DeadLetterTables))
		for i, d := range out.DeadLetterTables {
			names[i] = d.Table
		}
		out.dropping = strings.Join(names, ",")
		updates = append(updates, table.NewSetPropertiesUpdate(map[string]string{PropDroppingPrefix + name: out.dropping}))
	}
	if len(removeProps) > 0 {
		updates = append(updates, table.NewRemovePropertiesUpdate(removeProps))
	}
	if _, _, err := t.cat.CommitTable(ctx, t.ident, reqs, updates); err != nil {
		return out, false, fmt.Errorf("drop %s %s of %s: %w", kind, name, t.Name(), err)
	}
	if err := t.Refresh(ctx); err != nil {
		return out, true, fmt.Errorf("%s %s of %s is dropped: %w", kind, name, t.Name(), err)
	}
	return out, true, nil
}

// refDeadLetterTables splits the dead-letter tables of branch name of
// t that exist into those nothing but the branch names, to drop with it,
// and those to keep: another ref's ledger names them, or they are main's
// writers' (DeadLetterName, RecordedDeadLetterTable), another branch's
// by its name (BranchDeadLetterName), or the ledger of a rolled-back line
// a published branch began names them. The branch's are
// those the ledger as of head names (none when head is nil: the branch is
// gone) and BranchDeadLetterName's when it holds t's dead letters. why
// says, for each kept, which of those holds it.
func (t *Table) refDeadLetterTables(ctx context.Context, name string, head *int64) (drop []Dropped, kept []string, why map[string][]string, err error) {
	meta := t.tbl.Metadata()
	named := map[string]bool{}
	// A ledger another tool truncated (*TruncatedLedgerError) is read as
	// far as it goes: floe maintain tells the user to drop the branches
	// and tags that need what is gone, so the branch's own is no reason to
	// refuse. A table only its lost part names is left, not dropped.
	var truncated *TruncatedLedgerError
	if head != nil {
		if err := t.branchDeadLetterTables(meta, *head, named); err != nil && !errors.As(err, &truncated) {
			return nil, nil, nil, fmt.Errorf("read the ledger of branch %s of %s for its dead-letter tables: %w", name, t.Name(), err)
		}
	}
	if v := t.tbl.Properties()[PropDroppingPrefix+name]; v != "" {
		// A drop of the branch was cut short: its commit recorded them.
		// Also when the branch was made again since (a new replay onto
		// that name): this drop's commit sets the record anew and its
		// end removes it, so they are dropped now or never (review s61).
		for n := range strings.SplitSeq(v, ",") {
			named[n] = true
		}
	}
	own := maps.Clone(named)
	own[strings.Join(BranchDeadLetterName(t.ident, name), ".")] = true
	// others says, by table name, what else holds a table. Case aside:
	// Glue lowercases table names, so A's is a's there (the replay's
	// refusal of such a branch ignores case too).
	others := map[string][]string{}
	holds := func(n, reason string) {
		k := strings.ToLower(n)
		if !slices.Contains(others[k], reason) {
			others[k] = append(others[k], reason)
		}
	}
	holds(strings.Join(DeadLetterName(t.ident), "."), "it is main's dead-letter table by name")
	if rec := t.RecordedDeadLetterTable(); rec != nil {
		holds(strings.Join(rec, "."), "main's writers write to it (the table records it as its dead-letter table)")
	}
	// Another ref's truncated ledger may name any of them in its lost
	// part: all are kept (dropped by running the drop again once that ref
	// is dropped too), rather than each truncated branch refusing the
	// other's drop.
	var unsure []string
	// By name, so that a table's reasons come in the same order each run.
	refs := maps.Collect(meta.Refs())
	for _, n := range slices.Sorted(maps.Keys(refs)) {
		ref := refs[n]
		if n == name {
			continue
		}
		if ref.SnapshotRefType == table.BranchRef && n != table.MainBranch {
			// A replay onto that branch writes there before its ledger
			// names it (a-b's is a_b's: floe's older replays allowed both).
			holds(strings.Join(BranchDeadLetterName(t.ident, n), "."), fmt.Sprintf("a replay onto branch %s writes to it (that branch's name makes the same table name)", n))
		}
		ledger := fmt.Sprintf("the ledger of %s %s", ref.SnapshotRefType, n)
		if n == table.MainBranch {
			ledger = "main's ledger"
		}
		names := map[string]bool{}
		if err := t.branchDeadLetterTables(meta, ref.SnapshotID, names); err != nil {
			if !errors.As(err, &truncated) {
				return nil, nil, nil, fmt.Errorf("read the ledger of %s %s of %s for its dead-letter tables: %w", ref.SnapshotRefType, n, t.Name(), err)
			}
			unsure = append(unsure, ledger+" is truncated and may name it")
		}
		for dlq := range names {
			holds(dlq, ledger+" names it")
		}
	}
	// A line of main's history that a published branch began and a
	// rollback left (snapshots no ref reaches, which main may be set back
	// to) names its dead-letter tables too: a published branch dropped
	// since, whose table another branch writes (a_b's is a-b's; review
	// s61), or a --dlq-table two replays shared.
	for _, tip := range unreachedTips(meta) {
		published := t.PublishedBranch(tip)
		if published == "" {
			continue
		}
		names := map[string]bool{}
		if err := t.branchDeadLetterTables(meta, tip, names); err != nil && !errors.As(err, &truncated) {
			return nil, nil, nil, fmt.Errorf("read the ledger of snapshot %d of %s, which no ref reaches, for its dead-letter tables: %w", tip, t.Name(), err)
		}
		for dlq := range names {
			holds(dlq, fmt.Sprintf("the ledger of snapshot %d names it: main's history that the publish of branch %s began, which a rollback left and main may be set back to", tip, published))
		}
	}
	drop, kept, why = []Dropped{}, []string{}, map[string][]string{}
	for _, n := range slices.Sorted(maps.Keys(own)) {
		dlq, err := OpenDeadLetters(ctx, t.cat, identOf(n), t.Name(), false)
		switch {
		case errors.Is(err, ErrTableNotFound):
			continue // never created, or dropped
		case err != nil && !named[n]:
			continue // a table of that name that is not t's, and the branch's ledger does not name it
		case err != nil:
			return nil, nil, nil, fmt.Errorf("open dead-letter table %s of branch %s of %s: %w", n, name, t.Name(), err)
		case len(others[strings.ToLower(n)]) > 0 || len(unsure) > 0:
			kept = append(kept, n)
			why[n] = slices.Concat(others[strings.ToLower(n)], unsure)
		default:
			drop = append(drop, Dropped{Table: n, Location: dlq.tbl.Location()})
		}
	}
	return drop, kept, why, nil
}

// CutShortDrops returns, by branch, the dead-letter tables that a drop of
// the branch cut short after its commit recorded and has still to drop
// (PropDroppingPrefix): floe drop --branch run again finishes it.
func (t *Table) CutShortDrops() map[string][]string {
	out := map[string][]string{}
	for k, v := range t.tbl.Properties() {
		if branch, ok := strings.CutPrefix(k, PropDroppingPrefix); ok && branch != "" && v != "" {
			out[branch] = strings.Split(v, ",")
		}
	}
	return out
}

// removeDropping removes the property PropDroppingPrefix+name once the
// dead-letter tables it lists are dropped, if it still holds record, what
// this drop read or wrote: another drop of the branch since (made again
// by a replay) recorded tables of its own, which it, or a run again after
// it was cut short, drops. It removes the records of the tables dropped
// (PropDeadLetterTablePrefix) too: a drop run again once the branch is
// gone commits nothing before it drops them (review s61).
func (t *Table) removeDropping(ctx context.Context, name, record string, dropped []Dropped) error {
	var keys []string
	for _, d := range dropped {
		keys = append(keys, PropDeadLetterTablePrefix+d.Table)
	}
	return retryConflicts(ctx, func(attempt int) error {
		// The table as it is now: dropping the tables took a while.
		if err := t.Refresh(ctx); err != nil {
			return err
		}
		props := t.tbl.Properties()
		var present []string
		if v, ok := props[PropDroppingPrefix+name]; ok && v == record {
			present = append(present, PropDroppingPrefix+name)
		}
		for _, k := range keys {
			if _, ok := props[k]; ok {
				present = append(present, k)
			}
		}
		if len(present) == 0 {
			return nil
		}
		return t.commitProperties(ctx, "remove properties "+strings.Join(present, ", ")+" of", func(txn *table.Transaction) error { return txn.RemoveProperties(present) })
	})
}

// keepRolledBack moves the dead-letter tables drop of branch name to
// kept when the branch was published and the head it made main's is still
// a snapshot of the table: main rolled back below it since (by another
// engine) may be set back, and its commits' dead letters are needed again,
// as floe maintain keeps the files of a rolled-back commit's dead letters
// (keptFiles). Once maintenance expired that snapshot, running the drop
// again drops them. It says so in why.
func (t *Table) keepRolledBack(name string, drop []Dropped, kept []string, why map[string][]string) ([]Dropped, []string) {
	v, ok := t.tbl.Properties()[PropPublished+name]
	if !ok || len(drop) == 0 {
		return drop, kept
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || !t.inHistoryOfLive(id) {
		return drop, kept
	}
	for _, d := range drop {
		kept = append(kept, d.Table)
		why[d.Table] = append(why[d.Table], fmt.Sprintf("branch %s was published and main's history from its publish (snapshot %d) is still in the table: main rolled back below it may be set back to it", name, id))
	}
	slices.Sort(kept)
	return []Dropped{}, kept
}

// inHistoryOfLive reports whether snapshot id is a snapshot of the table
// or an ancestor (archived, expired since) of one: maintenance expires the
// published head while keeping younger snapshots that descend from it
// (main's head rolled back below it, unreferenced but younger than the
// retention), whose ledgers name the branch's dead-letter tables through
// the archive (review s61).
func (t *Table) inHistoryOfLive(id int64) bool {
	meta := t.tbl.Metadata()
	if meta.SnapshotByID(id) != nil {
		return true
	}
	lookup := snapshotIn(meta, t.archive)
	seen := map[int64]bool{}
	for _, s := range meta.Snapshots() {
		for cur := &s; cur != nil && !seen[cur.SnapshotID]; {
			seen[cur.SnapshotID] = true
			if cur.ParentSnapshotID == nil {
				break
			}
			if *cur.ParentSnapshotID == id {
				return true
			}
			cur = lookup(*cur.ParentSnapshotID)
		}
	}
	return false
}

// refList names refs as "main (branch), v1 (tag)".
func refList(refs []Ref) string {
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = fmt.Sprintf("%s (%s)", r.Name, r.Kind)
	}
	if len(parts) == 0 {
		return "none (the table has no snapshot)"
	}
	return strings.Join(parts, ", ")
}
