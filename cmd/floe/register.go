package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

func newRegisterCmd() *cobra.Command {
	var (
		f                tableFlags
		metadataLocation string
		location         string
		all              bool
		asJSON           bool
	)
	cmd := &cobra.Command{
		Use:   "register (--table NAMESPACE.TABLE (--metadata-location FILE | --location TABLE_LOCATION) | --all --location WAREHOUSE) [--json]",
		Short: "Register in a catalog a table whose files are in the warehouse",
		Long: `Register a table that is in the warehouse but not in the catalog: after the catalog's database
was lost (the bucket or folder kept), to move a table to another catalog, or to adopt a table
another catalog wrote. The table is registered as its metadata file has it, ledger included, so
floe audit, floe status and a sink resuming from the ledger work on it at once.

--metadata-location names the metadata file to register, NNNNN-UUID.metadata.json in the
table's metadata/ folder. --location names the table's location instead (the folder holding
metadata/ and data/), and the newest whole metadata file there is taken, and printed: the
highest version number (the NNNNN of the name, or N of vN.metadata.json) whose current
snapshot's manifest list and manifests exist. A file whose are missing is skipped, with a
warning naming it and them: a commit whose catalog update failed leaves one once floe maintain
--remove-orphans removed its files. Two whole files of the newest version are refused, each
named with its current snapshot and what its last commit sank: a commit that lost the
catalog's swap, or was cut short, after writing its file leaves one, nothing in the files
tells which one the catalog had, and registering one leaves out the other's commit (a sink
reads its records again only while the log holds them). Give the catalog's with
--metadata-location. --location looks in metadata/ only: a table whose write.metadata.path
names another folder keeps its metadata files there from the commit that set it, which
--location does not see (it registers the table as it was before that commit, or refuses when
a file it reads names the folder); give its newest file there with --metadata-location.

The file must parse as Iceberg table metadata, name a manifest list and manifests that exist
(for its current snapshot), and lie in the metadata folder of the location it records: a table
copied to another bucket or folder is refused, as its metadata still names the old location's
files. A table already in the catalog is refused, as is the name of a SQL catalog's view. With
a SQLite or PostgreSQL catalog, floe writes the catalog's row itself (iceberg-go has no
registration for them), creating the catalog and the namespace when missing (a SQLite file
only for a registration that is not refused); REST and Glue catalogs register it themselves.
It names the table's dead-letter tables (TABLE_dlq, beside it) that the catalog lacks:
register them too. Stop every other writer of the table first.

--all --location WAREHOUSE registers every table of a warehouse laid out as floe's SQLite and
PostgreSQL catalogs (and Glue) lay it out, NAMESPACE.db/TABLE/metadata/, each as NAMESPACE.TABLE
from its newest whole metadata file, as --location does for one table: after losing a catalog
of many tables (a sink of --topic-regex into lake.{topic}), with their dead-letter tables. A
table the catalog already has from that file is left as it is; one that cannot be registered
(a tie of metadata files, a name the catalog has from another file) is named with why, the
others are registered all the same, and the exit code is 2. Only the warehouse's namespace and
table folders are listed, never the tables' files.`,
		Example: `  floe register --table lake.orders --location s3://lake/warehouse/lake.db/orders
  floe register --table lake.orders --metadata-location s3://lake/warehouse/lake.db/orders/metadata/00012-8d2c....metadata.json
  floe register --all --location s3://lake/warehouse --catalog "$FLOE_CATALOG"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			switch {
			case all && (f.table != "" || metadataLocation != ""):
				return errors.New("--all registers every table under --location WAREHOUSE, each under the name its folder gives: leave out --table and --metadata-location, or leave out --all to register one table")
			case all && location == "":
				return errors.New("--all needs --location WAREHOUSE, the folder holding the NAMESPACE.db folders of the tables to register")
			case all:
			case metadataLocation == "" && location == "":
				return errors.New("missing --metadata-location FILE, the table's metadata file, or --location TABLE_LOCATION, whose newest metadata file is taken")
			case metadataLocation != "" && location != "":
				return errors.New("--metadata-location and --location both name the metadata file to register: give one")
			}
			if f.table == "" && !all {
				return errMissingTable(ctx)
			}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			// The catalog is created when missing: after losing its
			// database, registering tables is how it is made again. Only
			// by a registration that passes its checks: a refused one
			// left a new, empty SQLite file, which later commands then
			// read as an empty catalog instead of saying it is missing.
			cfg.CreateOnRegister = true
			cat, err := catalog.Open(ctx, cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			// The commands it advises read this run's catalog: one given
			// on the command line (a new catalog, after losing the old)
			// is not the one those commands find without it (a new-user
			// run audited the old catalog's table as advised). Its value
			// is not printed: a PostgreSQL URI holds a password.
			withCatalog := ""
			if cmd.Flags().Changed("catalog") && sourcesOf(ctx)["catalog"] == "" {
				withCatalog = ", with this run's --catalog"
			}
			if all {
				return registerAll(ctx, cat, out, cmd.ErrOrStderr(), location, withCatalog, asJSON)
			}
			r, err := registerTable(ctx, cat, out, f.table, location, metadataLocation, asJSON)
			if err != nil {
				return err
			}
			return r.print(ctx, cat, out, withCatalog, asJSON)
		},
	}
	flags := cmd.Flags()
	f.register(flags)
	flags.StringVar(&metadataLocation, "metadata-location", "", "the table's metadata file to register: a path, file:// or s3:// URI of NNNNN-UUID.metadata.json in its metadata/ folder")
	flags.StringVar(&location, "location", "", "the table's location (the folder holding metadata/ and data/): its newest metadata file is registered; with --all, the warehouse folder holding the NAMESPACE.db folders")
	flags.BoolVar(&all, "all", false, "register every table under --location WAREHOUSE (NAMESPACE.db/TABLE folders), each as NAMESPACE.TABLE from its newest whole metadata file")
	flags.BoolVar(&asJSON, "json", false, "print JSON instead of text: table, metadata_location, location, snapshots, dead_letter_tables_missing (a line per table; with --all, tables refused have error instead)")
	return cmd
}

// registration is a table floe register registered, or found registered
// from the same metadata file (already).
type registration struct {
	name, file string
	already    bool
	tbl        *table.Table
	t          *snapshot.Table
}

// registerTable registers table name from metadataLocation, or from the
// newest whole metadata file under location.
func registerTable(ctx context.Context, cat icecat.Catalog, out io.Writer, name, location, metadataLocation string, quiet bool) (registration, error) {
	ident, err := catalog.ParseIdent(name)
	if err != nil {
		return registration{}, err
	}
	file, newest, err := chooseMetadata(ctx, cat, location, metadataLocation, out, quiet)
	if err != nil {
		return registration{}, err
	}
	r := registration{name: name, file: file}
	r.tbl, err = catalog.Register(ctx, cat, ident, file, func(meta table.Metadata) error { return checkRegisteredName(name, meta) })
	if already, ok := errors.AsType[*catalog.AlreadyRegisteredError](err); ok && !already.View && catalog.LocationKey(already.MetadataFile) == catalog.LocationKey(file) {
		// Run again (a recovery script's rerun): the catalog has the
		// table from this very file.
		fmt.Fprintf(out, "%s is already registered from this metadata file: nothing to do\n", name)
		r.already = true
		if r.tbl, err = cat.LoadTable(ctx, ident); err != nil {
			return registration{}, fmt.Errorf("load %s: %w", name, err)
		}
	} else if err != nil {
		return registration{}, registerHint(err, name)
	}
	if newest != "" {
		// An older metadata file is the table as it was: allowed (the
		// newest may be damaged), but said.
		slog.Warn("a newer metadata file is beside the one registered: the table is registered as it was then, without the commits after it (a sink re-reads their records from the log, while the log holds them)",
			"registered", path.Base(file), "newest", path.Base(newest))
	}
	if r.t, err = snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{}); err != nil {
		return registration{}, fmt.Errorf("registered %s, but cannot open it: %w", name, err)
	}
	return r, nil
}

// print says what was registered, which of its dead-letter tables the
// catalog lacks, and how to check it; withCatalog follows the commands it
// advises.
func (r registration) print(ctx context.Context, cat icecat.Catalog, out io.Writer, withCatalog string, asJSON bool) error {
	missing, err := missingDeadLetterTables(ctx, cat, r.t)
	if err != nil {
		return fmt.Errorf("registered %s: %w", r.name, err)
	}
	if asJSON {
		printJSONLine(out, map[string]any{"table": r.name, "metadata_location": r.file, "location": r.tbl.Location(),
			"snapshots": len(r.tbl.Metadata().Snapshots()), "dead_letter_tables_missing": missing})
		return nil
	}
	done := "registered " // what this run did, before the table's line
	if r.already {
		done = ""
	}
	fmt.Fprintf(out, "%s%s: %s (%s", done, r.name, r.file, plural(len(r.tbl.Metadata().Snapshots()), "snapshot"))
	if h := r.t.Head(); h != nil {
		fmt.Fprintf(out, ", last committed %s", time.UnixMilli(h.TimestampMs).UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(out, ")")
	for _, m := range missing {
		fmt.Fprintf(out, "its dead-letter table %s is not in this catalog: register it too (floe register --table %s --location ...%s; by default beside it, %s)\n",
			m, m, withCatalog, parentOf(r.tbl.Location())+"/"+m[strings.LastIndex(m, ".")+1:])
	}
	if of := r.t.Iceberg().Properties()[snapshot.PropDeadLettersOf]; of != "" {
		// A dead-letter table has no ledger of its own to audit.
		fmt.Fprintf(out, "check it with its data table: floe audit --table %s --deep%s\n", of, withCatalog)
		return nil
	}
	fmt.Fprintf(out, "check it with: floe audit --table %s%s\n", r.name, withCatalog)
	return nil
}

// registerAll registers every table FindTables finds under warehouse,
// going on past the ones it cannot register, which it names at the end;
// what each registered table lacks is said once all are registered, as
// its dead-letter tables are usually among them.
func registerAll(ctx context.Context, cat icecat.Catalog, out, errOut io.Writer, warehouse, withCatalog string, asJSON bool) error {
	loc, err := catalog.MetadataLocation(warehouse)
	if err != nil {
		return err
	}
	found, err := catalog.FindTables(ctx, cat, loc)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return fmt.Errorf("no table folder under %s: --all looks for NAMESPACE.db/TABLE/metadata/ folders in the warehouse folder --location names (check it; a table elsewhere is registered with --table and --location)", loc)
	}
	var done []registration
	var refused []string
	for _, ft := range found {
		r, err := registerTable(ctx, cat, out, ft.Name, ft.Location, "", asJSON)
		if err != nil {
			if asJSON {
				printJSONLine(out, map[string]any{"table": ft.Name, "location": ft.Location, "error": err.Error()})
			}
			fmt.Fprintf(errOut, "floe: %s not registered: %v\n", ft.Name, err)
			refused = append(refused, ft.Name)
			continue
		}
		done = append(done, r)
	}
	for _, r := range done {
		if err := r.print(ctx, cat, out, withCatalog, asJSON); err != nil {
			return err
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%d of %d tables under %s not registered (%s), each for the reason above; the other %d are registered",
			len(refused), len(found), loc, strings.Join(refused, ", "), len(done))
	}
	return nil
}

// chooseMetadata returns the metadata file to register: the newest whole
// one under location when it is given (saying which, and which files it
// skipped), else metadataLocation, with the newest whole file beside it
// when that is another.
func chooseMetadata(ctx context.Context, cat icecat.Catalog, location, metadataLocation string, out io.Writer, quiet bool) (file, newer string, err error) {
	if location != "" {
		loc, err := catalog.MetadataLocation(location)
		if err != nil {
			return "", "", err
		}
		latest, err := catalog.LatestMetadata(ctx, cat, loc)
		// Said before a tie's refusal too: those files are not candidates.
		for _, s := range latest.Skipped {
			slog.Warn("skipped a metadata file, not a whole table: its current snapshot's files are missing (a commit whose catalog update failed, its files since removed by maintenance, or damage)",
				"file", path.Base(s.File), "snapshot", s.SnapshotID, "missing", s.Missing)
		}
		var tie *catalog.TiedMetadataError
		var elsewhere *catalog.MetadataElsewhereError
		switch {
		case errors.Is(err, catalog.ErrNoTableMetadata):
			return "", "", fmt.Errorf("%w: check --location, which names the table's folder (the one holding metadata/ and data/); "+
				"a table whose write.metadata.path puts its metadata files elsewhere is registered with --metadata-location FILE", err)
		case errors.As(err, &elsewhere):
			return "", "", fmt.Errorf("%w: register it with --metadata-location FILE, the newest metadata file in %s that is this table's", err, elsewhere.Path)
		case errors.As(err, &tie):
			return "", "", tieHint(tie)
		case err != nil:
			return "", "", err
		}
		if !quiet {
			fmt.Fprintf(out, "newest whole metadata file under %s: %s\n", loc, path.Base(latest.File))
		}
		return latest.File, "", nil
	}
	if file, err = catalog.MetadataLocation(metadataLocation); err != nil {
		return "", "", err
	}
	// Only a hint: the registration reports a folder it cannot read.
	latest, err := catalog.LatestMetadata(ctx, cat, parentOf(parentOf(file)))
	newest := []string{latest.File}
	if tie, ok := errors.AsType[*catalog.TiedMetadataError](err); ok {
		newest, err = tie.Files, nil
	}
	if err == nil && !slices.ContainsFunc(newest, func(f string) bool { return catalog.LocationKey(f) == catalog.LocationKey(file) }) {
		newer = newest[0]
	}
	return file, newer, nil
}

// tieHint adds to the refusal of tied metadata files what each one's last
// commit sank (which records each leaves out), and how to choose:
// registering one leaves out the others' last commits, whose records a
// sink reads again from the log only while the log holds them.
func tieHint(tie *catalog.TiedMetadataError) error {
	sank := make([]string, len(tie.Files))
	for i, f := range tie.Files {
		sank[i] = path.Base(f) + ": " + lastCommit(tie.Metas[i])
	}
	return fmt.Errorf("%w. Their last commits sank %s. Registered, each leaves out the others' last commits, whose records a sink reads again from the log only while the log still holds them: "+
		"register the one the catalog had with --metadata-location FILE (a backup of the catalog tells, or the sinks' logs: a losing writer logged \"commit attempt failed\"); "+
		"if nothing tells, register one and run floe status --brokers on it: records it shows lost are the other's, gone from the log, and the other is the one to register (floe drop --keep-files --yes first)",
		tie, strings.Join(sank, "; "))
}

// lastCommit says what the current snapshot of meta sank, read from its
// summary's ledger properties.
func lastCommit(meta table.Metadata) string {
	s := meta.CurrentSnapshot()
	switch {
	case s == nil:
		return "nothing (no snapshot)"
	case s.Summary == nil || !mapping.IsFloeCommit(s.Summary.Properties):
		return "no ledger entry (not a floe commit)"
	}
	c, err := mapping.DecodeCommit(s.SnapshotID, time.UnixMilli(s.TimestampMs).UTC(), s.Summary.Properties)
	if err != nil {
		// A commit whose ranges are in a ranges file: not read for a hint.
		return fmt.Sprintf("ranges not shown (%v)", err)
	}
	rs := make([]string, len(c.Ranges))
	for i, r := range c.Ranges {
		rs[i] = r.String()
	}
	return strings.Join(rs, ", ")
}

// parentOf is the location loc is in: path.Dir would fold s3:// to s3:/.
func parentOf(loc string) string {
	return loc[:max(strings.LastIndex(loc, "/"), 0)]
}

// registerHint adds to an error of catalog.Register the flag or command
// that fixes it.
func registerHint(err error, table string) error {
	var already *catalog.AlreadyRegisteredError
	var incomplete *catalog.IncompleteMetadataError
	switch {
	case errors.As(err, &already) && already.View:
		return fmt.Errorf("%w: nothing was written; register the table under another name, or drop the view first with the engine that made it", err)
	case errors.As(err, &already):
		return fmt.Errorf("%w: nothing was written; if it is the same table, there is nothing to do (floe audit --table %s checks it); "+
			"to register it from another metadata file, remove the catalog's entry first, keeping the files: floe drop --table %s --keep-files --yes",
			err, table, table)
	case errors.As(err, &incomplete):
		return fmt.Errorf("%w: nothing was written; register an older metadata file, the table as it was before that commit: --location TABLE_LOCATION takes the newest whole one", err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: check --metadata-location; --location TABLE_LOCATION takes the newest metadata file of the table's metadata/ folder", err)
	case errors.Is(err, catalog.ErrNotTableMetadata):
		return fmt.Errorf("%w: give --metadata-location a table's metadata file, NNNNN-UUID.metadata.json in its metadata/ folder", err)
	}
	return err
}

// missingDeadLetterTables returns the dead-letter tables that registered
// table t names (its ledger, its properties) and the catalog does not
// have: the audit of t reports them missing until they are registered.
func missingDeadLetterTables(ctx context.Context, cat icecat.Catalog, t *snapshot.Table) ([]string, error) {
	names, err := t.DeadLetterTableNames()
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, name := range names {
		ident, err := catalog.ParseIdent(name)
		if err != nil {
			continue // a property set by hand, and wrong: no table to register
		}
		ok, err := cat.CheckTableExists(ctx, ident)
		if err != nil {
			return nil, fmt.Errorf("look for dead-letter table %s: %w", name, err)
		}
		if !ok {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// checkRegisteredName refuses a dead-letter table's metadata registered
// under its data table's name, and warns when the table's folder is named
// otherwise than the table: registering by hand from a listing of the
// warehouse, a folder is easily taken for its neighbour (from a user's
// recovery run: both were registered without a word).
func checkRegisteredName(name string, meta table.Metadata) error {
	folder := meta.Location()[strings.LastIndex(meta.Location(), "/")+1:]
	ns, short := name[:max(strings.LastIndex(name, "."), 0)], name[strings.LastIndex(name, ".")+1:]
	if of := meta.Properties()[snapshot.PropDeadLettersOf]; of == name {
		return fmt.Errorf("the metadata file is that of the dead-letter table of %s (folder %s), not of %s itself: register it under its own name, e.g. floe register --table %s.%s, and the data table from its own folder; nothing was written",
			name, folder, name, ns, folder)
	}
	if folder != short {
		slog.Warn("the table's folder is named otherwise than the table: check that it is the table meant (floe status lists what each table is)",
			"table", name, "folder", meta.Location())
	}
	return nil
}
