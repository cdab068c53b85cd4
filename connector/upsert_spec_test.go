package connector_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// auditSays runs floe's deepest audit (rows, broker, content) and
// returns whether it calls the table complete, logging its findings.
func auditSays(t *testing.T, e *env, tbl *snapshot.Table) bool {
	t.Helper()
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Logf("audit finding: %+v", f)
	}
	t.Logf("audit complete: %v", rep.Complete())
	return rep.Complete()
}

// TestUpsertSpecCannotChange: an equality delete of a partitioned spec
// applies only to data files of the same spec and partition (Iceberg spec;
// iceberg-go's scan does so). A sink that changed an upsert table's spec
// (--partition-by identity(kafka_key), a key column) after it held rows
// wrote deletes that never reached the rows of the old spec: a key updated
// after the change had two rows, a key deleted kept its old one, and
// compaction (which skips files of older specs) did not repair it. Such a
// change is refused; the table goes on as it was. From the review of the
// upsert path.
func TestUpsertSpecCannotChange(t *testing.T) {
	e := newEnv(t)
	const topic = "accounts-spec"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.upsertTable("lake.accounts_spec")
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	e.Produce([]*kgo.Record{keyed(topic, 0, ptr("a"), ptr("a1"), 0), keyed(topic, 0, ptr("b"), ptr("b1"), 1)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	pb, err := mapping.ParsePartitionBy("identity(kafka_key)")
	if err != nil {
		t.Fatal(err)
	}
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	cat, ident := e.CatalogOf("lake.accounts_spec")
	_, err = snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{Layout: mapping.Layout{Key: mapping.KeyString}, Mode: mapping.ModeUpsert, Key: &key, PartitionBy: &pb})
	if pe, ok := errors.AsType[*mapping.PartitionByError](err); !ok || !strings.Contains(pe.Error(), "cannot change once it holds files") {
		t.Fatalf("a new spec on an upsert table with rows: %v, want a PartitionByError", err)
	}
	e.Produce([]*kgo.Record{keyed(topic, 0, ptr("a"), ptr("a2"), 2), keyed(topic, 0, ptr("b"), nil, 3)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows(t, tbl) {
		got = append(got, r.Key+"="+r.Value)
	}
	if len(got) != 1 || got[0] != "a=a2" || tbl.PartitionSpec() != "none" || !auditSays(t, e, tbl) {
		t.Fatalf("rows %v, spec %s; want [a=a2] (b deleted), unpartitioned, the audit complete", got, tbl.PartitionSpec())
	}
}

// TestUpsertSpecChangedByAnotherEngine: floe refuses a --partition-by
// that changes the spec of an upsert table holding files
// (TestUpsertSpecCannotChange); the same change made by another engine
// (ALTER TABLE ... ADD PARTITION FIELD kafka_key) left floe's later
// equality deletes in the new spec, out of reach of the rows of the old
// one: rows [a=a1 a=a2 b=b1]. The sink refuses to write (exit 2), and the
// table keeps what it had. From the second review of the upsert path.
func TestUpsertSpecChangedByAnotherEngine(t *testing.T) {
	e := newEnv(t)
	const topic, name = "accounts-spec-other", "lake.accounts_spec_other"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.upsertTable(name)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	e.Produce([]*kgo.Record{keyed(topic, 0, ptr("a"), ptr("a1"), 0), keyed(topic, 0, ptr("b"), ptr("b1"), 1)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	// Another engine evolves the spec.
	cat, ident := e.CatalogOf(name)
	it, err := cat.LoadTable(e.Ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	txn := it.NewTransaction()
	upd := txn.UpdateSpec(true)
	upd.AddField(mapping.ColKey, iceberg.IdentityTransform{}, mapping.ColKey)
	if err := upd.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	tbl2 := e.OpenTable(name, snapshot.OpenOptions{})
	e.Produce([]*kgo.Record{keyed(topic, 0, ptr("a"), ptr("a2"), 2), keyed(topic, 0, ptr("b"), nil, 3)})
	_, serr := e.sink(tbl2, cfg)
	var got []string
	for _, r := range rows(t, tbl2) {
		got = append(got, r.Key+"="+r.Value)
	}
	slices.Sort(got)
	if pe, ok := errors.AsType[*mapping.PartitionByError](serr); !ok || !strings.Contains(pe.Error(), "the table's partition spec changed") ||
		!slices.Equal(got, []string{"a=a1", "b=b1"}) {
		t.Fatalf("second sink: %v; rows %v; want the spec change refused and the rows [a=a1 b=b1] kept", serr, got)
	}
}
