package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWhereKeyLatestRecordDeadLetter: an upsert table keyed by the Kafka
// key (--key string --value json). Key u2 is a row from offset 1, and its
// later record at offset 3 is no JSON: a dead letter, which changed no
// row. floe where --key u2 answered "key u2 is a row: the record at ..
// offset 1" without a word that the row is stale; it says that the key's
// latest record is a dead letter, with its offset and reason. Key u1,
// whose row is its latest record, says nothing of the kind (from a
// review).
func TestWhereKeyLatestRecordDeadLetter(t *testing.T) {
	const topic = "prof"
	b := func(s string) []byte { return []byte(s) }
	_, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{
		rec(topic, 0, b("u1"), b(`{"v":1}`), 1),
		rec(topic, 0, b("u2"), b(`{"v":2}`), 2),
		rec(topic, 0, b("u1"), b(`{"v":3}`), 3),
		rec(topic, 0, b("u2"), b(`{not json`), 4),
	})
	mustFloe(t, append(sink, "--table", "lake.prof", "--mode", "upsert", "--key", "string", "--value", "json")...)
	type keyJSON struct {
		Status           string `json:"status"`
		Offset           *int64 `json:"offset"`
		DeadLetterOffset *int64 `json:"dead_letter_offset"`
		DeadLetterReason string `json:"dead_letter_reason"`
		Explanation      string `json:"explanation"`
	}
	whereKey := func(key string) keyJSON {
		t.Helper()
		out := mustFloe(t, append([]string{"where", "--table", "lake.prof", "--key", key, "--json"}, loc...)...)
		var k keyJSON
		if err := json.Unmarshal([]byte(out), &k); err != nil {
			t.Fatalf("where --key %s: %v\n%s", key, err, out)
		}
		return k
	}
	k := whereKey("u2")
	if k.Status != "row" || k.Offset == nil || *k.Offset != 1 || k.DeadLetterOffset == nil || *k.DeadLetterOffset != 3 || k.DeadLetterReason == "" ||
		!strings.Contains(k.Explanation, "the key's latest record, at prof/0 offset 3, is a dead letter in lake.prof_dlq") {
		t.Errorf("where --key u2: %+v; want its row at offset 1, and its latest record at offset 3 named a dead letter, with its reason", k)
	}
	if k := whereKey("u1"); k.Status != "row" || k.Offset == nil || *k.Offset != 2 || k.DeadLetterOffset != nil || strings.Contains(k.Explanation, "dead letter") {
		t.Errorf("where --key u1: %+v; want its row at offset 2, no dead letter", k)
	}
}
