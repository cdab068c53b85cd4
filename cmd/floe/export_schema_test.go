package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestExportOldSnapshotColumns (from a new-user run): as-of -o of a typed
// table at a position before a column was added wrote that column in its
// CSV header (the table's schema now) and not in its JSON lines (the
// snapshot's): both take the snapshot's columns.
func TestExportOldSnapshotColumns(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "clicks", 1, nil); err != nil {
		t.Fatal(err)
	}
	sink := append([]string{"sink", "-b", st.Brokers[0], "-t", "clicks", "--table", "lake.clicks", "--value", "json", "--stop-at-end"}, loc...)
	produce := func(values ...string) {
		var recs []*kgo.Record
		for _, v := range values {
			recs = append(recs, &kgo.Record{Topic: "clicks", Value: []byte(v)})
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
		mustFloe(t, sink...)
	}
	produce(`{"id":1}`, `{"id":2}`)
	produce(`{"id":3,"country":"fr"}`)
	dir := t.TempDir()
	columns := map[string][]string{}
	for _, ext := range []string{"csv", "jsonl"} {
		out := filepath.Join(dir, "old."+ext)
		mustFloe(t, append([]string{"as-of", "--table", "lake.clicks", "--offsets", "0=2", "-o", out}, loc...)...)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		if ext == "csv" {
			columns[ext], err = csv.NewReader(strings.NewReader(first)).Read()
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, name := range []string{"id", "country"} {
			if strings.Contains(first, fmt.Sprintf("%q:", name)) {
				columns[ext] = append(columns[ext], name)
			}
		}
	}
	if slices.Contains(columns["csv"], "country") || !slices.Contains(columns["csv"], "id") || slices.Contains(columns["jsonl"], "country") {
		t.Fatalf("columns of an export before country was added: CSV %v, JSON lines %v", columns["csv"], columns["jsonl"])
	}
}
