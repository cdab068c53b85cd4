package main

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestTagReadable: the tag floe replay --tag-main gives main's previous
// head is the only place main's earlier history stays, and floe showed
// it nowhere (a production user's report): floe status --table lists the
// table's refs, audit, dead-letters and as-of --branch read a tag (and
// nothing writes onto one), the refusal of a position below the publish
// names the tag and the command that reads it, where and files --branch
// read a tag and a branch, and a branch named like a tag is not suggested
// to be created.
func TestTagReadable(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc)...)
	before := foreignTable(t, st.Catalog(), "lake.orders").CurrentSnapshot().SnapshotID
	mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders",
		"--from", "0=50,1=50,2=50", "--branch", "rebuild", "--publish", "--publish-different", "--tag-main", "before-rebuild"}, loc)...)
	tbl := func(args ...string) []string { return slices.Concat(args, []string{"--table", "lake.orders"}, loc) }

	out := mustFloe(t, tbl("status")...)
	tagLine := regexp.MustCompile(`(?m)^before-rebuild +tag +` + strconv.FormatInt(before, 10) + ` +\d{4}-`)
	if !tagLine.MatchString(out) || !regexp.MustCompile(`(?m)^rebuild +branch +\d+ `).MatchString(out) {
		t.Errorf("floe status --table:\n%s\nwant the tag before-rebuild of snapshot %d and the branch rebuild listed", out, before)
	}
	var doc struct {
		SnapshotID *int64 `json:"snapshot_id"`
		Refs       []struct {
			Name, Type  string
			SnapshotID  int64  `json:"snapshot_id"`
			CommittedAt string `json:"committed_at"`
		} `json:"refs"`
	}
	if err := json.Unmarshal([]byte(mustFloe(t, tbl("status", "--json")...)), &doc); err != nil {
		t.Fatal(err)
	}
	tags := map[string]int64{}
	for _, r := range doc.Refs {
		if r.Type == "tag" && r.CommittedAt != "" {
			tags[r.Name] = r.SnapshotID
		}
	}
	if doc.SnapshotID == nil || tags["before-rebuild"] != before {
		t.Errorf("floe status --json: snapshot_id %v, tags with a commit time %v; want the existing fields and tag before-rebuild of %d", doc.SnapshotID, tags, before)
	}

	// The tag's ledger is main's before the publish: all 300 events.
	code, out, errs := floe(t, tbl("audit", "--branch", "before-rebuild", "--json")...)
	var rep struct {
		Branch string
		Tag    bool
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Branch != "before-rebuild" || !rep.Tag {
		t.Errorf("floe audit --branch before-rebuild: exit %d (%v)\n%s%s\nwant an audit of the tag", code, err, out, errs)
	}
	// Its header names the tag (from a new-user run: the table alone).
	if code, out, errs = floe(t, tbl("dead-letters", "--branch", "before-rebuild", "--summary")...); code != 0 || !strings.Contains(out, "lake.orders (tag before-rebuild)") {
		t.Errorf("floe dead-letters --branch before-rebuild: exit %d\n%s%s", code, out, errs)
	}

	// Below the publish main's history is gone: the refusal names the tag
	// and how to read it, and that command answers.
	code, out, errs = floe(t, tbl("as-of", "--offsets", "orders/0=10,orders/1=10,orders/2=10")...)
	want := "floe as-of --table lake.orders --branch before-rebuild --offsets orders/0=10,orders/1=10,orders/2=10"
	if code != exitError || !strings.Contains(errs, "tag before-rebuild holds main's history") || !strings.Contains(errs, want) {
		t.Errorf("floe as-of below the publish: exit %d\n%s%s\nwant the refusal to name the tag and %q", code, out, errs, want)
	}
	out = mustFloe(t, tbl("as-of", "--branch", "before-rebuild", "--offsets", "orders/0=10,orders/1=10,orders/2=10", "--rows", "--json")...)
	var asOf struct {
		SnapshotID int64 `json:"snapshot_id"`
		RowCount   int64 `json:"row_count"`
	}
	if err := json.Unmarshal([]byte(out), &asOf); err != nil || asOf.RowCount != 30 {
		t.Errorf("floe as-of --branch before-rebuild --rows: %v\n%s\nwant the 30 rows below the cut", err, out)
	}

	// where and files read a tag (and a branch) too: offset 10, below the
	// replay's start, is a row of the tag's history and unsunk on main;
	// the tag's files are its snapshot's, all 300 events.
	where := func(args ...string) (status string, snapshotID int64) {
		t.Helper()
		var res struct {
			Status     string
			SnapshotID int64 `json:"snapshot_id"`
		}
		out := mustFloe(t, tbl(append([]string{"where", "--partition", "0", "--offset", "10", "--json"}, args...)...)...)
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("floe where %v: %v\n%s", args, err, out)
		}
		return res.Status, res.SnapshotID
	}
	if status, snap := where("--branch", "before-rebuild"); status != "row" || foreignTable(t, st.Catalog(), "lake.orders").Metadata().SnapshotByID(snap) == nil {
		t.Errorf("floe where --branch before-rebuild: %s in snapshot %d; want a row of the tag's history", status, snap)
	}
	for _, ref := range [][]string{nil, {"--branch", "rebuild"}} {
		if status, _ := where(ref...); status != "unsunk" {
			t.Errorf("floe where %v: %s; want unsunk (the replay began at 50)", ref, status)
		}
	}
	files := func(args ...string) (snapshotID, records int64) {
		t.Helper()
		var res struct {
			SnapshotID int64 `json:"snapshot_id"`
			Records    int64
		}
		out := mustFloe(t, tbl(append([]string{"files", "--json"}, args...)...)...)
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("floe files %v: %v\n%s", args, err, out)
		}
		return res.SnapshotID, res.Records
	}
	if snap, records := files("--branch", "before-rebuild"); snap != before || records != 300 {
		t.Errorf("floe files --branch before-rebuild: snapshot %d, %d rows; want the tag's snapshot %d and its 300", snap, records, before)
	}
	if _, records := files("--branch", "rebuild"); records != 150 {
		t.Errorf("floe files --branch rebuild: %d rows; want the replay's 150", records)
	}
	if code, _, errs := floe(t, tbl("files", "--branch", "rebuild", "--snapshot", strconv.FormatInt(before, 10))...); code != exitError || !strings.Contains(errs, "give one") {
		t.Errorf("floe files --branch --snapshot: exit %d\n%s\nwant them refused together", code, errs)
	}

	// Nothing writes onto a tag: a replay onto it is refused, the tag
	// unchanged, and a missing name lists tags apart from branches.
	code, out, errs = floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--branch", "before-rebuild"}, tbl())...)
	if code != exitError || !strings.Contains(errs, "before-rebuild is a tag") || !strings.Contains(errs, "pick another branch name") {
		t.Errorf("floe replay --branch before-rebuild (a tag): exit %d\n%s%s\nwant it refused as a tag", code, out, errs)
	}
	if ref := maps.Collect(foreignTable(t, st.Catalog(), "lake.orders").Metadata().Refs())["before-rebuild"]; ref.SnapshotID != before {
		t.Errorf("tag before-rebuild now names snapshot %d, want %d", ref.SnapshotID, before)
	}
	code, _, errs = floe(t, tbl("audit", "--branch", "nosuch")...)
	if code != exitError || !strings.Contains(errs, `has no branch or tag "nosuch" (its branches: rebuild; its tags: before-rebuild)`) {
		t.Errorf("floe audit --branch nosuch: exit %d\n%s\nwant branches and tags listed apart", code, errs)
	}
}
