package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/localstack"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStampedBeforeNoRecordAfterTime (from a review): partition 0's ten records
// are all stamped before --from, and retention deleted [0, 3). The time
// resolves to the end (10): no record is stamped at or after it. The
// b4ab809 note says "starts at offset 10, its first record stamped at or
// after --from", a record that does not exist.
func TestStampedBeforeNoRecordAfterTime(t *testing.T) {
	st, loc := replayStack(t)
	ctx := t.Context()
	if err := localstack.CreateTopic(ctx, st.Brokers, "early", 1, nil); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "early", Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := localstack.Produce(ctx, st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	if err := st.Cluster.DeleteRecords("early", 0, 3); err != nil {
		t.Fatal(err)
	}
	from := base.Add(500 * time.Second).UTC().Format(time.RFC3339)
	code, out, errs := floe(t, append([]string{"replay", "--brokers", strings.Join(st.Brokers, ","), "--topic", "early", "--from", from, "--table", "lake.early"}, loc...)...)
	t.Logf("exit %d\n%s%s", code, out, errs)
	if strings.Contains(out, "starts at offset 10, its first record stamped at or after --from") {
		t.Errorf("the note names a first record stamped at or after --from at offset 10, the partition's end: no record is there")
	}
}
