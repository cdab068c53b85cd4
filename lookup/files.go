package lookup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// FilesResult lists the data files that make up one snapshot of a table:
// exactly the Parquet files a reader without Iceberg support must read to
// see that snapshot. Its JSON field names are stable (floe files --json).
//
// Listing the table's data folder instead gives wrong answers, because the
// folder also holds files that are not part of the snapshot: orphans that
// no snapshot references (written by a writer that was fenced or crashed
// before its commit; floe maintain --remove-orphans deletes them after an
// hour), files of other branches (floe replay --branch writes the rebuilt
// rows into the same folder), and files that are no longer live (a state
// table's fold replaces the files it rewrites at every flush, a published
// replay replaces main's files; they stay until floe maintain expires the
// snapshots that had them).
type FilesResult struct {
	Table string `json:"table"`
	// SnapshotID and CommittedAt are the snapshot's; absent when the table
	// has no snapshot yet (and so no files).
	SnapshotID  *int64     `json:"snapshot_id,omitempty"`
	CommittedAt *time.Time `json:"committed_at,omitempty"`
	// Records and SizeBytes add up the files'.
	Records   int64  `json:"records"`
	SizeBytes int64  `json:"size_bytes"`
	Files     []File `json:"files"`
	// DeleteFiles are the snapshot's row-level delete files (an upsert
	// table's equality deletes; in a table of another mode, another
	// engine's): rows of Files they match are deleted, so a reader of
	// Files alone reads rows the table no longer holds. Records counts
	// the rows of Files before the deletes.
	DeleteFiles []DeleteFile `json:"delete_files,omitempty"`
	// Upsert is set for an upsert table, whose commits write deletes.
	Upsert bool `json:"-"`
}

// DeleteFile is one live row-level delete file, as its manifest entry
// describes it.
type DeleteFile struct {
	Path string `json:"path"`
	// Missing is set, by Check, for a delete file the table's storage no
	// longer has (deleted outside floe): the snapshot cannot be read, and
	// its data files alone give rows the deletes removed.
	Missing bool `json:"missing,omitempty"`
	// Kind is equality (deletes rows by the values of some columns),
	// position (by file and row position) or deletion_vector (a
	// format v3 position delete in Puffin).
	Kind string `json:"kind"`
	// Records is the number of deletes the file holds, SizeBytes its
	// size.
	Records   int64 `json:"records"`
	SizeBytes int64 `json:"size_bytes"`
	AddedBy   int64 `json:"added_by_snapshot"`
}

// File is one live data file, as its manifest entry describes it (no data
// is read).
type File struct {
	// Path is the file's URI (file:// or s3://).
	Path string `json:"path"`
	// Missing is set, by Check, for a file the table's storage no longer
	// has (deleted outside floe).
	Missing bool `json:"missing,omitempty"`
	// Topic is the Kafka topic of the file's rows, from the ledger; empty
	// when the ledger cannot tell (a table holding the same partition of
	// several topics, whose commit cannot attribute the file).
	Topic string `json:"topic,omitempty"`
	// Partition, MinOffset and MaxOffset are the Kafka partition of the
	// file's rows (floe writes one partition per file) and the smallest and
	// largest offset among them, from the manifest's column bounds; absent
	// for a file without such bounds (not written by floe, or with column
	// metrics disabled) or holding several partitions.
	Partition *int32 `json:"partition,omitempty"`
	MinOffset *int64 `json:"min_offset,omitempty"`
	MaxOffset *int64 `json:"max_offset,omitempty"`
	// MinPartition and MaxPartition bound the Kafka partitions of a file
	// that holds rows of several, outside a file group (the compaction of
	// an upsert table merges partitions, its deletes applied), from the
	// manifest's column bounds: its rows are of partitions between them.
	MinPartition *int32 `json:"min_partition,omitempty"`
	MaxPartition *int32 `json:"max_partition,omitempty"`
	// Compacted is set for such a file that a floe compaction wrote (its
	// snapshot live or archived: Table.IsCompaction); another engine's
	// file of several partitions is not.
	Compacted bool `json:"compacted,omitempty"`
	// Records is the file's row count, SizeBytes its size.
	Records   int64 `json:"records"`
	SizeBytes int64 `json:"size_bytes"`
	// AddedBy is the snapshot that added the file.
	AddedBy int64 `json:"added_by_snapshot"`
	// Group is set for a file of a file group: files that hold rows of
	// several Kafka partitions together (a sink commit's shared lane, or a
	// compaction), which floe records, with the offsets the group's files
	// together hold, in the snapshot that added it (floe.file-groups).
	// When the group holds several partitions, Partition and offsets are
	// absent, and Topic is set only when it holds one topic.
	Group *FileGroup `json:"group,omitempty"`
}

