package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// TableProperties returns the properties set on every table floe creates. They keep metadata
// small and commits cheap under a steady commit rate: manifests are merged,
// old metadata.json versions are deleted, and iceberg-go does not retry
// conflicts itself (floe's own loop decides between retry and fencing).
func TableProperties() iceberg.Properties {
	return iceberg.Properties{
		table.ManifestMergeEnabledKey:             "true",
		table.MetadataDeleteAfterCommitEnabledKey: "true",
		table.MetadataPreviousVersionsMaxKey:      "20",
		table.CommitNumRetriesKey:                 "0",
		"floe.created-by":                         "floe",
		// Offsets and timestamps are unique per row and values rarely repeat:
		// dictionary encoding would cost CPU and then fall back anyway.
		"write.parquet.dict-encoding-enabled.column." + mapping.ColOffset:    "false",
		"write.parquet.dict-encoding-enabled.column." + mapping.ColTimestamp: "false",
		"write.parquet.dict-encoding-enabled.column." + mapping.ColValue:     "false",
		"write.parquet.dict-encoding-enabled.column." + mapping.ColRawValue:  "false",
		// zstd level 1 compresses Kafka payloads nearly as well as the default
		// level at a fraction of the CPU.
		table.ParquetCompressionLevelKey: "1",
	}
}

// Table is a floe table: an Iceberg table with floe's columns and a ledger,
// written on one branch.
type Table struct {
	cat    catalog.Catalog
	ident  table.Identifier
	branch string
	// onTag is set when branch is a tag (OpenOptions.ReadTag): the table
	// is read only.
	onTag  bool
	tbl    *table.Table
	schema *arrow.Schema
	// archive indexes the ledger entries of expired snapshots, the union
	// of the segments tbl names, loaded with the metadata whenever tbl
	// changes (adopt), so that walking the ledger needs no I/O and always
	// matches tbl. segments are those segments with their indexes, and
	// archiveSig identifies them (segmentsSignature).
	//
	// The archive holds of each entry its ancestry, kind, commit id hash
	// and dead-letter table (archivedEntry), and where its block is;
	// readers fetch blocks as they need them (ledger.go).
	archive    *archiveIndex
	segments   []segment
	archiveSig string
	// archiveCache shares the segments' indexes with the table's other
	// handles in this process; set by Open, never changed.
	archiveCache *ArchiveCache
	// created is set when Open created the table (Created).
	created bool
	// specChange is the change of partition spec SetPartitionBy made to
	// the table while it held snapshots (SpecChange).
	specChange *SpecChange
	// ranges are the ranges files tbl's snapshots reference, read with it
	// (adopt); written is the one this process's last commit wrote.
	ranges  *rangesFiles
	written writtenRanges
	// layout is how the table holds records; schema the Arrow schema of
	// its rows, for the table's current schema (schemaID).
	layout   mapping.Layout
	schemaID int
	// recordLayout is set while layout, a table floe never wrote took
	// from the flags, is to be recorded by the next commit.
	recordLayout bool
	// mode is the table's mode, and key an upsert table's key; both are
	// fixed when the table is created.
	mode mapping.Mode
	key  mapping.UpsertKey
	// summary is the ledger's summary last computed (see Summary).
	summary *summaryCache
	// fsys opens the table's storage as the table last loaded from the
	// catalog does (a method value of it). Tables rebuilt after a commit
	// (adoptCommitted) use it: storage opened with a context of its own
	// keeps that context, and a commit's context ends with the commit; and
	// the catalog's opener may add to each caller's context what the
	// storage needs (floe's catalogs add their one S3 configuration, so
	// that opening the storage builds no new S3 client and transport).
	fsys table.FSysF
	// held is the publish hold this writer last saw (PublishHold).
	held heldState
	// version is set on an earlier version OpenVersion opened.
	version bool
}

