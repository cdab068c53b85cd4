package replay_test

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
)

// TestReplayFoldRegistryKeyWidened (from a review): replay --fold latest
// --key registry of a topic whose Avro key schema went from int to long.
// The fold's key column kafka_key was widened (the key types were kept
// only for tables keyed by the Kafka key alone), and iceberg-go's scan
// then left the int rows of updated and deleted keys in the state.
func TestReplayFoldRegistryKeyWidened(t *testing.T) {
	e := newEnv(t)
	const topic = "fold-int-key"
	e.Topic(topic, 1, nil)
	reg := func(s string) int {
		id, err := localstack.RegisterSchema(t.Context(), e.Stack.Registry, topic+"-key", sr.Schema{Schema: s})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	vInt, vLong := reg(`"int"`), reg(`"long"`)
	key := func(id int64, schemaID int) []byte {
		b := []byte{0, byte(schemaID >> 24), byte(schemaID >> 16), byte(schemaID >> 8), byte(schemaID)}
		return binary.AppendVarint(b, id)
	}
	rec := func(k []byte, v string) *kgo.Record {
		r := &kgo.Record{Topic: topic, Key: k, Timestamp: time.Unix(1_700_000_000, 0)}
		if v != "" {
			r.Value = []byte(v)
		}
		return r
	}
	e.Produce([]*kgo.Record{rec(key(1, vInt), `{"name":"one"}`), rec(key(2, vInt), `{"name":"two"}`),
		rec(key(1, vLong), `{"name":"uno"}`), rec(key(2, vLong), "")})
	l := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyRegistry}
	res, err := e.replay("lake.state", replay.Options{Topic: topic, Fold: mapping.FoldLatest, Layout: l,
		Sink: connector.Config{FlushRecords: 2, Registry: e.Registry()}})
	if err != nil {
		t.Fatalf("fold: %+v, %v", res, err)
	}
	full := e.openExisting("lake.state", "")
	var got []string
	for _, r := range rows(t, full) {
		got = append(got, r.Columns["name"])
	}
	slices.Sort(got)
	f, _ := full.Iceberg().Schema().FindFieldByName(mapping.ColKey)
	if !slices.Equal(got, []string{"uno"}) {
		t.Errorf("folded state %v (kafka_key %s), want [uno]; replay complete=%v", got, f.Type, res.Complete)
	}
	rep, err := audit.Run(e.Ctx, full, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true, Registry: e.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("audit --deep --verify-content: complete %v, findings %+v", rep.Complete(), rep.Findings)
}