// FileGroup describes the file group of a File.
type FileGroup struct {
	// Files counts the group's data files, this one included (a reader
	// needs all of them, as listed, for the group's rows).
	Files int `json:"files"`
	// Spans are the offsets [low, high) of each partition that the
	// group's files together hold, sorted by topic, partition and offset.
	Spans []Span `json:"spans"`
}

// Span is offsets [Low, High) of one partition.
type Span struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Low       int64  `json:"low"`
	High      int64  `json:"high"`
}

// Files lists the live data files of a snapshot of tbl's branch (0: its
// head), reading manifests only, and its row-level delete files, whose
// deletes remove rows of the data files: reading these alone would give
// rows the table no longer holds, which floe files says. An upsert
// table's commits write equality deletes, which a compaction (floe
// maintain --compact) applies; in a table of another mode, another engine
// wrote them. (Refusing such a snapshot left a new user with nothing to
// list of an upsert table.)
func Files(ctx context.Context, tbl *snapshot.Table, snapshotID int64) (FilesResult, error) {
	res := FilesResult{Table: tbl.Name(), Files: []File{}}
	if snapshotID == 0 && tbl.Head() == nil {
		return res, nil
	}
	snap, err := tbl.Snapshot(snapshotID)
	if err != nil {
		return res, err
	}
	res.Upsert = tbl.Mode() == mapping.ModeUpsert
	// The summary says when there are deletes, and their manifests are
	// read only then.
	deletes := snap.Summary == nil
	if !deletes {
		n, _ := strconv.ParseInt(snap.Summary.Properties["total-delete-files"], 10, 64)
		deletes = n > 0
	}
	if deletes {
		dels, err := tbl.DeleteFiles(ctx, snap.SnapshotID)
		if err != nil {
			return res, fmt.Errorf("list the delete files of %s: %w", tbl.Name(), err)
		}
		for _, d := range dels {
			kind := "position"
			switch {
			case d.Equality:
				kind = "equality"
			case d.Format == iceberg.PuffinFile:
				kind = "deletion_vector"
			}
			res.DeleteFiles = append(res.DeleteFiles, DeleteFile{Path: d.Path, Kind: kind, Records: d.Records, SizeBytes: d.SizeBytes, AddedBy: d.AddedBy})
		}
		slices.SortFunc(res.DeleteFiles, func(a, b DeleteFile) int { return cmp.Compare(a.Path, b.Path) })
	}
	at := time.UnixMilli(snap.TimestampMs).UTC()
	res.SnapshotID, res.CommittedAt = &snap.SnapshotID, &at
	files, err := tbl.Files(ctx, snap.SnapshotID)
	if err != nil {
		return res, fmt.Errorf("list the data files of %s: %w", tbl.Name(), err)
	}
	groups, err := tbl.GroupsOfFiles(ctx, snap.SnapshotID, files)
	if err != nil {
		return res, err
	}
	var topics topicIndex
	if of := tbl.Iceberg().Properties()[snapshot.PropDeadLettersOf]; of != "" {
		// A dead-letter table has no ledger: its data table's names the
		// topics of its partitions.
		if topics, err = deadLetterTopics(ctx, tbl, of); err != nil {
			return res, err
		}
	} else if topics, err = newTopicIndex(ctx, tbl, snap.SnapshotID, files, groups); err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	for _, f := range files {
		out := File{Path: f.Path, Records: f.Records, SizeBytes: f.SizeBytes, AddedBy: f.AddedBy}
		var first, last mapping.Span // of the file's group, if any
		if g := groups[f.Path]; g != nil {
			out.Group = &FileGroup{Files: len(g.Files)}
			for _, s := range g.Spans {
				out.Group.Spans = append(out.Group.Spans, Span{Topic: s.Topic, Partition: s.Partition, Low: s.Low, High: s.High})
			}
			first, last = g.Spans[0], g.Spans[len(g.Spans)-1]
		}
		switch {
		case first.TopicPartition != last.TopicPartition:
			// Several partitions: the group's spans say which offsets.
			if first.Topic == last.Topic {
				out.Topic = first.Topic
			}
		case f.HasBounds && f.PartitionMin == f.PartitionMax:
			p, lo, hi := f.PartitionMin, f.Offsets.Low, f.Offsets.High-1
			out.Partition, out.MinOffset, out.MaxOffset = &p, &lo, &hi
			out.Topic = cmp.Or(first.Topic, topics.of(f))
		case f.HasBounds && out.Group == nil:
			// Merged across partitions, not as a group (an upsert
			// table's compaction): which partitions, and their topic
			// when the ledger has one of them all.
			lo, hi := f.PartitionMin, f.PartitionMax
			out.MinPartition, out.MaxPartition = &lo, &hi
			out.Topic = topics.across(lo, hi)
			// Live or archived: the file outlives its compaction's
			// snapshot (review s61).
			out.Compacted = tbl.IsCompaction(f.AddedBy)
		}
		res.Records += f.Records
		res.SizeBytes += f.SizeBytes
		res.Files = append(res.Files, out)
	}
	slices.SortFunc(res.Files, func(a, b File) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmpPtr(a.Partition, b.Partition), cmpPtr(a.MinOffset, b.MinOffset), cmp.Compare(a.Path, b.Path))
	})
	return res, nil
}

