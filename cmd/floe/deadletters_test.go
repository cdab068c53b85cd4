package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
)

// Reasons of the records deadLettersStack makes dead letters, as floe
// dead-letters counts them: the two not JSON differ in their values and
// where the syntax error is, the one not UTF-8 is alone of its reason.
const (
	reasonNotJSON  = `decode json: not valid JSON: "…"`
	reasonWrongTyp = `field id: the table's type long cannot take a value of type string`
	reasonNotUTF8  = `decode json: not valid JSON: not UTF-8 text at byte 15 (0xfe)`
)

// deadLettersStack sinks topic ev (two partitions) with --value json into
// lake.ev: at ev/0 offsets 1 (not JSON), 2 (id of the wrong type) and 4
// (not UTF-8) are dead letters, at ev/1 offset 1 (not JSON), the rest rows.
// It returns the stack and the catalog flags.
func deadLettersStack(t *testing.T) (*localstack.Stack, []string) {
	t.Helper()
	st, _, _ := partitionedStack(t, "ev", 2)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	rec := func(p int32, i int, key, value string) *kgo.Record {
		r := &kgo.Record{Topic: "ev", Partition: p, Value: []byte(value), Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if key != "" {
			r.Key = []byte(key)
		}
		return r
	}
	recs := []*kgo.Record{
		rec(0, 0, "a", `{"id":1}`),
		rec(0, 1, "b", "not json"),
		rec(0, 2, "", `{"id":"x"}`),
		rec(0, 3, "d", `{"id":3}`),
		rec(0, 4, "e\x00\xff", "line\nbreak\tand \xfe byte"),
		rec(1, 5, "f", `{"id":5}`),
		rec(1, 6, "g", "oops"),
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "ev", "--table", "lake.ev", "--value", "json", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	return st, cat
}

// deadLettersJSON runs floe dead-letters --json with args and decodes it.
func deadLettersJSON(t *testing.T, args ...string) lookup.DeadLettersResult {
	t.Helper()
	out := mustFloe(t, append([]string{"dead-letters", "--json"}, args...)...)
	var res lookup.DeadLettersResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("dead-letters --json %v: %v\n%s", args, err, out)
	}
	return res
}

// positions lists the dead letters of res as topic/partition@offset.
func positions(res lookup.DeadLettersResult) []string {
	var out []string
	for _, d := range res.DeadLetters {
		out = append(out, fmt.Sprintf("%s/%d@%d", d.Topic, d.Partition, d.Offset))
	}
	return out
}

// TestDeadLettersCommand: floe dead-letters lists exactly the records
// that could not become rows, with their reasons, bytes and counts by
// reason, in text and JSON; its filters and --limit select from them.
func TestDeadLettersCommand(t *testing.T) {
	_, cat := deadLettersStack(t)
	table := append([]string{"--table", "lake.ev"}, cat...)

	res := deadLettersJSON(t, table...)
	want := []string{"ev/0@1", "ev/0@2", "ev/0@4", "ev/1@1"}
	if got := positions(res); !slices.Equal(got, want) || res.Matched != 4 || res.Counted != 4 || res.More ||
		!slices.Equal(res.DeadLetterTables, []string{"lake.ev_dlq"}) || len(res.Notes) != 0 {
		t.Fatalf("dead letters %v (matched %d, counted %d, more %v, tables %v, notes %q), want %v", got, res.Matched, res.Counted, res.More, res.DeadLetterTables, res.Notes, want)
	}
	d := res.DeadLetters[2]
	if string(d.Key) != "e\x00\xff" || string(d.Value) != "line\nbreak\tand \xfe byte" || d.Reason != reasonNotUTF8 ||
		d.Error != "decode json: not valid JSON: not UTF-8 text at byte 15 (0xfe)" || d.SchemaID != nil || d.CommitID == "" || d.File == "" {
		t.Errorf("ev/0@4: %+v; want its key and value as produced, its reason, a commit id and a file", d)
	}
	if res.DeadLetters[1].Key != nil || !strings.HasPrefix(res.DeadLetters[1].Error, reasonWrongTyp) {
		t.Errorf("ev/0@2: key %q, error %q; want a null key and the type conflict", res.DeadLetters[1].Key, res.DeadLetters[1].Error)
	}
	if len(res.Reasons) != 3 || res.Reasons[0].Reason != reasonNotJSON || res.Reasons[0].Count != 2 || res.Reasons[0].Offset != 1 ||
		!strings.HasPrefix(res.Reasons[1].Reason, reasonWrongTyp) || res.Reasons[1].Count != 1 ||
		res.Reasons[2].Reason != reasonNotUTF8 || res.Reasons[2].Count != 1 || res.Reasons[2].Offset != 4 {
		t.Errorf("reasons %+v; want 2 not JSON (first ev/0 offset 1), then 1 of the wrong type, 1 not UTF-8", res.Reasons)
	}
	// The JSON has base64 bytes and null for a null key.
	raw := mustFloe(t, append([]string{"dead-letters", "--json"}, table...)...)
	if !strings.Contains(raw, `"key_base64": null`) || !strings.Contains(raw, `"value_base64": "bm90IGpzb24="`) {
		t.Errorf("dead-letters --json has no null key or base64 value:\n%s", raw)
	}

	text := mustFloe(t, append([]string{"dead-letters"}, table...)...)
	for _, w := range []string{
		"lake.ev: 4 dead letters in lake.ev_dlq",
		"TOPIC  PARTITION  OFFSET  TIMESTAMP",
		`e\x00\xff`, `line\nbreak\tand \xfe byte`,
		"by reason:",
		"2      ev/0 offset 1  " + reasonNotJSON + "\n",
		"1      ev/0 offset 2  " + reasonWrongTyp,
		"1      ev/0 offset 4  " + reasonNotUTF8 + "\n",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("dead-letters text lacks %q:\n%s", w, text)
		}
	}
	if lines := strings.Count(text, "\nev  "); lines != 4 {
		t.Errorf("dead-letters text has %d lines of dead letters, want 4:\n%s", lines, text)
	}

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--partition", "1"}, []string{"ev/1@1"}},
		{[]string{"--topic", "ev", "--partition", "0", "--from-offset", "2", "--until-offset", "4"}, []string{"ev/0@2"}},
		{[]string{"--since", time.Now().Add(-time.Hour).Add(150 * time.Second).UTC().Format(time.RFC3339)}, []string{"ev/0@4", "ev/1@1"}},
		{[]string{"--since", "1m"}, nil},
	} {
		res := deadLettersJSON(t, append(c.args, table...)...)
		if got := positions(res); !slices.Equal(got, c.want) || res.Matched != int64(len(c.want)) {
			t.Errorf("dead-letters %v: %v (matched %d), want %v", c.args, got, res.Matched, c.want)
		}
	}
	res = deadLettersJSON(t, append([]string{"--limit", "1"}, table...)...)
	if got := positions(res); !slices.Equal(got, []string{"ev/0@1"}) || !res.More || res.Matched != 4 || res.Reasons[0].Count != 2 {
		t.Errorf("dead-letters --limit 1: %v, more %v, matched %d, reasons %+v; want the first, more, and every one counted", got, res.More, res.Matched, res.Reasons)
	}
	if text := mustFloe(t, append([]string{"dead-letters", "--limit", "1"}, table...)...); !strings.Contains(text, "the first 1 of 4: --limit N lists more") {
		t.Errorf("dead-letters --limit 1 does not say there are more:\n%s", text)
	}
	summary := mustFloe(t, append([]string{"dead-letters", "--summary"}, table...)...)
	if strings.Contains(summary, "TIMESTAMP") || !strings.Contains(summary, "2      ev/0 offset 1  "+reasonNotJSON) {
		t.Errorf("dead-letters --summary lists dead letters or lacks the counts:\n%s", summary)
	}
	if text := mustFloe(t, append([]string{"dead-letters", "--since", "1m"}, table...)...); !strings.Contains(text, "no dead letter of lake.ev matches --since 1m (the ledger counts 4 dead letters in all)") {
		t.Errorf("dead-letters matching none:\n%s", text)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--topic", "nope"}, `--topic "nope": want a topic lake.ev holds: ev`},
		{[]string{"--partition", "7"}, `--partition "7": want a partition lake.ev holds: ev/0, ev/1`},
		{[]string{"--from-offset", "4", "--until-offset", "2"}, `--until-offset "2": want an offset above the first one selected, 4`},
		{[]string{"--since", "yesterday"}, `--since "yesterday": want an RFC3339 time`},
		{[]string{"--table", "lake.evv"}, "(did you mean lake.ev"},
		{[]string{"--table", "lake.ev_dlq"}, "lake.ev_dlq is the dead-letter table of lake.ev and has no ledger of its own"},
	} {
		args := slices.Concat([]string{"dead-letters"}, table, c.args)
		if code, out, errs := floe(t, args...); code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("dead-letters %v: exit %d\n%s%s; want exit %d and %q", c.args, code, out, errs, exitError, c.want)
		}
	}
}

