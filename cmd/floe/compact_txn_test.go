package main

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

// TestCompactTransactionalSpansStayOne (from a review): a compaction
// records what a merged set of files holds as spans merged into intervals
// per partition, one per partition for contiguous commits. On a
// transactional topic every sink file ends before a commit marker and the
// next begins after it, so the files' bounds never touch; the spans were
// one per merged file, and each tiered re-merge carried all of them again,
// growing with the table's history.
func TestCompactTransactionalSpansStayOne(t *testing.T) {
	st, loc := sinkStack(t)
	const topic = "tx"
	if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	round := func(txns int) {
		for range txns {
			var recs []*kgo.Record
			for p := range int32(2) {
				for range 10 {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, `{"n":%d}`, n)})
					n++
				}
			}
			if err := localstack.ProduceTxn(t.Context(), st.Brokers, "txn-spans", recs, true); err != nil {
				t.Fatal(err)
			}
			mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", topic, "--table", "lake.tx", "--stop-at-end", "--maintain=false"}, loc...)...)
		}
		mustFloe(t, append([]string{"maintain", "--table", "lake.tx", "--compact"}, loc[:2]...)...)
	}
	spans := func() (int, int) {
		head := openTable(t, st.Catalog(), "lake.tx").Head()
		v := head.Summary.Properties[mapping.KeyFileGroups]
		gs, err := mapping.DecodeFileGroups(v)
		if err != nil {
			t.Fatalf("compaction snapshot %d groups %q: %v", head.SnapshotID, v, err)
		}
		total := 0
		for _, g := range gs {
			total += len(g.Spans)
		}
		return total, len(v)
	}
	round(12)
	s1, b1 := spans()
	round(24)
	s2, b2 := spans()
	t.Logf("after 12 commits: %d spans (%d bytes inline); after 36: %d spans (%d bytes)", s1, b1, s2, b2)
	code, out, errs := floe(t, append([]string{"audit", "--table", "lake.tx", "--deep", "--brokers", st.Brokers[0], "--verify-content"}, loc[:2]...)...)
	if code != 0 {
		t.Errorf("audit: %d\n%s\n%s", code, out, errs)
	}
	if s1 > 2 || s2 > 2 {
		t.Fatalf("the compactions of 12 and 36 contiguous commits of 2 partitions record %d and %d spans (%d bytes inline in the last snapshot summary), want one interval per partition", s1, s2, b2)
	}
}

// TestCompactTransactionsAbortedBetween (from a review): aborted
// transactions between committed ones on 6 partitions, sunk a round at a
// time and compacted every third round: no compaction's spans reach over
// an aborted range (joinSpans joins only across offsets of ranges that
// hold the spans), so where finds every committed row and no aborted one,
// and the audit, content included, is complete, also after expiry.
func TestCompactTransactionsAbortedBetween(t *testing.T) {
	st, loc := sinkStack(t)
	const topic, parts = "txl", 6
	if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, parts, nil); err != nil {
		t.Fatal(err)
	}
	n, rounds := 0, 0
	txn := func(k int, commit bool) {
		var recs []*kgo.Record
		for p := range int32(parts) {
			for range k {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, `{"n":%d}`, n)})
				n++
			}
		}
		if err := localstack.ProduceTxn(t.Context(), st.Brokers, "txn-l", recs, commit); err != nil {
			t.Fatal(err)
		}
	}
	check := func() {
		tbl := openTable(t, st.Catalog(), "lake.txl")
		bad := 0
		for p := range int32(parts) {
			tp := mapping.TopicPartition{Topic: topic, Partition: p}
			for off := int64(0); off < int64(rounds*10); off++ {
				w, err := lookup.Where(t.Context(), tbl, nil, tp, off)
				if err != nil {
					t.Fatal(err)
				}
				want := lookup.StatusNoRow
				if off%10 < 5 {
					want = lookup.StatusRow
				}
				if w.Status != want {
					bad++
					if bad < 5 {
						t.Errorf("where %s@%d: %s, want %s: %s", tp, off, w.Status, want, w.Explanation)
					}
				}
			}
		}
		for _, extra := range [][]string{{"--deep"}, {"--deep", "--brokers", st.Brokers[0], "--verify-content"}} {
			code, out, errs := floe(t, append(append([]string{"audit", "--table", "lake.txl"}, extra...), loc[:2]...)...)
			if code != 0 {
				t.Errorf("audit %v: exit %d\n%s\n%s", extra, code, out, errs)
			}
		}
	}
	for i := range 9 {
		txn(5, true)
		txn(3, false)
		rounds++
		mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", topic, "--table", "lake.txl", "--stop-at-end", "--maintain=false"}, loc...)...)
		if i%3 == 2 {
			mustFloe(t, append([]string{"maintain", "--table", "lake.txl", "--compact"}, loc[:2]...)...)
			check()
		}
	}
	mustFloe(t, append([]string{"maintain", "--table", "lake.txl", "--expire-older-than", "0s", "--retain-last", "1"}, loc[:2]...)...)
	check()
	t.Log(mustFloe(t, append([]string{"files", "--table", "lake.txl"}, loc[:2]...)...))
}
