package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/schema"
)

// Registering a table puts back a catalog's entry for a table whose files
// are in the warehouse: after the catalog's database was lost, to move a
// table to another catalog, or to adopt one a catalog never had.

// ErrNoTableMetadata is wrapped by LatestMetadata's error when the
// location's metadata folder holds no versioned metadata file (or does not
// exist).
var ErrNoTableMetadata = errors.New("no Iceberg table metadata file")

// ErrNotTableMetadata is wrapped by Register's error when the file it is
// given does not parse as Iceberg table metadata.
var ErrNotTableMetadata = errors.New("not Iceberg table metadata")

// LocationMismatchError is Register's refusal of a metadata file that is
// not in the metadata folder of the table location it records: a table
// copied to another bucket or folder. Iceberg metadata names every file
// (manifests, data files) by its full path, so a table registered from the
// copy would read, and its writers write, the original location.
type LocationMismatchError struct {
	MetadataFile  string
	TableLocation string // as the metadata file records it
}

func (e *LocationMismatchError) Error() string {
	return fmt.Sprintf("metadata file %s is not in the metadata folder of the table location it records, %s: "+
		"the table was copied or moved from there, and Iceberg metadata names every file by its full path, so registered from here it would still read (and its writers write) %s; "+
		"register the table at its original location, or rewrite the copy's paths first (Spark's rewrite_table_path procedure)",
		e.MetadataFile, e.TableLocation, e.TableLocation)
}

// AlreadyRegisteredError is Register's refusal of a table name the catalog
// already has. It wraps icecat.ErrTableAlreadyExists, or
// icecat.ErrViewAlreadyExists when the name is a view's.
type AlreadyRegisteredError struct {
	Table string
	// MetadataFile is the metadata file the catalog has for it; empty when
	// it could not be read.
	MetadataFile string
	// View is true when the name is a view's, as a SQL catalog's row
	// tells (iceberg_type VIEW); other catalogs are not asked.
	View bool
}

func (e *AlreadyRegisteredError) Error() string {
	switch {
	case e.View:
		return fmt.Sprintf("%s is the name of a view in the catalog, not of a table", e.Table)
	case e.MetadataFile == "":
		return fmt.Sprintf("table %s is already in the catalog", e.Table)
	}
	return fmt.Sprintf("table %s is already in the catalog, at metadata file %s", e.Table, e.MetadataFile)
}

func (e *AlreadyRegisteredError) Unwrap() error {
	if e.View {
		return icecat.ErrViewAlreadyExists
	}
	return icecat.ErrTableAlreadyExists
}

// MetadataLocation turns a metadata file or table location given by a
// person into the form floe's catalogs record: a local path becomes an
// absolute file:// URI (what a folder warehouse's tables record), a URI
// stays as it is, without a trailing slash.
func MetadataLocation(loc string) (string, error) {
	if strings.Contains(loc, "://") {
		return strings.TrimRight(loc, "/"), nil
	}
	abs, err := filepath.Abs(strings.TrimPrefix(loc, "file:"))
	if err != nil {
		return "", fmt.Errorf("location %s: %w", loc, err)
	}
	return "file://" + abs, nil
}

// IncompleteMetadataError is the refusal of a metadata file whose current
// snapshot's manifest list or manifests are missing: a table that cannot
// be read. A commit whose catalog update failed leaves its metadata file,
// and maintenance later removes the files that file names (they are
// orphans: no version of the table references them) but keeps the
// metadata file; damage leaves one too.
type IncompleteMetadataError struct {
	File       string
	SnapshotID int64
	Missing    []string // the manifest list, or the manifests it lists
}

func (e *IncompleteMetadataError) Error() string {
	return fmt.Sprintf("metadata file %s is not a whole table: the files of its current snapshot %d are missing (%s); "+
		"a commit whose catalog update failed leaves such a file once maintenance removed its files, which the table never referenced",
		e.File, e.SnapshotID, strings.Join(e.Missing, ", "))
}

