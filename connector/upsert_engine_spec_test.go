package connector_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestUpsertEngineSpecOutsideKey: an upsert table keyed by the Kafka key,
// created by floe and still empty, is given the spec hour(kafka_timestamp)
// by another engine. floe refuses such a spec itself (the deletes of a key
// must share its row's partition), but took it from another engine: the
// sink wrote its data files and then failed in iceberg-go's writer of the
// equality deletes ("failed to find source column"), leaving them behind;
// had the write gone through, a key updated an hour later would have kept
// its old row. The sink is refused at start now, naming the key-columns
// rule, before it writes anything (from a review).
func TestUpsertEngineSpecOutsideKey(t *testing.T) {
	e := newEnv(t)
	const topic, name = "acc", "lake.acc"
	e.Topic(topic, 1, nil)
	e.UpsertTable(name)
	cat, ident := e.CatalogOf(name)
	it, err := cat.LoadTable(e.Ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	txn := it.NewTransaction()
	upd := txn.UpdateSpec(true)
	upd.AddField(mapping.ColTimestamp, iceberg.HourTransform{}, "ts_hour")
	if err := upd.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	tbl, dlq := e.TableWithDeadLetters(name, snapshot.OpenOptions{Layout: mapping.Layout{Key: mapping.KeyString}, Mode: mapping.ModeUpsert, Key: &key})
	e.Produce([]*kgo.Record{keyed(topic, 0, ptr("a"), ptr("a1"), 0), keyed(topic, 0, ptr("b"), ptr("b1"), 1)})
	cfg := connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Logger: floetest.QuietLogger()}
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err == nil {
		_, err = s.Run(e.Ctx)
	}
	if _, ok := errors.AsType[*mapping.PartitionByError](err); !ok || !strings.Contains(err.Error(), "kafka_timestamp, which is not a key column (kafka_key)") {
		t.Fatalf("sink into an upsert table another engine partitioned by hour(kafka_timestamp): %v (%T), want a refusal naming the key-columns rule", err, err)
	}
	var written []string
	_ = filepath.WalkDir(strings.TrimPrefix(tbl.Iceberg().Location(), "file://"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			written = append(written, p)
		}
		return nil
	})
	if len(written) > 0 {
		t.Errorf("the refused sink left data files: %v", written)
	}
}
