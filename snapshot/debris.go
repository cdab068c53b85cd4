package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"strings"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
)

// metadataVersion returns the version of a metadata file named as
// catalogs name them (VERSION-UUID, catalog.ParseMetadataName): only those
// are deleted, and only they count towards the versions compared.
func metadataVersion(name string) (int64, bool) {
	n, ok := catalog.ParseMetadataName(name)
	return n.Version, ok && n.UUID
}

// MetadataLocationError reports a metadata location (write.metadata.path)
// that is not a folder under the table's location: other tables' metadata
// files may be there, and nothing tells a losing commit's metadata file
// from theirs, so floe deletes no file in it.
type MetadataLocationError struct {
	Table            string
	MetadataLocation string
	Location         string
}

func (e *MetadataLocationError) Error() string {
	return fmt.Sprintf("table %s: not removing stale metadata or ledger archive files under its metadata location %s: it is not a folder under the table location %s, so other tables' files may be there",
		e.Table, e.MetadataLocation, e.Location)
}

// checkMetadataLocation refuses a metadata location that is not a folder
// of the table's own.
func (t *Table) checkMetadataLocation() error {
	loc, meta := strings.TrimSuffix(t.tbl.Location(), "/"), t.metadataLocation()
	if !strings.HasPrefix(meta, loc+"/") {
		return &MetadataLocationError{Table: t.Name(), MetadataLocation: meta, Location: loc}
	}
	return nil
}

// RemoveStaleMetadata deletes (with dryRun, only lists) the metadata files
// of the table that no table version will ever reference, and returns
// their paths. Commits that lost the catalog's race leave them: iceberg-go's
// SQL and Glue catalogs write the new metadata file before their
// compare-and-swap of the table's metadata location, and a failed swap
// ("metadata-location moved underneath us") leaves the file. Killed
// commits and failed post-commit cleanups leave some too.
//
// A file is stale when its name carries a version (VERSION-UUID.metadata.json,
// compressed variants included) no greater than that of the metadata last
// loaded, and it is neither that metadata's file nor in its metadata log.
// That is safe with no age, while other writers commit: a catalog commit
// stages the version of the file it started from plus one, and swaps only
// if the catalog's entry is still the one that named that file (the SQL
// catalog compares the location, Glue the entry's version), so versions
// grow along the table's history and a file is never current again once
// one with a higher version was. A commit that staged version v <= V (the loaded file's)
// started from a file of version v-1 < V, which stopped being current when
// the loaded file was or earlier: that commit cannot win. A file of such a
// version that did win was current before the loaded file, so it is the
// loaded file or one of its predecessors, which the metadata log lists
// unless it dropped them (write.metadata.previous-versions-max); iceberg-go
// deletes dropped ones after its commit when
// write.metadata.delete-after-commit.enabled is set, and when it is not,
// the versions older than the log's oldest are kept here too (the table's
// owner keeps them on purpose). The metadata last loaded need not be the
// newest, only one that was current once (a load or a commit's result).
// Call it after reloading the table: a losing commit's file has the
// version of the commit that beat it, which only a reload brings.
//
// minAge > 0 also keeps files younger than minAge. Files whose names carry
// no version are never touched, nor is anything outside the metadata
// folder itself. A metadata location outside the table's location is
// refused with a *MetadataLocationError: other tables' files may be there.
//
// Cost: one listing of the metadata folder (a directory read; on object
// stores a HEAD and a delimited LIST, paginated every 1000 keys; the
// folder holds the metadata log's files, the ledger archive folder, which
// is not listed, and whatever debris there is), one delete per stale file,
// and no file read. A file another cleaner deleted first is not an error.
func (t *Table) RemoveStaleMetadata(ctx context.Context, log *slog.Logger, minAge time.Duration, dryRun bool) ([]string, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := t.checkMetadataLocation(); err != nil {
		return nil, err
	}
	folder, err := t.listMetadataFolder(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("remove stale metadata files of %s: %w", t.Name(), err)
	}
	removed, err := t.deleteFolderFiles(ctx, t.staleMetadata(log, folder.meta, minAge, time.Now()), dryRun)
	if err != nil {
		return removed, fmt.Errorf("remove stale metadata files of %s (%d deleted): %w", t.Name(), len(removed), err)
	}
	return removed, nil
}

