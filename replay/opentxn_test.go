package replay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// TestReplayFromTimeOpenTransactionRunAgain: partition 0 holds ten
// records stamped +0s..+9s, then a transaction left open with one record
// stamped +10s (offset 10). A replay --from +12s starts at the last stable
// offset 10 and is complete at once, [10, 10). Once the transaction has
// committed, the same command is a complete replay run again: it says so
// and reads nothing, although +12s now resolves past the end the first run
// recorded (it was refused as "--until before --from").
func TestReplayFromTimeOpenTransactionRunAgain(t *testing.T) {
	e := newEnv(t)
	const topic = "opentxn"
	e.Topic(topic, 1, nil)
	base := e.produceSeconds(topic, 10) // 0-9, +0s..+9s
	txn := e.OpenTxn("opentxn-open")
	if err := txn.ProduceSync(e.Ctx, &kgo.Record{Topic: topic, Value: []byte("txn"), Timestamp: base.Add(10 * time.Second)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	from := base.Add(12 * time.Second).UTC().Format(time.RFC3339)
	opts := replay.Options{Topic: topic, From: bound(t, from, topic, true)}
	res, err := e.replay("lake.opentxn", opts)
	if err != nil || !res.Complete {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	t.Logf("first run: plan [%d, %d)", res.Plan.Start[0], res.Plan.End[0])
	if err := txn.EndTransaction(e.Ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	res2, err := e.replay("lake.opentxn", opts)
	if err != nil || !res2.Complete {
		t.Fatalf("the same replay --from %s run again once the transaction committed: complete %v, %v; want the complete replay to say so and read nothing", from, res2.Complete, err)
	}
	if rs := rows(t, e.openExisting("lake.opentxn", "")); len(rs) != 0 {
		t.Fatalf("replay from +12s holds %d rows, want none (every record is stamped before it)", len(rs))
	}
}

// TestReplayFromTimeOpenTransactionResumes: the interrupted form of
// TestReplayFromTimeOpenTransactionRunAgain. Partition 1 holds 100
// records stamped from +0s; partition 0 ten records and then a
// transaction left open, stamped before the time. A replay --from +12s is
// interrupted with part of partition 1 committed; the transaction then
// commits. Running the same command again continues partition 1 to its
// recorded end (it was refused, so the replay could never be finished).
func TestReplayFromTimeOpenTransactionResumes(t *testing.T) {
	e := newEnv(t)
	const topic = "opentxn2"
	e.Topic(topic, 2, nil)
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "p0-%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, "p1-%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	e.Produce(recs)
	txn := e.OpenTxn("opentxn-open2")
	if err := txn.ProduceSync(e.Ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("txn"), Timestamp: base.Add(10 * time.Second)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	from := base.Add(12 * time.Second).UTC().Format(time.RFC3339)
	opts := replay.Options{Topic: topic, From: bound(t, from, topic, true), Sink: connector.Config{FlushRecords: 10}}
	res := e.interrupted("lake.opentxn2", opts)
	t.Logf("interrupted: plan start %v end %v, next %v", res.Plan.Start, res.Plan.End, res.Next)
	if err := txn.EndTransaction(e.Ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.opentxn2", opts)
	if err != nil || !res.Complete {
		t.Fatalf("resume of the interrupted replay --from %s once the transaction committed: complete %v, %v", from, res.Complete, err)
	}
}

// TestReplayUntilTimePastOpenTransaction: offsets 0-9 stamped +0s..+9s, a
// transaction left open at offset 10, then committed records 11-19
// stamped +11s..+19s. A replay --until +15s cannot read records 11-14,
// stamped before the time, past the open transaction: it is refused, as
// --until 0=15 is, where it was cut at offset 10 and called complete.
func TestReplayUntilTimePastOpenTransaction(t *testing.T) {
	e := newEnv(t)
	const topic = "untilopen"
	e.Topic(topic, 1, nil)
	base := e.produceSeconds(topic, 10)
	txn := e.OpenTxn("opentxn-until")
	if err := txn.ProduceSync(e.Ctx, &kgo.Record{Topic: topic, Value: []byte("txn"), Timestamp: base.Add(10 * time.Second)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 11; i < 20; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	e.Produce(recs)
	if _, err := e.replay("lake.untilopen_offsets", replay.Options{Topic: topic, Until: bound(t, "0=15", topic, false)}); err == nil {
		t.Fatal("--until 0=15 past the last stable offset was accepted")
	}
	until := base.Add(15 * time.Second).UTC().Format(time.RFC3339)
	res, err := e.replay("lake.untilopen", replay.Options{Topic: topic, Until: bound(t, until, topic, false)})
	if err == nil {
		t.Fatalf("replay --until %s (offset 15): complete, plan [%d, %d): the committed records 11-14 stamped before the time are not in it, and nothing says so", until, res.Plan.Start[0], res.Plan.End[0])
	}
	if !strings.Contains(err.Error(), "transaction still open at offset 10") {
		t.Fatalf("refusal does not name the open transaction: %v", err)
	}
	if err := txn.EndTransaction(e.Ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if res, err = e.replay("lake.untilopen", replay.Options{Topic: topic, Until: bound(t, until, topic, false)}); err != nil || !res.Complete || res.Plan.End[0] != 15 {
		t.Fatalf("replay --until %s once the transaction ended: complete %v, end %d, %v; want complete up to offset 15", until, res.Complete, res.Plan.End[0], err)
	}
	if n := len(rows(t, e.openExisting("lake.untilopen", ""))); n != 15 {
		t.Fatalf("replay --until %s holds %d rows, want 15 (offsets 0-14; the commit marker follows them)", until, n)
	}
}

// TestReplayFromExpiredSnapshot: lake.expsrc sank topic expsnap in three
// commits of ten records; expiry removes the first commit's snapshot. Its
// commit is still in the ledger archive (floe where names it), so replay
// --from snapshot:ID starts where it had reached, offset 10 (it was
// refused: "no table of the catalog has snapshot").
func TestReplayFromExpiredSnapshot(t *testing.T) {
	e := newEnv(t)
	const topic = "expsnap"
	e.Topic(topic, 1, nil)
	src := e.Table("lake.expsrc")
	for i := range 3 {
		e.Produce(records(topic, 0, 10, fmt.Sprint(i)))
		if _, err := e.sink(src, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := src.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	var first int64
	for _, c := range l.Commits {
		for _, r := range c.Ranges {
			if r.High == 10 && first == 0 {
				first = c.SnapshotID
			}
		}
	}
	if _, err := src.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	if err := src.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if src.Iceberg().Metadata().SnapshotByID(first) != nil {
		t.Fatalf("snapshot %d not expired", first)
	}
	// The ledger still knows it.
	if w, err := src.Locate(e.Ctx, 0, mapping.TopicPartition{Topic: topic}, 5); err != nil || w.Commit.SnapshotID != first {
		t.Fatalf("locate offset 5: %+v, %v; want snapshot %d", w, err, first)
	}
	res, err := e.replay("lake.expdst", replay.Options{Topic: topic, From: bound(t, fmt.Sprintf("snapshot:%d", first), topic, true)})
	if err != nil || res.Plan.Start[0] != 10 {
		t.Fatalf("replay --from snapshot:%d (expired, in the archived ledger, next offset 10): start %d, %v", first, res.Plan.Start[0], err)
	}
}

// TestReplayFromTimeClampedStartNotKept (from a review): offsets 0-9
// stamped +0s..+9s, then a transaction left open with one record stamped
// +10s (offset 10). replay --from +12s into lake.a starts at the last
// stable offset 10 and is complete at once, [10, 10). The transaction then
// commits and records 12-19 stamped +12s..+19s arrive. The same replay
// with an explicit --until +15s is refused, where it went on from offset
// 10 and held a record stamped before the --from time; into a new table
// (lake.b) it holds only records stamped at or after it.
func TestReplayFromTimeClampedStartNotKept(t *testing.T) {
	e := newEnv(t)
	const topic = "clamped"
	e.Topic(topic, 1, nil)
	base := e.produceSeconds(topic, 10)
	txn := e.OpenTxn("clamped-open")
	if err := txn.ProduceSync(e.Ctx, &kgo.Record{Topic: topic, Value: []byte("txn"), Timestamp: base.Add(10 * time.Second)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	from := bound(t, base.Add(12*time.Second).UTC().Format(time.RFC3339), topic, true)
	res, err := e.replay("lake.a", replay.Options{Topic: topic, From: from})
	if err != nil || !res.Complete {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	if err := txn.EndTransaction(e.Ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 12; i < 20; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	e.Produce(recs)
	until := bound(t, base.Add(15*time.Second).UTC().Format(time.RFC3339), topic, false)
	// lake.a began at the last stable offset 10, before the time's
	// records: going on from there would take offset 10, stamped before
	// the time, and starting further would leave a gap. It is refused.
	if _, err := e.replay("lake.a", replay.Options{Topic: topic, From: from, Until: until}); err == nil || !strings.Contains(err.Error(), "this replay began it at offset 10") {
		t.Fatalf("lake.a: replay --from +12s --until +15s run again: %v; want the refusal naming its start", err)
	}
	res, err = e.replay("lake.b", replay.Options{Topic: topic, From: from, Until: until})
	if err != nil || !res.Complete {
		t.Fatalf("lake.b: replay --from +12s --until +15s: %+v, %v", res, err)
	}
	for _, r := range rows(t, e.openExisting("lake.b", "")) {
		if r.TS < base.Add(12*time.Second).UnixMicro() {
			t.Errorf("lake.b: replay --from +12s holds offset %d stamped %s, before the --from time", r.Offset, time.UnixMicro(r.TS).Sub(base))
		}
	}
}
