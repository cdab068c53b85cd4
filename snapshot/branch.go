package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// HasBranch reports whether the table, as last loaded, has a branch of that
// name.
func (t *Table) HasBranch(name string) bool {
	ref, ok := t.refs()[name]
	return ok && ref.SnapshotRefType == table.BranchRef
}

// HasTag reports whether the table, as last loaded, has a tag of that name.
func (t *Table) HasTag(name string) bool {
	ref, ok := t.refs()[name]
	return ok && ref.SnapshotRefType == table.TagRef
}

func (t *Table) refs() map[string]table.SnapshotRef {
	return maps.Collect(t.tbl.Metadata().Refs())
}

// Ref kinds (Ref.Kind): Iceberg's names, as its metadata writes them.
const (
	RefBranch = string(table.BranchRef)
	RefTag    = string(table.TagRef)
)

// Ref is a branch or tag of a table and the snapshot it names.
type Ref struct {
	Name string `json:"name"`
	// Kind is RefBranch or RefTag.
	Kind       string `json:"type"`
	SnapshotID int64  `json:"snapshot_id"`
	// CommittedAt is when its snapshot was committed; nil when the
	// metadata lacks the snapshot (damaged, or expired by another tool).
	CommittedAt *time.Time `json:"committed_at,omitempty"`
}