// TiedMetadataError is LatestMetadata's refusal of several whole metadata
// files of the newest version. At most one is the commit the catalog took;
// the others lost the catalog's swap after writing their file (iceberg-go's
// SQL and Glue catalogs write it first), or were cut short, and their
// writer stopped before removing it. Nothing in the files tells which: a
// losing writer wrote its file later as often as not, so the latest
// last-updated-ms is no answer, and registering a loser drops the
// winner's commit from the table.
type TiedMetadataError struct {
	Version int64
	// Files are the tied files, sorted, with their metadata.
	Files []string
	Metas []table.Metadata
}

func (e *TiedMetadataError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d whole metadata files share the newest version, %d: ", len(e.Files), e.Version)
	for i, f := range e.Files {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f)
		if s := e.Metas[i].CurrentSnapshot(); s != nil {
			fmt.Fprintf(&b, " (current snapshot %d, committed %s)", s.SnapshotID, time.UnixMilli(s.TimestampMs).UTC().Format(time.RFC3339Nano))
		}
	}
	b.WriteString(". At most one is the commit the catalog had, the others lost its swap (or were cut short) after writing their file, and nothing in the files tells which")
	return b.String()
}

// MetadataElsewhereError is LatestMetadata's refusal of a table whose
// metadata file sets write.metadata.path to a folder other than
// location/metadata/: its later metadata files are there. That folder is
// not listed, as other tables' metadata files may be there too, and the
// newest of them need not be this table's. iceberg-go and Java's writers
// put the file of the commit that sets the property in the new folder
// already, so metadata/ shows the property only when a table's writer did
// otherwise; when none did, LatestMetadata cannot tell that the table
// moved its metadata (see LatestMetadata).
type MetadataElsewhereError struct {
	File string // the file that sets it
	Path string // write.metadata.path
}

func (e *MetadataElsewhereError) Error() string {
	return fmt.Sprintf("metadata file %s sets write.metadata.path to %s: the table's later metadata files are there, a folder other tables' metadata may share, which is not searched for the newest",
		e.File, e.Path)
}

// Latest is LatestMetadata's choice.
type Latest struct {
	File string
	// Skipped are the metadata files of higher versions than File's (or
	// than the tied ones'), newest first, which are not whole tables.
	Skipped []*IncompleteMetadataError
}

// LatestMetadata returns the newest whole metadata file of the table at
// location (as MetadataLocation gives it): of the files directly in
// location/metadata/ whose name carries a version (ParseMetadataName), the
// one of the highest version whose current snapshot's manifest list and
// manifests exist. A file of that version or a higher one whose files are
// missing (*IncompleteMetadataError) is skipped and returned in Skipped: a
// commit the catalog never took, whose files maintenance removed, leaves
// one, and registering it would give a table that cannot be read.
// A file read that sets write.metadata.path to another folder is refused
// (*MetadataElsewhereError, returned with Skipped set): the table's newer
// files are there. A table
// whose commit set that property wrote the commit's file in the new
// folder, which is not looked at: the file returned is then the table as
// it was before that commit, and only the caller can know.
// Whole files of equal version are refused (*TiedMetadataError, returned
// with Skipped set): at most one is the catalog's, and nothing tells which;
// a tie of whole and incomplete files is no tie.
//
// Cost: one listing of the metadata folder, and, for each file read from
// the newest down to the first whole one, the file and its current
// snapshot's manifest list (its manifests are looked up in the listing).
func LatestMetadata(ctx context.Context, cat icecat.Catalog, location string) (Latest, error) {
	ctx, fsys, err := storageOf(ctx, cat, location)
	if err != nil {
		return Latest{}, err
	}
	if _, ok := fsys.(iceio.ListableIO); !ok {
		return Latest{}, fmt.Errorf("find the newest metadata file under %s: its storage cannot list files", location)
	}
	dir := location + "/metadata"
	folder, err := listFolder(fsys, dir)
	if err != nil {
		return Latest{}, classify(ctx, cat, err)
	}
	byVersion := map[int64][]string{}
	for name := range folder.names {
		if n, ok := ParseMetadataName(name); ok {
			byVersion[n.Version] = append(byVersion[n.Version], dir+"/"+name)
		}
	}
	if len(byVersion) == 0 {
		return Latest{}, fmt.Errorf("%w in %s/", ErrNoTableMetadata, dir)
	}
	var res Latest
	for _, v := range slices.Backward(slices.Sorted(maps.Keys(byVersion))) {
		tie := &TiedMetadataError{Version: v}
		for _, f := range slices.Sorted(slices.Values(byVersion[v])) {
			meta, err := readMetadata(ctx, fsys, f)
			if err != nil {
				return Latest{}, classify(ctx, cat, err)
			}
			if p := strings.TrimRight(meta.Properties()[table.WriteMetadataPathKey], "/"); p != "" && LocationKey(p) != LocationKey(dir) {
				return res, &MetadataElsewhereError{File: f, Path: p}
			}
			if err := checkWhole(fsys, f, meta, folder); err != nil {
				var inc *IncompleteMetadataError
				if !errors.As(err, &inc) {
					return Latest{}, classify(ctx, cat, err)
				}
				res.Skipped = append(res.Skipped, inc)
				continue
			}
			tie.Files, tie.Metas = append(tie.Files, f), append(tie.Metas, meta)
		}
		switch len(tie.Files) {
		case 0:
		case 1:
			res.File = tie.Files[0]
			return res, nil
		default:
			return res, tie
		}
	}
	return Latest{}, fmt.Errorf("no metadata file in %s/ is a whole table: %w", dir, errors.Join(errs(res.Skipped)...))
}