// OpenOptions control Open.
type OpenOptions struct {
	// Create creates the namespace and table when missing.
	Create bool
	// Write says the table is opened to be written (Create says so too):
	// an existing table floe never wrote takes Layout, recorded by the
	// first commit.
	Write bool
	// Branch is the branch read and written; empty means main.
	Branch string
	// ReadTag lets Branch name a tag, for a command that only reads: a tag
	// is an immutable ref (its ledger is its snapshot's ancestry), so the
	// Table open on it refuses every commit (OnTag). Writers leave it
	// unset, and a tag's name is then refused as no branch.
	ReadTag bool
	// Properties are set, beside TableProperties(), on a table Create creates
	// (for example mapping.PropFold, or a replay's marker). An existing table keeps
	// its own.
	Properties map[string]string
	// Layout is how the table holds records. A table Create creates gets it
	// (empty modes: the defaults of mapping.RawLayout); an existing table
	// keeps the layout it was created with, and a mode set here that
	// differs from it (or RawValue for a table without them) is a
	// *mapping.LayoutError. A table floe never wrote, opened to be
	// written (Write), takes it.
	Layout mapping.Layout
	// Schema is the schema of a table Create creates; nil means the
	// layout's (mapping.Layout.Schema).
	Schema *iceberg.Schema
	// PartitionBy, when set, is the partition spec the table should have.
	// A table Create creates gets it for the columns it has and records
	// it (mapping.PropPartitionBy), so that the commits that add the
	// other columns add their fields. An existing table is evolved to it
	// when its spec differs (SetPartitionBy). A spec the table's columns
	// cannot take is a *mapping.PartitionByError, before anything is
	// created or changed. Nil leaves an existing table's spec as it is.
	PartitionBy *mapping.PartitionBy
	// Logger receives a change of the partition spec; nil:
	// slog.Default().
	Logger *slog.Logger
	// Mode is the table's mode. A table Create creates gets it (empty:
	// mapping.ModeAppend); an existing table of another mode is a
	// *mapping.ModeError. Empty accepts an existing table's mode.
	Mode mapping.Mode
	// Key is the key of an upsert table (Mode mapping.ModeUpsert): a
	// table Create creates gets it as identifier fields and
	// mapping.PropUpsertKey; an existing table with another key is a
	// *KeyChangeError. Nil accepts an existing table's key.
	Key *mapping.UpsertKey
	// EnvelopeLeftOut says that no envelope was asked for (Layout's is
	// none because a sink's --envelope was left out), so that an existing
	// table floe wrote keeps its own, as it keeps its mode when Mode is
	// empty, and fills in the value and key modes Layout leaves empty
	// with its own: a Debezium table sunk again without --envelope stays
	// one. Unset, Layout's envelope of none is asked for whenever Layout
	// names a value mode. A new table, or one floe never wrote, gets
	// Layout as it is.
	EnvelopeLeftOut bool
	// ArchiveCache, when set, is the cache of ledger archive segment
	// indexes of another handle of the table in this process
	// (Table.ArchiveCache): the new handle reads only the indexes that
	// one does not hold. Nil: a cache of its own.
	ArchiveCache *ArchiveCache
	// Location, when set, is where a table Create creates lives; empty:
	// where the catalog puts it (under its warehouse).
	Location string
}

// ArchiveCache returns the cache of the table's ledger archive segment
// indexes, to open another handle of the table that shares it
// (OpenOptions.ArchiveCache). It may be called while the table is in use.
func (t *Table) ArchiveCache() *ArchiveCache { return t.archiveCache }

// Reopen opens another handle of t's table and branch, for another
// goroutine (a handle is not safe for concurrent use), that shares t's
// archive indexes (ArchiveCache): it reads only what t has not.
func (t *Table) Reopen(ctx context.Context) (*Table, error) {
	opts := OpenOptions{Branch: t.branch, ReadTag: t.onTag, ArchiveCache: t.archiveCache}
	if t.recordLayout {
		// The layout t took from the flags is not recorded yet.
		opts.Layout = t.layout
	}
	return Open(ctx, t.cat, t.ident, opts)
}

// ErrTableNotFound is matched (errors.Is) when Open finds no table of the
// name (or no namespace), and was not asked to create it.
var ErrTableNotFound = errors.New("table not found")

// ErrNoBranch is matched (errors.Is) when Open is asked for a branch the
// table does not have. Open never creates one: iceberg-go would fork it
// from main on its first commit, inheriting main's files and ledger.
var ErrNoBranch = errors.New("no such branch")

