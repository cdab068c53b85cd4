package snapshot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/floe-dev/floe/mapping"
)

// PropLedgerArchive is the table property that names the table's ledger
// archive: a JSON file under the table's metadata folder that keeps the
// ledger entries of expired snapshots.
//
// Snapshot expiry erases the summaries that carry the ledger. Maintain
// writes every snapshot it is about to expire into a new archive file (the
// previous archive's entries plus the new ones) and sets this property in
// the same catalog commit that expires them, so there is no moment at
// which a snapshot is gone but its entry is not durable: either the commit
// lands and both changed, or nothing changed. The archive is one small file
// read once per table load, and auditors can query it directly (for
// example DuckDB's read_json).
const PropLedgerArchive = "floe.ledger-archive"

// ArchiveFormat is the archive file's format marker.
const ArchiveFormat = "floe.ledger-archive/v1"

// archiveFolder is the archive files' folder under the metadata location. A
// folder of its own keeps them apart from metadata.json versions, which
// iceberg-go deletes after commits.
const archiveFolder = "floe-ledger"

// ArchivedSnapshot is one expired snapshot as the archive keeps it: enough
// to walk a branch's ancestry through it (the parent) and to decode its
// ledger entry exactly as from the live snapshot (id, commit time and the
// summary's floe. properties). Snapshots of other writers are archived too,
// without properties, so that the ancestry stays walkable across them.
type ArchivedSnapshot struct {
	SnapshotID  int64             `json:"snapshot-id"`
	ParentID    *int64            `json:"parent-snapshot-id,omitempty"`
	TimestampMs int64             `json:"timestamp-ms"`
	Properties  map[string]string `json:"floe-properties,omitempty"`
}

// Archive is a table's ledger archive. The zero value (or nil) is an empty
// archive.
type Archive struct {
	Format    string             `json:"format"`
	TableUUID string             `json:"table-uuid"`
	Snapshots []ArchivedSnapshot `json:"snapshots"`

	byID map[int64]int
}

// Len is the number of archived snapshots.
func (a *Archive) Len() int {
	if a == nil {
		return 0
	}
	return len(a.Snapshots)
}

// snapshot returns an archived snapshot as an Iceberg snapshot with its
// ledger properties, or nil.
func (a *Archive) snapshot(id int64) *table.Snapshot {
	if a == nil {
		return nil
	}
	i, ok := a.byID[id]
	if !ok {
		return nil
	}
	s := a.Snapshots[i]
	return &table.Snapshot{SnapshotID: s.SnapshotID, ParentSnapshotID: s.ParentID, TimestampMs: s.TimestampMs,
		Summary: &table.Summary{Properties: iceberg.Properties(s.Properties)}}
}

func (a *Archive) index() {
	a.byID = make(map[int64]int, len(a.Snapshots))
	for i, s := range a.Snapshots {
		a.byID[s.SnapshotID] = i
	}
}

// with returns a new archive holding a's snapshots and snaps (a snapshot
// already archived is kept once), ordered by commit time.
func (a *Archive) with(tableUUID string, snaps []table.Snapshot) *Archive {
	add := make([]ArchivedSnapshot, 0, len(snaps))
	for _, s := range snaps {
		as := ArchivedSnapshot{SnapshotID: s.SnapshotID, ParentID: s.ParentSnapshotID, TimestampMs: s.TimestampMs}
		if s.Summary != nil {
			for k, v := range s.Summary.Properties {
				if strings.HasPrefix(k, mapping.KeyPrefix) {
					if as.Properties == nil {
						as.Properties = map[string]string{}
					}
					as.Properties[k] = v
				}
			}
		}
		add = append(add, as)
	}
	return a.plus(tableUUID, add)
}

// union returns a new archive holding the snapshots of a and b. Entries
// describe immutable snapshots, so two archives never disagree about one.
func (a *Archive) union(tableUUID string, b *Archive) *Archive {
	if b == nil {
		return a.plus(tableUUID, nil)
	}
	return a.plus(tableUUID, b.Snapshots)
}

func (a *Archive) plus(tableUUID string, add []ArchivedSnapshot) *Archive {
	out := &Archive{Format: ArchiveFormat, TableUUID: tableUUID}
	if a != nil {
		out.Snapshots = slices.Clone(a.Snapshots)
	}
	out.index()
	for _, as := range add {
		if _, ok := out.byID[as.SnapshotID]; ok {
			continue
		}
		out.byID[as.SnapshotID] = len(out.Snapshots)
		out.Snapshots = append(out.Snapshots, as)
	}
	slices.SortFunc(out.Snapshots, func(x, y ArchivedSnapshot) int {
		return cmp.Or(cmp.Compare(x.TimestampMs, y.TimestampMs), cmp.Compare(x.SnapshotID, y.SnapshotID))
	})
	out.index()
	return out
}

// ArchiveError reports a ledger archive that cannot be read or written.
// Reading a table whose archive is unreadable fails rather than returning
// a ledger without the archived entries.
type ArchiveError struct {
	Table string
	Path  string
	Err   error
}

func (e *ArchiveError) Error() string {
	return fmt.Sprintf("ledger archive %s of table %s: %v", e.Path, e.Table, e.Err)
}

func (e *ArchiveError) Unwrap() error { return e.Err }

// readArchive reads the archive a table's metadata names, or returns nil
// when it names none.
func readArchive(ctx context.Context, tbl *table.Table, name string) (*Archive, error) {
	path := tbl.Properties()[PropLedgerArchive]
	if path == "" {
		return nil, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, &ArchiveError{Table: name, Path: path, Err: err}
	}
	return readArchiveFile(fsys, tbl.Metadata().TableUUID().String(), name, path)
}

// readArchiveFile reads and checks one archive file of the table with uuid
// tableUUID.
func readArchiveFile(fsys iceio.IO, tableUUID, name, path string) (*Archive, error) {
	fail := func(err error) (*Archive, error) { return nil, &ArchiveError{Table: name, Path: path, Err: err} }
	f, err := fsys.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return fail(err)
	}
	var a Archive
	if err := json.Unmarshal(b, &a); err != nil {
		return fail(err)
	}
	if a.Format != ArchiveFormat {
		return fail(fmt.Errorf("format %q, this floe reads %q", a.Format, ArchiveFormat))
	}
	if a.TableUUID != tableUUID {
		return fail(fmt.Errorf("written for table uuid %s, not this table's %s", a.TableUUID, tableUUID))
	}
	a.index()
	return &a, nil
}

// archiveLocation is the folder of a table's archive files.
func archiveLocation(meta table.Metadata) string {
	loc := meta.Properties()[table.WriteMetadataPathKey]
	if loc == "" {
		loc = strings.TrimSuffix(meta.Location(), "/") + "/metadata"
	}
	return strings.TrimSuffix(loc, "/") + "/" + archiveFolder
}

// writeArchive writes a new archive file under the table's metadata
// location and returns its path. Each write goes to a new file, so the
// archive the table currently names is never overwritten: a maintenance run
// that fails after writing leaves only an unreferenced file.
func writeArchive(ctx context.Context, tbl *table.Table, a *Archive) (string, error) {
	path := fmt.Sprintf("%s/%05d-%s.json", archiveLocation(tbl.Metadata()), a.Len(), uuid.NewString())
	b, err := json.MarshalIndent(a, "", " ")
	if err != nil {
		return path, err
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return path, err
	}
	wfs, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return path, errors.New("the table's storage cannot write files")
	}
	return path, wfs.WriteFile(path, b)
}
