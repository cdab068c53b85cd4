package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestTagKeepsItsDeadLetters: after floe replay --publish --tag-main, the
// tag holds main's earlier history, dead letters included; reconciling
// the dead-letter table (floe maintain, every sink session) must not
// remove the tag's dead letters, or its audit and dead-letters listing
// find them missing.
func TestTagKeepsItsDeadLetters(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	var bad []*kgo.Record
	for i := range 5 {
		bad = append(bad, &kgo.Record{Topic: "orders", Partition: 0, Value: fmt.Appendf(nil, `{"order_id":%d,`, i)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, bad); err != nil {
		t.Fatal(err)
	}
	tbl := func(args ...string) []string { return slices.Concat(args, []string{"--table", "lake.orders"}, loc) }
	mustFloe(t, tbl("sink", "--brokers", brokers, "--topic", "orders", "--value", "json", "--stop-at-end")...)
	mustFloe(t, tbl("replay", "--brokers", brokers, "--topic", "orders", "--from", "0=50,1=50,2=50",
		"--branch", "rebuild", "--publish", "--publish-different", "--tag-main", "before")...)
	check := func(when string) {
		t.Helper()
		if code, out, errs := floe(t, tbl("audit", "--branch", "before", "--deep")...); code != 0 {
			t.Errorf("%s: floe audit --branch before --deep: exit %d\n%s%s", when, code, out, errs)
		}
		code, out, errs := floe(t, tbl("dead-letters", "--branch", "before", "--json")...)
		var doc struct {
			Matched int64    `json:"matched"`
			Notes   []string `json:"notes"`
		}
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Matched != 5 || len(doc.Notes) > 0 {
			t.Errorf("%s: floe dead-letters --branch before: exit %d (%v)\n%s%s\nwant the tag's 5 dead letters listed, no note", when, code, err, out, errs)
		}
	}
	check("after the publish")
	mustFloe(t, tbl("maintain")...)
	check("after floe maintain")
	mustFloe(t, tbl("sink", "--brokers", brokers, "--topic", "orders", "--stop-at-end")...)
	check("after a sink session")
}