// NoBranchError is Open's error for a branch the table does not have
// (errors.Is ErrNoBranch). It lists the table's tags apart from its
// branches: a tag is no branch to write, and a reader that takes tags
// (OpenOptions.ReadTag) is told the name is neither.
type NoBranchError struct {
	Table, Branch string
	// Branches are the table's branches but main, Tags its tags, sorted.
	Branches, Tags []string
	// ReadTag is OpenOptions.ReadTag: the opener would have read a tag.
	ReadTag bool
}

// IsTag reports whether Branch names one of the table's tags: a writer
// asked for it, and creating a branch of that name would fail.
func (e *NoBranchError) IsTag() bool { return slices.Contains(e.Tags, e.Branch) }

func (e *NoBranchError) Error() string {
	what := "branch"
	if e.ReadTag {
		what = "branch or tag"
	}
	have := "it has none yet"
	if len(e.Branches) > 0 {
		have = "its branches: " + strings.Join(e.Branches, ", ")
	}
	if len(e.Tags) > 0 {
		have += "; its tags: " + strings.Join(e.Tags, ", ")
	}
	msg := fmt.Sprintf("table %s has no %s %q (%s)", e.Table, what, e.Branch, have)
	if e.IsTag() {
		// A writer asked: a tag is read only, and its name is taken.
		msg += fmt.Sprintf(": %q is a tag, which floe reads (floe audit, dead-letters and as-of --branch %s) but never writes", e.Branch, e.Branch)
	}
	return msg
}

func (e *NoBranchError) Is(target error) bool { return target == ErrNoBranch }

// notFoundError is Open's error for a missing table: ErrTableNotFound and
// the catalog's own error.
type notFoundError struct {
	table string
	err   error
}

func (e *notFoundError) Error() string {
	// iceberg-go's own errors would only say it again ("table does not
	// exist: [lake orders]").
	if errors.Is(e.err, catalog.ErrNoSuchNamespace) {
		return fmt.Sprintf("table %s does not exist in the catalog, nor does its namespace", e.table)
	}
	return fmt.Sprintf("table %s does not exist in the catalog", e.table)
}
func (e *notFoundError) Unwrap() []error { return []error{ErrTableNotFound, e.err} }

