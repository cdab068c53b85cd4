package mapping

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// KeyFileGroups is the ledger property that lists a snapshot's file groups
// (FileGroup), as JSON:
//
//	floe.file-groups = [{"files":["s3://b/t/data/00001.parquet"],
//	                     "spans":{"orders":"0:0-120,7:40-95"}}]
//
// a group's spans per topic as comma-separated "partition:low-high" items,
// sorted by partition then low offset, touching intervals of a partition
// merged. On a sink commit the groups are the commit's data files that hold
// rows of several Kafka partitions; on a compaction snapshot, the files
// compaction added. A data file of the snapshot in no group holds rows of
// one Kafka partition only, and its manifest bounds place it. Snapshots
// without the key (every snapshot before file groups) have no groups.
//
// Like the ranges, the groups are a ledger property: a commit whose ledger
// properties exceed the inline threshold writes them to its ranges file.
const KeyFileGroups = "floe.file-groups"

// Span is offsets [Low, High) of one partition that a file group may hold
// rows of.
type Span struct {
	TopicPartition
	Interval
}

func (s Span) String() string { return s.TopicPartition.String() + " " + s.Interval.String() }

// FileGroup is a set of data files (paths) that together hold the rows of
// Spans (and no other rows); no single file is placed by its manifest
// bounds alone: a group is checked, and searched, as a whole.
type FileGroup struct {
	Files []string
	Spans []Span
}

// Holds reports whether the group's spans include offset of tp.
func (g FileGroup) Holds(tp TopicPartition, offset int64) bool {
	for _, s := range g.Spans {
		if s.TopicPartition == tp && s.Contains(offset) {
			return true
		}
	}
	return false
}

// MergeSpans returns spans sorted by partition then low offset, with the
// intervals of one partition that touch or overlap merged; empty spans
// are dropped.
func MergeSpans(spans []Span) []Span {
	ss := slices.Clone(spans)
	slices.SortFunc(ss, func(a, b Span) int {
		if c := a.TopicPartition.Compare(b.TopicPartition); c != 0 {
			return c
		}
		return cmp.Compare(a.Low, b.Low)
	})
	out := ss[:0]
	for _, s := range ss {
		if s.Len() <= 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].TopicPartition == s.TopicPartition && s.Low <= out[n-1].High {
			out[n-1].High = max(out[n-1].High, s.High)
			continue
		}
		out = append(out, s)
	}
	return slices.Clip(out)
}

// fileGroupJSON is the JSON form of one group.
type fileGroupJSON struct {
	Files []string          `json:"files"`
	Spans map[string]string `json:"spans"`
}

// EncodeFileGroups returns the KeyFileGroups value of groups, their spans
// merged (MergeSpans). Every group needs a file and a non-empty span, and a
// file belongs to one group at most.
func EncodeFileGroups(groups []FileGroup) (string, error) {
	out := make([]fileGroupJSON, 0, len(groups))
	seen := map[string]bool{}
	for i, g := range groups {
		if len(g.Files) == 0 {
			return "", fmt.Errorf("encode file groups: group %d has no files", i)
		}
		for _, f := range g.Files {
			if f == "" {
				return "", fmt.Errorf("encode file groups: group %d has a file without a path", i)
			}
			if seen[f] {
				return "", fmt.Errorf("encode file groups: file %s is in two groups", f)
			}
			seen[f] = true
		}
		for _, s := range g.Spans {
			if err := (Range{TopicPartition: s.TopicPartition, Interval: s.Interval}).Validate(); err != nil {
				return "", fmt.Errorf("encode file groups: group %d: span %w", i, err)
			}
			if !topicName.MatchString(s.Topic) {
				return "", fmt.Errorf("encode file groups: group %d: %q is not a legal Kafka topic name", i, s.Topic)
			}
		}
		spans := MergeSpans(g.Spans)
		if len(spans) == 0 {
			return "", fmt.Errorf("encode file groups: group %d (%s) has no spans", i, g.Files[0])
		}
		j := fileGroupJSON{Files: g.Files, Spans: map[string]string{}}
		var b strings.Builder
		for k, s := range spans {
			fmt.Fprintf(&b, "%d:%d-%d", s.Partition, s.Low, s.High)
			if k == len(spans)-1 || spans[k+1].Topic != s.Topic {
				j.Spans[s.Topic] = b.String()
				b.Reset()
			} else {
				b.WriteByte(',')
			}
		}
		out = append(out, j)
	}
	// encoding/json sorts map keys: the value depends on the groups only.
	v, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("encode file groups: %w", err)
	}
	return string(v), nil
}

