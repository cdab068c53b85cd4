package main

// Adversarial review of floe replay (review-replay): the command's output.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/floe-dev/floe/localstack"
)

// TestReviewReplayJSONOnDifference: floe replay --json prints "the plan and
// the result as one JSON document when the replay ends" (schema
// floe.replay/v1, with compared, equal, differ, published). A complete
// upsert replay whose branch differs from main ends with the comparison's
// result, but with --json nothing at all is printed on stdout: a script
// gets no document to read compared/equal/differ from, only the exit code
// and a line on stderr (an interrupted replay, also exit 2, does print its
// document).
func TestReviewReplayJSONOnDifference(t *testing.T) {
	_, base := upsertReplayBase(t)
	mustFloe(t, base...)
	code, out, errs := floe(t, append(base, "--branch", "late", "--publish", "--from", "0=117,1=117", "--json")...)
	if code != exitError {
		t.Fatalf("publish of a different branch: exit %d, want %d\n%s\n%s", code, exitError, out, errs)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &doc); err != nil {
		t.Fatalf("--json printed no JSON document for a replay refused on a difference (exit %d): stdout %q, stderr %q", code, out, lastLine(errs))
	}
	if doc["schema"] != "floe.replay/v1" || doc["compared"] != true || doc["equal"] != false || doc["published"] != false {
		t.Fatalf("--json document of a refused publish: %s", out)
	}
}

// TestReviewReplayJSONPublishDifferentEqualField: with --publish-different
// a differing branch is published and the document says how it differed
// (differ), but "equal" (a documented field of floe.replay/v1) is left out
// (omitempty on a bool): a reader of .equal gets null, not false.
func TestReviewReplayJSONPublishDifferentEqualField(t *testing.T) {
	_, base := upsertReplayBase(t)
	mustFloe(t, base...)
	out := mustFloe(t, append(base, "--branch", "late", "--publish", "--publish-different", "--from", "0=117,1=117", "--json")...)
	var doc map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if doc["compared"] != true || doc["published"] != true || doc["differ"] == nil {
		t.Fatalf("--json of --publish-different: %s", out)
	}
	if eq, ok := doc["equal"]; !ok || eq != false {
		t.Fatalf("--json of a differing branch published anyway: equal is %v (present %v), want false: %s", eq, ok, out)
	}
}

// TestReviewReplayPublishDifferentSaysNotPublished: with
// --publish-different a differing branch is published ("published:
// main moved from snapshot ..."), and the same output says of it "...: not
// published, main is unchanged" (DifferError's text, printed inside
// "compared with main key by key: DIFFERENT: ...: published all the
// same (--publish-different)"), as
// does the differ field of --json.
func TestReviewReplayPublishDifferentSaysNotPublished(t *testing.T) {
	_, base := upsertReplayBase(t)
	mustFloe(t, base...)
	out := mustFloe(t, append(base, "--branch", "late", "--publish", "--publish-different", "--from", "0=117,1=117")...)
	if !strings.Contains(out, "main moved from snapshot") || strings.Contains(out, "not published, main is unchanged") {
		t.Fatalf("output of a published --publish-different replay:\n%s", out)
	}
}

// upsertReplayBase starts a stack whose topic customers holds keyed
// records (produceKeyed) and returns the replay command that rebuilds
// them into the upsert table lake.customers (--key string, flushes of
// 50).
func upsertReplayBase(t *testing.T) (*localstack.Stack, []string) {
	t.Helper()
	st, loc := replayStack(t)
	const topic = "customers"
	produceKeyed(t, st, topic)
	return st, append([]string{"replay", "--brokers", strings.Join(st.Brokers, ","), "--topic", topic, "--table", "lake.customers",
		"--mode", "upsert", "--key", "string", "--flush-records", "50"}, loc...)
}
