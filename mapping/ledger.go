package mapping

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Snapshot summary property keys of the ledger. Every floe commit carries
// KeyVersion, KeyCommitID and KeyWriter, one KeyRangesPrefix+topic key per
// topic it advanced (KeyLostPrefix+topic where it recorded a loss), and,
// from version 2 on, KeyTopicIDPrefix+topic for each of those topics whose
// broker reports topic IDs, and KeyAbortedPrefix+topic where offsets
// deleted by retention were judged to have held only aborted records.
//
// A ranges value lists the topic's ranges as comma-separated
// "partition:low-high:records[:dead[:deletes[:skipped]]]" items: the
// counts of Range, trailing zero counts left out (so a range of rows only
// is "partition:low-high:records", and "partition:low-high:records:dead"
// one that sent records to the dead-letter table), for example
//
//	floe.ranges.orders = "0:0-1200:1187,3:950-1800:850"
//
// and a lost (or aborted) value lists "partition:low-high" items. Offsets are decimal,
// [low, high) is half-open. This keeps a 16-partition commit under 400 bytes
// of metadata.json. An empty range "partition:pos-pos:0" is a start: it
// records where a writer began a partition the ledger did not have yet,
// before anything of it was sunk (see Range.IsStart).
//
// A topic id value is the Kafka topic ID the ranges were read from, in
// Kafka's own text form (URL-safe base64 of the 16-byte UUID, unpadded),
// for example "floe.topic-id.orders = 8bMxWQbKQ0yJDWexrLrJWA".
const (
	KeyPrefix        = "floe."
	KeyVersion       = "floe.version"
	KeyCommitID      = "floe.commit-id"
	KeyWriter        = "floe.writer"
	KeyRangesPrefix  = "floe.ranges."
	KeyLostPrefix    = "floe.lost."
	KeyAbortedPrefix = "floe.aborted."
	KeyTopicIDPrefix = "floe.topic-id."
	// KeyDeadLetterFiles lists, as a JSON array, the data files of the
	// dead-letter table that hold the commit's dead letters: the commit is
	// what decides they exist, and a writer that crashed before adding them
	// to the dead-letter table has them added by the next one.
	KeyDeadLetterFiles = "floe.dead-letter-files"
	// KeyDeadLetterTable names the dead-letter table those files belong to.
	KeyDeadLetterTable = "floe.dead-letter-table"

	// LedgerVersion is the encoding version floe writes for ranges
	// inline (a commit of a ranges file is LedgerVersionRangesFile).
	// Version 1 (no topic ids, no starts) is still read.
	LedgerVersion = "2"
)

// readableVersions are the encoding versions DecodeCommit accepts.
var readableVersions = []string{"1", LedgerVersion, LedgerVersionRangesFile}

