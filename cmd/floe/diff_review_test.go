package main

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/localstack"
)

// TestFoldLatestWhereKeyOtherPartition (from a review of this change
// set): where --key --brokers on a --fold latest table searched the log
// for the key's bytes in every partition, and answered for partition 0's
// key with a record of partition 1; it searches the key's partition only.
func TestFoldLatestWhereKeyOtherPartition(t *testing.T) {
	st, loc := replayStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "kv", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{
		{Topic: "kv", Partition: 0, Key: []byte("a"), Value: []byte("1")},
		{Topic: "kv", Partition: 1, Key: []byte("c03"), Value: []byte("2")},
		{Topic: "kv", Partition: 1, Key: []byte("c03"), Value: nil},
	}); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", "kv", "--table", "lake.kv_state", "--fold", "latest"}, loc...)...)
	key := `{"kafka_topic":"kv","kafka_partition":0,"kafka_key":"c03"}`
	code, out, errs := floe(t, append([]string{"where", "--table", "lake.kv_state", "--key", key}, loc...)...)
	t.Logf("without --brokers: exit %d\n%s%s", code, out, errs)
	code, out, errs = floe(t, append([]string{"where", "--table", "lake.kv_state", "--key", key, "--brokers", brokers}, loc...)...)
	t.Logf("with --brokers: exit %d\n%s%s", code, out, errs)
	if code != exitOK || !strings.Contains(out, "never seen") || strings.Contains(out, "kv/1") {
		t.Errorf("where --key %s --brokers (a key never written to partition 0): exit %d\n%s%s", key, code, out, errs)
	}
}

// TestDeadLetterNoteKeyFields (from a review of this change set): in a
// table keyed by decoded columns a dead letter's key is not known; the
// audit noted the key behind a dead letter though its latest record was a
// row. It notes only where the key is the Kafka key's bytes.
func TestDeadLetterNoteKeyFields(t *testing.T) {
	run := sinkAudited(t, "acct", func(st *localstack.Stack) []*kgo.Record {
		return []*kgo.Record{
			{Topic: "acct", Key: []byte(`{"id":1}`), Value: []byte(`{"x":1}`)},
			{Topic: "acct", Key: []byte(`{"id":1}`), Value: []byte(`not json`)},
			{Topic: "acct", Key: []byte(`{"id":1}`), Value: []byte(`{"x":2}`)},
		}
	}, "--value", "json", "--key", "json", "--mode", "upsert")
	if run.sinkCode == exitError || len(run.rows) != 1 {
		t.Fatalf("sink: exit %d, rows %v\n%s", run.sinkCode, run.rows, run.sinkOut)
	}
	if strings.Contains(run.auditOut, "latest record in the log is a dead letter") {
		t.Errorf("audit notes a key behind a dead letter, though the key's latest record (offset 2) is its row:\n%s", run.auditOut)
	}
}

// TestJSONSchemaDecimalPrecisionOver38 (from a review of this change set):
// a JSON Schema Connect Decimal of precision 50 (Debezium's NUMERIC(50,2))
// was refused as a schema once Connect Decimals became decimals, every
// record a dead letter; it stays a double, as before.
func TestJSONSchemaDecimalPrecisionOver38(t *testing.T) {
	plain := `{"type":"object","properties":{"id":{"type":"integer"},"amount":{"type":"number"}}}`
	titled := `{"type":"object","properties":{"id":{"type":"integer"},"amount":{"type":"number","title":"org.apache.kafka.connect.data.Decimal","connect.parameters":{"scale":"2","connect.decimal.precision":"50"}}}}`
	run := sinkAudited(t, "big", func(st *localstack.Stack) []*kgo.Record {
		var recs []*kgo.Record
		for i, schema := range []string{plain, titled} {
			id, err := localstack.RegisterSchema(t.Context(), st.Registry, "big-value", sr.Schema{Schema: schema, Type: sr.TypeJSON})
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: "big", Value: localstack.WireFormat(id, nil, fmt.Appendf(nil, `{"id":%d,"amount":12.25}`, i))})
		}
		return recs
	}, "--value", "registry", "--schema-registry")
	if run.sinkCode != exitOK || len(run.rows) != 2 {
		t.Fatalf("sink: exit %d, %d rows, want 2 (the Connect Decimal of precision 50 into the double column, as before)\n%s", run.sinkCode, len(run.rows), run.sinkOut)
	}
}

// TestStopAtEndSignalAtStart (from a review of this change set): floe
// sink --stop-at-end stopped by SIGTERM as its session opened exited 0;
// it names the partitions it did not finish and exits 2.
func TestStopAtEndSignalAtStart(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "big", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("big", 2, 2000, time.Now().Add(-time.Hour), 1)); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "big", "--table", "lake.big",
		"--stop-at-end", "--json", "--log-format", "json"}, loc...)
	code, stdout, lines := signalledSink(t, args, func(line string) bool { return strings.Contains(line, `"msg":"sinking"`) })
	if code != 2 || !strings.Contains(lines[len(lines)-1], "interrupted before the end offsets") {
		t.Fatalf("--stop-at-end run stopped by SIGTERM as its session opened: exit %d\nstdout: %s\nstderr:\n%s", code, stdout, strings.Join(lines, "\n"))
	}
}

// TestAvroDecimalIntoDoubleIsConflict (from a review of this change set):
// a double column taking decimals is for JSON Schema Connect Decimals
// only; an Avro decimal into a double column stays a schema conflict
// (it was rounded silently, even with --on-schema-conflict fail).
func TestAvroDecimalIntoDoubleIsConflict(t *testing.T) {
	v1 := `{"type":"record","name":"Pay","fields":[{"name":"id","type":"long"},{"name":"amount","type":"double"}]}`
	v2 := `{"type":"record","name":"Pay","fields":[{"name":"id","type":"long"},{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":2}}]}`
	amount, _ := new(big.Rat).SetString("123456789012345678.91")
	run := sinkAudited(t, "pay", func(st *localstack.Stack) []*kgo.Record {
		recs := avroRecords(t, st, "pay", v1, map[string]any{"id": int64(1), "amount": 1.5})
		more := avroRecords(t, st, "pay2", v2, map[string]any{"id": int64(2), "amount": amount})
		more[0].Topic = "pay"
		return append(recs, more...)
	}, "--value", "registry", "--on-schema-conflict", "fail", "--schema-registry")
	if len(run.rows) == 2 {
		t.Errorf("a decimal(20,2) record into the double column with --on-schema-conflict fail: exit %d, stored as %s (was 123456789012345678.91): rounded without a conflict", run.sinkCode, run.rows[1].Columns["amount"])
	}
}
