package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestLedgerCommand: floe ledger prints every commit of the table with
// its ranges and a line per partition, the archived commits of expired
// snapshots included, selects by partition and --last, and --json carries
// the same ledger. A new user found no command that showed it (only the
// demo printed one).
func TestLedgerCommand(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "40"}, loc...)...)
	ledger := append([]string{"ledger", "--table", "lake.orders"}, loc...)

	before := mustFloe(t, ledger...)
	commits := regexp.MustCompile(`(?m)^\d{6,} +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +\S`).FindAllString(before, -1)
	if len(commits) < 8 || !strings.Contains(before, "0:start@0") || !strings.Contains(before, "300 rows in the ledger") {
		t.Fatalf("floe ledger: %d commit lines, want the start and at least 8 flushes of 300 rows:\n%s", len(commits), before)
	}
	total := regexp.MustCompile(`(?m)^(\d+) commits, 300 rows in the ledger$`).FindStringSubmatch(before)
	if total == nil || total[1] != strconv.Itoa(len(commits)) {
		t.Fatalf("floe ledger's last line does not count its %d commits:\n%s", len(commits), before)
	}

	// The snapshots expire; their commits are read from the archive.
	if out := mustFloe(t, append([]string{"maintain", "--table", "lake.orders", "--retain-last", "1", "--expire-older-than", "0s"}, loc...)...); !strings.Contains(out, "ledger archive: ") {
		t.Fatalf("floe maintain archived nothing:\n%s", out)
	}
	if after := mustFloe(t, ledger...); after != before {
		t.Fatalf("after expiry floe ledger prints:\n%s\nwant what it printed before:\n%s", after, before)
	}

	one := mustFloe(t, append(ledger, "--partition", "1", "--last", "2")...)
	lines := regexp.MustCompile(`(?m)^\d{6,} .*$`).FindAllString(one, -1)
	if len(lines) != 2 || !strings.Contains(one, "2 shown of ") {
		t.Fatalf("--partition 1 --last 2: want 2 commits:\n%s", one)
	}
	for _, l := range lines {
		if strings.Contains(l, " 0:") || strings.Contains(l, " 2:") || !strings.Contains(l, " 1:[") {
			t.Fatalf("--partition 1 printed another partition's range: %s", l)
		}
	}

	var doc struct {
		Table   string `json:"table"`
		Commits []struct {
			SnapshotID int64 `json:"snapshot_id"`
			Ranges     []struct {
				Partition int32  `json:"partition"`
				Kind      string `json:"kind"`
				Records   int64  `json:"records"`
			} `json:"ranges"`
		} `json:"commits"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Next      int64 `json:"next"`
			Records   int64 `json:"records"`
		} `json:"partitions"`
	}
	out := mustFloe(t, append(ledger, "--json")...)
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("floe ledger --json: %v\n%s", err, out)
	}
	var rows, next int64
	for _, c := range doc.Commits {
		for _, r := range c.Ranges {
			rows += r.Records
		}
	}
	for _, p := range doc.Partitions {
		next += p.Next
	}
	if doc.Table != "lake.orders" || len(doc.Commits) != len(commits) || rows != 300 || next != 300 || len(doc.Partitions) != 3 {
		t.Fatalf("floe ledger --json: %d commits, %d rows, next offsets summing to %d, %d partitions; want %d, 300, 300, 3",
			len(doc.Commits), rows, next, len(doc.Partitions), len(commits))
	}
}

// TestLedgerUpsertTable (from a new-user run): floe ledger on an upsert
// table called its upserts rows and left its deletes out, where floe
// audit of the same table said UPSERTS and DELETES. Its ranges, partition
// lines and total count upserts and deletes as the audit does, and
// --json's partitions carry deletes beside records.
func TestLedgerUpsertTable(t *testing.T) {
	_, loc := keyedStack(t, "lake.u") // 12 records of partition 0: 9 upserts, 3 deletes
	out := mustFloe(t, append([]string{"ledger", "--table", "lake.u"}, loc...)...)
	ranges := regexp.MustCompile(`0:\[\d+, \d+\) (\d+) upserts?, (\d+) deletes?`).FindAllStringSubmatch(out, -1)
	var upserts, deletes int
	for _, r := range ranges {
		n, _ := strconv.Atoi(r[1])
		d, _ := strconv.Atoi(r[2])
		upserts, deletes = upserts+n, deletes+d
	}
	if upserts != 9 || deletes != 3 || !strings.Contains(out, "RANGES [low, high) upserts, deletes, skipped") ||
		!regexp.MustCompile(`(?m)^PARTITION +FIRST +NEXT +RANGES +UPSERTS +DELETES +SKIPPED\nu/0 +0 +12 +\d+ +9 +3 +0$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\d+ commits, 9 upserts, 3 deletes in the ledger$`).MatchString(out) || strings.Contains(out, "rows") {
		t.Fatalf("floe ledger of an upsert table: ranges count %d upserts and %d deletes, want 9 and 3 as its audit; want upserts and deletes, no rows:\n%s", upserts, deletes, out)
	}
	audit := mustFloe(t, append([]string{"audit", "--table", "lake.u"}, loc...)...)
	if !regexp.MustCompile(`(?m)^u/0 +0 +12 +\d+ +9 +3 +0 `).MatchString(audit) {
		t.Errorf("floe audit of the same table does not count 9 upserts and 3 deletes:\n%s", audit)
	}

	var doc struct {
		Partitions []struct {
			Records int64 `json:"records"`
			Deletes int64 `json:"deletes"`
		} `json:"partitions"`
	}
	js := mustFloe(t, append([]string{"ledger", "--table", "lake.u", "--json"}, loc...)...)
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("floe ledger --json: %v\n%s", err, js)
	}
	if len(doc.Partitions) != 1 || doc.Partitions[0].Records != 9 || doc.Partitions[0].Deletes != 3 {
		t.Fatalf("floe ledger --json: partitions %+v, want records 9 and deletes 3:\n%s", doc.Partitions, js)
	}
}
