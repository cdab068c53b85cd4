package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestAuditCommandStateTable audits the demo's state table (built by the
// demo's own replay --fold latest step from a topic with a committed and an
// aborted transaction: an upsert table keyed by partition and Kafka key) at
// every level: a folded table is complete.
func TestAuditCommandStateTable(t *testing.T) {
	st, loc := replayStack(t)
	ordersWithTransactions(t, st)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	var demo bytes.Buffer
	if err := demoReplay(t.Context(), &demo, st, openFloeTable(t, st, "lake.orders")); err != nil {
		t.Fatal(err)
	}

	base := append([]string{"audit", "--table", "lake.orders_state", "--deep", "--brokers", brokers, "--verify-content"}, loc...)
	code, out, errs := floe(t, base...)
	if code != exitOK || !strings.Contains(out, "upsert table (key partition-kafka-key)") || !strings.Contains(out, "verdict: COMPLETE") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	checkWidth(t, out)

	code, out, errs = floe(t, append(base, "--json")...)
	doc := decodeAudit(t, out)
	var state struct {
		Mode string  `json:"mode"`
		Key  *string `json:"upsert_key"`
	}
	if err := json.Unmarshal([]byte(out), &state); err != nil {
		t.Fatal(err)
	}
	if code != exitOK || !doc.Complete || len(doc.Levels) != 5 || state.Mode != "upsert" || state.Key == nil || *state.Key != "partition-kafka-key" {
		t.Fatalf("exit %d, mode %q key %v, %+v\n%s", code, state.Mode, state.Key, doc, errs)
	}
	var verified, rows int64
	for _, p := range doc.Partitions {
		if p.Rows == nil || p.Content == nil {
			t.Fatalf("partition %+v: want rows and content", p)
		}
		verified += p.Content.Verified
		rows += *p.Rows
	}
	if verified == 0 || verified != rows {
		t.Fatalf("%d rows verified of %d", verified, rows)
	}
}
