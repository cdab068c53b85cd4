package main

import (
	"encoding/json"
	"os"
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

// TestWhereKeyReadsListedDeadLettersOnlyPending: where --key --brokers
// reads the key's records in the log, and drops those that are dead
// letters: the dead-letter table's rows, or, while a commit's dead letters
// are pending (not in the dead-letter table yet), the files its ledger
// entry lists. It read those files for every commit with dead letters,
// pending or not. Here key a is written and deleted in the commit that
// also sent key b's record to the dead-letter table, which holds it: the
// file the commit lists, replaced by bytes that are no Parquet where the
// table's scans do not look (its offsets are not key a's), is not read,
// and the answer is the same.
func TestWhereKeyReadsListedDeadLettersOnlyPending(t *testing.T) {
	const topic = "listed"
	b := func(s string) []byte { return []byte(s) }
	st, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{
		rec(topic, 0, b("a"), b(`{"v":1}`), 1),
		rec(topic, 0, b("b"), b(`{not json`), 2),
		rec(topic, 0, b("a"), nil, 3),
	})
	mustFloe(t, append(sink, "--table", "lake.listed", "--mode", "upsert", "--key", "string", "--value", "json")...)
	where := append([]string{"where", "--table", "lake.listed", "--key", "a", "--brokers", strings.Join(st.Brokers, ","), "--json"}, loc...)
	want := mustFloe(t, where...)
	if !strings.Contains(want, `"offset": 2`) {
		t.Fatalf("where --key a: %s; want its delete at offset 2", want)
	}
	tbl := openFloeTable(t, st, "lake.listed")
	var listed []string
	for c, err := range tbl.Commits(t.Context(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, c.DeadLetterFiles...)
	}
	if len(listed) != 1 {
		t.Fatalf("the ledger lists dead-letter files %v, want one", listed)
	}
	if err := os.WriteFile(strings.TrimPrefix(listed[0], "file://"), []byte("no Parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, got, errs := floe(t, where...)
	if code != 0 || got != want {
		t.Errorf("where --key a with the dead letters in the dead-letter table and the file the commit lists unreadable: exit %d, stderr %q\n%s\nwant\n%s", code, errs, got, want)
	}
}
