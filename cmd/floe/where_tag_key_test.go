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

// TestWhereKeyOnTagIgnoresMainsLaterDeadLetter (from a review): floe
// where --branch TAG --key K reads the tag's ledger, and the key's "later
// dead letter" must be one of the tag's ledger too: the dead-letter table
// holds main's dead letters beside the tag's, and main's, sunk after the
// tag's snapshot at an offset past the tag's ledger, was named as the
// key's latest record in the tag's history.
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

// TestWhereOffsetOnTagAndMainAtOneDeadLetter: main rolled back under a tag
// and the same offsets sunk again: the dead-letter table holds the tag's
// dead letter at offset 1 and main's, in two files. floe where --offset 1
// names each ref's own (its commit's file), not the first the scan finds.
func TestWhereOffsetOnTagAndMainAtOneDeadLetter(t *testing.T) {
	const topic = "prof"
	b := func(s string) []byte { return []byte(s) }
	st, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, b("u1"), b(`{"v":1}`), 1)})
	sink = append(sink, "--table", "lake.prof", "--value", "json")
	mustFloe(t, sink...)
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent("lake.prof")
	load := func() *table.Table {
		t.Helper()
		tbl, err := cat.LoadTable(t.Context(), ident)
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	c1 := load().CurrentSnapshot().SnapshotID
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{rec(topic, 0, b("u2"), b(`{broken`), 2)}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, sink...)
	c2 := load().CurrentSnapshot()
	// Tag main's head and roll main back to c1, then sink offset 1 again.
	if _, _, err := cat.CommitTable(t.Context(), ident, nil, []table.Update{
		table.NewSetSnapshotRefUpdate("pinned", c2.SnapshotID, table.TagRef, -1, -1, -1),
		table.NewSetSnapshotRefUpdate(table.MainBranch, c1, table.BranchRef, -1, -1, -1),
	}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, sink...)
	c2again := load().CurrentSnapshot()
	if c2again.SnapshotID == c2.SnapshotID || c2again.ParentSnapshotID == nil || *c2again.ParentSnapshotID != c1 {
		t.Fatalf("main after sinking offset 1 again: snapshot %d, want a new child of %d", c2again.SnapshotID, c1)
	}
	for _, ref := range []struct {
		branch string
		snap   *table.Snapshot
	}{{"", c2again}, {"pinned", c2}} {
		args := []string{"where", "--table", "lake.prof", "--partition", "0", "--offset", "1", "--json"}
		if ref.branch != "" {
			args = append(args, "--branch", ref.branch)
		}
		out := mustFloe(t, append(args, loc...)...)
		var w struct {
			Kind string `json:"kind"`
			File string `json:"file"`
		}
		if err := json.Unmarshal([]byte(out), &w); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		files := ref.snap.Summary.Properties["floe.dead-letter-files"]
		if w.Kind != "dead_letter" || w.File == "" || !strings.Contains(files, w.File) {
			t.Errorf("floe where --offset 1 on %q: %s\nwant the dead letter in its commit's file (%s)", ref.branch, out, files)
		}
	}
}
