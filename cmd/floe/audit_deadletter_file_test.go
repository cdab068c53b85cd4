package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestAuditDeadLetterFileLostOnce (from a new-user run): one data file of
// the dead-letter table deleted from the storage was reported as
// "2 missing-file": one finding for the file, one for the commit whose
// dead letters it held (its only file, the same one). One fault, one
// finding, which names the file and the commit; at every depth.
func TestAuditDeadLetterFileLostOnce(t *testing.T) {
	_, cfg, cat, _ := asOfDLSetup(t)
	dlq := openTable(t, cfg, "lake.dl_dlq")
	files, err := dlq.Files(t.Context(), dlq.Head().SnapshotID)
	if err != nil || len(files) != 1 {
		t.Fatalf("dead-letter files: %v %v", files, err)
	}
	if err := os.Remove(strings.TrimPrefix(files[0].Path, "file://")); err != nil {
		t.Fatal(err)
	}
	commits, err := openTable(t, cfg, "lake.dl").DeadLetterCommits(t.Context(), 0, "lake.dl_dlq")
	if err != nil || len(commits) != 1 {
		t.Fatalf("commits naming the dead-letter table: %v %v", commits, err)
	}
	for _, depth := range [][]string{nil, {"--deep"}} {
		code, out, errs := floe(t, slices.Concat([]string{"audit", "--table", "lake.dl", "--json"}, depth, cat)...)
		var doc struct {
			Findings []struct {
				Kind   string  `json:"kind"`
				File   *string `json:"file"`
				Detail string  `json:"detail"`
			} `json:"findings"`
		}
		if code != exitFindings || json.Unmarshal([]byte(out), &doc) != nil {
			t.Fatalf("audit %v: exit %d\n%s%s", depth, code, out, errs)
		}
		if len(doc.Findings) != 1 || doc.Findings[0].Kind != "missing-file" || doc.Findings[0].File == nil || *doc.Findings[0].File != files[0].Path ||
			!strings.Contains(doc.Findings[0].Detail, commits[0].ID) {
			t.Errorf("audit %v: findings %+v; want one missing-file of %s naming commit %s", depth, doc.Findings, files[0].Path, commits[0].ID)
		}
	}
	code, out, errs := floe(t, slices.Concat([]string{"audit", "--table", "lake.dl"}, cat)...)
	if code != exitFindings || !strings.Contains(out, "1 finding: 1 missing-file") {
		t.Errorf("audit text: exit %d, want the verdict to count 1 missing-file\n%s%s", code, out, errs)
	}
}