// cmpPtr orders absent values first.
func cmpPtr[T cmp.Ordered](a, b *T) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return cmp.Compare(*a, *b)
}

// topicIndex tells the Kafka topic of a data file, which manifests do not
// give exactly (string column bounds may be truncated), from the ledger.
type topicIndex struct {
	// byPartition lists the ledger's topics that have each partition.
	byPartition map[int32][]string
	// commits are the commits that added files of a partition number
	// several topics have; chains, per such file (by path), a chain of
	// each topic that may hold its offsets, to place files of floe's
	// compactions, which no commit added.
	commits map[int64]mapping.Commit
	chains  mapping.Chains
	byFile  map[string][]int
}

// newTopicIndex indexes the ledger as of snapshotID for the topics of
// files (of which those in grouped tell theirs by their group's spans).
// The ledger's summary names each partition's topics; only when a file's
// partition number is of several topics is the ledger read: the commits
// that added such files, and, for the files no commit of the ledger added
// (a compaction's), the ranges that meet their offsets (a chain of each
// topic: mapping.Chains, skipping the archived blocks that hold none). A
// table of one topic costs no range, and one of several the blocks around
// its files, however long its ledger.
func newTopicIndex(ctx context.Context, tbl *snapshot.Table, snapshotID int64, files []snapshot.DataFile, grouped map[string]*mapping.FileGroup) (topicIndex, error) {
	ix := topicIndex{byPartition: map[int32][]string{}, commits: map[int64]mapping.Commit{}, byFile: map[string][]int{}}
	sum, err := tbl.Summary(ctx, snapshotID)
	if err != nil {
		return ix, err
	}
	for _, tp := range sum.Partitions() {
		if !slices.Contains(ix.byPartition[tp.Partition], tp.Topic) {
			ix.byPartition[tp.Partition] = append(ix.byPartition[tp.Partition], tp.Topic)
		}
	}
	var shared []snapshot.DataFile // files whose partition number several topics have
	added := map[int64]bool{}
	for _, f := range files {
		if !f.HasBounds || f.PartitionMin != f.PartitionMax || len(ix.byPartition[f.PartitionMin]) < 2 || grouped[f.Path] != nil {
			continue
		}
		shared = append(shared, f)
		added[f.AddedBy] = true
	}
	if len(shared) == 0 {
		return ix, nil
	}
	for c, err := range tbl.CommitsOf(ctx, snapshotID, added) {
		if err != nil {
			return ix, err
		}
		ix.commits[c.SnapshotID] = c
	}
	for _, f := range shared {
		if _, ok := ix.commits[f.AddedBy]; ok {
			continue
		}
		for _, topic := range ix.byPartition[f.PartitionMin] {
			if f.MayHoldTopic(topic) {
				ix.byFile[f.Path] = append(ix.byFile[f.Path], ix.chains.Add(mapping.TopicPartition{Topic: topic, Partition: f.PartitionMin}, f.Offsets))
			}
		}
	}
	if ix.chains.Len() == 0 {
		return ix, nil
	}
	ix.chains.Build()
	return ix, tbl.MeetChains(ctx, snapshotID, &ix.chains)
}