// removeDebris deletes (or, in a dry run, lists) the stale metadata files
// (see RemoveStaleMetadata), the unreferenced manifests (see
// staleManifests), the stale ledger archive files (see
// staleArchives) and the stale ranges files (see staleRangesFiles) older
// than minAge, from one listing of the metadata folder.
func (t *Table) removeDebris(ctx context.Context, log *slog.Logger, minAge time.Duration, dryRun bool, res *MaintainResult) error {
	fail := func(err error) error {
		return fmt.Errorf("remove stale metadata and ledger archive files of %s: %w", t.Name(), err)
	}
	// As for orphans (removeOrphans): the version loaded just before the
	// listing, and ages from then, so that no file a commit after it
	// names is older than minAge, however long the listing takes.
	now := time.Now()
	if err := t.Refresh(ctx); err != nil {
		return fail(err)
	}
	folder, err := t.listMetadataFolder(ctx, true)
	if err != nil {
		return fail(err)
	}
	archives, err := t.staleArchives(ctx, log, folder.archives, minAge, now)
	if err != nil {
		return fail(err)
	}
	var errs []error
	res.StaleMetadata, err = t.deleteFolderFiles(ctx, t.staleMetadata(log, folder.meta, minAge, now), dryRun)
	errs = append(errs, err)
	res.StaleManifests, err = t.deleteFolderFiles(ctx, t.staleManifests(ctx, log, folder.meta, minAge, now), dryRun)
	errs = append(errs, err)
	// A segment's index goes with it, and so does one whose segment is
	// already gone (floe before this deleted segments only).
	stale := append(archives, t.staleIndexes(folder, archives, minAge, now)...)
	res.StaleArchives, err = t.deleteFolderFiles(ctx, stale, dryRun)
	errs = append(errs, err)
	res.StaleRangesFiles, err = t.deleteFolderFiles(ctx, t.staleRangesFiles(folder.ranges, minAge, now), dryRun)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return fail(fmt.Errorf("%d metadata, %d manifest, %d archive and %d ranges files deleted: %w", len(res.StaleMetadata), len(res.StaleManifests), len(res.StaleArchives), len(res.StaleRangesFiles), err))
	}
	return nil
}

// namedSegmentNames are the file names of the segments the table names.
func (t *Table) namedSegmentNames() map[string]bool {
	named := map[string]bool{}
	for _, seg := range namedSegments(t.tbl.Properties()) {
		named[path.Base(seg.path)] = true
	}
	return named
}

// staleIndexes picks, out of the files of the archive index folder, the
// indexes and summaries files older than minAge of segments the table does
// not name and that are either gone or stale (deleted with them): no
// table version can name a segment again once it is gone, and the index
// of a segment in the making is younger than minAge, like the segment.
func (t *Table) staleIndexes(folder metadataFolder, staleArchives []folderFile, minAge time.Duration, now time.Time) []folderFile {
	named := t.namedSegmentNames()
	kept := map[string]bool{}
	for _, f := range folder.archives {
		kept[f.name] = true
	}
	for _, f := range staleArchives {
		kept[f.name] = false
	}
	var stale []folderFile
	for _, f := range folder.indexes {
		seg, ok := segmentOfSummaries(f.name)
		if !ok {
			seg, ok = f.name, strings.HasSuffix(f.name, ".json")
		}
		if ok && !named[seg] && !kept[seg] && f.modTime.Before(now.Add(-minAge)) {
			stale = append(stale, f)
		}
	}
	return stale
}

// staleRangesFiles picks, out of the files of the ranges folder, those
// older than minAge that no snapshot of the table references, live or
// archived. A commit writes its ranges file before it commits, so a young
// unreferenced file may be about to be committed; an hour is far beyond
// any commit (at most commitTimeout in a sink). Older ones are left by
// commits that never landed (a crash between the write and the commit, a
// writer that gave up), and by snapshots an expiry removed: the archive
// holds their ranges inline. Referenced files are never deleted, whatever
// their age, and neither is a file of a snapshot whose reference does not
// decode (its name is not known to be unreferenced).
func (t *Table) staleRangesFiles(files []folderFile, minAge time.Duration, now time.Time) []folderFile {
	referenced := map[string]bool{}
	note := func(id int64, props map[string]string) bool {
		if props[mapping.KeyRangesFile] == "" {
			return true
		}
		ref, ok, err := mapping.RangesRefOf(id, props)
		if err != nil || !ok {
			return false
		}
		referenced[path.Base(ref.Path)] = true
		return true
	}
	for _, s := range t.tbl.Metadata().Snapshots() {
		if s.Summary != nil && !note(s.SnapshotID, s.Summary.Properties) {
			return nil
		}
	}
	// The archive inlines the ranges of the files it archives: an entry
	// referencing one is damaged or foreign, and every file is kept.
	if t.archive.rangesFiles() {
		return nil
	}
	var stale []folderFile
	for _, f := range files {
		if strings.HasSuffix(f.name, ".json") && !referenced[f.name] && f.modTime.Before(now.Add(-minAge)) {
			stale = append(stale, f)
		}
	}
	return stale
}

