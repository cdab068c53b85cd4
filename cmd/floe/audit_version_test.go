package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/snapshot"
)

// TestAuditMetadataLocation: a report's evidence digest could be verified
// only while the table stayed at the audited version (a new user found a
// live sink's table never did). floe audit --metadata-location audits the
// ledger of the version an earlier report names: after more commits and an
// expiry that archived that version's commits, its digest is the report's
// again, while the table as it is has another.
func TestAuditMetadataLocation(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	sink := append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "50"}, loc...)
	maintain := append([]string{"maintain", "--table", "lake.orders", "--retain-last", "1", "--expire-older-than", "0s",
		"--remove-orphans", "--orphan-min-age", "1s"}, loc...)
	mustFloe(t, sink...)
	mustFloe(t, maintain...)
	auditArgs := append([]string{"audit", "--table", "lake.orders", "--json"}, loc...)
	_, js, _ := floe(t, auditArgs...)
	then := decodeAudit(t, js)
	if then.Evidence.Digest == "" || then.Evidence.MetadataLocation == "" {
		t.Fatalf("audit --json has no evidence: %s", js)
	}
	segments := archiveFiles(t, then.Evidence.MetadataLocation)
	if len(segments) == 0 {
		t.Fatal("the audited version names no ledger archive: the expiry archived nothing")
	}

	// More commits and expiries, until a later segment absorbed the
	// audited version's and maintenance deleted it.
	for round := 0; ; round++ {
		produceRound(t, st.Brokers, "orders", 3, 60, map[int32]int64{})
		mustFloe(t, sink...)
		mustFloe(t, maintain...)
		if !slices.ContainsFunc(segments, fileExists) {
			break
		}
		if round == 10 {
			t.Fatalf("after %d expiries the audited version's archive files %v are still there", round+1, segments)
		}
	}

	_, js, _ = floe(t, auditArgs...)
	if now := decodeAudit(t, js); now.Evidence.Digest == then.Evidence.Digest {
		t.Fatalf("the table as it is has the earlier digest %s: the test changed nothing", now.Evidence.Digest)
	}
	// The location as the report has it, and as a local path.
	for _, location := range []string{then.Evidence.MetadataLocation, strings.TrimPrefix(then.Evidence.MetadataLocation, "file://")} {
		code, js, errs := floe(t, append(auditArgs, "--metadata-location", location)...)
		again := decodeAudit(t, js)
		if code != exitOK || again.Evidence.Digest != then.Evidence.Digest || again.Evidence.MetadataLocation != then.Evidence.MetadataLocation {
			t.Fatalf("audit --metadata-location %s: exit %d, digest %s at %s; want %s at %s\n%s",
				location, code, again.Evidence.Digest, again.Evidence.MetadataLocation, then.Evidence.Digest, then.Evidence.MetadataLocation, errs)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--deep"}, "drop --deep (read the table and the log as they are)"},
		{[]string{"--metadata-location", then.Evidence.MetadataLocation + ".gone"}, "read the metadata file"},
	} {
		args := append(append([]string{}, auditArgs...), c.args...)
		if !strings.Contains(strings.Join(c.args, " "), "--metadata-location") {
			args = append(args, "--metadata-location", then.Evidence.MetadataLocation)
		}
		if code, _, errs := floe(t, args...); code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("audit %v: exit %d, %s; want exit 2 saying %q", c.args, code, errs, c.want)
		}
	}

	// A local stack's env.sh sets FLOE_BROKERS for every command: the
	// audit of a version leaves it out, saying so (it was refused, naming
	// a flag the user never gave).
	t.Setenv("FLOE_BROKERS", "127.0.0.1:1")
	code, js, errs := floe(t, append(auditArgs, "--metadata-location", then.Evidence.MetadataLocation)...)
	if code != exitOK || decodeAudit(t, js).Evidence.Digest != then.Evidence.Digest ||
		!strings.Contains(errs, "not used with --metadata-location, which audits an earlier version's ledger only: --brokers (set by FLOE_BROKERS)") {
		t.Errorf("audit --metadata-location with FLOE_BROKERS set: exit %d\n%s", code, errs)
	}
}

// archiveFiles are the ledger archive files the metadata file at location
// (file://) names.
func archiveFiles(t *testing.T, location string) []string {
	t.Helper()
	b, err := os.ReadFile(strings.TrimPrefix(location, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Properties map[string]string `json:"properties"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	var files []string
	for k, v := range meta.Properties {
		if strings.HasPrefix(k, snapshot.PropLedgerSegmentPrefix) {
			files = append(files, strings.TrimPrefix(v, "file://"))
		}
	}
	return files
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
