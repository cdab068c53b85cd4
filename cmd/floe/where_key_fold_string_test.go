package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestWhereKeyFoldStringKeyLog: a --fold latest --key string table is
// keyed by the Kafka key within its partition, its kafka_key the key's
// bytes as text. Key c1 was written (offset 0) and deleted by a tombstone
// (offset 2). floe where --key --brokers reads the deleting record's
// offset from the log, as for a binary kafka_key, and once floe maintain
// --compact dropped the deletes, finds the delete in the log. It said the
// table's keys are decoded from its records and gave no offset, and
// after the compaction answered unknown (from a review).
func TestWhereKeyFoldStringKeyLog(t *testing.T) {
	st, loc := replayStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "kv", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{
		{Topic: "kv", Key: []byte("c1"), Value: []byte("1")},
		{Topic: "kv", Key: []byte("c2"), Value: []byte("2")},
		{Topic: "kv", Key: []byte("c1"), Value: nil},
		{Topic: "kv", Key: []byte("c2"), Value: []byte("3")},
	}); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", "kv", "--table", "lake.kv_state", "--fold", "latest", "--key", "string", "--flush-records", "1"}, loc...)...)
	key := `{"kafka_topic":"kv","kafka_partition":0,"kafka_key":"c1"}`
	type keyJSON struct {
		Status      string `json:"status"`
		Offset      *int64 `json:"offset"`
		FoundBy     string `json:"found_by"`
		Explanation string `json:"explanation"`
	}
	whereKey := func(what string) keyJSON {
		t.Helper()
		out := mustFloe(t, append([]string{"where", "--table", "lake.kv_state", "--key", key, "--brokers", brokers, "--json"}, loc...)...)
		var k keyJSON
		if err := json.Unmarshal([]byte(out), &k); err != nil {
			t.Fatalf("where --key %s: %v\n%s", what, err, out)
		}
		return k
	}
	if k := whereKey("before compaction"); k.Status != "deleted" || k.Offset == nil || *k.Offset != 2 {
		t.Errorf("where --key c1 --brokers: %+v; want deleted by the record at kv/0 offset 2, read from the log", k)
	}
	mustFloe(t, append([]string{"maintain", "--table", "lake.kv_state", "--compact"}, loc...)...)
	if k := whereKey("after compaction"); k.Status != "deleted" || k.FoundBy != "log" || k.Offset == nil || *k.Offset != 2 {
		t.Errorf("where --key c1 --brokers after floe maintain --compact dropped the deletes: %+v; want deleted, found by the log at offset 2", k)
	}
}