// folderFile is a file of the metadata folder.
type folderFile struct {
	// path is the file's path as the storage lists it, which is what its
	// Remove takes.
	path    string
	name    string
	modTime time.Time
}

// metadataFolder is what listMetadataFolder lists: the files directly in
// the table's metadata folder, and those of its ledger archive, archive
// index and ranges folders.
type metadataFolder struct {
	meta, archives, indexes, ranges []folderFile
}

// listMetadataFolder lists the files directly in the table's metadata
// folder and, with archives, those directly in its ledger archive, archive
// index and ranges folders, in one walk that descends into no other
// folder.
func (t *Table) listMetadataFolder(ctx context.Context, archives bool) (metadataFolder, error) {
	var out metadataFolder
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return out, err
	}
	lfs, ok := fsys.(iceio.ListableIO)
	if !ok {
		return out, errors.New("the table's storage cannot list files")
	}
	dir := t.metadataLocation()
	// Storages list a folder's files under the folder's path in their own
	// form (LocalFS as a local path, object stores as a URI): the first
	// path walked, the folder itself, gives that form.
	root := ""
	err = lfs.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// No metadata folder, or a file removed while listing.
				return nil
			}
			return err
		}
		if root == "" {
			root = strings.TrimSuffix(p, "/")
			return nil
		}
		if d.IsDir() {
			if dir := strings.TrimSuffix(p, "/"); archives && (dir == root+"/"+archiveFolder || dir == root+"/"+indexFolder || dir == root+"/"+rangesFolder) {
				return nil
			}
			return fs.SkipDir
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		f := folderFile{path: p, name: p[i+1:], modTime: info.ModTime()}
		switch p[:i] {
		case root:
			out.meta = append(out.meta, f)
		case root + "/" + archiveFolder:
			out.archives = append(out.archives, f)
		case root + "/" + indexFolder:
			out.indexes = append(out.indexes, f)
		case root + "/" + rangesFolder:
			out.ranges = append(out.ranges, f)
		}
		return nil
	})
	if err != nil {
		return metadataFolder{}, fmt.Errorf("list %s: %w", dir, err)
	}
	return out, nil
}

// staleMetadata picks the stale metadata files out of files (see
// RemoveStaleMetadata for why each rule is safe).
func (t *Table) staleMetadata(log *slog.Logger, files []folderFile, minAge time.Duration, now time.Time) []folderFile {
	current, ok := metadataVersion(path.Base(t.tbl.MetadataLocation()))
	if !ok {
		log.Info("the table's metadata file name carries no version: not removing stale metadata files", "table", t.Name(), "metadata", t.tbl.MetadataLocation())
		return nil
	}
	meta := t.tbl.Metadata()
	referenced := map[string]bool{path.Base(t.tbl.MetadataLocation()): true}
	oldest := current
	for e := range meta.PreviousFiles() {
		name := path.Base(e.MetadataFile)
		referenced[name] = true
		if v, ok := metadataVersion(name); ok {
			oldest = min(oldest, v)
		}
	}
	floor := int64(0)
	if !meta.Properties().GetBool(table.MetadataDeleteAfterCommitEnabledKey, table.MetadataDeleteAfterCommitEnabledDefault) {
		floor = oldest
	}
	var stale []folderFile
	for _, f := range files {
		v, ok := metadataVersion(f.name)
		switch {
		case !ok, referenced[f.name], v > current, v < floor:
		case minAge > 0 && !f.modTime.Before(now.Add(-minAge)):
		default:
			stale = append(stale, f)
		}
	}
	return stale
}

