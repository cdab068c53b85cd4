package snapshot

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/mapping"
)

// DataFile is a live data file of a snapshot as its manifest describes it:
// enough for the file-level audit and for "which file holds offset X"
// without reading any data.
type DataFile struct {
	Path string
	// AddedBy is the snapshot that added the file.
	AddedBy   int64
	Records   int64
	SizeBytes int64
	// HasBounds is false when the manifest has no column bounds for the
	// partition and offset columns (a file not written by floe, or written
	// with metrics disabled).
	HasBounds bool
	// Partition bounds: floe files hold one partition, so they are equal.
	PartitionMin, PartitionMax int32
	// Offsets is [min offset, max offset + 1) of the file's rows.
	Offsets mapping.Interval
	// topics are the manifest's bounds on the topic column (see
	// MayHoldTopic).
	topics topicBounds
}

// MayHoldTopic reports whether the file's manifest bounds on the topic
// column admit topic: false only when they exclude it. Iceberg truncates
// string bounds (to 16 characters by default), so topics sharing a long
// prefix are not told apart.
func (f DataFile) MayHoldTopic(topic string) bool { return f.topics.admit(topic) }

// topicBounds are a file's manifest bounds on the topic column, when it
// has them.
type topicBounds struct {
	low, high string
	ok        bool
}

func (b topicBounds) admit(topic string) bool {
	return !b.ok || (b.low <= topic && topic <= b.high)
}

// Files lists the live data files of a snapshot (0 means the branch head),
// reading only manifests.
func (t *Table) Files(ctx context.Context, snapshotID int64) ([]DataFile, error) {
	fields, err := t.positionFields()
	if err != nil {
		return nil, err
	}
	var out []DataFile
	err = t.liveEntries(ctx, snapshotID, iceberg.ManifestContentData, func(e iceberg.ManifestEntry) {
		df := e.DataFile()
		if df.ContentType() != iceberg.EntryContentData {
			return
		}
		f := DataFile{Path: df.FilePath(), AddedBy: e.SnapshotID(), Records: df.Count(), SizeBytes: df.FileSizeBytes()}
		f.PartitionMin, f.PartitionMax, f.Offsets, f.HasBounds = fields.partitionBounds(df)
		f.topics = fields.topicBounds(df)
		out = append(out, f)
	})
	return out, err
}

