package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/localstack"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReplayFromTimeSaysDeletedLateRecordUnseen: offset 2 was stamped
// after the time (a producer's clock ahead), offsets 3-5 before it, 6-9
// after it; retention deleted [0, 3). Kafka's "first offset stamped at or
// after the time" was 2, so [3, 6) belonged to a replay from the time, but
// the broker resolves the time to 6 now and no broker keeps the deleted
// records' times. The replay left [3, 6) out without a word (its check
// covered a start at the log start only); it says so now, with the
// --from offsets that take them, and that replay takes them.
func TestReplayFromTimeSaysDeletedLateRecordUnseen(t *testing.T) {
	st, loc := replayStack(t)
	var stamps [2][]time.Duration
	stamps[0] = []time.Duration{0, 1, 1000, 3, 4, 5, 1006, 1007, 1008, 1009}
	for i := range 4 {
		stamps[1] = append(stamps[1], time.Duration(990+10*i))
	}
	base := stampedTopic(t, st, "late", stamps[:], 3)
	from := base.Add(500 * time.Second).UTC().Format(time.RFC3339)
	replay := append([]string{"replay", "--brokers", strings.Join(st.Brokers, ","), "--topic", "late", "--from", from}, loc...)
	out := mustFloe(t, append(replay, "--table", "lake.late")...)
	for _, want := range []string{
		"late/0 starts at offset 6, where --from resolves (its first record stamped at or after it, or its end where none is); retention deleted [0, 3)",
		"would take [3, 6) too",
		"to take them, replay --from 0=3,1=0",
		"replayed 8 rows",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay --from %s lacks %q:\n%s", from, want, out)
		}
	}
	if strings.Contains(out, "late/1 starts at offset") {
		t.Errorf("partition 1, whose log retention did not cut, is named:\n%s", out)
	}
	// --json carries the notes and the --from that takes them: a script
	// did not learn of them.
	var doc struct {
		Notes            []string `json:"notes"`
		FromTakingUnseen string   `json:"from_taking_unseen"`
		Rows             int64    `json:"rows"`
	}
	jsonOut := mustFloe(t, append(replay, "--table", "lake.late_json", "--json")...)
	if err := json.Unmarshal([]byte(jsonOut), &doc); err != nil {
		t.Fatalf("replay --json: %v\n%s", err, jsonOut)
	}
	if doc.FromTakingUnseen != "0=3,1=0" || doc.Rows != 8 || !slices.ContainsFunc(doc.Notes, func(n string) bool { return strings.Contains(n, "would take [3, 6) too") }) {
		t.Errorf("replay --json: from_taking_unseen %q, rows %d, notes %q; want 0=3,1=0, 8 and the note on [3, 6)", doc.FromTakingUnseen, doc.Rows, doc.Notes)
	}
	replay[len(replay)-len(loc)-1] = "0=3,1=0"
	if out := mustFloe(t, append(replay, "--table", "lake.late2")...); !strings.Contains(out, "replayed 11 rows") || strings.Contains(out, "note:") {
		t.Errorf("replay --from the offsets the note gives:\n%s", out)
	}
}

// TestReplayFromTimeEmptiedPartition: a topic with size retention
// (retention.bytes: its retention does not rule out deleted records
// stamped after a time). Partition 1 got records stamped after the time,
// which retention deleted. With one left, the replay is refused, as its
// first retained record is at or after the time; with none left (log
// start = end = 5), it goes ahead from partition 1's end, but no longer
// without a word: it says [0, 5) was deleted, times unknown, and that a
// replay from earliest records it as lost (from a review).
func TestReplayFromTimeEmptiedPartition(t *testing.T) {
	for _, left := range []int{1, 0} {
		t.Run(fmt.Sprintf("left=%d", left), func(t *testing.T) {
			st, loc := replayStack(t)
			const topic = "emptied"
			size := "1073741824"
			if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 2, map[string]*string{"retention.bytes": &size}); err != nil {
				t.Fatal(err)
			}
			base := time.Now().Add(-time.Hour).Truncate(time.Second)
			var recs []*kgo.Record
			for i := range 10 {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "p0-%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
			}
			for i := range 5 + left {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, "p1-%d", i), Timestamp: base.Add(time.Duration(100+i) * time.Second)})
			}
			if err := localstack.Produce(t.Context(), st.Brokers, recs, kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
				t.Fatal(err)
			}
			if err := st.Cluster.DeleteRecords(topic, 1, 5); err != nil {
				t.Fatal(err)
			}
			from := base.Add(50 * time.Second).UTC().Format(time.RFC3339)
			code, out, errs := floe(t, append([]string{"replay", "--brokers", st.Brokers[0], "--topic", topic, "--table", "lake.emptied", "--from", from}, loc...)...)
			if left == 1 {
				if code == exitOK || !strings.Contains(errs, "retention deleted everything below 5") {
					t.Errorf("replay --from %s, partition 1's first retained record after it: exit %d; want it refused\n%s%s", from, code, out, errs)
				}
				return
			}
			if code != exitOK {
				t.Fatalf("replay --from %s, partition 1 emptied: exit %d\n%s%s", from, code, out, errs)
			}
			for _, want := range []string{
				"note: emptied/1 starts at its end 5: retention deleted all of it, [0, 5), whose times no broker keeps",
				"replay --from earliest, which records [0, 5) as lost",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("replay --from %s, partition 1 emptied, lacks %q:\n%s", from, want, out)
				}
			}
			if strings.Contains(out, "note: emptied/0") {
				t.Errorf("partition 0, whose log retention did not cut, is named:\n%s", out)
			}
		})
	}
}

// TestStampedBeforeNoRecordAfterTime (from a review): partition 0's ten
// records are all stamped before --from, and retention deleted [0, 3). The
// time resolves to the end (10): no record is stamped at or after it. The
// note said "starts at offset 10, its first record stamped at or after
// --from", a record that does not exist.
func TestStampedBeforeNoRecordAfterTime(t *testing.T) {
	st, loc := replayStack(t)
	var stamps []time.Duration
	for i := range 10 {
		stamps = append(stamps, time.Duration(i))
	}
	base := stampedTopic(t, st, "early", [][]time.Duration{stamps}, 3)
	from := base.Add(500 * time.Second).UTC().Format(time.RFC3339)
	code, out, errs := floe(t, append([]string{"replay", "--brokers", strings.Join(st.Brokers, ","), "--topic", "early", "--from", from, "--table", "lake.early"}, loc...)...)
	t.Logf("exit %d\n%s%s", code, out, errs)
	if strings.Contains(out, "starts at offset 10, its first record stamped at or after --from") {
		t.Errorf("the note names a first record stamped at or after --from at offset 10, the partition's end: no record is there")
	}
}

// stampedTopic creates topic with a partition per element of stamps, whose
// records it stamps base plus each duration in seconds, and deletes
// partition 0's records below deleteBelow; it returns base.
func stampedTopic(t *testing.T, st *localstack.Stack, topic string, stamps [][]time.Duration, deleteBelow int64) time.Time {
	t.Helper()
	ctx := t.Context()
	if err := localstack.CreateTopic(ctx, st.Brokers, topic, int32(len(stamps)), nil); err != nil {
		t.Fatal(err)
	}
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for p, ds := range stamps {
		for i, d := range ds {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(d * time.Second)})
		}
	}
	if err := localstack.Produce(ctx, st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	if err := st.Cluster.DeleteRecords(topic, 0, deleteBelow); err != nil {
		t.Fatal(err)
	}
	return base
}
