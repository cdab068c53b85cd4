package mapping

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func tp(topic string, p int32) TopicPartition { return TopicPartition{Topic: topic, Partition: p} }

func rng(topic string, p int32, lo, hi, n int64) Range {
	return Range{TopicPartition: tp(topic, p), Interval: Interval{lo, hi}, Records: n}
}

func TestCommitRoundTrip(t *testing.T) {
	c := Commit{ID: "0b7c1c9e-8f0e-4a53-9d37-6a1d0f6c7a10", Writer: "host:42:abcd", Ranges: []Range{
		rng("orders", 3, 950, 1800, 850),
		rng("orders", 0, 0, 1200, 1187),
		{TopicPartition: tp("orders", 0), Interval: Interval{1200, 1300}, Lost: true},
		rng("orders", 0, 1300, 1301, 0),
		rng("pay.v2_x-y", 1, 5, 5, 0),
		{TopicPartition: tp("pay.v2_x-y", 2), Interval: Interval{0, 10}, Records: 6, DeadLetters: 3},
	}, DeadLetterFiles: []string{"s3://w/lake/t_dlq/data/a.parquet"}, DeadLetterTable: "lake.t_dlq"}
	props, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got := props["floe.ranges.orders"]; got != "0:0-1200:1187,0:1300-1301:0,3:950-1800:850" {
		t.Fatalf("encoding changed: %q", got)
	}
	if got := props["floe.lost.orders"]; got != "0:1200-1300" {
		t.Fatalf("lost encoding changed: %q", got)
	}
	props["other.key"] = "kept out of the ledger"
	at := time.UnixMilli(1_700_000_000_000).UTC()
	got, err := DecodeCommit(7, at, props)
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.SnapshotID, want.CommittedAt = 7, at
	SortRanges(want.Ranges)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	base := map[string]string{KeyVersion: "1", KeyCommitID: "id", KeyWriter: "w"}
	cases := map[string]map[string]string{
		"no ranges":         {},
		"bad version":       {KeyVersion: "9", "floe.ranges.t": "0:0-1:1"},
		"garbage":           {"floe.ranges.t": "zero"},
		"missing records":   {"floe.ranges.t": "0:0-10"},
		"reversed":          {"floe.ranges.t": "0:10-5:0"},
		"too many records":  {"floe.ranges.t": "0:0-5:6"},
		"negative":          {"floe.ranges.t": "0:-1-5:0"},
		"overlap in commit": {"floe.ranges.t": "0:0-10:1,0:5-12:1"},
		"bad topic":         {"floe.ranges.a:b": "0:0-1:1"},
		"unknown key":       {"floe.ranges.t": "0:0-1:1", "floe.frobnicate": "x"},
		"lost with records": {"floe.lost.t": "0:0-5:1"},
		"empty value":       {"floe.ranges.t": ""},
		"partition int32":   {"floe.ranges.t": "4294967296:0-1:1"},
		"empty commit id":   {KeyCommitID: "", "floe.ranges.t": "0:0-1:1"},
	}
	for name, extra := range cases {
		t.Run(name, func(t *testing.T) {
			props := map[string]string{}
			for k, v := range base {
				props[k] = v
			}
			for k, v := range extra {
				props[k] = v
			}
			_, err := DecodeCommit(42, time.Time{}, props)
			var me *MalformedError
			if !errors.As(err, &me) || me.SnapshotID != 42 {
				t.Fatalf("err = %v, want a MalformedError naming snapshot 42", err)
			}
			if !strings.Contains(err.Error(), "snapshot 42") {
				t.Fatalf("error does not name the snapshot: %v", err)
			}
		})
	}
}