// FormatTopicID returns a Kafka topic ID in Kafka's text form, or "" for
// the all-zero ID of a broker without topic IDs.
func FormatTopicID(id [16]byte) string {
	if id == ([16]byte{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// checkTopicID reports whether s is a topic ID in Kafka's text form.
func checkTopicID(s string) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return fmt.Errorf("topic id %q is not a Kafka topic ID (22 characters of URL-safe base64)", s)
	}
	return nil
}

// Commit is one floe snapshot's entry in the ledger.
type Commit struct {
	// SnapshotID and CommittedAt come from the Iceberg snapshot; they are
	// zero for a commit not yet made.
	SnapshotID  int64
	CommittedAt time.Time
	// ID is the commit's UUID, Writer the identity of the process that made it.
	ID     string
	Writer string
	// Ranges are the ranges the commit consumed, lost ones included, sorted.
	Ranges []Range
	// TopicIDs maps topics of Ranges to the Kafka topic ID they were read
	// from (FormatTopicID); a topic is absent when its broker has no topic
	// IDs, and for every topic of a version 1 commit.
	TopicIDs map[string]string
	// DeadLetterFiles are the data files of the dead-letter table
	// DeadLetterTable (namespace.name) that hold the records of Ranges'
	// DeadLetters.
	DeadLetterFiles []string
	DeadLetterTable string
	// FileGroups are the commit's data files that hold rows of several
	// Kafka partitions, with the spans of Ranges each group holds
	// (KeyFileGroups); the commit's other data files hold one partition's
	// rows each. Nil for every commit before file groups.
	FileGroups []FileGroup
}

// MalformedError reports a snapshot whose floe properties do not decode.
type MalformedError struct {
	SnapshotID int64
	Key        string
	Err        error
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("snapshot %d has a malformed ledger property %q: %v (the table was edited by something other than floe, or by a newer floe)", e.SnapshotID, e.Key, e.Err)
}

func (e *MalformedError) Unwrap() error { return e.Err }

// topicName matches legal Kafka topic names, which never contain the
// separators of the encoding.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Encode returns the snapshot summary properties that record c.
func (c Commit) Encode() (map[string]string, error) {
	if c.ID == "" {
		return nil, errors.New("encode ledger: commit has no id")
	}
	if len(c.Ranges) == 0 {
		return nil, errors.New("encode ledger: commit has no ranges")
	}
	rs := slices.Clone(c.Ranges)
	SortRanges(rs)
	ranges := map[string]*strings.Builder{}
	lost := map[string]*strings.Builder{}
	aborted := map[string]*strings.Builder{}
	for _, r := range rs {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("encode ledger: %w", err)
		}
		if !topicName.MatchString(r.Topic) {
			return nil, fmt.Errorf("encode ledger: %q is not a legal Kafka topic name", r.Topic)
		}
		dst := ranges
		switch {
		case r.Lost:
			dst = lost
		case r.Aborted:
			dst = aborted
		}
		b := dst[r.Topic]
		if b == nil {
			b = &strings.Builder{}
			dst[r.Topic] = b
		} else {
			b.WriteByte(',')
		}
		fmt.Fprintf(b, "%d:%d-%d", r.Partition, r.Low, r.High)
		if !r.Deleted() {
			counts := []int64{r.Records, r.DeadLetters, r.Deletes, r.Skipped}
			for len(counts) > 1 && counts[len(counts)-1] == 0 {
				counts = counts[:len(counts)-1]
			}
			for _, n := range counts {
				fmt.Fprintf(b, ":%d", n)
			}
		}
	}
	props := map[string]string{
		KeyVersion:  LedgerVersion,
		KeyCommitID: c.ID,
		KeyWriter:   c.Writer,
	}
	for t, b := range ranges {
		props[KeyRangesPrefix+t] = b.String()
	}
	for t, b := range lost {
		props[KeyLostPrefix+t] = b.String()
	}
	for t, b := range aborted {
		props[KeyAbortedPrefix+t] = b.String()
	}
	for t, id := range c.TopicIDs {
		if ranges[t] == nil && lost[t] == nil && aborted[t] == nil {
			return nil, fmt.Errorf("encode ledger: topic id of %s, which the commit has no range of", t)
		}
		if err := checkTopicID(id); err != nil {
			return nil, fmt.Errorf("encode ledger: topic %s: %w", t, err)
		}
		props[KeyTopicIDPrefix+t] = id
	}
	if len(c.DeadLetterFiles) > 0 {
		b, err := json.Marshal(c.DeadLetterFiles)
		if err != nil {
			return nil, fmt.Errorf("encode ledger: dead-letter files: %w", err)
		}
		props[KeyDeadLetterFiles] = string(b)
		if c.DeadLetterTable == "" {
			return nil, errors.New("encode ledger: dead-letter files without their table")
		}
		props[KeyDeadLetterTable] = c.DeadLetterTable
	}
	if len(c.FileGroups) > 0 {
		v, err := EncodeFileGroups(c.FileGroups)
		if err != nil {
			return nil, fmt.Errorf("encode ledger: %w", err)
		}
		props[KeyFileGroups] = v
	}
	return props, nil
}

// IsFloeCommit reports whether snapshot summary properties carry a floe
// ledger entry.
func IsFloeCommit(props map[string]string) bool {
	_, ok := props[KeyCommitID]
	return ok
}