// Open loads the table (creating it when asked) and checks that its schema
// can hold floe rows.
func Open(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts OpenOptions) (*Table, error) {
	name := strings.Join(ident, ".")
	want := opts.Layout
	// A mode left empty is not asked for: an existing table keeps its own,
	// a new one gets the default.
	asked := want
	// A layout not valid in itself is refused after an existing table's
	// own: a Debezium table's envelope taken by a run that left it out
	// makes that run's --key string invalid, where the fix is the table's
	// keys.
	invalid := want.Normalize()
	tbl, err := cat.LoadTable(ctx, ident)
	if invalid != nil && err != nil {
		return nil, invalid
	}
	created := false
	if err != nil && isNoSuchTable(err) && opts.Create {
		if err := opts.CheckNew(); err != nil {
			return nil, err
		}
		tbl, created, err = create(ctx, cat, ident, want, opts)
	}
	if err != nil {
		if isNoSuchTable(err) {
			return nil, &notFoundError{table: name, err: err}
		}
		return nil, fmt.Errorf("load table %s: %w", name, err)
	}
	layout, err := mapping.LayoutOf(tbl.Properties())
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", name, err)
	}
	// A table floe never wrote has no layout to keep: a sink's flags give
	// it one, recorded with its first commit, as a new table's is.
	foreign := neverWritten(tbl)
	recordLayout := foreign && (opts.Create || opts.Write)
	if recordLayout {
		layout = want
	}
	if opts.EnvelopeLeftOut && !foreign {
		// Judged on the table just loaded: a caller that loaded it
		// first to learn its envelope loaded every table twice.
		asked.Envelope = layout.Envelope
		asked.Value = cmp.Or(asked.Value, layout.Value)
		asked.Key = cmp.Or(asked.Key, layout.Key)
		filled := asked
		invalid = filled.Normalize()
	}
	// A table without rows was most likely made by a run with the wrong
	// flags: the refusal says it can be dropped.
	empty := !holdsRows(tbl)
	// The envelope before the mode: it sets the mode (a Debezium table is
	// an upsert table), so a run of another envelope refused for the mode
	// was told to pass a --mode its envelope refuses (a production user's
	// report). An envelope is asked for by a writer that sets the modes:
	// one that leaves them to the table (audit, lookups) reads any.
	if asked.Envelope != layout.Envelope && (asked.Envelope != mapping.EnvelopeNone || asked.Value != "") {
		return nil, &mapping.LayoutError{Table: name, Setting: "envelope", Value: asked.Envelope.String(), Want: layout.Envelope.String(), Empty: empty}
	}
	// Then the mode and key: a run of the wrong mode is refused for it,
	// not for a layout it would then change only to be refused again.
	mode, key, err := checkMode(name, tbl, opts, empty)
	if err != nil {
		return nil, err
	}
	switch {
	case asked.Value != "" && asked.Value != layout.Value:
		return nil, &mapping.LayoutError{Table: name, Setting: "values", Value: string(asked.Value), Want: string(layout.Value), Empty: empty}
	case asked.Key != "" && asked.Key != layout.Key:
		return nil, &mapping.LayoutError{Table: name, Setting: "keys", Value: string(asked.Key), Want: string(layout.Key), Empty: empty}
	case asked.RawValue && !layout.RawValue:
		// A table that keeps raw values keeps them for a writer that did
		// not ask; only asking for what the table lacks is an error.
		return nil, &mapping.LayoutError{Table: name, Setting: mapping.SettingRawValues, Value: "kept", Want: "not kept"}
	case invalid != nil:
		return nil, invalid
	}
	if err := layout.Check(tbl.Schema()); err != nil {
		fix := "sink into a new table, or fix its schema"
		if foreign {
			fix = "floe did not create it: sink into a new table, or fix its schema; docs/sinking.md, Sinking into a table another tool created"
		}
		return nil, fmt.Errorf("table %s cannot hold floe rows: %w (%s)", name, err, fix)
	}
	branch := opts.Branch
	if branch == "" {
		branch = table.MainBranch
	}
	cache := opts.ArchiveCache
	if cache == nil {
		cache = &ArchiveCache{}
	}
	t := &Table{cat: cat, ident: ident, branch: branch, layout: layout, recordLayout: recordLayout, mode: mode, key: key, archiveCache: cache, created: created}
	if err := t.adoptLoaded(ctx, tbl); err != nil {
		return nil, err
	}
	// iceberg-go would fork a missing branch from main on its first commit,
	// inheriting main's files and ledger; a branch must exist (replay
	// creates its branches empty with CreateEmptyBranch).
	if branch != table.MainBranch && !t.HasBranch(branch) {
		if opts.ReadTag && t.HasTag(branch) {
			t.onTag = true
		} else {
			e := &NoBranchError{Table: name, Branch: branch, ReadTag: opts.ReadTag}
			for _, r := range t.Refs() {
				if r.Kind == RefTag {
					e.Tags = append(e.Tags, r.Name)
				} else if r.Name != table.MainBranch {
					e.Branches = append(e.Branches, r.Name)
				}
			}
			return nil, e
		}
	}
	if opts.PartitionBy != nil {
		// A table just created has the spec already; one another process
		// created first, or an existing one, may not.
		if err := t.SetPartitionBy(ctx, *opts.PartitionBy, opts.Logger); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// holdsRows reports whether tbl's head counts a row (Iceberg's
// total-records: an upsert table's rows deleted since still count, so that
// a table said to hold none loses nothing when dropped).
func holdsRows(tbl *table.Table) bool {
	head := tbl.CurrentSnapshot()
	return head != nil && head.Summary != nil && head.Summary.Properties["total-records"] != "0"
}

// HoldsRows reports whether the table, as last loaded, holds rows on main
// (holdsRows): floe drop would lose them, so advice that names it is for a
// table that holds none.
func (t *Table) HoldsRows() bool { return holdsRows(t.tbl) }

// neverWritten reports whether floe never wrote tbl: another tool created
// it (no floe property) and no snapshot is a floe commit.
func neverWritten(tbl *table.Table) bool {
	for k := range tbl.Properties() {
		if strings.HasPrefix(k, "floe.") {
			return false
		}
	}
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties) {
			return false
		}
	}
	return true
}

