package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReplayRepairsUpsertTableLostFile: a data file of an upsert table is
// gone from its storage, the damage the audit's missing-file sends users
// to replay for. The replay onto a branch compared it with main, whose
// read failed on that file, so neither --publish nor --publish-different
// could publish it: the table could not be rebuilt in place (a new user's
// report). The refusal now says main cannot be read and names
// --publish-different, which publishes the branch, and the table audits
// complete.
func TestReplayRepairsUpsertTableLostFile(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "wallets"
	produceKeyed(t, st, topic)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.wallets", "--mode", "upsert", "--key", "string",
		"--stop-at-end"}, loc)...)
	tbl := openFloeTable(t, st, "lake.wallets")
	files, err := tbl.Files(t.Context(), tbl.Head().SnapshotID)
	if err != nil || len(files) == 0 {
		t.Fatalf("data files: %v %v", files, err)
	}
	if err := os.Remove(strings.TrimPrefix(files[0].Path, "file://")); err != nil {
		t.Fatal(err)
	}
	replay := slices.Concat([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.wallets", "--branch", "fix", "--publish"}, loc)
	code, out, errs := floe(t, replay...)
	if code != exitError || !strings.Contains(errs, "main cannot be read to compare") || !strings.Contains(errs, "pass --publish-different to publish it in place of main") {
		t.Fatalf("replay --publish over a lost data file: exit %d\n%s%s\nwant exit %d naming main's lost file and --publish-different", code, out, errs, exitError)
	}
	out = mustFloe(t, append(replay, "--publish-different")...)
	if !strings.Contains(out, "published") {
		t.Errorf("replay --publish-different over a lost data file:\n%s", out)
	}
	if out := mustFloe(t, slices.Concat([]string{"audit", "--table", "lake.wallets", "--deep", "--brokers", brokers}, loc)...); !strings.Contains(out, "verdict: COMPLETE") {
		t.Errorf("audit --deep after the repair:\n%s", out)
	}
}
