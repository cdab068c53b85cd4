package main

import (
	"slices"
	"strings"
	"testing"
)

// TestSinkCreateTableFalse (from a new-user run): a misspelt --table made
// a new table and sank the whole topic into it. --create-table=false
// refuses a missing table before anything is created (neither the table
// nor its dead-letter table), naming the tables that come close, and sinks
// into an existing one as usual; with --topic-regex, whose topics get new
// tables, it is refused.
func TestSinkCreateTableFalse(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	sink := func(extra ...string) (int, string, string) {
		return floe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--stop-at-end", "--value", "json"}, extra, loc)...)
	}
	if code, out, errs := sink("--topic", "orders", "--table", "lake.orders"); code != exitOK {
		t.Fatalf("first sink: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs := sink("--topic", "orders", "--table", "lake.order", "--create-table=false")
	if code != exitError || !strings.Contains(errs, "lake.order") || !strings.Contains(errs, "did you mean lake.orders") || !strings.Contains(errs, "--create-table=false refuses to create it") {
		t.Fatalf("a misspelt --table with --create-table=false: exit %d\n%s\n%s", code, out, errs)
	}
	// Said once: the refusal and the hint of a missing table both said
	// "check --table" (from a new-user run).
	if n := strings.Count(errs, "check --table"); n != 1 {
		t.Errorf("the refusal says \"check --table\" %d times, want once:\n%s", n, errs)
	}
	_, tables, _ := floe(t, append([]string{"status"}, loc...)...)
	if strings.Contains(tables, "lake.order ") || strings.Contains(tables, "lake.order_dlq") {
		t.Fatalf("the refused run created a table:\n%s", tables)
	}
	if code, out, errs := sink("--topic", "orders", "--table", "lake.orders", "--create-table=false"); code != exitOK {
		t.Fatalf("an existing table with --create-table=false: exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := sink("--topic-regex", "ord.*", "--table", "lake.{topic}", "--create-table=false"); code != exitError || !strings.Contains(errs, "--topic-regex") {
		t.Fatalf("--create-table=false with --topic-regex: exit %d\n%s", code, errs)
	}
}