// checkNewIdent reports why floe should not create a table named ident, or
// nil. catalog.ParseIdent takes any name a catalog can hold, so that tables other
// engines created open; a table floe creates gets a plain name instead:
// NAMESPACE.TABLE with one namespace level (lake.a.b would create the
// nested namespace lake.a, which Glue and most SQL engines cannot name),
// each part of ASCII letters, digits, _ and - (a space or other character
// is escaped in the table's file paths: lake.db/my%20table).
func checkNewIdent(ident table.Identifier) error {
	name := strings.Join(ident, ".")
	if len(ident) != 2 {
		return fmt.Errorf("table %q: floe creates tables as NAMESPACE.TABLE, with one namespace level (this would create the nested namespace %s); for example %s.%s",
			name, strings.Join(ident[:len(ident)-1], "."), ident[0], strings.Join(ident[1:], "_"))
	}
	notPlain := func(r rune) bool {
		return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}
	for _, p := range ident {
		if i := strings.IndexFunc(p, notPlain); i >= 0 {
			r, _ := utf8.DecodeRuneInString(p[i:])
			plain := func(p string) string {
				return strings.Map(func(r rune) rune {
					if notPlain(r) {
						return '_'
					}
					return r
				}, p)
			}
			return fmt.Errorf("table %q: a new table's namespace and name take letters, digits, _ and - only (%q holds %q, which its file paths would escape); for example %s.%s",
				name, p, r, plain(ident[0]), plain(ident[1]))
		}
	}
	return nil
}

// create creates the table of layout and opts (its schema, nil: the
// layout's; its properties, mode and key; partitioned by opts.PartitionBy,
// nil: unpartitioned). created is false when another process created it
// first.
func create(ctx context.Context, cat catalog.Catalog, ident table.Identifier, layout mapping.Layout, opts OpenOptions) (_ *table.Table, created bool, _ error) {
	if err := checkNewIdent(ident); err != nil {
		return nil, false, err
	}
	ns := catalog.NamespaceFromIdent(ident)
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, false, fmt.Errorf("create namespace %s: %w", strings.Join(ns, "."), err)
	}
	props := TableProperties()
	if layout != mapping.RawLayout {
		// A raw table records nothing: tables of floes before typed
		// tables look the same.
		maps.Copy(props, layout.Properties())
	}
	maps.Copy(props, opts.Properties)
	schema := opts.Schema
	if schema == nil {
		schema = layout.Schema()
	}
	schema, err := withMode(props, schema, opts)
	if err != nil {
		return nil, false, err
	}
	copts := []catalog.CreateTableOpt{catalog.WithProperties(props)}
	if opts.Location != "" {
		copts = append(copts, catalog.WithLocation(opts.Location))
	}
	if pb := opts.PartitionBy; pb != nil {
		spec, err := newSpec(schema, *pb)
		if err != nil {
			return nil, false, err
		}
		props[mapping.PropPartitionBy] = pb.String()
		copts = append(copts, catalog.WithPartitionSpec(spec))
	}
	tbl, err := cat.CreateTable(ctx, ident, schema, copts...)
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		// Another floe process created it first.
		tbl, err = cat.LoadTable(ctx, ident)
		return tbl, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("create table %s: %w", strings.Join(ident, "."), err)
	}
	// Said, as a new catalog is: a typo in a table's name makes a new
	// table, which a user must be able to see.
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	name := strings.Join(ident, ".")
	log.Info("created a new table", "table", name, "location", tbl.Location())
	for other, err := range Tables(ctx, cat) {
		if err != nil {
			break
		}
		if o := strings.Join(other, "."); o != name && strings.EqualFold(o, name) {
			// A mistyped --table made a second table silently (from a
			// new-user run).
			log.Warn("created a table whose name differs from another's only in case: engines that fold names to lower case (Spark, Trino, Hive catalogs) take them for one; if --table was mistyped, floe drop removes the new one",
				"table", name, "other", o)
		}
	}
	return tbl, true, nil
}