// Refs returns the table's branches (main first) and tags, as last loaded,
// each sorted by name.
func (t *Table) Refs() []Ref {
	var refs []Ref
	meta := t.tbl.Metadata()
	for name, r := range t.refs() {
		ref := Ref{Name: name, Kind: string(r.SnapshotRefType), SnapshotID: r.SnapshotID}
		if s := meta.SnapshotByID(r.SnapshotID); s != nil {
			at := time.UnixMilli(s.TimestampMs).UTC()
			ref.CommittedAt = &at
		}
		refs = append(refs, ref)
	}
	rank := func(r Ref) int {
		switch {
		case r.Name == table.MainBranch:
			return 0
		case r.Kind == RefBranch:
			return 1
		}
		return 2
	}
	slices.SortFunc(refs, func(a, b Ref) int {
		if c := rank(a) - rank(b); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return refs
}

// CreateEmptyBranch creates branch name as an empty root snapshot: no
// parent, no data files, no ledger. Commits on the branch (a Table opened
// with OpenOptions.Branch) then build content that shares nothing with main
// — a rebuild — and its ledger holds only the branch's own commits, so a
// replay on the branch resumes from the branch, never from main. (iceberg-go
// forks a branch that does not exist yet from main's head, which would carry
// main's files and ledger into the rebuild.)
//
// The commit asserts that the branch still does not exist; creating a branch
// that exists is an error. When another writer's commit (a live sink on
// main) got in first, it reloads and tries again.
func (t *Table) CreateEmptyBranch(ctx context.Context, name string) error {
	if name == "" || name == table.MainBranch {
		return fmt.Errorf("create branch %q of %s: pick a branch name other than %q", name, t.Name(), table.MainBranch)
	}
	return retryConflicts(ctx, func(int) error { return t.createEmptyBranch(ctx, name) })
}

// branchHeads asserts every branch's head as in meta, and main's absence
// when it has none. A snapshot without a parent takes its sequence number
// from meta, and iceberg-go (v0.7.0) adds such a snapshot to the table as
// the catalog has it without checking that number: after another writer's
// commits it would lower the table's last sequence number below theirs,
// metadata every later load refuses as invalid (from a review). A commit
// of a parentless snapshot asserts these, so any snapshot committed since
// meta was read fails it, and the commit is tried again on a fresh table.
func branchHeads(meta table.Metadata) []table.Requirement {
	var reqs []table.Requirement
	for name, head := range branchHeadIDs(meta) {
		reqs = append(reqs, table.AssertRefSnapshotID(name, head))
	}
	return reqs
}

// branchHeadIDs maps main and every other branch of meta to its head
// (nil: main has no snapshot yet).
func branchHeadIDs(meta table.Metadata) map[string]*int64 {
	heads := map[string]*int64{table.MainBranch: nil}
	for name, ref := range meta.Refs() {
		if ref.SnapshotRefType == table.BranchRef {
			heads[name] = &ref.SnapshotID
		}
	}
	return heads
}

// createEmptyBranch is one attempt of CreateEmptyBranch.
func (t *Table) createEmptyBranch(ctx context.Context, name string) error {
	if err := t.Refresh(ctx); err != nil {
		return err
	}
	meta := t.tbl.Metadata()
	for n, ref := range meta.Refs() {
		if n == name && ref.SnapshotRefType == table.TagRef {
			// A tag is read only: a branch of another name is the fix.
			return fmt.Errorf("create branch %s of %s: %s is a tag, which floe reads (floe audit, dead-letters and as-of --branch %s) but never writes: pick another branch name", name, t.Name(), name, name)
		}
		if n == name {
			return fmt.Errorf("create branch %s of %s: a ref of that name exists", name, t.Name())
		}
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("open storage of %s: %w", t.Name(), err)
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return fmt.Errorf("storage of %s is read-only", t.Name())
	}
	locs, err := t.tbl.LocationProvider()
	if err != nil {
		return fmt.Errorf("locations of %s: %w", t.Name(), err)
	}
	id := newSnapshotID(meta)
	seq := meta.LastSequenceNumber() + 1
	path := locs.NewMetadataLocation(fmt.Sprintf("snap-%d-0-%s.avro", id, uuid.New()))
	out, err := wfs.Create(path)
	if err != nil {
		return fmt.Errorf("write manifest list of branch %s: %w", name, err)
	}
	firstRowID := meta.NextRowID()
	err = iceberg.WriteManifestList(meta.Version(), out, id, nil, &seq, firstRowID, nil)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write manifest list of branch %s: %w", name, err)
	}
	schemaID := meta.CurrentSchema().ID
	snap := table.Snapshot{
		SnapshotID:     id,
		SequenceNumber: seq,
		TimestampMs:    time.Now().UnixMilli(),
		ManifestList:   path,
		Summary:        &table.Summary{Operation: table.OpAppend, Properties: iceberg.Properties{}},
		SchemaID:       &schemaID,
	}
	if meta.Version() >= 3 {
		var added int64
		snap.FirstRowID, snap.AddedRows = &firstRowID, &added
	}
	reqs := append([]table.Requirement{
		table.AssertTableUUID(meta.TableUUID()),
		table.AssertRefSnapshotID(name, nil),
	}, branchHeads(meta)...)
	updates := []table.Update{
		table.NewAddSnapshotUpdate(&snap),
		table.NewSetSnapshotRefUpdate(name, id, table.BranchRef, 0, 0, 0),
	}
	if _, _, err := t.cat.CommitTable(ctx, t.ident, reqs, updates); err != nil {
		_ = wfs.Remove(path)
		return fmt.Errorf("create branch %s of %s: %w", name, t.Name(), err)
	}
	return t.Refresh(ctx)
}

// newSnapshotID returns a positive snapshot id the table does not use.
func newSnapshotID(meta table.Metadata) int64 {
	for {
		id := rand.Int64()
		if id > 0 && meta.SnapshotByID(id) == nil {
			return id
		}
	}
}

// PropPublished + BRANCH is the table property that records the branch
// head Publish last made main's head, set in the same commit: running the
// publish of that head again once main has moved on is then known to be a
// repeat (*PublishedBeforeError), whatever snapshots expired since.
const PropPublished = "floe.published."

// PublishedBranch returns the branch whose head Publish last made main's
// head, when snapshot id (of main) is that head or descends from it, or
// is one of its ancestors (main rolled back into the branch's commits: a
// replay's branch begins empty, so they are all its own): the ledger of id
// is then that branch's, with the commits made on main since on top. It
// returns "" when id is in no published head's line (main was never
// replaced by a branch, or was replaced since, or rolled back below it).
func (t *Table) PublishedBranch(id int64) string {
	published := map[int64]string{}
	for k, v := range t.tbl.Properties() {
		if branch, ok := strings.CutPrefix(k, PropPublished); ok {
			if head, err := strconv.ParseInt(v, 10, 64); err == nil {
				published[head] = branch
			}
		}
	}
	if len(published) == 0 {
		return ""
	}
	lookup := snapshotIn(t.tbl.Metadata(), t.archive)
	// ancestry calls fn with from and each of its ancestors, until fn
	// says stop.
	ancestry := func(from int64, fn func(int64) bool) {
		seen := map[int64]bool{}
		for s := lookup(from); s != nil && !seen[s.SnapshotID] && fn(s.SnapshotID); {
			seen[s.SnapshotID] = true
			if s.ParentSnapshotID == nil {
				break
			}
			s = lookup(*s.ParentSnapshotID)
		}
	}
	found := ""
	ancestry(id, func(s int64) bool {
		found = published[s]
		return found == ""
	})
	// Heads in order, so that a snapshot in two lines names one branch
	// whatever the map's order.
	for _, head := range slices.Sorted(maps.Keys(published)) {
		if found != "" {
			break
		}
		ancestry(head, func(s int64) bool {
			if s == id {
				found = published[head]
			}
			return found == ""
		})
	}
	return found
}

// publishAttempts is how many times PublishChecked checks main and tries
// to swap it before it gives up on a main that keeps moving.
const publishAttempts = 5

// ErrPublishRace is matched (errors.Is) when main or the branch kept moving
// while Publish tried to swap them.
var ErrPublishRace = errors.New("publish raced with other commits")

// Publish makes the head of this Table's branch the head of main in one
// catalog commit. Readers of main see either the old content or the
// branch's, never a mix, and main's ledger becomes the branch's. The commit
// asserts that the branch head has not moved; when another commit moved main
// meanwhile it reloads and tries again (main is replaced either way, and a
// live sink on main resumes from the new ledger). It returns main's previous
// head (0 if main had none) and the new one.
func (t *Table) Publish(ctx context.Context) (from, to int64, err error) {
	return t.PublishChecked(ctx, "", nil)
}

// RefExistsError reports a tag or branch name the table already has.
type RefExistsError struct {
	Table, Name string
	// Tag is set when the ref is a tag, else it is a branch.
	Tag bool
}

func (e *RefExistsError) Error() string {
	kind := "branch"
	if e.Tag {
		kind = "tag"
	}
	return fmt.Sprintf("%s already has a %s named %s: choose another name", e.Table, kind, e.Name)
}

// CheckNewRef returns a *RefExistsError when the table, as last loaded,
// has a branch or tag named name ("" has none).
func (t *Table) CheckNewRef(name string) error {
	if name == "" {
		return nil
	}
	if ref, ok := t.refs()[name]; ok {
		return &RefExistsError{Table: t.Name(), Name: name, Tag: ref.SnapshotRefType == table.TagRef}
	}
	return nil
}

// PublishedBeforeError reports a branch whose head is already an ancestor
// of main's head: it was published, and main has moved on since.
// Publishing it again would move main back and drop main's newer commits,
// so PublishChecked does not.
type PublishedBeforeError struct {
	Table, Branch string
	// Head is the branch's head, Main main's head now.
	Head, Main int64
}

func (e *PublishedBeforeError) Error() string {
	return fmt.Sprintf("branch %s of %s was published before: its head %d is an ancestor of main's head %d, which has moved on since; publishing it again would drop main's newer commits, so main is unchanged",
		e.Branch, e.Table, e.Head, e.Main)
}

// PublishChecked is Publish, with check called before every attempt with
// main's head as the attempt asserts it (0: main has none): an error from
// check stops the publish, main unchanged. With tag, the same commit tags
// main's previous head so: the history main leaves stays readable by
// Iceberg engines, and snapshot expiry keeps the tag's snapshot; a ref of
// that name already there is a *RefExistsError, main unchanged. The commit asserts that main
// is still that head, so what check approved is what the branch replaces;
// when main moved meanwhile, the next attempt checks again. A branch whose
// head main already descends from is a *PublishedBeforeError.
func (t *Table) PublishChecked(ctx context.Context, tag string, check func(ctx context.Context, mainID int64) error) (from, to int64, err error) {
	if t.branch == table.MainBranch {
		return 0, 0, fmt.Errorf("publish %s: the table is open on main; publish needs a branch", t.Name())
	}
	if err := t.writable("publish"); err != nil {
		return 0, 0, err
	}
	// hold is the hold on main's writers this publish set, once main moved
	// under an attempt: lifted by the swap, or here when it gives up.
	// A publish that ends without its swap (an error, or main found at
	// the branch's head already: another run swapped it) lifts it too;
	// after the swap the lift finds it gone.
	var hold PublishHold
	swapped := false
	defer func() {
		if hold.Branch != "" && !swapped {
			t.liftPublishHold(ctx, slog.Default(), hold)
		}
	}()
	for attempt := 1; ; attempt++ {
		began := time.Now()
		if err := t.Refresh(ctx); err != nil {
			return 0, 0, err
		}
		head := t.Head()
		if head == nil {
			return 0, 0, fmt.Errorf("publish branch %s of %s: the branch does not exist", t.branch, t.Name())
		}
		meta := t.tbl.Metadata()
		var mainID *int64
		var mainRef table.SnapshotRef
		for n, ref := range meta.Refs() {
			if n == table.MainBranch {
				id := ref.SnapshotID
				mainID, mainRef = &id, ref
			}
		}
		if mainID != nil && *mainID == head.SnapshotID {
			return head.SnapshotID, head.SnapshotID, nil
		}
		// The recorded publish decides only where main's history no
		// longer tells (expired past the archive): a main rolled back
		// below the published head since does not descend from it, and
		// publishing it again drops nothing of main's.
		published := false
		if mainID != nil {
			published = table.IsAncestorOf(*mainID, head.SnapshotID, snapshotIn(meta, t.archive)) ||
				ancestryEnd(meta, t.archive, *mainID) != nil && t.tbl.Properties()[PropPublished+t.branch] == strconv.FormatInt(head.SnapshotID, 10)
		}
		if published {
			return 0, 0, &PublishedBeforeError{Table: t.Name(), Branch: t.branch, Head: head.SnapshotID, Main: *mainID}
		}
		// After the checks above: a publish run again finds the tag its
		// first run made.
		if err := t.CheckNewRef(tag); err != nil {
			return 0, 0, err
		}
		if check != nil {
			var id int64
			if mainID != nil {
				id = *mainID
			}
			if err := check(ctx, id); err != nil {
				return 0, 0, err
			}
		}
		var maxRef, maxSnap int64
		var minKeep int
		if mainRef.MaxRefAgeMs != nil {
			maxRef = *mainRef.MaxRefAgeMs
		}
		if mainRef.MaxSnapshotAgeMs != nil {
			maxSnap = *mainRef.MaxSnapshotAgeMs
		}
		if mainRef.MinSnapshotsToKeep != nil {
			minKeep = *mainRef.MinSnapshotsToKeep
		}
		headID := head.SnapshotID
		reqs := []table.Requirement{
			table.AssertTableUUID(meta.TableUUID()),
			table.AssertRefSnapshotID(table.MainBranch, mainID),
			table.AssertRefSnapshotID(t.branch, &headID),
		}
		updates := []table.Update{table.NewSetSnapshotRefUpdate(table.MainBranch, headID, table.BranchRef, maxRef, maxSnap, minKeep),
			table.NewSetPropertiesUpdate(iceberg.Properties{PropPublished + t.branch: strconv.FormatInt(headID, 10)})}
		if _, ok := meta.Properties()[PropPublishHold]; ok {
			// This publish's hold, or one a publish that died left.
			updates = append(updates, table.NewRemovePropertiesUpdate([]string{PropPublishHold}))
		}
		if tag != "" && mainID != nil {
			reqs = append(reqs, table.AssertRefSnapshotID(tag, nil))
			updates = append(updates, table.NewSetSnapshotRefUpdate(tag, *mainID, table.TagRef, 0, 0, 0))
		}
		_, _, err := t.cat.CommitTable(ctx, t.ident, reqs, updates)
		if err == nil {
			swapped = true
			if mainID != nil {
				from = *mainID
			}
			return from, headID, t.Refresh(ctx)
		}
		if !isConflict(err) || attempt >= publishAttempts {
			if isConflict(err) {
				// Each attempt checks main again first (a replay compares
				// it with the branch): a writer of main that commits more
				// often than that takes wins every time (found by review).
				return 0, 0, fmt.Errorf("publish branch %s of %s as main: main moved before each of %d attempts could swap it, though its floe sinks were asked to hold their commits meanwhile: a writer of main that does not hold (another engine, a floe older than this one) commits more often than the check before the swap takes; stop it while publishing, then run the same command again, main unchanged: %w: %w",
					t.branch, t.Name(), attempt, ErrPublishRace, err)
			}
			return 0, 0, fmt.Errorf("publish branch %s of %s as main: %w", t.branch, t.Name(), err)
		}
		if hold.Branch == "" || time.Until(hold.Until) < time.Since(began) {
			// Main moved while this attempt checked it: its writers hold
			// their next commits until the swap (AwaitPublish), so that a
			// sink flushing more often than the check takes cannot win
			// every attempt. One commit of each may still land: it learns
			// of the hold from its answer.
			// A renewal that fails keeps the hold set before, for the
			// deferred lift. Setting it is a commit too, which a writer
			// committing every few milliseconds can win ten times over:
			// the next attempt asks again (a publish beside such a writer
			// failed at once, where the hold was its way through).
			h, err := t.setPublishHold(ctx, publishHoldFor(time.Since(began)))
			switch {
			case err == nil:
				hold = h
			case !isConflict(err):
				return 0, 0, err
			}
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return 0, 0, err
		}
	}
}

// SetProperties sets table properties in one metadata-only commit. When
// another writer's commit got in first (a live sink), it reloads and
// tries again.
func (t *Table) SetProperties(ctx context.Context, props map[string]string) error {
	if err := t.writable("set properties of"); err != nil {
		return err
	}
	return retryConflicts(ctx, func(attempt int) error {
		if attempt > 1 {
			if err := t.Refresh(ctx); err != nil {
				return err
			}
		}
		return t.setProperties(ctx, props)
	})
}

// retryConflicts makes up to 10 attempts (numbered from 1) while they end
// in a conflict with another writer's commit (isConflict), backing off in
// between, and returns the last attempt's error.
func retryConflicts(ctx context.Context, attempt func(n int) error) error {
	for n := 1; ; n++ {
		err := attempt(n)
		if err == nil || !isConflict(err) || n >= 10 {
			return err
		}
		if err := sleep(ctx, backoff(n)); err != nil {
			return err
		}
	}
}

// setProperties is one attempt of SetProperties.
func (t *Table) setProperties(ctx context.Context, props map[string]string) error {
	return t.commitProperties(ctx, "set properties of", func(txn *table.Transaction) error { return txn.SetProperties(props) })
}

// commitProperties commits, in one metadata-only commit on t as loaded,
// the property changes change makes; what names the change in errors.
func (t *Table) commitProperties(ctx context.Context, what string, change func(*table.Transaction) error) error {
	txn := t.tbl.NewTransaction()
	if err := change(txn); err != nil {
		return fmt.Errorf("%s %s: %w", what, t.Name(), err)
	}
	tbl, err := txn.Commit(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, t.Name(), err)
	}
	if err := t.adoptCommitted(ctx, tbl); err != nil {
		return fmt.Errorf("%s %s: reload after the commit: %w", what, t.Name(), err)
	}
	return nil
}
