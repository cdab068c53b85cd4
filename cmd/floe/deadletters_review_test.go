package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestDeadLetterThatDecodesNow (from a review): the content
// level decodes every record as the sink does, and compares a row with the
// row the record makes; but where the table holds a dead letter it only
// compares the dead letter's bytes with the record's, never whether the
// record is one. A record the sink could not decode then (a registry that
// answered 40403 for a schema id it had not replicated yet: a follower
// behind the leader, a registry restored from a backup, a migration) and
// that decodes now is missing from the data table for good, and
// `floe audit --verify-content` says COMPLETE, counting it as a verified
// dead letter, without a word that it decodes now and a replay would
// recover it. It is complete (the dead-letter table accounts for them) and
// a note now says so.
func TestDeadLetterThatDecodesNow(t *testing.T) {
	const topic = "orders"
	st := topicStack(t, topic)
	schema := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	recs := avroRecords(t, st, topic, schema, map[string]any{"id": int64(1)}, map[string]any{"id": int64(2)})
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	// A registry that does not have the schema yet: the 40403 Confluent's
	// registry answers for an unknown id.
	var lagging atomic.Bool
	lagging.Store(true)
	target, _ := url.Parse(st.Registry)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lagging.Load() && strings.HasPrefix(r.URL.Path, "/schemas/ids/") {
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error_code":40403,"message":"Schema not found"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	code, out, errs := floe(t, append([]string{"sink", "-b", st.Brokers[0], "-t", topic, "--table", "lake." + topic, "--stop-at-end",
		"--value", "registry", "--schema-registry", srv.URL}, loc...)...)
	if code != exitOnlyDeadLetters {
		t.Fatalf("sink with a registry lacking the schema: exit %d, want %d (only dead letters)\n%s%s", code, exitOnlyDeadLetters, out, errs)
	}
	lagging.Store(false)
	code, out, errs = floe(t, append([]string{"audit", "--table", "lake." + topic, "--deep", "--verify-content",
		"-b", st.Brokers[0], "--schema-registry", st.Registry}, loc...)...)
	// Complete (every offset is a row or a dead letter), and the report
	// says the dead letters would be rows now.
	if code != exitOK || !strings.Contains(out, "2 dead letters' records decode now as the sink decodes records") ||
		!strings.Contains(out, "orders/0 offset 0") {
		t.Errorf("audit --verify-content of dead letters that decode now: exit %d\n%s%s", code, out, errs)
	}
}

// TestWireErrorNamesTheFix (from a review): a registry table's topic that
// also carries records a producer wrote without the registry's serializer
// (plain JSON from a script, Avro without the header) gets those as dead
// letters whose reason reads "not in the schema registry wire format: the
// first byte is 0x7b, not the magic byte 0". It does not say that 0x7b is
// '{', that the record is plain JSON text, nor what to do (the producer
// must use a schema-registry serializer; --value json for a topic of
// plain JSON). The run's summary gives advice only when every record is a
// dead letter.
func TestWireErrorNamesTheFix(t *testing.T) {
	schema := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	run := sinkAudited(t, "orders", func(st *localstack.Stack) []*kgo.Record {
		recs := avroRecords(t, st, "orders", schema, map[string]any{"id": int64(1)})
		return append(recs, &kgo.Record{Topic: "orders", Value: []byte(`{"id":2}`)})
	}, "--value", "registry", "--schema-registry")
	if run.sinkCode == exitError {
		t.Fatalf("sink failed:\n%s", run.sinkOut)
	}
	dead := floetest.Rows(t, openTable(t, run.st.Catalog(), "lake.orders_dlq"))
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	reason := dead[0].Columns["error"]
	if !strings.Contains(reason, "JSON") || !strings.Contains(reason, "serializer") {
		t.Errorf("the dead letter of a plain JSON record {\"id\":2} in a registry table says %q: it names neither what the bytes are (JSON text) nor the fix (a schema-registry serializer, or --value json)", reason)
	}
}
