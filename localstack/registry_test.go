package localstack

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// The registry's journal brings back every change after a restart: the
// same subjects, versions and schema IDs (also the schemas registered
// after a deletion, whose IDs depend on the order of changes), so records
// already in a persistent broker's log still decode. A journal line cut
// short by a crash, never answered, is dropped.
func TestRegistryJournalSurvivesRestart(t *testing.T) {
	ctx := t.Context()
	journal := filepath.Join(t.TempDir(), "schema-registry.jsonl")
	reg, err := StartRegistry(ctx, 0, journal)
	if err != nil {
		t.Fatal(err)
	}
	money := sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; package shop; message Money { int64 units = 1; }`}
	order := sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; package shop; import "shop/money.proto"; message Order { Money total = 1; }`,
		References: []sr.SchemaReference{{Name: "shop/money.proto", Subject: "money", Version: 1}}}
	avro1 := sr.Schema{Schema: `{"type":"record","name":"A","fields":[{"name":"x","type":"int"}]}`}
	avro2 := sr.Schema{Schema: `{"type":"record","name":"A","fields":[{"name":"x","type":"int"},{"name":"y","type":["null","string"],"default":null}]}`}
	json1 := sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object","properties":{"n":{"type":"integer"}}}`}
	ids := map[string]int{}
	for _, r := range []struct {
		key, subject string
		s            sr.Schema
	}{
		{"money", "money", money}, {"order", "orders-value", order}, {"avro1", "a-value", avro1}, {"avro2", "a-value", avro2},
	} {
		if ids[r.key], err = RegisterSchema(ctx, reg.URL, r.subject, r.s); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := sr.NewClient(sr.URLs(reg.URL))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteSchema(ctx, "a-value", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if ids["json1"], err = RegisterSchema(ctx, reg.URL, "j-value", json1); err != nil {
		t.Fatal(err)
	}
	before := registryState(t, cl)
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}

	// A crash while writing a line leaves it without its newline.
	f, err := os.OpenFile(journal, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"method":"POST","uri":"/subjects/cut/vers`)
	f.Close()

	reg, err = StartRegistry(ctx, 0, journal)
	if err != nil {
		t.Fatalf("restart on the journal: %v", err)
	}
	defer reg.Close()
	cl, err = sr.NewClient(sr.URLs(reg.URL))
	if err != nil {
		t.Fatal(err)
	}
	if after := registryState(t, cl); after != before {
		t.Fatalf("after the restart:\n%s\nbefore:\n%s", after, before)
	}
	for key, id := range ids {
		if _, err := cl.SchemaByID(ctx, id); err != nil {
			t.Errorf("schema %s (id %d) after the restart: %v", key, id, err)
		}
	}
	// Registering goes on where it stopped: a new schema gets a new ID,
	// a known one its old ID.
	id, err := RegisterSchema(ctx, reg.URL, "new-value", sr.Schema{Schema: `"string"`})
	if err != nil || slices.Contains(slices.Collect(maps.Values(ids)), id) {
		t.Errorf("new schema after the restart: id %d, err %v; IDs before: %v", id, err, ids)
	}
	if again, err := RegisterSchema(ctx, reg.URL, "orders-value", order); err != nil || again != ids["order"] {
		t.Errorf("registering a known schema again: id %d, err %v, want %d", again, err, ids["order"])
	}
	b, _ := os.ReadFile(journal)
	if bytes.Contains(b, []byte("/subjects/cut/")) {
		t.Error("the line cut short is still in the journal")
	}
}

// registryState lists every subject version with its ID, references and
// schema, as text to compare: the active ones, then the soft-deleted ones
// too.
func registryState(t *testing.T, cl *sr.Client) string {
	t.Helper()
	var b bytes.Buffer
	for _, ctx := range []context.Context{t.Context(), sr.WithParams(t.Context(), sr.ShowDeleted)} {
		all, err := cl.AllSchemas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			fmt.Fprintf(&b, "%s v%d id %d refs %v: %s\n", s.Subject, s.Version, s.ID, s.References, s.Schema.Schema)
		}
		b.WriteString("--\n")
	}
	return b.String()
}
