package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
)

// TestReviewS62DiffFilesCheckDeleteFileGone (review of the diff
// 13219fd..HEAD, commit 6782aea): floe files --check of an upsert table
// one of whose equality-delete files was deleted from the storage fails
// (exit 2), and its message must say what is gone: a delete file, which
// cannot be dropped (the rows it deletes would come back), not "a data
// file", with the way out of a dead-letter table's lost data file
// (--drop-missing-dead-letter-files) as its hint.
func TestReviewS62DiffFilesCheckDeleteFileGone(t *testing.T) {
	st := topicStack(t, "up")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	sink := slices.Concat([]string{"sink", "-t", "up", "--table", "lake.up", "--mode", "upsert", "--key", "string", "--stop-at-end", "-b", st.Brokers[0]}, cat)
	for _, v := range []string{"one", "two"} {
		if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "up", Key: []byte("k"), Value: []byte(v)}}); err != nil {
			t.Fatal(err)
		}
		mustFloe(t, sink...)
	}
	var res lookup.FilesResult
	out := mustFloe(t, slices.Concat([]string{"files", "--table", "lake.up", "--json"}, cat)...)
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.DeleteFiles) == 0 {
		t.Fatalf("no delete file: %s", out)
	}
	gone := res.DeleteFiles[0].Path
	if err := os.Remove(strings.TrimPrefix(gone, "file://")); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, slices.Concat([]string{"files", "--table", "lake.up", "--check"}, cat)...)
	if code != 2 || !strings.Contains(out, gone+"  (missing from storage)") {
		t.Fatalf("files --check: exit %d, want 2 marking %s\n%s\n%s", code, gone, out, errs)
	}
	if strings.Contains(errs, "a data file") || strings.Contains(errs, "--drop-missing-dead-letter-files") || !strings.Contains(errs, "delete file") {
		t.Errorf("files --check with a delete file gone says:\n%s\nwant it named a delete file (which cannot be dropped), not a data file with a dead-letter table's way out", errs)
	}
}
