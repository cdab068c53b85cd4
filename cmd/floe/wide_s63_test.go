package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

// TestLedgerWideCommitSummarised: floe ledger printed each range of a
// commit on one line, 7,800 characters for a commit of a 500-partition
// topic (a user's run). A commit of more than 8 ranges is summarised per
// topic, its lost and deleted-aborted ranges still listed; a short one is
// printed range by range as before.
func TestLedgerWideCommitSummarised(t *testing.T) {
	var c mapping.Commit
	for p := int32(0); p < 500; p++ {
		r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "wide", Partition: p}, Interval: mapping.Interval{Low: 100, High: 140}, Records: 40}
		if p == 17 {
			r.Records, r.Lost = 0, true
		}
		c.Ranges = append(c.Ranges, r)
	}
	for p := int32(0); p < 3; p++ {
		c.Ranges = append(c.Ranges, mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "pay", Partition: p}, Interval: mapping.Interval{Low: 0, High: 0}})
	}
	got := ledgerCommitText(c, true, false)
	want := "wide/0-499: 500 ranges, 19960 rows  pay/0-2: 3 starts  wide/17:[100, 140) LOST"
	if got != want {
		t.Errorf("wide commit:\n got %q\nwant %q", got, want)
	}
	short := mapping.Commit{Ranges: c.Ranges[:2]}
	if got := ledgerCommitText(short, false, false); got != "0:[100, 140) 40  1:[100, 140) 40" {
		t.Errorf("short commit: %q", got)
	}
	if got := ledgerCommitText(mapping.Commit{Ranges: c.Ranges[500:]}, true, false); !strings.Contains(got, "pay/0:start@0") {
		t.Errorf("starts: %q", got)
	}
}

// TestSinkWarnsFlushLongerThanHalfOrphanAge (from the exactly-once
// review): a --flush-interval above half the default --orphan-min-age
// lets floe maintain --remove-orphans delete a flush's files before their
// commit names them; the sink says so at its start, and not at 30m.
func TestSinkWarnsFlushLongerThanHalfOrphanAge(t *testing.T) {
	for _, c := range []struct {
		interval string
		warns    bool
	}{{"30m", false}, {"45m", true}} {
		code, _, errs := floe(t, "sink", "--brokers", "127.0.0.1:1", "--dial-timeout", "100ms", "--topic", "orders", "--table", "lake.orders",
			"--flush-interval", c.interval, "--catalog", t.TempDir()+"/catalog.db", "--warehouse", t.TempDir())
		warned := strings.Contains(errs, "--flush-interval "+c.interval+"0s: a flush's files wait uncommitted up to that long") &&
			strings.Contains(errs, "run it with --orphan-min-age above twice the flush interval")
		if code != exitError || warned != c.warns {
			t.Errorf("sink --flush-interval %s: exit %d, warned %v, want %v:\n%s", c.interval, code, warned, c.warns, errs)
		}
	}
}

// TestStatusWideTopicTotals: floe status of a 500-partition topic printed
// 500 lines and nowhere how far the table lagged in all (a user's run); a
// topic of more than 8 partitions ends with a line of its totals, one of
// few partitions does not.
func TestStatusWideTopicTotals(t *testing.T) {
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	var st lookup.TableStatus
	st.Table = "lake.wide"
	for p := range int32(12) {
		lag, next := int64(p), int64(100)
		ps := lookup.PartitionStatus{Topic: "wide", Partition: p, Lag: &lag, TableNext: &next}
		if p == 3 {
			later := at.Add(time.Duration(p) * time.Minute)
			ps.LastCommit = &later
		}
		st.Partitions = append(st.Partitions, ps)
	}
	for p := range int32(2) {
		st.Partitions = append(st.Partitions, lookup.PartitionStatus{Topic: "zsmall", Partition: p})
	}
	var b bytes.Buffer
	printStatus(&b, st)
	out := b.String()
	if !regexp.MustCompile(`(?m)^\s*wide\s+all 12\s+66\s+-\s+-\s+2026-12-07T09:03:00Z\s*$`).MatchString(out) || strings.Contains(out, "all 2") {
		t.Errorf("status of a 12-partition topic and a 2-partition one:\n%s", out)
	}
}