// DecodeFileGroups decodes a KeyFileGroups value. A value that does not
// decode is an error naming the group and the part that is wrong; spans
// come back sorted and merged.
func DecodeFileGroups(v string) ([]FileGroup, error) {
	var js []fileGroupJSON
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&js); err != nil || dec.More() {
		return nil, errors.New(`want a JSON array of {"files": [paths], "spans": {topic: "partition:low-high,..."}}`)
	}
	if len(js) == 0 {
		return nil, errors.New("empty list of file groups")
	}
	out := make([]FileGroup, 0, len(js))
	seen := map[string]bool{}
	for i, j := range js {
		if len(j.Files) == 0 {
			return nil, fmt.Errorf("group %d has no files", i)
		}
		for _, f := range j.Files {
			if f == "" {
				return nil, fmt.Errorf("group %d has a file without a path", i)
			}
			if seen[f] {
				return nil, fmt.Errorf("file %s is in two groups", f)
			}
			seen[f] = true
		}
		if len(j.Spans) == 0 {
			return nil, fmt.Errorf("group %d (%s) has no spans", i, j.Files[0])
		}
		g := FileGroup{Files: j.Files}
		for _, topic := range slices.Sorted(maps.Keys(j.Spans)) {
			if !topicName.MatchString(topic) {
				return nil, fmt.Errorf("group %d: %q is not a legal Kafka topic name", i, topic)
			}
			rs, err := decodeRanges(topic, j.Spans[topic], true, false, false)
			if err != nil {
				return nil, fmt.Errorf("group %d: spans of %s: %w", i, topic, err)
			}
			for _, r := range rs {
				if r.Len() == 0 {
					return nil, fmt.Errorf("group %d: span %s of %s is empty", i, r.Interval, r.TopicPartition)
				}
				g.Spans = append(g.Spans, Span{r.TopicPartition, r.Interval})
			}
		}
		g.Spans = MergeSpans(g.Spans)
		out = append(out, g)
	}
	return out, nil
}

// FileGroupsOf returns the file groups of a snapshot's summary properties
// (a compaction snapshot's, or a sink commit's in inline form), nil when
// it has none; a value that does not decode is a *MalformedError.
func FileGroupsOf(snapshotID int64, props map[string]string) ([]FileGroup, error) {
	v, ok := props[KeyFileGroups]
	if !ok {
		return nil, nil
	}
	gs, err := DecodeFileGroups(v)
	if err != nil {
		return nil, &MalformedError{SnapshotID: snapshotID, Key: KeyFileGroups, Err: err}
	}
	return gs, nil
}

// SpanOutside returns a span of c's file groups that c's ranges that
// produced rows (neither lost nor aborted) do not cover, and ok false when
// they cover every span: a group may hold rows of its commit's ranges only.
func (c Commit) SpanOutside() (s Span, ok bool) {
	var covered []Span
	for _, r := range c.Ranges {
		if !r.Deleted() {
			covered = append(covered, Span{r.TopicPartition, r.Interval})
		}
	}
	covered = MergeSpans(covered)
	for _, g := range c.FileGroups {
		for _, s := range g.Spans {
			i, _ := slices.BinarySearchFunc(covered, s, func(a, b Span) int {
				if c := a.TopicPartition.Compare(b.TopicPartition); c != 0 {
					return c
				}
				return cmp.Compare(a.High, b.Low+1)
			})
			if i == len(covered) || covered[i].TopicPartition != s.TopicPartition || covered[i].Low > s.Low || covered[i].High < s.High {
				return s, true
			}
		}
	}
	return Span{}, false
}
