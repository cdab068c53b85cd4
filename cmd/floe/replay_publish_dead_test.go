package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestPublishRefusesOnlyDeadLetters (from a review): lake.evs is a
// registry table holding three rows. A replay onto a branch against a
// schema registry that lacks the topic's schemas (another registry: a
// migration, a wrong --schema-registry) makes every record a dead letter
// (an unknown schema id). It was published, main's three rows gone, and
// then exited 3 for a run without rows; the audit of main said complete.
// The publish is refused (exit 2), main keeps its rows.
func TestPublishRefusesOnlyDeadLetters(t *testing.T) {
	const schema = `{"type":"record","name":"Ev","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`
	st, loc := sunkTopic(t, "evs", true, func(st *localstack.Stack) []*kgo.Record {
		return avroRecords(t, st, "evs", schema,
			map[string]any{"id": int64(1), "name": "a"}, map[string]any{"id": int64(2), "name": "b"}, map[string]any{"id": int64(3), "name": "c"})
	})
	if n := len(floetest.Rows(t, openFloeTable(t, st, "lake.evs"))); n != 3 {
		t.Fatalf("main holds %d rows after the sink, want 3", n)
	}
	other, err := localstack.StartRegistry(t.Context(), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	code, out, errs := floe(t, append([]string{"replay", "-b", strings.Join(st.Brokers, ","), "-t", "evs", "--table", "lake.evs",
		"--branch", "rebuild", "--publish", "--value", "registry", "--schema-registry", other.URL}, loc...)...)
	n := len(floetest.Rows(t, openFloeTable(t, st, "lake.evs")))
	if n != 3 || code != exitError || !strings.Contains(errs, "at least 3 rows and 0 dead letters in main, at most 0 rows and 3 dead letters on the branch") || !strings.Contains(errs, "not published, main is unchanged") {
		_, audit, _ := floe(t, append([]string{"audit", "--table", "lake.evs", "--deep"}, loc...)...)
		verdict := "?"
		if i := strings.Index(audit, "verdict:"); i >= 0 {
			verdict = strings.SplitN(audit[i:], "\n", 2)[0]
		}
		t.Fatalf("replay --publish that made every record a dead letter: exit %d, main now holds %d rows (was 3); floe audit --deep of main: %s\nstdout:\n%s\nstderr:\n%s", code, n, verdict, out, errs)
	}
}
