package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/localstack"
)

// TestOnlyDeadLettersAdviceWithAnotherRegistry (from a review): a
// commit of dead letters only into a table that holds rows of the topic
// now says "--value, --key and --schema-registry fit it: these records are
// malformed or of another kind". The table's rows prove the layout, not
// this run's --schema-registry: a sink restarted with the registry of
// another environment (FLOE_SCHEMA_REGISTRY copied wrong) finds none of
// the topic's schema ids and dead-letters every record, and the warning
// tells the operator the registry is right, where the advice before (check
// that --schema-registry matches) was the way out.
func TestOnlyDeadLettersAdviceWithAnotherRegistry(t *testing.T) {
	st := topicStack(t, "reg")
	schema := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	if err := localstack.Produce(t.Context(), st.Brokers, avroRecords(t, st, "reg", schema, map[string]any{"id": int64(1)})); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	sink := []string{"sink", "-t", "reg", "--table", "lake.reg", "--value", "registry", "--stop-at-end", "-b", st.Brokers[0]}
	mustFloe(t, slices.Concat(sink, []string{"--schema-registry", st.Registry}, cat)...)
	// More records of the same schema; the next run is given another
	// environment's registry, which has none of the topic's schemas.
	if err := localstack.Produce(t.Context(), st.Brokers, avroRecords(t, st, "reg", schema, map[string]any{"id": int64(2)}, map[string]any{"id": int64(3)})); err != nil {
		t.Fatal(err)
	}
	other, err := localstack.StartRegistry(t.Context(), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, _, errs := floe(t, slices.Concat(sink, []string{"--schema-registry", other.URL}, cat)...)
	if !strings.Contains(errs, "every record of this commit is a dead letter") {
		t.Fatalf("setup: no dead-letter-only commit with the other registry:\n%s", lastLines(errs, 10))
	}
	if strings.Contains(errs, "--schema-registry fit it") || !strings.Contains(errs, "--schema-registry") {
		t.Errorf("records whose schema ids this run's --schema-registry does not have: the warning says\n%s\nwant it to name --schema-registry as what to check, not to say it fits", lastLines(errs, 10))
	}
}