// TestDeadLettersRegistryAndNone: dead letters of a registry table carry
// the schema id they named; an unknown id and plain JSON are told apart
// by reason. A table whose records all became rows says it has none.
func TestDeadLettersRegistryAndNone(t *testing.T) {
	st := topicStack(t, "reg")
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "clean", 1, nil); err != nil {
		t.Fatal(err)
	}
	schema := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	recs := avroRecords(t, st, "reg", schema, map[string]any{"id": int64(1)})
	recs = append(recs,
		&kgo.Record{Topic: "reg", Value: localstack.WireFormat(999, nil, []byte{2})},
		&kgo.Record{Topic: "reg", Value: []byte(`{"id":2}`)},
		&kgo.Record{Topic: "reg", Value: localstack.WireFormat(998, nil, []byte{4})},
		&kgo.Record{Topic: "clean", Value: []byte(`{"id":1}`)})
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "reg", "--table", "lake.reg", "--value", "registry", "--schema-registry", st.Registry, "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	mustFloe(t, slices.Concat([]string{"sink", "-t", "clean", "--table", "lake.clean", "--value", "json", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)

	res := deadLettersJSON(t, append([]string{"--table", "lake.reg"}, cat...)...)
	if got := positions(res); !slices.Equal(got, []string{"reg/0@1", "reg/0@2", "reg/0@3"}) {
		t.Fatalf("dead letters %v, want reg/0 offsets 1, 2 and 3", got)
	}
	if id := res.DeadLetters[0].SchemaID; id == nil || *id != 999 || res.DeadLetters[1].SchemaID != nil {
		t.Errorf("schema ids %v, %v: want 999 for the unknown id, none for plain JSON", res.DeadLetters[0].SchemaID, res.DeadLetters[1].SchemaID)
	}
	unknown := fmt.Sprintf("schema registry %s does not have schema #: schema not found", st.Registry)
	if len(res.Reasons) != 2 || res.Reasons[0].Reason != unknown || res.Reasons[0].Count != 2 ||
		!strings.HasPrefix(res.Reasons[1].Reason, "not in the schema registry wire format") || !strings.Contains(res.Reasons[1].Reason, "--value json") {
		t.Errorf("reasons %+v; want 2 unknown schema ids, then plain JSON with its fix", res.Reasons)
	}
	text := mustFloe(t, slices.Concat([]string{"dead-letters", "--table", "lake.reg"}, cat)...)
	if !strings.Contains(text, "  999     ") || !strings.Contains(text, `\x00\x00\x00\x03\xe7\x02`) {
		t.Errorf("dead-letters text lacks the schema id or the escaped value:\n%s", text)
	}

	for _, args := range [][]string{{}, {"--json"}} {
		code, out, errs := floe(t, slices.Concat([]string{"dead-letters", "--table", "lake.clean"}, args, cat)...)
		if code != exitOK || (len(args) == 0 && !strings.Contains(out, "lake.clean has no dead letters: its ledger's 2 commits sent no record to a dead-letter table")) ||
			(len(args) > 0 && !strings.Contains(out, `"dead_letters": []`)) {
			t.Errorf("dead-letters %v of a table without dead letters: exit %d\n%s%s", args, code, out, errs)
		}
	}
}

