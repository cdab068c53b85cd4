package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestReplayFromSnapshotNewPartition: lake.src sinks topic grow (one
// partition, ten records); snapshot S is its head. Partition 1 is added
// since and gets five records, whose first three retention deletes. Every
// record of partition 1 came after S, so a replay --from snapshot:S starts
// it at 0, as a sink starts a partition added after it began the topic:
// the deleted [0, 3) is a data loss, refused by default and recorded as
// lost with --on-data-loss record. It started at the log start, 3, with
// no word and no lost range (from a review).
func TestReplayFromSnapshotNewPartition(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "grow"
	if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "p0-%d", i)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs, kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", topic, "--table", "lake.src", "--stop-at-end"}, loc...)...)
	s := openTable(t, st.Catalog(), "lake.src").Head().SnapshotID
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreatePartitions(t.Context(), 1, topic); err != nil {
		t.Fatal(err)
	}
	recs = nil
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, "p1-%d", i)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs, kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
		t.Fatal(err)
	}
	if err := st.Cluster.DeleteRecords(topic, 1, 3); err != nil {
		t.Fatal(err)
	}
	replay := append([]string{"replay", "--brokers", st.Brokers[0], "--topic", topic, "--table", "lake.since", "--from", fmt.Sprintf("snapshot:%d", s)}, loc...)
	code, out, errs := floe(t, replay...)
	if code == exitOK || !strings.Contains(errs, "data loss on grow/1: offsets [0, 3)") || !strings.Contains(errs, "--on-data-loss record") {
		t.Errorf("replay --from snapshot:%d, grow/1 added since with [0, 3) deleted: exit %d; want the data loss refused, naming --on-data-loss record\n%s%s", s, code, out, errs)
	}
	out = mustFloe(t, append(replay, "--on-data-loss", "record")...)
	if !strings.Contains(out, "grow/1: [0, 5)") || !strings.Contains(out, "replayed 2 rows") {
		t.Errorf("replay --from snapshot:%d --on-data-loss record: want grow/1 replayed from 0, its 2 retained records:\n%s", s, out)
	}
	wout := mustFloe(t, append([]string{"where", "--table", "lake.since", "--partition", "1", "--offset", "1", "--json"}, loc...)...)
	var w struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(wout), &w); err != nil || w.Status != "lost" {
		t.Errorf("where grow/1@1 in the replay: %v\n%s; want lost", err, wout)
	}
}
