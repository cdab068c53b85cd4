package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
)

// TestMaintainExpiresWithoutLosingTheLedger sinks in several commits,
// expires all snapshots but the head and removes orphans with floe
// maintain, then checks that the ledger reads the same, that the sink
// resumes exactly where it was, that a deep audit with the broker is
// complete and its evidence covers the expired commits, that floe where
// still names an expired snapshot, and that only the old orphan went.
func TestMaintainExpiresWithoutLosingTheLedger(t *testing.T) {
	st, loc := sinkStack(t)
	sink := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "40"}, loc...)
	if code, out, errs := floe(t, sink...); code != exitOK {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	tbl := auditTable(t, st, "lake.orders")
	before, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Commits) < 3 {
		t.Fatalf("%d commits, want several to expire", len(before.Commits))
	}

	where := func() lookup.WhereResult {
		t.Helper()
		code, out, errs := floe(t, append([]string{"where", "--table", "lake.orders", "--topic", "orders", "--partition", "0", "--offset", "0", "--json"}, loc...)...)
		var w lookup.WhereResult
		if err := json.Unmarshal([]byte(out), &w); code != exitOK || err != nil {
			t.Fatalf("where: exit %d, %v\n%s\n%s", code, err, out, errs)
		}
		return w
	}
	whereBefore := where()
	if whereBefore.Status != lookup.StatusRow || whereBefore.SnapshotID == nil {
		t.Fatalf("where before expiry: %+v", whereBefore)
	}

	// A crashed writer's file, and one a live writer may be about to commit.
	data := strings.TrimPrefix(tbl.DataLocation(), "file://")
	old, young := filepath.Join(data, "crashed-00000.parquet"), filepath.Join(data, "inflight-00000.parquet")
	for _, f := range []string{old, young} {
		if err := os.WriteFile(f, []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-3 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}

	maintain := append([]string{"maintain", "--table", "lake.orders", "--retain-last", "1", "--remove-orphans"}, loc...)
	code, out, errs := floe(t, append(maintain, "--dry-run")...)
	if code != exitOK || !strings.Contains(out, "would be expired") || !strings.Contains(out, "crashed-00000.parquet") {
		t.Fatalf("maintain --dry-run: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs = floe(t, maintain...); code != exitOK {
		t.Fatalf("maintain: exit %d\n%s\n%s", code, out, errs)
	}
	want := "snapshots expired: " + strconv.Itoa(len(tbl.Iceberg().Metadata().Snapshots())-1)
	if !strings.Contains(out, want) || !strings.Contains(out, "ledger archive: ") || !strings.Contains(out, "orphan data files deleted: 1") {
		t.Fatalf("maintain output lacks %q, the archive or one orphan:\n%s", want, out)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("old orphan kept: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatalf("young unreferenced file deleted: %v", err)
	}

	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); n != 1 {
		t.Fatalf("%d snapshots after maintain, want 1", n)
	}
	after, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("ledger after expiry differs:\n%+v\nwant\n%+v", after, before)
	}
	expired := *whereBefore.SnapshotID
	if tbl.Iceberg().Metadata().SnapshotByID(expired) != nil {
		t.Fatalf("snapshot %d holding offset 0 was not expired", expired)
	}
	if w := where(); w.Status != lookup.StatusRow || w.SnapshotID == nil || *w.SnapshotID != expired || w.File == "" ||
		!w.CommittedAt.Equal(*whereBefore.CommittedAt) {
		t.Fatalf("where after expiry: %+v, want the row in expired snapshot %d", w, expired)
	}

	// The sink resumes from the archived ledger: no duplicate, no gap.
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("orders", 3, 150, time.Now(), 2)); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := floe(t, sink...); code != exitOK {
		t.Fatalf("sink after expiry: exit %d\n%s\n%s", code, out, errs)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	resumed, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(resumed.Commits[:len(before.Commits)], before.Commits) {
		t.Fatal("the resumed ledger does not start with the archived commits")
	}
	var sunk int64
	for tp, next := range resumed.Next() {
		if tp.Topic != "orders" {
			t.Fatalf("ledger has partition %s", tp)
		}
		sunk += next
	}
	if sunk != 450 {
		t.Fatalf("ledger covers %d offsets, want 450", sunk)
	}

	code, out, errs = floe(t, append([]string{"audit", "--table", "lake.orders", "--deep", "--brokers", st.Brokers[0], "--json"}, loc...)...)
	var doc struct {
		Complete   bool `json:"complete"`
		Partitions []struct {
			Rows *int64 `json:"rows"`
		} `json:"partitions"`
		Evidence struct {
			Digest           string `json:"digest"`
			MetadataLocation string `json:"metadata_location"`
			LedgerCommits    int    `json:"ledger_commits"`
		} `json:"evidence"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK || !doc.Complete {
		t.Fatalf("audit after expiry: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	var rows int64
	for _, p := range doc.Partitions {
		if p.Rows == nil {
			t.Fatalf("deep audit without row counts: %s", out)
		}
		rows += *p.Rows
	}
	if rows != 450 || doc.Evidence.LedgerCommits != len(resumed.Commits) {
		t.Fatalf("audit: %d rows (want 450), evidence of %d commits (want %d)", rows, doc.Evidence.LedgerCommits, len(resumed.Commits))
	}
	// The evidence digest hashes the whole ledger, archived commits included.
	sum := sha256.Sum256(audit.Canonical(doc.Evidence.MetadataLocation, resumed))
	if doc.Evidence.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("evidence digest %s is not that of the ledger with the expired commits", doc.Evidence.Digest)
	}
}

// TestMaintainCommandErrors: nothing to do is a usage error, and an archive
// that cannot be written (a file stands where its folder must go) fails the
// run with exit 2 and expires nothing.
func TestMaintainCommandErrors(t *testing.T) {
	st, loc := sinkStack(t)
	if code, out, errs := floe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "100"}, loc...)...); code != exitOK {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := floe(t, append([]string{"maintain", "--table", "lake.orders"}, loc...)...); code != exitError || !strings.Contains(errs, "nothing to do") {
		t.Fatalf("maintain without an action: exit %d, %s", code, errs)
	}
	tbl := auditTable(t, st, "lake.orders")
	n := len(tbl.Iceberg().Metadata().Snapshots())
	meta := strings.TrimPrefix(tbl.Iceberg().Location(), "file://") + "/metadata"
	if err := os.WriteFile(filepath.Join(meta, "floe-ledger"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := floe(t, append([]string{"maintain", "--table", "lake.orders", "--retain-last", "1"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "nothing was expired") {
		t.Fatalf("maintain with an unwritable archive: exit %d, %s", code, errs)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(tbl.Iceberg().Metadata().Snapshots()); n < 2 || got != n {
		t.Fatalf("%d snapshots after a failed archive write, want all %d", got, n)
	}
}

// TestMaintainUsageListsFlags: the usage line names every flag of the
// maintain command except the catalog flags every table command shares.
func TestMaintainUsageListsFlags(t *testing.T) {
	cmd := newMaintainCmd()
	var shared tableFlags
	sharedSet := pflag.NewFlagSet("shared", pflag.ContinueOnError)
	shared.register(sharedSet)
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if sharedSet.Lookup(fl.Name) == nil && !strings.Contains(cmd.Use, "--"+fl.Name) {
			t.Errorf("usage %q lacks --%s", cmd.Use, fl.Name)
		}
	})
}