// DecodeCommit reads the ledger entry of one snapshot. Decoding is strict:
// any floe.* property that does not parse is a *MalformedError naming the
// snapshot and the key. A summary that references a ranges file is a
// *RangesFileError: its ranges are in the file (DecodeRangesFile).
func DecodeCommit(snapshotID int64, committedAt time.Time, props map[string]string) (Commit, error) {
	bad := func(key string, err error) (Commit, error) {
		return Commit{}, &MalformedError{SnapshotID: snapshotID, Key: key, Err: err}
	}
	if ref, ok, err := RangesRefOf(snapshotID, props); err != nil {
		return Commit{}, err
	} else if ok {
		return Commit{}, &RangesFileError{SnapshotID: snapshotID, Path: ref.Path, Err: errors.New("the commit's ranges are in that file, which was not read")}
	}
	c := Commit{SnapshotID: snapshotID, CommittedAt: committedAt}
	if v := props[KeyVersion]; !slices.Contains(readableVersions, v) {
		return bad(KeyVersion, fmt.Errorf("version %q, this floe reads %s", v, strings.Join(readableVersions, " and ")))
	}
	c.ID = props[KeyCommitID]
	if c.ID == "" {
		return bad(KeyCommitID, errors.New("empty commit id"))
	}
	c.Writer = props[KeyWriter]
	for _, key := range slices.Sorted(maps.Keys(props)) {
		var topic string
		var lost, aborted bool
		v1 := props[KeyVersion] == "1"
		switch {
		case strings.HasPrefix(key, KeyRangesPrefix):
			topic = strings.TrimPrefix(key, KeyRangesPrefix)
		case strings.HasPrefix(key, KeyLostPrefix):
			topic, lost = strings.TrimPrefix(key, KeyLostPrefix), true
		case strings.HasPrefix(key, KeyAbortedPrefix) && !v1:
			topic, aborted = strings.TrimPrefix(key, KeyAbortedPrefix), true
		case strings.HasPrefix(key, KeyTopicIDPrefix) && !v1:
			topic := strings.TrimPrefix(key, KeyTopicIDPrefix)
			if props[KeyRangesPrefix+topic] == "" && props[KeyLostPrefix+topic] == "" && props[KeyAbortedPrefix+topic] == "" {
				return bad(key, fmt.Errorf("topic id of %q, which the commit has no range of", topic))
			}
			if err := checkTopicID(props[key]); err != nil {
				return bad(key, err)
			}
			if c.TopicIDs == nil {
				c.TopicIDs = map[string]string{}
			}
			c.TopicIDs[topic] = props[key]
			continue
		case key == KeyDeadLetterFiles && !v1:
			if err := json.Unmarshal([]byte(props[key]), &c.DeadLetterFiles); err != nil || len(c.DeadLetterFiles) == 0 {
				return bad(key, errors.New("want a JSON array of file paths"))
			}
			continue
		case key == KeyDeadLetterTable && !v1:
			c.DeadLetterTable = props[key]
			continue
		case key == KeyFileGroups && !v1:
			gs, err := DecodeFileGroups(props[key])
			if err != nil {
				return bad(key, err)
			}
			c.FileGroups = gs
			continue
		case key == KeyVersion || key == KeyCommitID || key == KeyWriter || !strings.HasPrefix(key, KeyPrefix):
			continue
		default:
			return bad(key, errors.New("unknown floe property"))
		}
		if !topicName.MatchString(topic) {
			return bad(key, fmt.Errorf("%q is not a legal Kafka topic name", topic))
		}
		rs, err := decodeRanges(topic, props[key], lost, aborted, !v1)
		if err != nil {
			return bad(key, err)
		}
		c.Ranges = append(c.Ranges, rs...)
	}
	if len(c.Ranges) == 0 {
		return bad(KeyRangesPrefix+"*", errors.New("commit has no ranges"))
	}
	SortRanges(c.Ranges)
	for i := 1; i < len(c.Ranges); i++ {
		a, b := c.Ranges[i-1], c.Ranges[i]
		if a.TopicPartition == b.TopicPartition && b.Low < a.High {
			return bad(KeyRangesPrefix+a.Topic, fmt.Errorf("ranges %s and %s overlap within one commit", a.Interval, b.Interval))
		}
	}
	return c, nil
}