// Created reports whether Open created the table (OpenOptions.Create):
// a run's summary says so, for a misspelt --table makes a new table.
func (t *Table) Created() bool { return t.created }

// Name is the table's NAMESPACE.TABLE name.
func (t *Table) Name() string { return strings.Join(t.ident, ".") }

// Identifier is the table's catalog identifier.
func (t *Table) Identifier() table.Identifier { return t.ident }

// Branch is the branch this Table reads and writes, or the tag it reads
// (OnTag).
func (t *Table) Branch() string { return t.branch }

// OnTag reports whether the Table was opened on a tag (OpenOptions.ReadTag):
// it reads the tag's snapshot and refuses to commit.
func (t *Table) OnTag() bool { return t.onTag }

// writable returns an error when the Table is open on a tag: a tag is an
// immutable ref, and iceberg-go would commit onto it as if a branch.
func (t *Table) writable(what string) error {
	if t.onTag {
		return fmt.Errorf("%s %s: %q is a tag, which floe only reads; write onto a branch (floe replay --branch NEW)", what, t.Name(), t.branch)
	}
	return nil
}

// Iceberg returns the underlying iceberg-go table as last loaded.
func (t *Table) Iceberg() *table.Table { return t.tbl }

// FloeWrote reports whether floe wrote the table: it has a floe property
// or a floe commit (another tool's table has neither).
func (t *Table) FloeWrote() bool { return !neverWritten(t.tbl) }

// Catalog returns the catalog the table lives in.
func (t *Table) Catalog() catalog.Catalog { return t.cat }

// ArrowSchema is the schema of the batches Commit accepts, for the table's
// schema as last loaded.
func (t *Table) ArrowSchema() *arrow.Schema { return t.schema }

// Layout is how the table holds records.
func (t *Table) Layout() mapping.Layout { return t.layout }

// Mode is the table's mode (mapping.PropMode).
func (t *Table) Mode() mapping.Mode { return t.mode }

// UpsertKey is the key of an upsert table (mapping.PropUpsertKey); the
// zero key for a table of another mode.
func (t *Table) UpsertKey() mapping.UpsertKey { return t.key }

// Refresh reloads the table's metadata from the catalog. A table of the
// same name that is another table (dropped and created again since it was
// loaded) is a *TableReplacedError, and nothing is adopted.
func (t *Table) Refresh(ctx context.Context) error {
	tbl, err := t.cat.LoadTable(ctx, t.ident)
	if err != nil {
		return fmt.Errorf("reload table %s: %w", t.Name(), err)
	}
	if was, now := t.tbl.Metadata().TableUUID(), tbl.Metadata().TableUUID(); was != now {
		return &TableReplacedError{Table: t.Name(), Was: was.String(), Now: now.String()}
	}
	return t.adoptLoaded(ctx, tbl)
}

// TableReplacedError is returned when a table loaded again is another
// table under the same name (its UUID changed): it was dropped and created
// again (floe drop, another tool) while this process had it open. A writer
// that adopted it would commit into a table that knows nothing of its
// ranges, as if the new table had begun there (found by review).
type TableReplacedError struct {
	Table    string
	Was, Now string
}

func (e *TableReplacedError) Error() string {
	return fmt.Sprintf("table %s was dropped and created again while this process had it open (its UUID was %s, now %s): this process commits nothing more to it; stop it, and start it again only if the new table is meant to take what it writes",
		e.Table, e.Was, e.Now)
}

// adoptLoaded adopts a table loaded from the catalog.
func (t *Table) adoptLoaded(ctx context.Context, tbl *table.Table) error {
	if err := t.adopt(ctx, tbl); err != nil {
		return err
	}
	t.fsys = tbl.FS
	return nil
}

