package audit_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestStreamedAuditMatchesLedger: on a ledger with gaps, overlaps, losses
// and aborted offsets across three partitions, most of it archived by
// expiries into segments, the ledger level (which streams the ledger
// block by block) reports exactly what the whole ledger says: each
// partition's coverage as mapping.Cover computes it from every range, and
// for each overlap and loss the snapshots whose ranges meet it, found by
// scanning every commit. The audit that holds the whole ledger (rows level)
// reports the same ledger findings.
func TestStreamedAuditMatchesLedger(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.stream")
	r := rand.New(rand.NewPCG(23, 2))
	tps := []mapping.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}, {Topic: "orders", Partition: 2}}
	next := map[mapping.TopicPartition]int64{}
	for i := range 60 {
		var rs []mapping.Range
		for _, tp := range tps {
			lo := next[tp]
			switch r.IntN(12) {
			case 0:
				lo += 1 + int64(r.IntN(4)) // a gap
			case 1:
				lo = max(0, lo-1-int64(r.IntN(6))) // an overlap
			}
			rg := mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: lo, High: lo + 1 + int64(r.IntN(9))}}
			switch r.IntN(15) {
			case 0:
				rg.Lost = true
			case 1:
				rg.Aborted = true
			}
			if i == 0 {
				rg.Low = 0
			}
			next[tp] = max(next[tp], rg.High)
			rs = append(rs, rg)
		}
		floetest.ForceCommit(t, tbl, rs, nil)
		if i == 30 || i == 45 {
			if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 5}); err != nil {
				t.Fatal(err)
			}
		}
	}
	streamed := e.audit(tbl, audit.Options{Depth: audit.DepthFiles})
	whole := e.audit(tbl, audit.Options{Depth: audit.DepthRows})
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if streamed.Evidence != whole.Evidence || streamed.Evidence.Commits != 60 {
		t.Fatalf("evidence %+v, holding the whole ledger %+v", streamed.Evidence, whole.Evidence)
	}
	var want []string
	for _, tp := range tps {
		c := mapping.Cover(l.Ranges(tp))
		covering := func(iv mapping.Interval) string {
			var ids []string
			for _, lc := range l.Commits {
				if slices.ContainsFunc(lc.Ranges, func(r mapping.Range) bool {
					return r.TopicPartition == tp && r.Low < iv.High && iv.Low < r.High
				}) {
					ids = append(ids, fmt.Sprint(lc.SnapshotID))
				}
			}
			return strings.Join(ids, ", ")
		}
		for _, g := range c.Gaps {
			want = append(want, fmt.Sprintf("gap %s %s", tp, g))
		}
		for _, o := range c.Overlaps {
			want = append(want, fmt.Sprintf("overlap %s %s by snapshots %s", tp, o, covering(o)))
		}
		for _, lo := range c.Lost {
			want = append(want, fmt.Sprintf("lost %s %s (recorded by snapshot %s)", tp, lo, covering(lo)))
		}
	}
	slices.Sort(want)
	if len(want) < 6 {
		t.Fatalf("the ledger has only %d anomalies: %v", len(want), want)
	}
	for name, rep := range map[string]*audit.Report{"streamed": streamed, "whole": whole} {
		var got []string
		for _, f := range rep.Findings {
			if f.Level != audit.LevelLedger {
				continue
			}
			s := fmt.Sprintf("%s %s %s", f.Kind, f.Partition, f.Offsets)
			if i := strings.Index(f.Detail, "by snapshots "); i >= 0 {
				s += " " + f.Detail[i:]
			}
			if i := strings.Index(f.Detail, "(recorded by snapshot "); i >= 0 {
				s += " " + f.Detail[i:]
			}
			got = append(got, s)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s audit's ledger findings:\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, tp := range tps {
			c := mapping.Cover(l.Ranges(tp))
			i := slices.IndexFunc(rep.Partitions, func(p audit.PartitionReport) bool { return p.TopicPartition == tp })
			if i < 0 {
				t.Fatalf("%s audit has no report of %s", name, tp)
			}
			p := rep.Partitions[i]
			if p.First != c.First || p.Next != c.Next || p.Ranges != c.Ranges || p.Started != c.Started || !slices.Equal(p.Aborted, append([]mapping.Interval{}, c.Aborted...)) {
				t.Fatalf("%s audit, %s: %+v; coverage %+v", name, tp, p, c)
			}
		}
	}
}
