package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
)

// TestWhereKeyOnTagIgnoresMainsLaterDeadLetter (review s58): floe where
// --branch TAG --key K reads the tag's ledger, but the key's "later dead
// letter" is looked for in the whole dead-letter table, which holds main's
// dead letters too: a dead letter main sank after the tag's snapshot, at
// an offset past the tag's ledger, is named as the key's latest record in
// the tag's history.
func TestWhereKeyOnTagIgnoresMainsLaterDeadLetter(t *testing.T) {
	const topic = "prof"
	b := func(s string) []byte { return []byte(s) }
	st, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{
		rec(topic, 0, b("u2"), b(`{"v":2}`), 1),
		rec(topic, 0, b("u1"), b(`{not json`), 2), // a dead letter in the tag's history
	})
	sink = append(sink, "--table", "lake.prof", "--mode", "upsert", "--key", "string", "--value", "json")
	mustFloe(t, sink...)
	// Tag main's head, as an operator (or floe replay --tag-main) does.
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent("lake.prof")
	tbl, err := cat.LoadTable(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	head := tbl.CurrentSnapshot().SnapshotID
	if _, _, err := cat.CommitTable(t.Context(), ident, nil, []table.Update{table.NewSetSnapshotRefUpdate("pinned", head, table.TagRef, -1, -1, -1)}); err != nil {
		t.Fatal(err)
	}
	// Main goes on: u2's next record (offset 2) is a dead letter of main's.
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{rec(topic, 0, b("u2"), b(`{broken`), 3)}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, sink...)

	out := mustFloe(t, append([]string{"where", "--table", "lake.prof", "--branch", "pinned", "--key", "u2", "--json"}, loc...)...)
	var k struct {
		Status           string `json:"status"`
		Offset           *int64 `json:"offset"`
		DeadLetterOffset *int64 `json:"dead_letter_offset"`
		Explanation      string `json:"explanation"`
	}
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if k.Status != "row" || k.Offset == nil || *k.Offset != 0 || k.DeadLetterOffset != nil || strings.Contains(k.Explanation, "dead letter") {
		t.Errorf("floe where --branch pinned --key u2: %s\nwant its row at offset 0 and no later dead letter: the tag's ledger ends at offset 2, the dead letter at offset 2 is main's", out)
	}
}
