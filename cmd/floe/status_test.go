package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
)

// TestStatusLagExcludesLoss: offsets that retention deleted before they
// were sunk are reported as lost, not as lag; lag is what the table can
// still catch up on.
func TestStatusLagExcludesLoss(t *testing.T) {
	st, loc := replayStack(t)
	ctx := t.Context()
	brokers := strings.Join(st.Brokers, ",")
	if err := localstack.CreateTopic(ctx, st.Brokers, "events", 1, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	if err := localstack.Produce(ctx, st.Brokers, localstack.DemoEvents("events", 1, 100, start, 1)); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "events", "--table", "lake.events", "--stop-at-end"}, loc...)...)
	if err := localstack.Produce(ctx, st.Brokers, localstack.DemoEvents("events", 1, 50, start, 2)); err != nil {
		t.Fatal(err)
	}
	if err := st.Cluster.DeleteRecords("events", 0, 120); err != nil {
		t.Fatal(err)
	}

	var got lookup.TableStatus
	js := mustFloe(t, append([]string{"status", "--brokers", brokers, "--table", "lake.events", "--format", "json"}, loc...)...)
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatalf("status json: %v\n%s", err, js)
	}
	if len(got.Partitions) != 1 {
		t.Fatalf("status: %s", js)
	}
	p := got.Partitions[0]
	val := func(v *int64) int64 {
		if v == nil {
			return -1
		}
		return *v
	}
	// Ledger next 100, log start 120, end 150: [120, 150) is lag, [100, 120) is lost.
	if val(p.TableNext) != 100 || val(p.LogStart) != 120 || val(p.EndOffset) != 150 || val(p.Lag) != 30 || val(p.Lost) != 20 {
		t.Fatalf("status: next %d log start %d end %d lag %d lost %d; want 100, 120, 150, lag 30, lost 20\n%s",
			val(p.TableNext), val(p.LogStart), val(p.EndOffset), val(p.Lag), val(p.Lost), js)
	}

	text := mustFloe(t, append([]string{"status", "--brokers", brokers, "--table", "lake.events"}, loc...)...)
	lines := strings.Split(strings.TrimSpace(text), "\n")
	header, row := strings.Fields(lines[len(lines)-2]), strings.Fields(lines[len(lines)-1])
	wantHeader := []string{"TOPIC", "PARTITION", "LOG", "START", "END", "OFFSET", "TABLE", "NEXT", "LAG", "LOST", "DEAD", "LETTERS", "LAST", "COMMIT"}
	if strings.Join(header, " ") != strings.Join(wantHeader, " ") || len(row) != 9 || row[5] != "30" || row[6] != "20" || row[7] != "0" {
		t.Fatalf("status text: want a LAG of 30 and a LOST of 20:\n%s", text)
	}

	if strings.Contains(text, "(?:") {
		t.Errorf("status with --brokers explains unknown columns:\n%s", text)
	}
	// Without brokers their columns are "?", and a line says why (from a
	// new-user run: the "?" were left unexplained).
	if text := mustFloe(t, append([]string{"status", "--table", "lake.events"}, loc...)...); !strings.Contains(text, " ?  ") ||
		!strings.HasSuffix(text, "\n(?: the brokers' side, not known without --brokers or FLOE_BROKERS)\n") {
		t.Errorf("status without brokers:\n%s", text)
	}

	// Brokers that do not answer: the table's side is shown, and the
	// command fails naming the brokers (it failed outright; from a
	// new-user run).
	code, out, errs := floe(t, append([]string{"status", "--brokers", "127.0.0.1:" + fmt.Sprint(freeTCPPort(t)), "--dial-timeout", "1s", "--table", "lake.events"}, loc...)...)
	if code != exitError || !strings.Contains(out, "TABLE NEXT") || !strings.Contains(out, "events") || !strings.Contains(errs, "the brokers' side failed") {
		t.Fatalf("status with brokers that do not answer: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestStatusLedgerTopicDeleted (from a review and a new-user run): status
// of a table of two topics, one of which the brokers no longer have,
// failed whole ("the brokers' side failed ... check --topic", a flag not
// given: the topic came from the ledger), hiding the other topic's lag. It
// shows every partition, the other topic's broker side, and says which
// topic is gone; a --topic the brokers lack is still an error.
func TestStatusLedgerTopicDeleted(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "b", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "b", 1, 10, map[int32]int64{})
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--topic", "b", "--table", "lake.ab", "--stop-at-end"}, loc...)...)
	if err := st.Cluster.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "b", 1, 5, map[int32]int64{})
	status := append([]string{"status", "--table", "lake.ab", "--brokers", st.Brokers[0]}, loc[:2]...)
	code, out, errs := floe(t, status...)
	if code != exitOK || !regexp.MustCompile(`(?m)^\s*b\s+0\s+0\s+15\s+10\s+5\s`).MatchString(out) || !regexp.MustCompile(`(?m)^\s*orders\s+0\s+\?\s+\?\s+\d+\s+\?\s+\?\s`).MatchString(out) ||
		!strings.Contains(out, "topic orders, which the ledger names, does not exist on the brokers") || strings.Contains(errs, "check --topic") {
		t.Errorf("exit %d\n%s\n%s", code, out, errs)
	}
	var js struct {
		MissingTopics []string `json:"missing_topics"`
	}
	if err := json.Unmarshal([]byte(mustFloe(t, append(status, "--json")...)), &js); err != nil || len(js.MissingTopics) != 1 || js.MissingTopics[0] != "orders" {
		t.Errorf("--json: missing_topics %v (%v)", js.MissingTopics, err)
	}
	// Created again: another topic under the name, whose offsets are not
	// the table's (from the diff review: status failed whole).
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	code, out, errs = floe(t, status...)
	if code != exitOK || !strings.Contains(out, "topic orders has another topic ID on the brokers than the ledger recorded") || !regexp.MustCompile(`(?m)^\s*b\s+0\s+0\s+15\s+10\s+5\s`).MatchString(out) {
		t.Errorf("topic created again: exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = floe(t, append(status, "--topic", "nope")...)
	if code != exitError || !strings.Contains(errs, `topic "nope" does not exist`) || !strings.Contains(errs, "check --topic") {
		t.Errorf("--topic nope: exit %d, %q", code, errs)
	}
}

// TestStatusPartitionAddedWhileStopped (from a review): while the sink is
// stopped its topic gets a second partition, whose first 10 records
// retention deletes. The sink begins such a partition at offset 0 (the
// table followed the topic before it existed) and stops on the loss, and
// the audit reports it; status showed no loss (it took the log start for
// the partition's start). It shows the 10 offsets lost.
func TestStatusPartitionAddedWhileStopped(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "pa", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "pa", 1, 10, map[int32]int64{})
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "pa", "--table", "lake.pa", "--stop-at-end"}, loc...)...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreatePartitions(t.Context(), 1, "pa"); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "pa", 2, 40, map[int32]int64{})
	if err := st.Cluster.DeleteRecords("pa", 1, 10); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Partitions []struct {
			Partition int32  `json:"partition"`
			Lost      *int64 `json:"lost"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(mustFloe(t, append([]string{"status", "--table", "lake.pa", "--brokers", st.Brokers[0], "--json"}, loc[:2]...)...)), &js); err != nil {
		t.Fatal(err)
	}
	for _, p := range js.Partitions {
		if p.Partition == 1 && (p.Lost == nil || *p.Lost != 10) {
			t.Errorf("pa/1: lost %v, want 10", p.Lost)
		}
	}
	if code, _, errs := floe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "pa", "--table", "lake.pa", "--stop-at-end"}, loc...)...); code != exitError || !strings.Contains(errs, "pa/1") {
		t.Errorf("the sink: exit %d, %q; want it to stop on pa/1's loss", code, errs)
	}
}

// TestStatusListsTables (from a new-user run): nothing said which tables a
// catalog held (a replay's branch had left a dead-letter table behind,
// found with sqlite3). floe status without --table lists them: what each
// is, its rows, its last commit.
func TestStatusListsTables(t *testing.T) {
	st, loc := sinkStack(t)
	if _, err := catalog.Open(t.Context(), st.Catalog()); err != nil { // an empty catalog
		t.Fatal(err)
	}
	if out := mustFloe(t, append([]string{"status"}, loc...)...); !strings.Contains(out, "no tables yet") {
		t.Fatalf("status of an empty catalog:\n%s", out)
	}
	mustFloe(t, append([]string{"sink", "-b", st.Brokers[0], "-t", "orders", "--table", "lake.orders", "--stop-at-end", "--value", "json"}, loc...)...)
	var doc struct {
		Tables []catalogTable `json:"tables"`
	}
	out := mustFloe(t, append([]string{"status", "--json"}, loc...)...)
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]catalogTable{}
	for _, tb := range doc.Tables {
		got[tb.Table] = tb
	}
	if o := got["lake.orders"]; o.Kind != "append" || o.Rows == nil || *o.Rows != 300 || o.LastCommitAt == nil {
		t.Errorf("lake.orders listed as %+v", o)
	}
	if d, ok := got["lake.orders_dlq"]; ok && (d.Kind != "dead-letters" || d.Of != "lake.orders") {
		t.Errorf("lake.orders_dlq listed as %+v", d)
	}
	text := mustFloe(t, append([]string{"status"}, loc...)...)
	if !regexp.MustCompile(`lake\.orders +append +300 +20`).MatchString(text) {
		t.Errorf("status without --table:\n%s", text)
	}
}