// adopt makes tbl the table's metadata, loading the ledger archive
// segments it names that are not loaded already and the ranges files its
// snapshots reference that are not read already. Every assignment of t.tbl
// goes through adopt: metadata returned by a commit may name segments
// another process wrote (a floe maintain that expired snapshots without
// moving the branch), and reading its ledger with the archive loaded
// before would find the expired parents missing. On error t.tbl and the
// archive are left as they were.
//
// A segment that no longer exists was merged into another after tbl was
// loaded: the run that merged it deletes it after its commit. A ranges
// file that no longer exists may have been collected after an expiry
// archived its snapshot. The table is then reloaded once; the segments it
// names hold every entry of the deleted one. A ranges file still missing
// is kept as the error of the ledger through its snapshot
// (*mapping.RangesFileError), so that the table can still be opened, and
// its ledger is never read without the file.
func (t *Table) adopt(ctx context.Context, tbl *table.Table) error {
	if t.schema == nil || tbl.Schema().ID != t.schemaID {
		sc, err := t.layout.ArrowSchema(tbl.Schema())
		if err != nil {
			return fmt.Errorf("table %s: %w", t.Name(), err)
		}
		t.schema, t.schemaID = sc, tbl.Schema().ID
	}
	for reloaded := false; ; reloaded = true {
		named := namedSegments(tbl.Properties())
		sig := segmentsSignature(named)
		segs, a := t.segments, t.archive
		var err error
		if sig != t.archiveSig {
			segs, a, err = readSegments(ctx, tbl, t.Name(), named, t.segments, t.archive, t.archiveCache)
		}
		if err == nil {
			rf, gone := t.readRangesFiles(ctx, tbl)
			if !gone || reloaded {
				if t.mode == mapping.ModeUpsert {
					// A key of struct fields is named by the commit of its
					// first record.
					if t.key, err = mapping.UpsertKeyOf(tbl.Properties()); err != nil {
						return fmt.Errorf("table %s: %w", t.Name(), err)
					}
				}
				t.tbl, t.archive, t.segments, t.archiveSig, t.ranges = tbl, a, segs, sig, rf
				return nil
			}
			err = fs.ErrNotExist // a ranges file: a reload tells whether it was collected
		} else if reloaded || !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		fresh, lerr := t.cat.LoadTable(ctx, t.ident)
		if lerr != nil {
			return fmt.Errorf("reload table %s after a file of its ledger was not found: %w (reading it: %w)", t.Name(), lerr, err)
		}
		tbl = fresh
	}
}

// adoptCommitted adopts the table a commit of this process returned.
//
// iceberg-go builds that table's metadata from the metadata it committed
// on, and the result keeps its predecessor reachable: adopting it commit
// after commit keeps every earlier version of the metadata alive, and a
// long-running sink's heap grows with the square of its commits (190 MB at
// 300 commits). A copy built from it (MetadataBuilderFromBase, which
// materialises the snapshot list) holds only itself, at a fraction of a
// millisecond for 600 snapshots (a JSON round trip took 126 ms). Its
// storage is opened the way the table last loaded from the catalog opens
// it (t.fsys), with each caller's context.
func (t *Table) adoptCommitted(ctx context.Context, tbl *table.Table) error {
	mb, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		return fmt.Errorf("copy the metadata of %s: %w", t.Name(), err)
	}
	meta, err := mb.Build()
	if err != nil {
		return fmt.Errorf("copy the metadata of %s: %w", t.Name(), err)
	}
	return t.adopt(ctx, table.New(t.ident, meta, tbl.MetadataLocation(), t.fsys, t.cat))
}

// Head returns the snapshot at the head of the table's branch, or nil when
// the branch has none yet.
func (t *Table) Head() *table.Snapshot {
	return t.tbl.Metadata().SnapshotByName(t.branch)
}

// ErrTruncatedLedger is matched (errors.Is) by a *TruncatedLedgerError.
var ErrTruncatedLedger = errors.New("truncated ledger")