// deadLetterTopics indexes the topics of the data table of dead-letter
// table dlq by partition, from the data table's ledger summary; empty when
// the data table is gone. A partition number of several topics tells no
// topic (topicIndex.of), as the dead letters' commits are not read.
func deadLetterTopics(ctx context.Context, dlq *snapshot.Table, of string) (topicIndex, error) {
	ix := topicIndex{byPartition: map[int32][]string{}}
	ident, err := catalog.ParseIdent(of)
	if err != nil {
		return ix, nil
	}
	data, err := snapshot.Open(ctx, dlq.Catalog(), ident, snapshot.OpenOptions{})
	if errors.Is(err, snapshot.ErrTableNotFound) {
		return ix, nil
	}
	if err != nil {
		return ix, fmt.Errorf("open %s, whose dead letters %s holds, for their topics: %w", of, dlq.Name(), err)
	}
	return newTopicIndex(ctx, data, 0, nil, nil)
}

// of returns f's topic: the only topic of the ledger with f's partition (a
// table of one topic), else the only one whose range in the commit that
// added f holds f's offsets, or (a file a compaction wrote) the only one
// whose ranges hold them in one unbroken chain; empty when none tells.
func (ix topicIndex) of(f snapshot.DataFile) string {
	if ts := ix.byPartition[f.PartitionMin]; len(ts) == 1 {
		return ts[0]
	}
	var found []string
	if _, ok := ix.commits[f.AddedBy]; !ok {
		for _, i := range ix.byFile[f.Path] {
			if c := ix.chains.Chain(i); c.OK() {
				found = append(found, c.Topic)
			}
		}
	}
	for _, r := range ix.commits[f.AddedBy].Ranges {
		if !r.Deleted() && r.Partition == f.PartitionMin && r.Low <= f.Offsets.Low && f.Offsets.High <= r.High && !slices.Contains(found, r.Topic) {
			found = append(found, r.Topic)
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	return ""
}

// across returns the only topic the ledger has of the partitions from
// lo to hi, or "" when it has several (or none).
func (ix topicIndex) across(lo, hi int32) string {
	var found []string
	for p, ts := range ix.byPartition {
		if p < lo || p > hi {
			continue
		}
		for _, t := range ts {
			if !slices.Contains(found, t) {
				found = append(found, t)
			}
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	return ""
}

// Check looks for each of r's files, data and delete files, in tbl's
// storage (one request per file: the manifests still list a file deleted
// outside floe), sets Missing on those it lacks, and returns their paths.
func (r *FilesResult) Check(ctx context.Context, tbl *snapshot.Table) ([]string, error) {
	paths := make([]string, 0, len(r.Files)+len(r.DeleteFiles))
	for _, f := range r.Files {
		paths = append(paths, f.Path)
	}
	// The delete files too: one gone makes the snapshot unreadable, and
	// its data files alone hold rows the table no longer has.
	for _, d := range r.DeleteFiles {
		paths = append(paths, d.Path)
	}
	missing, err := tbl.MissingFiles(ctx, paths)
	if err != nil {
		return nil, err
	}
	for i := range r.Files {
		r.Files[i].Missing = slices.Contains(missing, r.Files[i].Path)
	}
	for i := range r.DeleteFiles {
		r.DeleteFiles[i].Missing = slices.Contains(missing, r.DeleteFiles[i].Path)
	}
	return missing, nil
}