// errs returns incs as errors.
func errs(incs []*IncompleteMetadataError) []error {
	out := make([]error, len(incs))
	for i, e := range incs {
		out[i] = e
	}
	return out
}

// folderListing is the names of the files directly in a folder.
type folderListing struct {
	dir   string          // LocationKey of the folder
	names map[string]bool // nil when its storage cannot list files
}

// listFolder lists the files directly in dir; a folder that does not
// exist has none.
func listFolder(fsys iceio.IO, dir string) (folderListing, error) {
	out := folderListing{dir: LocationKey(dir)}
	lfs, ok := fsys.(iceio.ListableIO)
	if !ok {
		return out, nil
	}
	out.names = map[string]bool{}
	err := lfs.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && LocationKey(strings.TrimRight(p, "/")) != out.dir:
			// metadata/floe-ledger/ and the like: never a table's metadata.
			return fs.SkipDir
		case !d.IsDir():
			out.names[d.Name()] = true
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return folderListing{}, fmt.Errorf("list %s: %w", dir, err)
	}
	return out, nil
}

// checkWhole returns an *IncompleteMetadataError when the manifest list of
// the current snapshot of meta (metadata file file) or a manifest it lists
// is missing: what reading the table reads first. Files in the listed
// folder (where Iceberg writers put them) are looked up in its listing,
// others are opened. A table of no snapshot is whole.
func checkWhole(fsys iceio.IO, file string, meta table.Metadata, folder folderListing) error {
	s := meta.CurrentSnapshot()
	if s == nil {
		return nil
	}
	exists := func(p string) (bool, error) {
		if key := LocationKey(p); folder.names != nil && path.Dir(key) == folder.dir {
			return folder.names[path.Base(key)], nil
		}
		f, err := fsys.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return true, f.Close()
	}
	incomplete := func(missing ...string) error {
		return &IncompleteMetadataError{File: file, SnapshotID: s.SnapshotID, Missing: missing}
	}
	ok, err := exists(s.ManifestList)
	switch {
	case err != nil:
		return fmt.Errorf("metadata file %s: look for the manifest list of its current snapshot %d: %w", file, s.SnapshotID, err)
	case !ok:
		return incomplete("manifest list " + s.ManifestList)
	}
	manifests, err := s.Manifests(fsys)
	if err != nil {
		return fmt.Errorf("metadata file %s: read the manifest list of its current snapshot %d: %w", file, s.SnapshotID, err)
	}
	var missing []string
	for _, m := range manifests {
		ok, err := exists(m.FilePath())
		if err != nil {
			return fmt.Errorf("metadata file %s: look for manifest %s of its current snapshot %d: %w", file, m.FilePath(), s.SnapshotID, err)
		}
		if !ok {
			missing = append(missing, "manifest "+m.FilePath())
		}
	}
	if len(missing) > 0 {
		return incomplete(missing...)
	}
	return nil
}

