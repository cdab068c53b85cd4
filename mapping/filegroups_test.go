package mapping

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func span(topic string, p int32, lo, hi int64) Span { return Span{tp(topic, p), Interval{lo, hi}} }

// A commit's file groups round-trip through its summary properties, spans
// sorted by partition then low and touching intervals merged, in the
// documented JSON.
func TestFileGroupsRoundTrip(t *testing.T) {
	c := Commit{ID: "c1", Writer: "w", Ranges: []Range{
		rng("orders", 0, 0, 10, 10), rng("orders", 0, 10, 20, 10), rng("orders", 3, 5, 9, 4),
		{TopicPartition: tp("orders", 3), Interval: Interval{9, 30}, Lost: true},
		rng("orders", 3, 30, 40, 10), rng("pay", 1, 0, 4, 4), rng("orders", 9, 0, 100, 100),
	}, FileGroups: []FileGroup{
		{Files: []string{"s3://b/t/data/a.parquet", "s3://b/t/data/b.parquet"},
			Spans: []Span{span("orders", 3, 30, 40), span("pay", 1, 0, 4), span("orders", 0, 10, 20), span("orders", 0, 0, 10), span("orders", 3, 5, 9)}},
		{Files: []string{"s3://b/t/data/c.parquet"}, Spans: []Span{span("orders", 9, 0, 100)}},
	}}
	props, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"files":["s3://b/t/data/a.parquet","s3://b/t/data/b.parquet"],"spans":{"orders":"0:0-20,3:5-9,3:30-40","pay":"1:0-4"}},` +
		`{"files":["s3://b/t/data/c.parquet"],"spans":{"orders":"9:0-100"}}]`
	if got := props[KeyFileGroups]; got != want {
		t.Fatalf("encoded\n %s\nwant\n %s", got, want)
	}
	got, err := DecodeCommit(7, time.Time{}, props)
	if err != nil {
		t.Fatal(err)
	}
	wantGroups := []FileGroup{
		{Files: c.FileGroups[0].Files, Spans: []Span{span("orders", 0, 0, 20), span("orders", 3, 5, 9), span("orders", 3, 30, 40), span("pay", 1, 0, 4)}},
		c.FileGroups[1],
	}
	if !reflect.DeepEqual(got.FileGroups, wantGroups) {
		t.Fatalf("decoded %+v\nwant %+v", got.FileGroups, wantGroups)
	}
	if s, out := got.SpanOutside(); out {
		t.Fatalf("span %s reported outside the commit's ranges", s)
	}
	if !got.FileGroups[0].Holds(tp("orders", 0), 15) || got.FileGroups[0].Holds(tp("orders", 3), 12) {
		t.Fatal("Holds does not follow the spans")
	}
	if gs, err := FileGroupsOf(7, props); err != nil || !reflect.DeepEqual(gs, wantGroups) {
		t.Fatalf("FileGroupsOf: %v %+v", err, gs)
	}
}

// A wide commit's groups go to its ranges file with its ranges, and come
// back from it.
func TestFileGroupsInRangesFile(t *testing.T) {
	c := wideCommit(1000)
	g := FileGroup{Files: []string{"s3://b/t/data/lane-0.parquet"}}
	for _, r := range c.Ranges {
		if !r.Deleted() {
			g.Spans = append(g.Spans, Span{r.TopicPartition, r.Interval})
		}
	}
	c.FileGroups = []FileGroup{g}
	props, file, err := c.EncodeRangesFile("s3://b/t/metadata/floe-ranges/x.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := props[KeyFileGroups]; ok {
		t.Fatal("the groups stayed in the summary")
	}
	if !strings.Contains(string(file), `floe.file-groups`) {
		t.Fatal("the ranges file does not hold the groups")
	}
	got, err := DecodeRangesFile(7, time.Time{}, props, file)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.FileGroups) != 1 || len(got.FileGroups[0].Spans) != 1000 {
		t.Fatalf("decoded %d groups", len(got.FileGroups))
	}
}

// A commit written before file groups decodes exactly as it did: no groups.
func TestFileGroupsOldCommitUnchanged(t *testing.T) {
	old := map[string]string{KeyVersion: "2", KeyCommitID: "c0", KeyWriter: "w",
		KeyRangesPrefix + "t": "0:0-10:10,1:0-5:5", KeyLostPrefix + "t": "2:0-7"}
	got, err := DecodeCommit(3, time.UnixMilli(5).UTC(), old)
	if err != nil {
		t.Fatal(err)
	}
	want := Commit{SnapshotID: 3, CommittedAt: time.UnixMilli(5).UTC(), ID: "c0", Writer: "w", Ranges: []Range{
		rng("t", 0, 0, 10, 10), rng("t", 1, 0, 5, 5), {TopicPartition: tp("t", 2), Interval: Interval{0, 7}, Lost: true}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got, want)
	}
	back, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := back[KeyFileGroups]; ok || len(back) != len(old) {
		t.Fatalf("re-encoded %v, want %v", back, old)
	}
}

// A malformed groups value is a MalformedError naming the key and the part
// that is wrong.
func TestFileGroupsMalformed(t *testing.T) {
	cases := map[string]struct{ value, want string }{
		"not json":       {`{`, "JSON array"},
		"unknown field":  {`[{"files":["a"],"spans":{"t":"0:0-1"},"x":1}]`, "JSON array"},
		"empty list":     {`[]`, "empty list"},
		"no files":       {`[{"files":[],"spans":{"t":"0:0-1"}}]`, "group 0 has no files"},
		"empty path":     {`[{"files":[""],"spans":{"t":"0:0-1"}}]`, "without a path"},
		"no spans":       {`[{"files":["a"],"spans":{}}]`, "group 0 (a) has no spans"},
		"bad topic":      {`[{"files":["a"],"spans":{"a:b":"0:0-1"}}]`, "not a legal Kafka topic"},
		"bad item":       {`[{"files":["a"],"spans":{"t":"0:0-1:5"}}]`, `item "0:0-1:5"`},
		"reversed":       {`[{"files":["a"],"spans":{"t":"0:9-1"}}]`, "0 <= low <= high"},
		"empty span":     {`[{"files":["a"],"spans":{"t":"0:4-4"}}]`, "is empty"},
		"two groups":     {`[{"files":["a"],"spans":{"t":"0:0-1"}},{"files":["a"],"spans":{"t":"1:0-1"}}]`, "file a is in two groups"},
		"partition text": {`[{"files":["a"],"spans":{"t":"x:0-1"}}]`, "partition"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			props := map[string]string{KeyVersion: "2", KeyCommitID: "c", KeyWriter: "w", KeyRangesPrefix + "t": "0:0-1:1", KeyFileGroups: tc.value}
			_, err := DecodeCommit(42, time.Time{}, props)
			var me *MalformedError
			if !errors.As(err, &me) || me.Key != KeyFileGroups || me.SnapshotID != 42 {
				t.Fatalf("err = %v, want a MalformedError of %s", err, KeyFileGroups)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
			if _, err := FileGroupsOf(42, props); !errors.As(err, &me) {
				t.Fatalf("FileGroupsOf: %v", err)
			}
		})
	}
	if _, err := EncodeFileGroups([]FileGroup{{Files: []string{"a"}, Spans: []Span{span("t", 0, 3, 3)}}}); err == nil {
		t.Error("a group of empty spans encoded")
	}
}

// MergeSpans merges touching and overlapping intervals of one partition
// only, and SpanOutside finds a span its commit's data ranges do not cover
// (a lost range included).
func TestMergeSpansAndSpanOutside(t *testing.T) {
	got := MergeSpans([]Span{span("t", 1, 10, 20), span("t", 0, 5, 10), span("t", 1, 0, 10), span("t", 1, 15, 25), span("t", 1, 30, 31), span("t", 0, 0, 5), span("t", 2, 3, 3)})
	want := []Span{span("t", 0, 0, 10), span("t", 1, 0, 25), span("t", 1, 30, 31)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merged %v, want %v", got, want)
	}
	c := Commit{Ranges: []Range{rng("t", 0, 0, 10, 10), rng("t", 0, 10, 20, 10),
		{TopicPartition: tp("t", 0), Interval: Interval{20, 30}, Lost: true}, rng("t", 0, 30, 40, 10)}}
	for _, tc := range []struct {
		s   Span
		out bool
	}{
		{span("t", 0, 0, 20), false}, {span("t", 0, 30, 40), false}, {span("t", 0, 15, 25), true},
		{span("t", 0, 35, 41), true}, {span("t", 1, 0, 5), true}, {span("u", 0, 0, 5), true},
	} {
		c.FileGroups = []FileGroup{{Files: []string{"a"}, Spans: []Span{tc.s}}}
		if s, out := c.SpanOutside(); out != tc.out || (out && s != tc.s) {
			t.Errorf("span %s: outside %v (%s), want %v", tc.s, out, s, tc.out)
		}
	}
}
