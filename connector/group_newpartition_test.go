package connector_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestGroupPicksUpNewPartitions (from a review): a partition added to the
// topic while a group sinks it is in the ledger, from offset 0, within
// about Config.PartitionCheck, as for a sink of the whole topic. A classic
// member learnt of it at the client's metadata refresh, 5 minutes later.
func TestGroupPicksUpNewPartitions(t *testing.T) {
	for _, proto := range []connector.GroupProtocol{connector.GroupClassic, connector.GroupConsumer} {
		t.Run(string(proto), func(t *testing.T) {
			e := newEnv(t)
			const topic, table = "growing", "lake.growing"
			e.Topic(topic, 2, nil)
			e.Produce(records(topic, 0, 20, "a"))
			e.Produce(records(topic, 1, 20, "a"))
			cfg := groupConfig(topic, "g-"+string(proto))
			cfg.GroupProtocol, cfg.PartitionCheck = proto, 2*time.Second
			m := e.startMember(table, cfg)
			defer m.halt(t)
			waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)
			if _, err := kadm.NewClient(e.Dial().Client()).CreatePartitions(e.Ctx, 1, topic); err != nil {
				t.Fatal(err)
			}
			e.Produce(records(topic, 2, 30, "new"))
			tp := mapping.TopicPartition{Topic: topic, Partition: 2}
			want := e.endOffsets(topic)
			if want[tp] != 30 {
				t.Fatalf("end offsets %v", want)
			}
			waitLedger(t, e, table, want, 30*time.Second)
		})
	}
}
