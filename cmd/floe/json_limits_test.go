package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestJSONWideOrDeepIsADeadLetter (from a review): one schemaless JSON
// record with 20,000 keys made the table's schema too large for a
// manifest's header, so every commit failed, at every later run too, and
// nothing after it was ever sunk; one nesting lists a thousand deep made
// every later flush slow for good. Both are dead letters now, and the
// records around them rows.
func TestJSONWideOrDeepIsADeadLetter(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "scores", 1, nil); err != nil {
		t.Fatal(err)
	}
	var wide strings.Builder
	wide.WriteString(`{"id":2,"scores":{`)
	for i := range 20000 {
		if i > 0 {
			wide.WriteString(",")
		}
		fmt.Fprintf(&wide, `"user%06d":%d`, i, i)
	}
	wide.WriteString("}}")
	deep := `{"id":3,"a":` + strings.Repeat("[", 1000) + "1" + strings.Repeat("]", 1000) + "}"
	var recs []*kgo.Record
	for _, v := range []string{`{"id":1}`, wide.String(), deep, `{"id":4}`} {
		recs = append(recs, &kgo.Record{Topic: "scores", Value: []byte(v)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	sink := append([]string{"sink", "-b", st.Brokers[0], "-t", "scores", "--table", "lake.scores", "--value", "json", "--stop-at-end"}, loc...)
	out := mustFloe(t, sink...)
	if !strings.Contains(out, "2 rows") || !strings.Contains(out, "2 dead letters") {
		t.Fatalf("sink:\n%s", out)
	}
	for offset, why := range map[int]string{1: "columns wide", 2: "past 64"} {
		if got := mustFloe(t, append([]string{"where", "--table", "lake.scores", "--partition", "0", "--offset", fmt.Sprint(offset)}, loc...)...); !strings.Contains(got, why) {
			t.Errorf("where offset %d: want a dead letter saying %q:\n%s", offset, why, got)
		}
	}
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "scores", Value: []byte(`{"id":5}`)}}); err != nil {
		t.Fatal(err)
	}
	if out := mustFloe(t, sink...); !strings.Contains(out, "1 row") {
		t.Fatalf("the next run:\n%s", out)
	}
	mustFloe(t, append([]string{"audit", "--table", "lake.scores", "--deep"}, loc[:2]...)...)
}
