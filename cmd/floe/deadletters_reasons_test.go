package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestDeadLettersReasonsKeepWhatTheyShare: floe dead-letters counts dead
// letters by their error without what is particular to a record, and
// shows of it what all the dead letters of the reason have alike: the
// magic byte 0 that plain JSON's first byte is not, and the example
// (1.0) of the fix of a fraction in a long column. Its reasons read "the
// first byte is #, not the magic byte #" and "whose first value of the
// field has one, or decode with a schema", every number a # and every
// parenthesised remark holding one left out. What does differ (the first
// bytes { and [) stays a #.
func TestDeadLettersReasonsKeepWhatTheyShare(t *testing.T) {
	st := topicStack(t, "amounts")
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "plain", 1, nil); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, v := range []string{`{"amount":1}`, `{"amount":1.5}`, `{"amount":2.25}`} {
		recs = append(recs, &kgo.Record{Topic: "amounts", Value: []byte(v)})
	}
	for _, v := range []string{`{"id":2}`, `{"id":3}`, `[4]`} {
		recs = append(recs, &kgo.Record{Topic: "plain", Value: []byte(v)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "amounts", "--table", "lake.amounts", "--value", "json", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	// Every record a dead letter: exit 3.
	if code, out, errs := floe(t, slices.Concat([]string{"sink", "-t", "plain", "--table", "lake.plain", "--value", "registry", "--schema-registry", st.Registry, "--stop-at-end", "-b", st.Brokers[0]}, cat)...); code != exitOnlyDeadLetters {
		t.Fatalf("sink of plain JSON with --value registry: exit %d\n%s%s", code, out, errs)
	}

	fraction := "field amount: the table's type long cannot take a value of type double (Iceberg allows only adding optional fields and widening int to long, float to double and a decimal's precision); " +
		"an integer arrived first and made the column long (a JSON number column takes its type from its first value, and Iceberg cannot widen long to double); " +
		"this table cannot take fractions in it: sink into a new table whose first value of the field has one (1.0), or decode with a schema (--value registry)"
	wire := func(first string) string {
		return "not in the schema registry wire format: the first byte is " + first + ", not the magic byte 0: the record looks like plain JSON text, written without a schema-registry serializer; " +
			"its producer should use one (KafkaAvroSerializer, KafkaJsonSchemaSerializer, ...), or a topic of plain JSON is sunk with --value json"
	}
	for _, c := range []struct {
		args  []string
		count int64
		want  string
	}{
		{[]string{"--table", "lake.amounts"}, 2, fraction},
		{[]string{"--table", "lake.plain", "--until-offset", "2"}, 2, wire("0x7b ('{')")},
		{[]string{"--table", "lake.plain"}, 3, wire("#")},
	} {
		res := deadLettersJSON(t, append(c.args, cat...)...)
		if len(res.Reasons) != 1 || res.Reasons[0].Count != c.count || res.Reasons[0].Reason != c.want {
			t.Errorf("dead-letters %v: reasons %+v\nwant %d of\n%s", c.args, res.Reasons, c.count, c.want)
			continue
		}
		for _, d := range res.DeadLetters {
			if d.Reason != c.want {
				t.Errorf("dead-letters %v: %s/%d@%d has reason %q, not its count's", c.args, d.Topic, d.Partition, d.Offset, d.Reason)
			}
		}
		if text := mustFloe(t, slices.Concat([]string{"dead-letters", "--summary"}, c.args, cat)...); !strings.Contains(text, c.want+"\n") {
			t.Errorf("dead-letters --summary %v lacks the reason %q:\n%s", c.args, c.want, text)
		}
	}
}