// liveEntries calls fn with the live entries of the manifests of one
// content (data or deletes) of a snapshot (0 means the branch head; none
// when the branch has no snapshot yet).
func (t *Table) liveEntries(ctx context.Context, snapshotID int64, content iceberg.ManifestContent, fn func(iceberg.ManifestEntry)) error {
	snap := t.Head()
	if snapshotID != 0 {
		snap = t.tbl.Metadata().SnapshotByID(snapshotID)
		if snap == nil {
			return fmt.Errorf("table %s has no snapshot %d", t.Name(), snapshotID)
		}
	}
	if snap == nil {
		return nil
	}
	fs, err := t.tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("open storage of %s: %w", t.Name(), err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return fmt.Errorf("read manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	for _, m := range manifests {
		if m.ManifestContent() != content {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			return fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range entries {
			fn(e)
		}
	}
	return nil
}

// positionFields are the field IDs of a table's topic, partition and
// offset columns, whose manifest bounds place a data file.
type positionFields struct{ topic, partition, offset int }

func (t *Table) positionFields() (positionFields, error) {
	sc := t.tbl.Schema()
	pf, ok := sc.FindFieldByName(mapping.ColPartition)
	if !ok {
		return positionFields{}, fmt.Errorf("table %s has no %s column", t.Name(), mapping.ColPartition)
	}
	of, ok := sc.FindFieldByName(mapping.ColOffset)
	if !ok {
		return positionFields{}, fmt.Errorf("table %s has no %s column", t.Name(), mapping.ColOffset)
	}
	tf, ok := sc.FindFieldByName(mapping.ColTopic)
	if !ok {
		return positionFields{}, fmt.Errorf("table %s has no %s column", t.Name(), mapping.ColTopic)
	}
	return positionFields{topic: tf.ID, partition: pf.ID, offset: of.ID}, nil
}

// topicBounds reads a data file's manifest bounds on the topic column.
func (f positionFields) topicBounds(df iceberg.DataFile) topicBounds {
	lo, lok := df.LowerBoundValues()[f.topic]
	hi, hok := df.UpperBoundValues()[f.topic]
	return topicBounds{low: string(lo), high: string(hi), ok: lok && hok}
}

// partitionBounds reads a data file's manifest bounds on the partition and
// offset columns: the lowest and highest partition, and the offsets
// [min, max+1); ok is false when the manifest has none.
func (f positionFields) partitionBounds(df iceberg.DataFile) (pmin, pmax int32, offsets mapping.Interval, ok bool) {
	lo, hi := df.LowerBoundValues(), df.UpperBoundValues()
	plo, phi, olo, ohi := lo[f.partition], hi[f.partition], lo[f.offset], hi[f.offset]
	if len(plo) != 4 || len(phi) != 4 || len(olo) != 8 || len(ohi) != 8 {
		return 0, 0, mapping.Interval{}, false
	}
	return int32(binary.LittleEndian.Uint32(plo)), int32(binary.LittleEndian.Uint32(phi)), mapping.Interval{
		Low:  int64(binary.LittleEndian.Uint64(olo)),
		High: int64(binary.LittleEndian.Uint64(ohi)) + 1,
	}, true
}

// bounds returns the one Kafka partition of a data file and its offsets;
// ok is false when the manifest does not place it in one partition.
func (f positionFields) bounds(df iceberg.DataFile) (int32, mapping.Interval, bool) {
	pmin, pmax, offsets, ok := f.partitionBounds(df)
	return pmin, offsets, ok && pmin == pmax
}

// DeleteFile is a live row-level delete file of a snapshot as its manifest
// describes it: what the audit of an upsert table checks and what floe
// where --key reads.
type DeleteFile struct {
	Path string
	// AddedBy is the snapshot that added the file.
	AddedBy int64
	// Records is the number of deletes the file holds, SizeBytes its
	// size.
	Records   int64
	SizeBytes int64
	// Equality is set for an equality-delete file, whose EqualityFieldIDs
	// are the columns its rows match on; otherwise the file holds position
	// deletes (a deletion vector when Format is PUFFIN).
	Equality         bool
	EqualityFieldIDs []int
	Format           iceberg.FileFormat
}

// DeleteFiles lists the live delete files of a snapshot (0 means the
// branch head), reading only manifests.
func (t *Table) DeleteFiles(ctx context.Context, snapshotID int64) ([]DeleteFile, error) {
	var out []DeleteFile
	err := t.liveEntries(ctx, snapshotID, iceberg.ManifestContentDeletes, func(e iceberg.ManifestEntry) {
		df := e.DataFile()
		out = append(out, DeleteFile{Path: df.FilePath(), AddedBy: e.SnapshotID(), Records: df.Count(),
			SizeBytes: df.FileSizeBytes(), Equality: df.ContentType() == iceberg.EntryContentEqDeletes, EqualityFieldIDs: df.EqualityFieldIDs(),
			Format: df.FileFormat()})
	})
	return out, err
}

// ReadDeleteFile calls fn with the rows of an equality-delete file of the
// table (the values of its equality columns), batch by batch; each batch
// is released when fn returns.
func (t *Table) ReadDeleteFile(ctx context.Context, f DeleteFile, fn func(arrow.RecordBatch) error) error {
	if !f.Equality || f.Format != iceberg.ParquetFile {
		return fmt.Errorf("read delete file %s: not an equality-delete file in Parquet", f.Path)
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("open storage of %s: %w", t.Name(), err)
	}
	return readParquet(ctx, fsys, f.Path, fn)
}
