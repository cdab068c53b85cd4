package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestPartitionByColumnOfWrongType (from a new-user run): a
// --partition-by field whose column arrives with a type its transform
// does not take (day of a string) stops the sink with one message that
// names the way on, which works: --partition-by none sinks the record. The
// start commit before it is no summary of committed records.
func TestPartitionByColumnOfWrongType(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "pb", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "pb", Value: []byte(`{"id":1,"placed_at":"yesterday"}`)}}); err != nil {
		t.Fatal(err)
	}
	sink := append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "pb", "--table", "lake.pb", "--value", "json", "--stop-at-end"}, loc...)
	code, out, errs := floe(t, append(sink, "--partition-by", "day(placed_at)")...)
	if code != exitError || strings.Count(errs, "which day does not take") != 1 || !strings.Contains(errs, "--partition-by with another field, or none") || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2, the message once, naming --partition-by none, and no summary", code, out, errs)
	}
	if out := mustFloe(t, append(sink, "--partition-by", "none")...); !strings.Contains(out, "sink lake.pb: 1 row in 1 commit") {
		t.Errorf("--partition-by none: %s", out)
	}
}