// Register registers the table whose metadata file is metadataLocation (as
// MetadataLocation gives it) in cat as ident, and returns it as cat loads
// it. The file is read first: one that is missing (fs.ErrNotExist), is not
// Iceberg table metadata (ErrNotTableMetadata), is not where the table
// location it records keeps its metadata (*LocationMismatchError), or
// whose current snapshot's manifest list or manifests are missing
// (*IncompleteMetadataError, a table that cannot be read) is refused, as
// is a name cat already has (*AlreadyRegisteredError); nothing is written
// then. check, when not nil, is given the metadata after those checks:
// an error from it refuses the registration too (the caller's own rules,
// such as what the table's properties say it is). A SQLite catalog opened
// with Config.CreateOnRegister is created once the file and check passed.
//
// REST and Glue catalogs register through their own RegisterTable, after
// creating a missing namespace. iceberg-go's SQL catalog (SQLite,
// PostgreSQL) has none: Register writes the rows its CreateTable would
// (registerSQL).
func Register(ctx context.Context, cat icecat.Catalog, ident table.Identifier, metadataLocation string, check func(table.Metadata) error) (*table.Table, error) {
	name := strings.Join(ident, ".")
	sctx, fsys, err := storageOf(ctx, cat, metadataLocation)
	if err != nil {
		return nil, err
	}
	meta, err := readMetadata(sctx, fsys, metadataLocation)
	if err != nil {
		return nil, classify(ctx, cat, err)
	}
	if err := checkPlace(metadataLocation, meta); err != nil {
		return nil, err
	}
	folder, err := listFolder(fsys, metadataLocation[:strings.LastIndex(metadataLocation, "/")])
	if err != nil {
		return nil, classify(ctx, cat, err)
	}
	if err := checkWhole(fsys, metadataLocation, meta, folder); err != nil {
		return nil, classify(ctx, cat, err)
	}
	if check != nil {
		if err := check(meta); err != nil {
			return nil, err
		}
	}
	if g, ok := cat.(*guardedCatalog); ok {
		// The checks passed: a catalog left uncreated is made now.
		if err := g.createNow(ctx); err != nil {
			return nil, err
		}
	}
	exists, err := cat.CheckTableExists(ctx, ident)
	if err != nil {
		return nil, fmt.Errorf("look for table %s in the catalog: %w", name, err)
	}
	if exists {
		e := &AlreadyRegisteredError{Table: name}
		if tbl, err := cat.LoadTable(ctx, ident); err == nil {
			e.MetadataFile = tbl.MetadataLocation()
		}
		return nil, e
	}
	inner := cat
	switch c := cat.(type) {
	case *guardedCatalog:
		if _, ok := c.Catalog.(*sqlcat.Catalog); ok {
			if err := c.registerSQL(ctx, ident, metadataLocation, meta.Location()); err != nil {
				return nil, c.explain(ctx, err)
			}
			return c.LoadTable(ctx, ident)
		}
		inner, ctx = c.Catalog, c.storage(ctx)
	case *restCatalog:
		inner = c.Catalog
	}
	r, ok := inner.(registrar)
	if !ok {
		return nil, fmt.Errorf("register table %s: this catalog cannot register a table", name)
	}
	ns := icecat.NamespaceFromIdent(ident)
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, icecat.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("create namespace %s for table %s: %w", strings.Join(ns, "."), name, err)
	}
	if _, err := r.RegisterTable(ctx, ident, metadataLocation); err != nil {
		if errors.Is(err, icecat.ErrTableAlreadyExists) {
			// Registered by someone else since CheckTableExists.
			return nil, &AlreadyRegisteredError{Table: name}
		}
		return nil, classify(ctx, cat, fmt.Errorf("register table %s: %w", name, err))
	}
	// Loaded through cat, so that the table is floe's (own) as every
	// table cat loads.
	return cat.LoadTable(ctx, ident)
}