// TestTopicIDs: version 2 commits carry the topic ID of each topic they
// hold ranges of; version 1 commits (written before) still decode, without
// one, and may not carry one.
func TestTopicIDs(t *testing.T) {
	id := FormatTopicID([16]byte{0xf1, 0xb3, 0x31, 0x59, 6, 0xca, 0x43, 0x4c, 0x89, 0x0d, 0x67, 0xb1, 0xac, 0xba, 0xc9, 0x58})
	if id != "8bMxWQbKQ0yJDWexrLrJWA" {
		t.Fatalf("FormatTopicID = %q, want Kafka's text form", id)
	}
	if FormatTopicID([16]byte{}) != "" {
		t.Fatal("the zero topic ID (a broker without IDs) must format as empty")
	}
	c := Commit{ID: "c", Writer: "w", Ranges: []Range{rng("orders", 0, 0, 5, 5)}, TopicIDs: map[string]string{"orders": id}}
	props, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if props[KeyVersion] != "2" || props[KeyTopicIDPrefix+"orders"] != id {
		t.Fatalf("props %v", props)
	}
	got, err := DecodeCommit(1, time.Time{}, props)
	if err != nil || got.TopicIDs["orders"] != id {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	v1 := map[string]string{KeyVersion: "1", KeyCommitID: "old", KeyWriter: "w", KeyRangesPrefix + "orders": "0:0-5:5"}
	if old, err := DecodeCommit(2, time.Time{}, v1); err != nil || old.TopicIDs != nil {
		t.Fatalf("a version 1 commit: %+v, %v", old, err)
	}
	v1[KeyTopicIDPrefix+"orders"] = id
	if _, err := DecodeCommit(2, time.Time{}, v1); err == nil {
		t.Fatal("a version 1 commit with a topic id decoded")
	}
	for name, bad := range map[string]map[string]string{
		"not base64":      {KeyTopicIDPrefix + "orders": "not an id!"},
		"short":           {KeyTopicIDPrefix + "orders": "AAAA"},
		"topic not in it": {KeyTopicIDPrefix + "other": id},
	} {
		p := map[string]string{KeyVersion: "2", KeyCommitID: "c", KeyWriter: "w", KeyRangesPrefix + "orders": "0:0-5:5"}
		for k, v := range bad {
			p[k] = v
		}
		if _, err := DecodeCommit(3, time.Time{}, p); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := (Commit{ID: "c", Ranges: c.Ranges, TopicIDs: map[string]string{"other": id}}).Encode(); err == nil {
		t.Error("encoded a topic id of a topic without ranges")
	}
	l := Ledger{Commits: []Commit{got, {Ranges: c.Ranges}, {Ranges: c.Ranges, TopicIDs: map[string]string{"orders": "AAAAAAAAAAAAAAAAAAAAAA"}}}}
	if l.TopicID("orders") != "AAAAAAAAAAAAAAAAAAAAAA" || len(l.TopicIDs("orders")) != 2 || l.TopicID("other") != "" {
		t.Fatalf("ledger topic ids: %q %q", l.TopicID("orders"), l.TopicIDs("orders"))
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	for name, c := range map[string]Commit{
		"no id":     {Ranges: []Range{rng("t", 0, 0, 1, 1)}},
		"no ranges": {ID: "x"},
		"bad topic": {ID: "x", Ranges: []Range{rng("a b", 0, 0, 1, 1)}},
		"records":   {ID: "x", Ranges: []Range{rng("t", 0, 0, 1, 2)}},
	} {
		if _, err := c.Encode(); err == nil {
			t.Errorf("%s: Encode accepted %+v", name, c)
		}
	}
}

func TestCover(t *testing.T) {
	rs := []Range{
		rng("t", 0, 10, 20, 10),
		rng("t", 0, 0, 10, 9),
		rng("t", 0, 25, 30, 5),
		rng("t", 0, 28, 35, 7),
		{TopicPartition: tp("t", 0), Interval: Interval{35, 40}, Lost: true},
		rng("t", 0, 40, 40, 0),
	}
	c := Cover(rs)
	want := Coverage{First: 0, Next: 40, Ranges: 6, Records: 31,
		Gaps: []Interval{{20, 25}}, Overlaps: []Interval{{28, 30}}, Lost: []Interval{{35, 40}}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	if c := Cover(nil); c.Ranges != 0 || c.Next != 0 {
		t.Fatalf("empty cover %+v", c)
	}
	for name, tc := range map[string]struct {
		ranges  []Range
		started bool
	}{
		"start":            {[]Range{rng("t", 0, 20, 30, 10), rng("t", 0, 20, 20, 0)}, true},
		"head lost":        {[]Range{{TopicPartition: tp("t", 0), Interval: Interval{0, 20}, Lost: true}, rng("t", 0, 20, 30, 10)}, true},
		"no start":         {[]Range{rng("t", 0, 20, 30, 10)}, false},
		"start further on": {[]Range{rng("t", 0, 20, 30, 10), rng("t", 0, 30, 30, 0)}, false},
	} {
		if c := Cover(tc.ranges); c.Started != tc.started {
			t.Errorf("%s: started %v, want %v", name, c.Started, tc.started)
		}
	}
}

func TestLedgerNextAndLocate(t *testing.T) {
	l := Ledger{Commits: []Commit{
		{SnapshotID: 1, Ranges: []Range{rng("t", 0, 0, 10, 10), rng("t", 1, 0, 4, 4)}},
		{SnapshotID: 2, Ranges: []Range{rng("t", 0, 10, 15, 3)}},
	}}
	if n := l.Next(); n[tp("t", 0)] != 15 || n[tp("t", 1)] != 4 || len(n) != 2 {
		t.Fatalf("next %v", n)
	}
	if c, r, ok := l.Locate(tp("t", 0), 12); !ok || c.SnapshotID != 2 || r.Low != 10 {
		t.Fatalf("locate 12: %v %v %v", c.SnapshotID, r, ok)
	}
	if _, _, ok := l.Locate(tp("t", 0), 15); ok {
		t.Fatal("offset 15 is not sunk yet")
	}
	if ps := l.Partitions(); !reflect.DeepEqual(ps, []TopicPartition{tp("t", 0), tp("t", 1)}) {
		t.Fatalf("partitions %v", ps)
	}
}

// FuzzDecodeCommit checks that decoding never panics and that whatever
// decodes re-encodes to the same ledger entry, over every key a commit's
// summary has (versions, lost and aborted ranges and file groups from a
// review).
func FuzzDecodeCommit(f *testing.F) {
	f.Add("1", "orders", "0:0-1200:1187,3:950-1800:850", "0:1200-1300", "", "")
	f.Add("1", "t", "0:0-0:0", "", "", "")
	f.Add("1", "x", "1:5-4:0", "1:a-b", "", "")
	f.Add("2", "t", "0:0-10:10,1:5-9:3:1", "", "", "")
	f.Add("2", "a.b", "0:0-0:0", "0:10-20", "0:20-30", `[{"files":["x"],"spans":{"a.b":"0:0-5"}}]`)
	f.Fuzz(func(t *testing.T, version, topic, ranges, lost, aborted, groups string) {
		props := map[string]string{KeyVersion: version, KeyCommitID: "id", KeyWriter: "w", KeyRangesPrefix + topic: ranges}
		if lost != "" {
			props[KeyLostPrefix+topic] = lost
		}
		if aborted != "" {
			props[KeyAbortedPrefix+topic] = aborted
		}
		if groups != "" {
			props[KeyFileGroups] = groups
		}
		c, err := DecodeCommit(1, time.Time{}, props)
		if err != nil {
			var me *MalformedError
			if !errors.As(err, &me) {
				t.Fatalf("error is not a MalformedError: %v", err)
			}
			return
		}
		again, err := c.Encode()
		if err != nil {
			t.Fatalf("decoded commit does not encode: %v", err)
		}
		c2, err := DecodeCommit(1, time.Time{}, again)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-decode: %v\n%+v\n%+v", err, c, c2)
		}
	})
}

// TestRangeCountsEncoding: an upsert table's ranges carry deletes and
// skipped records after the dead letters, trailing zeros left out, and
// decode back; ledgers without them decode with 0; a zero at the end or
// counts beyond the offsets are malformed.
func TestRangeCountsEncoding(t *testing.T) {
	tp := TopicPartition{Topic: "t", Partition: 3}
	c := Commit{ID: "c1", Writer: "w", Ranges: []Range{
		{TopicPartition: tp, Interval: Interval{Low: 0, High: 10}, Records: 7, Deletes: 2},
		{TopicPartition: TopicPartition{Topic: "t", Partition: 4}, Interval: Interval{Low: 0, High: 10}, Records: 5, DeadLetters: 1, Deletes: 2, Skipped: 1},
		{TopicPartition: TopicPartition{Topic: "t", Partition: 5}, Interval: Interval{Low: 0, High: 10}, Records: 5, DeadLetters: 1},
	}}
	props, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := props[KeyRangesPrefix+"t"], "3:0-10:7:0:2,4:0-10:5:1:2:1,5:0-10:5:1"; got != want {
		t.Fatalf("encoded %q, want %q", got, want)
	}
	back, err := DecodeCommit(1, time.Time{}, props)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range back.Ranges {
		if r != c.Ranges[i] {
			t.Fatalf("range %d decoded %+v, want %+v", i, r, c.Ranges[i])
		}
	}
	old := map[string]string{KeyVersion: "2", KeyCommitID: "c0", KeyWriter: "w", KeyRangesPrefix + "t": "3:0-10:8:2"}
	back, err = DecodeCommit(1, time.Time{}, old)
	if err != nil {
		t.Fatal(err)
	}
	if r := back.Ranges[0]; r.Records != 8 || r.DeadLetters != 2 || r.Deletes != 0 || r.Skipped != 0 {
		t.Fatalf("old range decoded %+v", r)
	}
	for _, bad := range []string{"3:0-10:7:0:0", "3:0-10:7:0:2:0", "3:0-10:7:0:2:1:1", "3:0-10:7:1:2:1", "3:0-10:7:0:-1:1"} {
		props := map[string]string{KeyVersion: "2", KeyCommitID: "c0", KeyWriter: "w", KeyRangesPrefix + "t": bad}
		if _, err := DecodeCommit(1, time.Time{}, props); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	if err := (Range{TopicPartition: tp, Interval: Interval{Low: 0, High: 3}, Records: 1, Deletes: 2, Skipped: 1}).Validate(); err == nil {
		t.Error("a range counting more records than offsets is valid")
	}
}