// TestDeadLettersRolledBack: the dead letters of a commit that a rollback
// took off the ledger are in the dead-letter table until the next sink
// session reconciles it; they are not the table's, and floe dead-letters
// leaves them out, saying so.
func TestDeadLettersRolledBack(t *testing.T) {
	st, cat := deadLettersStack(t)
	before := foreignTable(t, st.Catalog(), "lake.ev").CurrentSnapshot().SnapshotID
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "ev", Partition: 0, Value: []byte("late garbage")}}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "ev", "--table", "lake.ev", "--value", "json", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	table := append([]string{"--table", "lake.ev"}, cat...)
	if got := positions(deadLettersJSON(t, table...)); !slices.Contains(got, "ev/0@5") {
		t.Fatalf("before the rollback: %v, want ev/0@5 among them", got)
	}
	tbl := foreignTable(t, st.Catalog(), "lake.ev")
	txn := tbl.NewTransaction()
	if err := txn.RollbackToSnapshot(before); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := deadLettersJSON(t, table...)
	if got := positions(res); !slices.Equal(got, []string{"ev/0@1", "ev/0@2", "ev/0@4", "ev/1@1"}) || res.Counted != 4 ||
		len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "lake.ev_dlq also holds 1 dead letter of commits this table's ledger does not have") {
		t.Errorf("after the rollback: %v, counted %d, notes %q; want the first sink's four, and a note on the rolled-back one", got, res.Counted, res.Notes)
	}
}