// registrar is a catalog that registers tables itself: iceberg-go's REST,
// Glue and Hive catalogs.
type registrar interface {
	RegisterTable(ctx context.Context, ident table.Identifier, metadataLocation string) (*table.Table, error)
}

// storageOf opens the storage of loc as cat's tables open theirs, and
// returns it with the context its calls take.
func storageOf(ctx context.Context, cat icecat.Catalog, loc string) (context.Context, iceio.IO, error) {
	props := iceberg.Properties{}
	switch c := cat.(type) {
	case *guardedCatalog:
		ctx, props = c.storage(ctx), c.props
	case *restCatalog:
		ctx, props = c.st.attach(ctx), c.st.props
	}
	fsys, err := iceio.LoadFS(ctx, props, loc)
	if err != nil {
		return ctx, nil, classify(ctx, cat, fmt.Errorf("open the storage of %s: %w", loc, err))
	}
	return ctx, fsys, nil
}

// classify classifies err as cat classifies its own errors, when it does.
func classify(ctx context.Context, cat icecat.Catalog, err error) error {
	if g, ok := cat.(*guardedCatalog); ok {
		return g.explain(ctx, err)
	}
	return err
}

// readMetadata reads and parses the metadata file at loc, telling a file
// that cannot be read (a storage error, fs.ErrNotExist) from one that is
// not table metadata (ErrNotTableMetadata).
func readMetadata(ctx context.Context, fsys iceio.IO, loc string) (table.Metadata, error) {
	// iceberg-go's reader knows the compressed forms; the file is read
	// through readRecorder so that its errors are told from the parser's.
	rec := &readRecorder{IO: fsys}
	tbl, err := table.NewFromLocation(ctx, nil, loc, func(context.Context) (iceio.IO, error) { return rec, nil }, nil)
	switch {
	case err == nil:
		return tbl.Metadata(), nil
	case rec.err == nil:
		return nil, fmt.Errorf("read metadata file %s: %w: %w", loc, ErrNotTableMetadata, err)
	}
	return nil, fmt.Errorf("read metadata file %s: %w", loc, err)
}

// readRecorder is an IO that records the error of ReadFile.
type readRecorder struct {
	iceio.IO
	err error
}

func (r *readRecorder) ReadFile(name string) ([]byte, error) {
	var b []byte
	if rf, ok := r.IO.(iceio.ReadFileIO); ok {
		b, r.err = rf.ReadFile(name)
		return b, r.err
	}
	f, err := r.IO.Open(name)
	if err == nil {
		defer f.Close()
		b, err = io.ReadAll(f)
	}
	r.err = err
	return b, err
}

// checkPlace refuses metadata file loc when it is not in the metadata
// folder of the table it describes: the table's location's metadata/, or
// its write.metadata.path.
func checkPlace(loc string, meta table.Metadata) error {
	dir := strings.TrimRight(meta.Location(), "/") + "/metadata"
	if p := meta.Properties()[table.WriteMetadataPathKey]; p != "" {
		dir = strings.TrimRight(p, "/")
	}
	if LocationKey(path.Dir(LocationKey(loc))) != LocationKey(dir) {
		return &LocationMismatchError{MetadataFile: loc, TableLocation: meta.Location()}
	}
	return nil
}