// staleManifests picks, out of the files of the metadata folder, the
// manifest lists and manifests (.avro) older than minAge that no snapshot
// of the table references. A commit that lost the catalog's race leaves
// the ones it wrote (its retry writes its own), and so does an expiry
// killed before it deleted the files of the snapshots it expired: no
// other cleanup finds them, as orphan removal lists the data folder only.
// A commit writes its manifests just before it commits, so a younger file
// may be about to be committed. When a snapshot's manifest list cannot be
// read, what is referenced is not known, and none is picked.
func (t *Table) staleManifests(ctx context.Context, log *slog.Logger, files []folderFile, minAge time.Duration, now time.Time) []folderFile {
	var old []folderFile
	for _, f := range files {
		if strings.HasSuffix(f.name, ".avro") && f.modTime.Before(now.Add(-minAge)) {
			old = append(old, f)
		}
	}
	if len(old) == 0 {
		return nil
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		log.Warn("not removing unreferenced manifests", "table", t.Name(), "err", err)
		return nil
	}
	referenced := map[string]bool{}
	for _, s := range t.tbl.Metadata().Snapshots() {
		referenced[path.Base(s.ManifestList)] = true
		mans, err := s.Manifests(fsys)
		if err != nil {
			log.Warn("not removing unreferenced manifests: a snapshot's manifest list cannot be read", "table", t.Name(), "snapshot", s.SnapshotID, "err", err)
			return nil
		}
		for _, m := range mans {
			referenced[path.Base(m.FilePath())] = true
		}
	}
	var stale []folderFile
	for _, f := range old {
		if !referenced[f.name] {
			stale = append(stale, f)
		}
	}
	return stale
}

// staleArchives picks, out of the files of the ledger archive folder, the
// archive files (segments) that the table does not name, that are older
// than minAge, and whose every entry the table still holds: the snapshot
// is live, or in a segment the table names. Maintain runs killed before
// their commit leave such files (their snapshots were never expired), and
// so do runs killed before deleting the segments their new one absorbed,
// and repairs (commitMergedArchive keeps the files it merged).
//
// The age keeps the segment of a run in progress, written before its
// commit that names it. The entry check keeps what repairLedger needs to
// repair an archive that an overlapping run of floe before segments
// replaced: it merges every archive file, so an entry must never lose its
// last file. A file is deleted only when each of its entries is live or
// in a named segment, which this never deletes; a live snapshot expired
// later is archived by the expiry that removes it, and a named segment is
// unnamed only by a commit naming one that holds its entries. A file that
// is not an archive of this table is kept.
func (t *Table) staleArchives(ctx context.Context, log *slog.Logger, files []folderFile, minAge time.Duration, now time.Time) ([]folderFile, error) {
	named := t.namedSegmentNames()
	var candidates []folderFile
	for _, f := range files {
		if strings.HasSuffix(f.name, ".json") && !named[f.name] && f.modTime.Before(now.Add(-minAge)) {
			candidates = append(candidates, f)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	meta := t.tbl.Metadata()
	var stale []folderFile
	for _, f := range candidates {
		missing, found, err := t.entryNotHeld(fsys, meta, f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			log.Warn("keeping a file of the ledger archive folder that is not a ledger archive of this table", "table", t.Name(), "file", f.path, "err", err)
			continue
		}
		if found {
			log.Warn("keeping an unreferenced ledger archive: it holds the entry of a snapshot that is neither live nor in the table's archive",
				"table", t.Name(), "file", f.path, "snapshot", missing)
		} else {
			stale = append(stale, f)
		}
	}
	return stale, nil
}

// entryNotHeld returns the first entry of the archive file at path whose
// snapshot is neither live in meta nor in the table's archive, reading the
// file one entry at a time; found is false when there is none.
func (t *Table) entryNotHeld(fsys iceio.IO, meta table.Metadata, path string) (missing int64, found bool, err error) {
	for s, err := range segmentEntries(fsys, meta.TableUUID().String(), path, "") {
		if err != nil {
			return 0, false, err
		}
		if meta.SnapshotByID(s.SnapshotID) == nil && !t.archive.has(s.SnapshotID) {
			return s.SnapshotID, true, nil
		}
	}
	return 0, false, nil
}

// deleteFolderFiles deletes files (in a dry run, deletes nothing) and returns
// the paths deleted, or that a dry run would delete. A file already gone
// counts as deleted: another cleaner was first.
func (t *Table) deleteFolderFiles(ctx context.Context, files []folderFile, dryRun bool) ([]string, error) {
	var removed []string
	if dryRun {
		for _, f := range files {
			removed = append(removed, f.path)
		}
		return removed, nil
	}
	if len(files) == 0 {
		return nil, nil
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := fsys.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, f.path)
	}
	return removed, errors.Join(errs...)
}
