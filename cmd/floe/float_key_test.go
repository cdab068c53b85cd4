package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFloatIDColumnIsADeadLetter (from a new-user run): docs/upsert.md
// listed a float or double --id-columns column among the refusals, exit 2,
// where a value that would make one is a dead letter whose reason names
// the column, and the run exits 3, as its section on dead letters says.
// The sink cannot know the column's type before a record shows it (no
// table column, no registry schema until a record names one), so the doc
// says what the sink does.
func TestFloatIDColumnIsADeadLetter(t *testing.T) {
	const topic = "floaty"
	_, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, nil, []byte(`{"px":1.5}`), 0)})
	code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.t4", "--mode", "upsert", "--value", "json", "--id-columns", "px"})...)
	if code != exitOnlyDeadLetters {
		t.Fatalf("sink: exit %d, want %d\n%s\n%s", code, exitOnlyDeadLetters, out, errs)
	}
	code, out, errs = floe(t, slices.Concat([]string{"dead-letters", "--table", "lake.t4"}, loc)...)
	if code != 0 || !strings.Contains(out, `key column "px" is a double`) {
		t.Errorf("floe deadletters: exit %d, want the reason naming px\n%s\n%s", code, out, errs)
	}
	doc, err := os.ReadFile("../../docs/upsert.md")
	if err != nil {
		t.Fatal(err)
	}
	_, refused, _ := strings.Cut(string(doc), "\n## What is refused\n")
	refused, _, _ = strings.Cut(refused, "\n## ")
	for _, item := range strings.Split(refused, "\n- ")[1:] {
		if item, _, _ = strings.Cut(item, "\n\n"); strings.Contains(item, "float") {
			t.Errorf("docs/upsert.md, What is refused (exit 2), lists a float --id-columns column, which is a dead letter: %s", item)
		}
	}
}