// TruncatedLedgerError reports a snapshot whose ancestry is incomplete: a
// parent was expired without being archived (expired by another tool than
// Table.Maintain, or the metadata is damaged), so the ledger ranges it
// carried are gone. A writer must not trust such a ledger for resuming: a
// partition whose ranges were all in expired snapshots would look unsunk
// and be written again. Table.Maintain repairs the ledger when an
// interrupted maintenance left the missing entries in the table's other
// archive files, and otherwise names the snapshots whose entries are gone
// (then only a replay into a new table gives a complete ledger).
type TruncatedLedgerError struct {
	// Table is the table's name when known (NAMESPACE.TABLE).
	Table      string
	SnapshotID int64
	// Oldest is the oldest snapshot still reachable; its parent is missing.
	Oldest int64
}

func (e *TruncatedLedgerError) Error() string {
	return fmt.Sprintf("the history of snapshot %d is incomplete: the parent of snapshot %d was expired and is not in the ledger archive the table names, so floe cannot tell which offsets the table already holds",
		e.SnapshotID, e.Oldest)
}

func (e *TruncatedLedgerError) Is(target error) bool { return target == ErrTruncatedLedger }

// ancestry returns the ancestors of a snapshot, itself first, walked
// through the live snapshots of meta and the archived ones, or a
// *TruncatedLedgerError when the walk ends at a snapshot whose parent is
// neither.
func ancestry(meta table.Metadata, archive archivedSnapshots, snapshotID int64) ([]table.Snapshot, *TruncatedLedgerError) {
	ancestors, complete := table.AncestorsOfChecked(snapshotID, snapshotIn(meta, archive))
	if !complete {
		oldest := snapshotID
		if len(ancestors) > 0 {
			oldest = ancestors[len(ancestors)-1].SnapshotID
		}
		return nil, &TruncatedLedgerError{SnapshotID: snapshotID, Oldest: oldest}
	}
	return ancestors, nil
}

// snapshotIn looks snapshots up among the live ones of meta, then the
// archived ones.
func snapshotIn(meta table.Metadata, archive archivedSnapshots) table.SnapshotLookup {
	return func(id int64) *table.Snapshot {
		if s := meta.SnapshotByID(id); s != nil {
			return s
		}
		return archive.snapshot(id)
	}
}

// ancestryEnd is ancestry's verdict without the ancestors: a
// *TruncatedLedgerError, or nil. Below the live snapshots it takes the
// archive's memoized walk (archiveIndex.tail), so that a writer's
// maintenance, which asks at every run of every branch and tag, does not
// walk the whole history each time (the soak: a tenth of a sink's CPU at
// 30,000 commits, growing with them).
func ancestryEnd(meta table.Metadata, archive archivedSnapshots, snapshotID int64) *TruncatedLedgerError {
	id, oldest, done, _ := liveAncestors(meta, snapshotID, nil)
	if done {
		return nil
	}
	if ix, ok := archive.(*archiveIndex); ok {
		if t, pure := ix.tail(meta, id); pure {
			if t.complete {
				return nil
			}
			if t.found {
				oldest = t.oldest
			}
			return &TruncatedLedgerError{SnapshotID: snapshotID, Oldest: oldest}
		}
	}
	_, te := ancestry(meta, archive, snapshotID)
	return te
}

// liveAncestors walks snapshotID's ancestry while its snapshots are live
// in meta, calling visit (when not nil) with each, and returns the first
// one that is not (id: archived, or missing; or live, when the walk went
// round a cycle of parents, which callers' walks of the rest meet), the
// oldest live one found (snapshotID when none), or done when the walk
// reached the table's first snapshot; it stops at visit's first error.
func liveAncestors(meta table.Metadata, snapshotID int64, visit func(*table.Snapshot) error) (id, oldest int64, done bool, err error) {
	id, oldest = snapshotID, snapshotID
	for steps := len(meta.Snapshots()); steps >= 0; steps-- {
		s := meta.SnapshotByID(id)
		if s == nil {
			return id, oldest, false, nil
		}
		if visit != nil {
			if err := visit(s); err != nil {
				return id, oldest, false, err
			}
		}
		oldest = id
		if s.ParentSnapshotID == nil {
			return id, oldest, true, nil
		}
		id = *s.ParentSnapshotID
	}
	return id, oldest, false, nil
}

// isNoSuchTable reports whether err is the catalog's answer that the table
// (or its namespace) does not exist, which Open creates when asked to.
func isNoSuchTable(err error) bool {
	return errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace)
}
