package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestS3DeadLetterFileDeleted (from a new-user run): an object of the
// dead-letter table deleted from the bucket (aws s3 rm) stopped floe
// sink, floe maintain and even the default floe audit with "file does not
// exist". On versitygw, through the CLI: the sink goes on and warns with
// the way out, the audit reports the lost file (exit 1), floe maintain
// fails naming the flag, and with --drop-missing-dead-letter-files drops
// the file and records the first commit's dead letter as lost, saying so,
// after which an Iceberg scan reads the dead-letter table again, the later
// dead letter is there, maintenance passes and the audit reports the loss.
func TestS3DeadLetterFileDeleted(t *testing.T) {
	e := newS3Env(t)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	produce := func(values ...string) {
		var recs []*kgo.Record
		for _, v := range values {
			recs = append(recs, &kgo.Record{Topic: "orders", Value: []byte(v)})
		}
		if err := localstack.Produce(t.Context(), e.brokers, recs); err != nil {
			t.Fatal(err)
		}
	}
	loc := []string{"--catalog", e.catalog, "--warehouse", e.warehouse()}
	sink := e.sinkArgs("orders", "lake.orders", "--value", "json", "--stop-at-end")
	produce(`{"id":1}`, `oops`)
	if code, out, errs := floe(t, sink...); code != 0 || !strings.Contains(out, "1 dead letter") {
		t.Fatalf("first sink: exit %d\n%s\n%s", code, out, errs)
	}
	keys := regexp.MustCompile(`<Key>([^<]+\.parquet)</Key>`).FindAllStringSubmatch(e.list(t, "warehouse/lake.db/orders_dlq/data/"), -1)
	if len(keys) != 1 {
		t.Fatalf("dead-letter objects %v, want one", keys)
	}
	key := keys[0][1]
	resp, err := e.s3.Do(t.Context(), "DELETE", "/"+e.bucket+"/"+key, nil)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("delete %s: %v %v", key, resp, err)
	}
	resp.Body.Close()

	produce(`{"id":2}`, `oops again`)
	code, out, errs := floe(t, sink...)
	if code != 0 || !strings.Contains(errs, key) || !strings.Contains(errs, "--drop-missing-dead-letter-files") {
		t.Fatalf("sink after the object was deleted: exit %d, want 0 and a warning naming %s and the flag\n%s\n%s", code, key, out, errs)
	}
	code, out, errs = floe(t, append([]string{"audit", "--table", "lake.orders", "--json"}, loc...)...)
	if doc := decodeAudit(t, out); code != 1 || doc.Complete || !strings.Contains(out, key) {
		t.Errorf("audit: exit %d, want 1 and a finding naming %s\n%s\n%s", code, key, out, errs)
	}
	// A lookup that reads the lost file says what it is and the way out
	// (from a new-user run: the storage's bare "file does not exist").
	code, _, errs = floe(t, append([]string{"where", "--table", "lake.orders", "--partition", "0", "--offset", "1"}, loc...)...)
	if code != 2 || !strings.Contains(errs, "gone from its storage") || !strings.Contains(errs, "--drop-missing-dead-letter-files") {
		t.Errorf("where on the lost dead letter: exit %d, %s", code, errs)
	}
	// floe files reads manifests only; --check looks for each file in the
	// bucket and names the one gone.
	code, out, errs = floe(t, append([]string{"files", "--table", "lake.orders_dlq", "--check"}, loc...)...)
	if code != 2 || !strings.Contains(out, key+"  (missing from storage)") || !strings.Contains(errs, "1 of the 2 data files is gone") ||
		!strings.Contains(errs, "--drop-missing-dead-letter-files") {
		t.Errorf("files --check of the dead-letter table: exit %d, want 2 marking %s\n%s\n%s", code, key, out, errs)
	}
	if code, out, errs := floe(t, append([]string{"files", "--table", "lake.orders", "--check", "--json"}, loc...)...); code != 0 || strings.Contains(out, `"missing"`) {
		t.Errorf("files --check of the data table: exit %d, want 0 and no file missing\n%s\n%s", code, out, errs)
	}
	maintain := append([]string{"maintain", "--table", "lake.orders"}, loc...)
	if code, out, errs := floe(t, maintain...); code != 2 || !strings.Contains(errs, "--drop-missing-dead-letter-files") ||
		!strings.Contains(out, "dead-letter tables checked against the ledger: lake.orders_dlq") {
		t.Errorf("maintain: exit %d, want 2, the flag named and the dead-letter table said\n%s\n%s", code, out, errs)
	}
	code, out, errs = floe(t, append(maintain, "--drop-missing-dead-letter-files")...)
	if code != 0 || !strings.Contains(out, "dropped 1 data file") || !strings.Contains(out, key) ||
		!strings.Contains(out, "recorded the dead letters of 1 commit whose files are gone as lost") {
		t.Errorf("maintain --drop-missing-dead-letter-files: exit %d, want 0, the drop and the lost dead letter of the first commit reported\n%s\n%s", code, out, errs)
	}
	// The loss is recorded: maintenance passes, the audit still reports it.
	if code, out, errs := floe(t, maintain...); code != 0 {
		t.Errorf("maintain after the loss was recorded: exit %d, want 0\n%s\n%s", code, out, errs)
	}
	code, out, errs = floe(t, append([]string{"audit", "--table", "lake.orders"}, loc...)...)
	if code != 1 || !strings.Contains(out, "dead-letters-lost") || !strings.Contains(out, "replay") {
		t.Errorf("audit after the loss was recorded: exit %d, want 1 and a dead-letters-lost finding\n%s\n%s", code, out, errs)
	}
	dead := floetest.Rows(t, openTable(t, e.catalogConfig(), "lake.orders_dlq"))
	if len(dead) != 1 || dead[0].Offset != 3 {
		t.Errorf("dead letters after the drop %+v; want the one at offset 3", dead)
	}
}
