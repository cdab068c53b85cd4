package connector_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestUpsertKeyFieldDisagreesWithValue: in an upsert table keyed by the
// key's fields, a key field and the value field of its name are one
// column. Where they disagreed (key {"id":10}, value {"id":11}; a Debezium
// key {"id":2} with after.id 3), the row took the key's value and the
// value's was lost, with no dead letter, and the content audit, decoding
// the same way, said COMPLETE. Such a record is a dead letter naming the
// field and both values now; values that agree as decoded values (10 and
// 10.0 in JSON) are a row. From a new user's report.
func TestUpsertKeyFieldDisagreesWithValue(t *testing.T) {
	cases := []struct {
		name   string
		layout mapping.Layout
		recs   [][2]string
		rows   []string
		reason string
	}{
		{
			name:   "json",
			layout: mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON},
			recs: [][2]string{
				{`{"id":1}`, `{"id":1.0,"v":"a"}`},
				{`{"id":10}`, `{"id":11,"v":"x"}`},
				{`{"id":12}`, `{"id":12.0,"v":"y"}`},
				{`{"id":13}`, `{"id":null,"v":"z"}`},
			},
			rows:   []string{"1=a", "12=y", "13=z"},
			reason: "the key's field id is 10 and the value's field id is 11: the table is keyed by the key's fields, and its column id would hold the key's 10 and lose the value's; write the same id in the key and the value",
		},
		{
			name:   "debezium",
			layout: mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON, Envelope: mapping.EnvelopeDebezium},
			recs: [][2]string{
				{`{"id":1}`, `{"before":null,"after":{"id":1,"v":"a"},"source":{"ts_ms":1},"op":"c","ts_ms":2}`},
				{`{"id":2}`, `{"before":null,"after":{"id":3,"v":"x"},"source":{"ts_ms":1},"op":"c","ts_ms":2}`},
			},
			rows:   []string{"1=a"},
			reason: "the key's field id is 2 and the value's field id is 3: the table is keyed by the key's fields, and its column id would hold the key's 2 and lose the value's; check that the connector's record key",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			topic := "keyvalue-" + c.name
			e.Topic(topic, 1, nil)
			if err := c.layout.Normalize(); err != nil {
				t.Fatal(err)
			}
			opts := snapshot.OpenOptions{Create: true, Layout: c.layout, Mode: mapping.ModeUpsert, Key: &mapping.UpsertKey{Source: mapping.KeyFromKeyFields}}
			tbl, dlq := e.TableWithDeadLetters("lake.keyvalue_"+c.name, opts)
			var recs []*kgo.Record
			for i, r := range c.recs {
				recs = append(recs, keyedRec(topic, []byte(r[0]), r[1], i))
			}
			e.Produce(recs)
			if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows(t, tbl) {
				got = append(got, r.Columns["id"]+"="+r.Columns["v"])
			}
			slices.Sort(got)
			slices.Sort(c.rows)
			dead := rows(t, dlq)
			if !slices.Equal(got, c.rows) || len(dead) != 1 || dead[0].Offset != 1 || !strings.Contains(dead[0].Columns[mapping.ColError], c.reason) {
				t.Fatalf("rows %v, dead letters %+v; want rows %v and the record at offset 1 a dead letter: %s", got, dead, c.rows, c.reason)
			}
			t.Logf("reason: %s", dead[0].Columns[mapping.ColError])
			if !auditSays(t, e, tbl) {
				t.Fatal("the content audit disagrees with the sink")
			}
		})
	}
}
