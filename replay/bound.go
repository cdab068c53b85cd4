package replay

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/floe-dev/floe/mapping"
)

// Bound is where a replay starts (--from) or ends (--until). Exactly one of
// its forms is set; the zero Bound is the log's edge: earliest for --from,
// the end offsets at start for --until.
type Bound struct {
	// Spec is the text the bound was parsed from, for messages.
	Spec string
	// Time: per partition, the first offset whose record timestamp is at or
	// after Time (ListOffsets by timestamp), or the end offset where none is.
	Time time.Time
	// Offsets per partition; partitions not named start at their log start
	// (--from) or end at their end offset (--until).
	Offsets map[int32]int64
	// Snapshot (--from only): the positions a floe table's snapshot had
	// reached; Run resolves it into Offsets.
	Snapshot int64
	// fixed: the end an earlier run of this replay recorded when it
	// began (PropUntil), not the user's.
	fixed bool
}

// IsEdge reports whether b is the log's edge (earliest or end).
func (b Bound) IsEdge() bool { return b.Time.IsZero() && b.Offsets == nil && b.Snapshot == 0 }

// ParseBound parses a --from (from true) or --until value for topic:
// "earliest" (from) or "end" (until), an RFC 3339 time, "snapshot:ID"
// (from), or offsets "P=OFFSET[,P=OFFSET]" (TOPIC/P=OFFSET also accepted).
func ParseBound(s, topic string, from bool) (Bound, error) {
	setting, edge := SettingUntil, "end"
	if from {
		setting, edge = SettingFrom, "earliest"
	}
	bad := func(reason string) (Bound, error) {
		return Bound{}, &BoundError{Setting: setting, Value: s, Reason: reason}
	}
	s = strings.TrimSpace(s)
	b := Bound{Spec: s}
	switch {
	case s == "" || s == edge:
		b.Spec = edge
		return b, nil
	case from && strings.HasPrefix(s, "snapshot:"):
		id, err := strconv.ParseInt(strings.TrimPrefix(s, "snapshot:"), 10, 64)
		if err != nil || id <= 0 {
			return bad("want snapshot:ID with a snapshot id of a floe table")
		}
		b.Snapshot = id
		return b, nil
	case strings.Contains(s, "="):
		cut, err := mapping.ParseCut(s, topic)
		if err != nil {
			return bad(err.Error())
		}
		b.Offsets = map[int32]int64{}
		for tp, o := range cut {
			if tp.Topic != topic {
				return bad(fmt.Sprintf("names topic %s, but the replay reads %s", tp.Topic, topic))
			}
			b.Offsets[tp.Partition] = o
		}
		return b, nil
	}
	t, ago, ok := mapping.ParseWhen(s, time.Now())
	switch {
	case !ok:
		forms := "end, an RFC 3339 time (2024-05-01T09:00:00Z) or offsets P=OFFSET[,P=OFFSET]"
		if from {
			forms = "earliest, an RFC 3339 time (2024-05-01T09:00:00Z), offsets P=OFFSET[,P=OFFSET] or snapshot:ID"
		}
		return bad("want " + forms)
	case ago:
		// Read as floe as-of --time and dead-letters --since read it,
		// but a replay is continued by running it again, and "1h ago"
		// is another time at every run: the time it stands for is what
		// to give.
		return bad(fmt.Sprintf("a duration back from now is another time at every run, and a replay is continued by running the same command again; give the time it stands for now: %s", t.UTC().Truncate(time.Second).Format(time.RFC3339)))
	}
	b.Time = t
	return b, nil
}