// registerSQL writes, in one transaction, the rows of iceberg-go's SQL
// catalog (catalog/sql) that make table ident, at metadataLocation, one of
// g's tables: its namespace's row in iceberg_namespace_properties when the
// namespace has none and no table (as CreateNamespace writes it), and the
// table's row in iceberg_tables (as CreateTable writes it). iceberg-go has
// no RegisterTable for this catalog, and writes no row for a metadata file
// it did not write itself. It refuses (*AlreadyRegisteredError) a name the
// catalog has, and a location another of its tables has (two tables
// writing one location corrupt each other).
func (g *guardedCatalog) registerSQL(ctx context.Context, ident table.Identifier, metadataLocation, tableLocation string) error {
	name := strings.Join(ident, ".")
	var dialect schema.Dialect
	switch sqlcat.SupportedDialect(g.props[sqlcat.DialectKey]) {
	case sqlcat.SQLite:
		dialect = sqlitedialect.New()
	case sqlcat.Postgres:
		dialect = pgdialect.New()
	default:
		return fmt.Errorf("register table %s: floe writes the rows of SQLite and PostgreSQL catalogs only, not %s", name, g.props[sqlcat.DialectKey])
	}
	// A connection of its own, on the URI and driver iceberg-go's catalog
	// was opened with: the catalog keeps its connection to itself.
	sqldb, err := sql.Open(g.props[sqlcat.DriverKey], g.props["uri"])
	if err != nil {
		return fmt.Errorf("register table %s: connect to the catalog: %w", name, err)
	}
	db := bun.NewDB(sqldb, dialect)
	defer db.Close()

	ns, tbl := namespaceKey(icecat.NamespaceFromIdent(ident)), icecat.TableNameFromIdent(ident)
	err = db.RunInTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable}, func(ctx context.Context, tx bun.Tx) error {
		// A catalog of iceberg-go's legacy schema (V0) has no
		// iceberg_type column, and iceberg-go reads it without one.
		typed, err := hasTypeColumn(ctx, tx, dialect)
		if err != nil {
			return err
		}
		// A view's row has the name too (iceberg_type VIEW), and
		// iceberg-go's CheckTableExists does not see it.
		kind := "NULL"
		if typed {
			kind = "iceberg_type"
		}
		var typ sql.NullString
		err = tx.QueryRowContext(ctx, "SELECT "+kind+" FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
			g.name, ns, tbl).Scan(&typ)
		switch {
		case err == nil:
			return &AlreadyRegisteredError{Table: name, View: typ.String == sqlcat.ViewType}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("look for the table's row: %w", err)
		}
		var n int
		if other, err := tableAt(ctx, tx, g.name, tableLocation); err != nil || other != "" {
			if err == nil {
				err = fmt.Errorf("location %s is the location of this catalog's table %s: two tables writing one location corrupt each other", tableLocation, other)
			}
			return err
		}
		// A namespace exists while a table or a property row names it
		// (iceberg-go's namespaceExists).
		err = tx.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ?) + "+
			"(SELECT count(*) FROM iceberg_namespace_properties WHERE catalog_name = ? AND namespace = ?)", g.name, ns, g.name, ns).Scan(&n)
		if err != nil {
			return fmt.Errorf("look for namespace %s: %w", ns, err)
		}
		if n == 0 {
			// CreateNamespace's row for a namespace of no properties.
			if _, err := tx.ExecContext(ctx, "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) VALUES (?, ?, 'exists', 'true')",
				g.name, ns); err != nil {
				return fmt.Errorf("create namespace %s: %w", ns, err)
			}
		}
		q := "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location) VALUES (?, ?, ?, ?)"
		args := []any{g.name, ns, tbl, metadataLocation}
		if typed {
			q = "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, iceberg_type) VALUES (?, ?, ?, ?, ?)"
			args = append(args, sqlcat.TableType)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("insert the table's row: %w", err)
		}
		return nil
	})
	if _, ok := errors.AsType[*AlreadyRegisteredError](err); ok {
		return err
	}
	if err != nil {
		return fmt.Errorf("register table %s in catalog %s: %w", name, g.spec, err)
	}
	return nil
}

