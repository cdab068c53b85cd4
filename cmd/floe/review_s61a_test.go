package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/localstack"
)

// sinceTopic makes topic with 3 partitions of 10 records each, the first
// 5 of each stamped at base, the last 5 1000s later, and returns a --from
// time between them (offset 5 of every partition) as the replay records
// it.
func sinceTopic(t *testing.T, st *localstack.Stack, topic string) string {
	t.Helper()
	var stamps [][]time.Duration
	for range 3 {
		stamps = append(stamps, []time.Duration{0, 1, 2, 3, 4, 1000, 1001, 1002, 1003, 1004})
	}
	base := stampedTopic(t, st, topic, stamps, 0)
	return base.Add(500 * time.Second).UTC().Format(time.RFC3339)
}

// TestReplayAgainWithoutItsFrom: a replay --from a time run again without
// it was refused as "another replay's target; replay into a new --table"
// (a new user's run), though the table records the time it began with.
// The refusal names that time and the --from that continues the replay;
// one --from offsets, which nothing records but the ledger, names the
// offsets the ledger begins at.
func TestReplayAgainWithoutItsFrom(t *testing.T) {
	st, loc := replayStack(t)
	from := sinceTopic(t, st, "orders")
	replay := append([]string{"replay", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders"}, loc...)
	mustFloe(t, append(replay, "--table", "lake.orders_since", "--from", from)...)
	code, _, errs := floe(t, append(replay, "--table", "lake.orders_since")...)
	for _, want := range []string{
		"lake.orders_since holds orders/0 from offset 5, but this replay starts it at 0: it is the target of the replay --from " + from + " (recorded in table property floe.replay.from-time), and this one is --from earliest; ",
		"run it again with --from " + from + " to continue that replay, or replay into a new --table to start another",
	} {
		if code != exitError || !strings.Contains(errs, want) {
			t.Errorf("the replay again without its --from: exit %d, want %q:\n%s", code, want, errs)
		}
	}
	if out := mustFloe(t, append(replay, "--table", "lake.orders_since", "--from", from)...); !strings.Contains(out, "already holds this whole replay") {
		t.Errorf("the replay again with the --from it was told:\n%s", out)
	}

	mustFloe(t, append(replay, "--table", "lake.orders_off", "--from", "0=3,1=4,2=5")...)
	code, _, errs = floe(t, append(replay, "--table", "lake.orders_off", "--from", from)...)
	if want := "run it again with --from 0=3,1=4,2=5 to continue that replay"; code != exitError || !strings.Contains(errs, want) {
		t.Errorf("the offsets replay again --from a time: exit %d, want %q:\n%s", code, want, errs)
	}
}

// TestReplayLikeRefusedSaysNoLayoutTaken: a replay --like into a table
// that is not empty printed "layout of ... taken" and then was refused,
// as if it had gone ahead with it (a new user's run). The line comes once
// the target is accepted.
func TestReplayLikeRefusedSaysNoLayoutTaken(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json", "--stop-at-end"}, loc...)...)
	replay := append([]string{"replay", "--brokers", brokers, "--topic", "orders"}, loc...)
	if out := mustFloe(t, append(replay, "--table", "lake.orders_rebuilt", "--like", "lake.orders")...); !strings.Contains(out, "layout of lake.orders taken: ") {
		t.Errorf("replay --like into a new table does not say the layout it took:\n%s", out)
	}
	code, out, errs := floe(t, append(replay, "--table", "lake.orders", "--like", "lake.orders_rebuilt")...)
	if code != exitError || strings.Contains(out+errs, "taken") || !strings.Contains(errs, "lake.orders") {
		t.Errorf("replay --like into a table holding a sink's rows: exit %d; want refused, no layout taken:\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

// TestAsOfUnknownTopicNamesTopics: floe as-of --offsets nope/0=1 said "the
// table has nothing of nope/0", where floe where -t nope names the topics
// the table holds (a new user's run); as-of names them too.
func TestAsOfUnknownTopicNamesTopics(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	code, _, errs := floe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "nope/0=1"}, loc...)...)
	if want := `--offsets "nope/0=1": want offsets of a topic lake.orders holds: orders`; code != exitError || !strings.Contains(errs, want) {
		t.Errorf("as-of --offsets of a topic the table does not hold: exit %d, want %q:\n%s", code, want, errs)
	}
}

// TestAsOfDurationToTheMillisecond: floe as-of --time 10m printed the time
// it stands for with nanoseconds (2026-12-07T02:07:39.487010378Z, a new
// user's run): Kafka stamps records to the millisecond, and so does the
// time now, in the text and in --json.
func TestAsOfDurationToTheMillisecond(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	asOf := append([]string{"as-of", "--table", "lake.orders", "--time", "10m"}, loc...)
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	for _, out := range []string{mustFloe(t, asOf...), mustFloe(t, append(asOf, "--json")...)} {
		if !strings.Contains(out, "record time ") && !strings.Contains(out, `"time"`) {
			t.Errorf("as-of --time 10m does not say the time:\n%s", out)
		}
		for _, m := range stamp.FindAllStringSubmatch(out, -1) {
			if len(m[1]) > 4 {
				t.Errorf("as-of --time 10m prints %s, finer than a millisecond:\n%s", m[0], out)
			}
		}
	}
}

// TestReadCommandsWithSinkConfigNameItsTables: floe audit --config of a
// file whose pipelines name several tables answered only "missing --table
// NAMESPACE.TABLE" (a new user's run). The commands that read one table
// name the pipelines' tables and take none of them unasked (floe where,
// as-of and files did the same as audit).
func TestReadCommandsWithSinkConfigNameItsTables(t *testing.T) {
	dir := t.TempDir()
	two, one := filepath.Join(dir, "two.yaml"), filepath.Join(dir, "one.yaml")
	base := "brokers: [127.0.0.1:1]\ncatalog: " + filepath.Join(dir, "cat.db") + "\nwarehouse: " + dir + "\n"
	writeFile(t, two, base+"pipelines:\n  - topic: orders\n    table: lake.orders\n  - topic: payments\n    table: lake.payments\n  - topic: refunds\n    table: lake.orders\n")
	writeFile(t, one, base+"pipelines:\n  - topic: orders\n    table: lake.orders\n")
	// floe status without --table lists the catalog's tables.
	for _, cmd := range [][]string{{"audit"}, {"where", "--partition", "0", "--offset", "1"}, {"as-of", "--offsets", "orders/0=1"}, {"files"}} {
		code, _, errs := floe(t, append(cmd, "--config", two)...)
		if want := "missing --table NAMESPACE.TABLE: the pipelines of config file " + two + " are floe sink's, of several tables (lake.orders, lake.payments); this command takes one --table: pass --table lake.orders, or another of them"; code != exitError || !strings.Contains(errs, want) {
			t.Errorf("floe %s --config (2 tables): exit %d, want %q:\n%s", cmd, code, want, errs)
		}
		code, _, errs = floe(t, append(cmd, "--config", one)...)
		if want := "(table lake.orders); this command takes --table: pass --table lake.orders"; code != exitError || !strings.Contains(errs, want) {
			t.Errorf("floe %s --config (1 table): exit %d, want %q:\n%s", cmd, code, want, errs)
		}
	}
}

// TestAuditReplayFromTimeOneNoteNoLag: the audit of a replay --from a
// time of 3 partitions printed 6 notes, two near-identical ones per
// partition (the ledger's start, the broker's retained offsets below it),
// and its verdict counted the log past the replay's end as "not sunk yet
// (lag)", though a replay is a bounded job that reached its end (a new
// user's run). One note names the partitions, and the offsets past the
// recorded end (floe.replay.until) are said to be past it, not lag.
func TestAuditReplayFromTimeOneNoteNoLag(t *testing.T) {
	st, loc := replayStack(t)
	from := sinceTopic(t, st, "orders")
	brokers := []string{"--brokers", strings.Join(st.Brokers, ",")}
	mustFloe(t, slices.Concat([]string{"replay", "--topic", "orders", "--table", "lake.orders_since", "--from", from}, brokers, loc)...)
	produceRound(t, st.Brokers, "orders", 3, 30, map[int32]int64{})

	audit := slices.Concat([]string{"audit", "--table", "lake.orders_since"}, brokers, loc)
	var rep struct {
		Complete   bool     `json:"complete"`
		Verdict    string   `json:"verdict"`
		Notes      []string `json:"notes"`
		Partitions []struct {
			Lag     *int64 `json:"lag"`
			PastEnd int64  `json:"past_replay_end"`
		} `json:"partitions"`
	}
	out := mustFloe(t, append(audit, "--json")...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Complete {
		t.Fatalf("audit --json: %v\n%s", err, out)
	}
	want := "the ledger records that the replay --from " + from + " (table property floe.replay.from-time) began orders/0 at offset 5, orders/1 at offset 5 and orders/2 at offset 5: the table claims nothing below them"
	if len(rep.Notes) != 1 || !strings.HasPrefix(rep.Notes[0], want) || !strings.Contains(rep.Notes[0], "; the broker retains orders/0 [0, 5), orders/1 [0, 5) and orders/2 [0, 5) below them, which the table does not hold") {
		t.Errorf("audit notes: want one, beginning %q and naming the retained offsets: %q", want, rep.Notes)
	}
	for i, p := range rep.Partitions {
		if p.Lag == nil || *p.Lag != 0 || p.PastEnd != 10 {
			t.Errorf("partition %d: lag %v, past_replay_end %d; want 0 and 10", i, fmt.Sprint(deref(p.Lag)), p.PastEnd)
		}
	}
	text := strings.Join(strings.Fields(mustFloe(t, audit...)), " ")
	if strings.Contains(text, "not sunk yet") || !strings.Contains(text, "up to the end the replay recorded (table property floe.replay.until); the log holds 30 offsets past it, which the replay does not take") {
		t.Errorf("audit of a replay that reached its end: the log past it as lag, or unsaid:\n%s", text)
	}

	// A replay short of its end (as an interrupted one is) lags up to
	// that end only.
	tbl := openFloeTable(t, st, "lake.orders_since")
	if err := tbl.SetProperties(t.Context(), map[string]string{"floe.replay.until": "0=12,1=12,2=12"}); err != nil {
		t.Fatal(err)
	}
	text = strings.Join(strings.Fields(mustFloe(t, audit...)), " ")
	if want := "; 6 offsets of the log up to the end the replay recorded (table property floe.replay.until) not replayed yet (lag, not a finding), and the log holds 24 offsets past that end, which the replay does not take"; !strings.Contains(text, want) {
		t.Errorf("audit of a replay short of its end: want %q:\n%s", want, text)
	}
}

// deref is *p, or "null".
func deref(p *int64) any {
	if p == nil {
		return "null"
	}
	return *p
}

// TestStatusLastCommitOfPartitionLeftOut: a pipeline of partitions 0 and 1
// of a 3-partition topic records partition 2's start (where the process
// sinking it resumes), and floe status showed a LAST COMMIT time for
// partition 2, which no commit advanced (a new user's run; the column is
// "when a commit last advanced the partition"). It shows "-" now, and
// --json has no last_commit for it.
func TestStatusLastCommitOfPartitionLeftOut(t *testing.T) {
	st, loc := sinkStack(t)
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	writeFile(t, conf, "pipelines:\n  - topic: orders\n    table: lake.orders\n    partitions: [0, 1]\n")
	brokers := []string{"--brokers", strings.Join(st.Brokers, ",")}
	mustFloe(t, slices.Concat([]string{"sink", "--config", conf, "--stop-at-end"}, brokers, loc)...)
	status := slices.Concat([]string{"status", "--table", "lake.orders"}, brokers, loc)
	out := mustFloe(t, status...)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "orders" {
			continue
		}
		if last := f[len(f)-1]; (f[1] == "2") != (last == "-") {
			t.Errorf("partition %s: LAST COMMIT %s; want - for partition 2 alone, which no commit advanced:\n%s", f[1], last, out)
		}
	}
	var doc struct {
		Partitions []struct {
			Partition  int32   `json:"partition"`
			LastCommit *string `json:"last_commit"`
		} `json:"partitions"`
	}
	js := mustFloe(t, append(status, "--json")...)
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Partitions) != 3 {
		t.Fatalf("status --json: %v\n%s", err, js)
	}
	for _, p := range doc.Partitions {
		if (p.Partition == 2) != (p.LastCommit == nil) {
			t.Errorf("status --json: partition %d last_commit %v; want none for partition 2 alone", p.Partition, p.LastCommit)
		}
	}
}
