package main

import (
	"os"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// TestAuditCommandWideTable: floe sink of a 200-partition topic keeps its
// commits' ranges in ranges files; floe audit --deep with the broker and
// content verification says complete; with the head commit's ranges file
// deleted, floe audit exits 2 naming it.
func TestAuditCommandWideTable(t *testing.T) {
	const partitions = 200
	st, _, _ := partitionedStack(t, "wide", partitions)
	for p := range int32(partitions) {
		if err := localstack.Produce(t.Context(), st.Brokers, floetest.Records("wide", p, 3, "w")); err != nil {
			t.Fatal(err)
		}
	}
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	if code, out, errs := floe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "wide", "--table", "lake.wide", "--stop-at-end"}, loc...)...); code != exitOK {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	base := append([]string{"audit", "--table", "lake.wide"}, loc...)
	code, out, errs := floe(t, append(base, "--json", "--deep", "--brokers", st.Brokers[0], "--verify-content")...)
	doc := decodeAudit(t, out)
	if code != exitOK || !doc.Complete || len(doc.Partitions) != partitions {
		t.Fatalf("exit %d, complete %v, %d partitions\n%s", code, doc.Complete, len(doc.Partitions), errs)
	}
	tbl := auditTable(t, st, "lake.wide")
	ref := tbl.Head().Summary.Properties[mapping.KeyRangesFile]
	if ref == "" {
		t.Fatalf("the head commit of %d partitions keeps its ranges inline: %v", partitions, tbl.Head().Summary.Properties)
	}
	if err := os.Remove(strings.TrimPrefix(ref, "file://")); err != nil {
		t.Fatal(err)
	}
	code, out, errs = floe(t, base...)
	if code != exitError || !strings.Contains(errs, ref[strings.LastIndexByte(ref, '/')+1:]) {
		t.Fatalf("audit with a ranges file deleted: exit %d (want %d naming it)\nstdout:\n%s\nstderr:\n%s", code, exitError, out, errs)
	}
}