// tableAt returns the name of the table of catalog name whose metadata is
// under location ("" when none is), as a table's metadata files are unless
// write.metadata.path puts them elsewhere.
func tableAt(ctx context.Context, tx bun.Tx, name, location string) (string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables WHERE catalog_name = ?", name)
	if err != nil {
		return "", fmt.Errorf("look for a table at location %s: %w", location, err)
	}
	defer rows.Close()
	// Compared in Go, without their schemes (LocationKey): SQL's
	// substring functions count characters or bytes depending on the
	// database.
	prefix := LocationKey(strings.TrimRight(location, "/")) + "/"
	for rows.Next() {
		var ns, tbl string
		var loc sql.NullString
		if err := rows.Scan(&ns, &tbl, &loc); err != nil {
			return "", fmt.Errorf("look for a table at location %s: %w", location, err)
		}
		if loc.Valid && strings.HasPrefix(LocationKey(loc.String), prefix) {
			return ns + "." + tbl, nil
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("look for a table at location %s: %w", location, err)
	}
	return "", nil
}

// hasTypeColumn reports whether iceberg_tables has the iceberg_type column
// of iceberg-go's current catalog schema (V1), by the probe iceberg-go
// makes.
func hasTypeColumn(ctx context.Context, tx bun.Tx, dialect schema.Dialect) (bool, error) {
	q := "SELECT count(*) FROM pragma_table_info('iceberg_tables') WHERE name = 'iceberg_type'"
	if _, pg := dialect.(*pgdialect.Dialect); pg {
		q = "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'iceberg_tables' AND column_name = 'iceberg_type'"
	}
	var n int
	if err := tx.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return false, fmt.Errorf("look for the catalog's iceberg_type column: %w", err)
	}
	return n > 0, nil
}

// namespaceKey is how iceberg-go's SQL catalog stores namespace ns: its
// parts joined by dots, unless a part holds a dot or the name holds the
// prefix of its encoded form; then that form (namespaceToString in
// catalog/sql).
func namespaceKey(ns table.Identifier) string {
	const encodedPrefix = "__iceberg_namespace_v1__:"
	joined := strings.Join(ns, ".")
	if !strings.Contains(joined, encodedPrefix) && !slices.ContainsFunc(ns, func(p string) bool { return strings.Contains(p, ".") }) {
		return joined
	}
	b, _ := json.Marshal(ns) // strings only: it cannot fail
	return encodedPrefix + string(b)
}

// A FoundTable is a table folder FindTables found: Name is the
// NAMESPACE.TABLE its place in the warehouse implies, Location the folder.
type FoundTable struct {
	Name, Location string
}

// FindTables lists the tables in a warehouse laid out as floe's SQL
// catalogs (and iceberg-go's Glue catalog) lay it out: a folder
// NAMESPACE.db per namespace, holding a folder per table with a metadata/
// folder in it. Only those levels are listed, never a table's data or
// metadata files. A nested namespace's folder is its dotted name
// (a.b.db), as those catalogs name it. The tables come sorted by name.
func FindTables(ctx context.Context, cat icecat.Catalog, warehouse string) ([]FoundTable, error) {
	ctx, fsys, err := storageOf(ctx, cat, warehouse)
	if err != nil {
		return nil, err
	}
	lfs, ok := fsys.(iceio.ListableIO)
	if !ok {
		return nil, fmt.Errorf("find the tables under %s: its storage cannot list files", warehouse)
	}
	root := LocationKey(warehouse)
	var found []FoundTable
	err = lfs.WalkDir(warehouse, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, ok := strings.CutPrefix(LocationKey(strings.TrimRight(p, "/")), root+"/")
		if !ok || !d.IsDir() {
			return nil // the root itself, or a file
		}
		parts := strings.Split(rel, "/")
		switch {
		case len(parts) == 1 && strings.HasSuffix(parts[0], ".db") && len(parts[0]) > len(".db"):
			return nil // a namespace: look for its tables
		case len(parts) == 2:
			return nil // a table, if it holds metadata/
		case len(parts) == 3 && parts[2] == "metadata":
			found = append(found, FoundTable{Name: strings.TrimSuffix(parts[0], ".db") + "." + parts[1],
				Location: strings.TrimRight(warehouse, "/") + "/" + parts[0] + "/" + parts[1]})
		}
		return fs.SkipDir
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, classify(ctx, cat, fmt.Errorf("find the tables under %s: %w", warehouse, err))
	}
	slices.SortFunc(found, func(x, y FoundTable) int { return strings.Compare(x.Name, y.Name) })
	return found, nil
}