// TestDeadLettersPending: a dead letter the ledger counts that the
// dead-letter table does not hold (its append rolled back, as a sink that
// died before it leaves it) is not listed; a note counts it.
func TestDeadLettersPending(t *testing.T) {
	st, cat := deadLettersStack(t)
	before := foreignTable(t, st.Catalog(), "lake.ev_dlq").CurrentSnapshot().SnapshotID
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "ev", Partition: 0, Value: []byte("late garbage")}}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "ev", "--table", "lake.ev", "--value", "json", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	txn := foreignTable(t, st.Catalog(), "lake.ev_dlq").NewTransaction()
	if err := txn.RollbackToSnapshot(before); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	table := append([]string{"--table", "lake.ev"}, cat...)
	res := deadLettersJSON(t, table...)
	if got := positions(res); len(got) != 4 || res.Counted != 5 || len(res.Notes) != 1 ||
		!strings.Contains(res.Notes[0], "the ledger counts 1 dead letter that no dead-letter table holds yet (pending") {
		t.Errorf("with a pending dead letter: %v, counted %d, notes %q; want the four held, 5 counted and a note", got, res.Counted, res.Notes)
	}
	if text := mustFloe(t, append([]string{"dead-letters"}, table...)...); !strings.Contains(text, "note: the ledger counts 1 dead letter") {
		t.Errorf("dead-letters text does not note the pending one:\n%s", text)
	}
}

// TestDeadLettersUnreadableFile (from a review): a dead-letter file its
// storage still has but that cannot be read (cut short) was skipped with
// no word; a note names it.
func TestDeadLettersUnreadableFile(t *testing.T) {
	st, cat := deadLettersStack(t)
	dlq := foreignTable(t, st.Catalog(), "lake.ev_dlq")
	tasks, err := dlq.Scan().PlanFiles(t.Context())
	if err != nil || len(tasks) == 0 {
		t.Fatalf("dead-letter files: %v %v", tasks, err)
	}
	path := strings.TrimPrefix(tasks[0].File.FilePath(), "file://")
	if err := os.Truncate(path, 40); err != nil {
		t.Fatal(err)
	}
	res := deadLettersJSON(t, append([]string{"--table", "lake.ev"}, cat...)...)
	if !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.Contains(n, "which cannot be read: its dead letters (or the rest of them) are not listed")
	}) {
		t.Errorf("a cut-short dead-letter file: notes %q, want one naming it", res.Notes)
	}
}

// TestDeadLettersOfBranch: --branch lists a replay branch's dead letters,
// from the dead-letter table the branch writes, before it is published;
// main's stay as they were, and a branch the table lacks exits 2 naming
// it.
func TestDeadLettersOfBranch(t *testing.T) {
	st, cat := deadLettersStack(t)
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "ev", Partition: 1, Value: []byte("late garbage")}}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"replay", "-t", "ev", "--table", "lake.ev", "--branch", "rebuild", "--value", "json", "-b", st.Brokers[0]}, cat)...)
	table := append([]string{"--table", "lake.ev"}, cat...)

	res := deadLettersJSON(t, append([]string{"--branch", "rebuild"}, table...)...)
	want := []string{"ev/0@1", "ev/0@2", "ev/0@4", "ev/1@1", "ev/1@2"}
	if got := positions(res); !slices.Equal(got, want) || res.Counted != 5 || !slices.Equal(res.DeadLetterTables, []string{"lake.ev_rebuild_dlq"}) {
		t.Errorf("dead-letters --branch rebuild: %v (counted %d, tables %v), want %v in lake.ev_rebuild_dlq", got, res.Counted, res.DeadLetterTables, want)
	}
	res = deadLettersJSON(t, table...)
	if got := positions(res); !slices.Equal(got, want[:4]) || !slices.Equal(res.DeadLetterTables, []string{"lake.ev_dlq"}) {
		t.Errorf("dead-letters of main: %v (tables %v), want %v in lake.ev_dlq", got, res.DeadLetterTables, want[:4])
	}
	code, _, errs := floe(t, append([]string{"dead-letters", "--branch", "nope"}, table...)...)
	if code != 2 || !strings.Contains(errs, `no branch or tag "nope"`) || !strings.Contains(errs, "rebuild") {
		t.Errorf("dead-letters --branch nope: exit %d, stderr %q; want 2 naming the branch and the branches the table has", code, errs)
	}
}
