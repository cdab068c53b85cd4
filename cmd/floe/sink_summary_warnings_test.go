package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/localstack"
)

// TestSinkSummarySaysRecordedLoss: a run with --on-data-loss record that
// recorded a loss said so only in a WARN line of the log; its summary read
// "50 rows in 1 commit" and its JSON had no word of it (a new user's
// report). The summary and the JSON say which offsets were lost, and the
// run still exits 0: the user asked for the loss to be recorded.
func TestSinkSummarySaysRecordedLoss(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "retained", 1, nil); err != nil {
		t.Fatal(err)
	}
	sink := func(table string, extra ...string) []string {
		return slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "retained", "--table", table, "--stop-at-end"}, extra, loc)
	}
	produceRound(t, st.Brokers, "retained", 1, 100, map[int32]int64{})
	mustFloe(t, sink("lake.retained")...)
	mustFloe(t, sink("lake.retained_json")...)
	produceRound(t, st.Brokers, "retained", 1, 100, map[int32]int64{})
	if err := st.Cluster.DeleteRecords("retained", 0, 150); err != nil {
		t.Fatal(err)
	}

	code, out, errs := floe(t, sink("lake.retained", "--on-data-loss", "record")...)
	if code != exitOK || !strings.Contains(out, "50 rows in 1 commit") ||
		!strings.Contains(out, "warning: this run recorded 50 offsets as lost in the ledger, deleted by retention") || !strings.Contains(out, "retained/0 [100, 150)") {
		t.Fatalf("text summary: exit %d\n%s\n%s", code, out, errs)
	}

	code, out, errs = floe(t, sink("lake.retained_json", "--on-data-loss", "record", "--json")...)
	var rep struct {
		Rows int64 `json:"rows"`
		Lost []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Low       int64  `json:"low"`
			High      int64  `json:"high"`
		} `json:"lost"`
		LostOffsets int64    `json:"lost_offsets"`
		Warnings    []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK {
		t.Fatalf("--json: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	if rep.Rows != 50 || len(rep.Lost) != 1 || rep.Lost[0].Topic != "retained" || rep.Lost[0].Partition != 0 ||
		rep.Lost[0].Low != 100 || rep.Lost[0].High != 150 || rep.LostOffsets != 50 ||
		!slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, "retained/0 [100, 150)") }) {
		t.Fatalf("--json: %+v\n%s", rep, out)
	}
}

// TestSinkSummarySaysSpecChange: --partition-by given on a table that
// holds data changed its spec with a WARN line of the log only; the run's
// summary ("0 rows in 0 commits") did not repeat it, as it does a topic
// added to a table (a new user's report). The summary and the JSON's
// warnings say it.
func TestSinkSummarySaysSpecChange(t *testing.T) {
	st, loc := sinkStack(t)
	sink := func(extra ...string) []string {
		return slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, extra, loc)
	}
	mustFloe(t, sink()...)
	out := mustFloe(t, sink("--partition-by", "day(kafka_timestamp)")...)
	if !strings.Contains(out, "0 rows in 0 commits") || !strings.Contains(out, "warning: this run changed the partition spec of lake.orders from none to day(kafka_timestamp)") {
		t.Fatalf("text summary:\n%s", out)
	}
	out = mustFloe(t, sink("--partition-by", "hour(kafka_timestamp)", "--json")...)
	var rep struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil ||
		!slices.ContainsFunc(rep.Warnings, func(w string) bool {
			return strings.Contains(w, "from day(kafka_timestamp) to hour(kafka_timestamp)")
		}) {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	// A run that leaves the spec as it is says nothing of it.
	if out := mustFloe(t, sink("--partition-by", "hour(kafka_timestamp)")...); strings.Contains(out, "warning:") {
		t.Fatalf("a run that kept the spec warned:\n%s", out)
	}
}