// decodeRanges decodes one ranges, lost or aborted value; counts allows
// the counts after records (version 2): dead letters, deletes, skipped,
// the last of them positive (trailing zeros are left out).
func decodeRanges(topic, v string, lost, aborted, counts bool) ([]Range, error) {
	if v == "" {
		return nil, errors.New("empty value")
	}
	items := strings.Split(v, ",")
	out := make([]Range, 0, len(items))
	want := 3
	if lost || aborted {
		want = 2
	}
	for _, item := range items {
		parts := strings.Split(item, ":")
		if len(parts) != want && (want != 3 || !counts || len(parts) < 3 || len(parts) > 6) {
			return nil, fmt.Errorf("item %q: want %d colon-separated fields", item, want)
		}
		p, err := strconv.ParseInt(parts[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("item %q: partition: %w", item, err)
		}
		lo, hi, ok := strings.Cut(parts[1], "-")
		if !ok {
			return nil, fmt.Errorf("item %q: range %q is not low-high", item, parts[1])
		}
		r := Range{TopicPartition: TopicPartition{topic, int32(p)}, Lost: lost, Aborted: aborted}
		if r.Low, err = strconv.ParseInt(lo, 10, 64); err != nil {
			return nil, fmt.Errorf("item %q: low: %w", item, err)
		}
		if r.High, err = strconv.ParseInt(hi, 10, 64); err != nil {
			return nil, fmt.Errorf("item %q: high: %w", item, err)
		}
		if !r.Deleted() {
			if r.Records, err = strconv.ParseInt(parts[2], 10, 64); err != nil {
				return nil, fmt.Errorf("item %q: records: %w", item, err)
			}
		}
		extra := []*int64{&r.DeadLetters, &r.Deletes, &r.Skipped}
		names := []string{"dead letters", "deletes", "skipped"}
		for i, f := range parts[min(3, len(parts)):] {
			last := 3+i == len(parts)-1
			if *extra[i], err = strconv.ParseInt(f, 10, 64); err != nil || *extra[i] < 0 || (last && *extra[i] == 0) {
				want := "a count"
				if last {
					want = "a positive count (a zero count at the end is left out)"
				}
				return nil, fmt.Errorf("item %q: %s: want %s", item, names[i], want)
			}
		}
		if err := r.Validate(); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Ledger is the ordered list of floe commits of one table branch, oldest
// first.
type Ledger struct {
	Commits []Commit
}

// Partitions returns every partition the ledger mentions, sorted.
func (l Ledger) Partitions() []TopicPartition {
	seen := map[TopicPartition]bool{}
	for _, c := range l.Commits {
		for _, r := range c.Ranges {
			seen[r.TopicPartition] = true
		}
	}
	tps := slices.Collect(maps.Keys(seen))
	slices.SortFunc(tps, TopicPartition.Compare)
	return tps
}

// Topics returns the topics of every partition the ledger mentions, sorted.
func (l Ledger) Topics() []string { return topicsOf(l.Partitions()) }

// topicsOf returns the topics of sorted partitions, sorted.
func topicsOf(tps []TopicPartition) []string {
	var topics []string
	for _, tp := range tps {
		if len(topics) == 0 || topics[len(topics)-1] != tp.Topic {
			topics = append(topics, tp.Topic)
		}
	}
	return topics
}

// Ranges returns every range of one partition, in commit order.
func (l Ledger) Ranges(tp TopicPartition) []Range {
	var out []Range
	for _, c := range l.Commits {
		for _, r := range c.Ranges {
			if r.TopicPartition == tp {
				out = append(out, r)
			}
		}
	}
	return out
}

// Next returns, per partition, the offset after the highest one the ledger
// covers: where a writer resumes.
func (l Ledger) Next() map[TopicPartition]int64 {
	next := map[TopicPartition]int64{}
	for _, c := range l.Commits {
		for _, r := range c.Ranges {
			if n, ok := next[r.TopicPartition]; !ok || r.High > n {
				next[r.TopicPartition] = r.High
			}
		}
	}
	return next
}

// TopicID returns the Kafka topic ID the latest commit that recorded one
// for topic read it from, or "" when no commit did (a ledger written before
// floe recorded topic IDs, or a broker without them).
func (l Ledger) TopicID(topic string) string {
	for i := len(l.Commits) - 1; i >= 0; i-- {
		if id := l.Commits[i].TopicIDs[topic]; id != "" {
			return id
		}
	}
	return ""
}

// TopicIDs returns the distinct topic IDs the ledger recorded for topic, in
// the order they first appear. More than one means the ledger holds ranges
// of different topics that had the same name.
func (l Ledger) TopicIDs(topic string) []string {
	var ids []string
	for _, c := range l.Commits {
		if id := c.TopicIDs[topic]; id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Locate returns the commit and range holding offset in partition tp, and
// false when no range covers it.
func (l Ledger) Locate(tp TopicPartition, offset int64) (Commit, Range, bool) {
	for _, c := range l.Commits {
		for _, r := range c.Ranges {
			if r.TopicPartition == tp && r.Contains(offset) {
				return c, r, true
			}
		}
	}
	return Commit{}, Range{}, false
}
