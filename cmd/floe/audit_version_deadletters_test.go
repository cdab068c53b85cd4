package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestAuditMetadataLocationDeadLetters: floe audit --metadata-location
// audits the ledger of an earlier table version, but its ledger level
// compares that version's ledger with the dead-letter table as it is now.
// Dead letters a later commit sank belong to no commit of the earlier
// ledger, so the re-verification of a complete report found them stray
// and exited 1 with findings the original audit did not have: an auditor
// checking a report's digest is told the version had findings it did not
// have.
func TestAuditMetadataLocationDeadLetters(t *testing.T) {
	st, cat := deadLettersStack(t)
	auditArgs := append([]string{"audit", "--table", "lake.ev", "--json"}, cat...)
	code, js, errs := floe(t, auditArgs...)
	then := decodeAudit(t, js)
	if code != exitOK || !then.Complete {
		t.Fatalf("the first audit: exit %d, %s\n%s", code, js, errs)
	}

	// A later commit with a dead letter of its own.
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "ev", Partition: 0, Value: []byte("not json either")}}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "-t", "ev", "--table", "lake.ev", "--value", "json", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	if code, _, errs := floe(t, auditArgs...); code != exitOK {
		t.Fatalf("the table as it is: exit %d\n%s", code, errs)
	}

	code, js, errs = floe(t, append(auditArgs, "--metadata-location", then.Evidence.MetadataLocation)...)
	again := decodeAudit(t, js)
	if again.Evidence.Digest != then.Evidence.Digest {
		t.Fatalf("digest %s, want the report's %s", again.Evidence.Digest, then.Evidence.Digest)
	}
	if code != exitOK || !again.Complete || len(again.Findings) != 0 {
		var kinds []string
		for _, f := range again.Findings {
			kinds = append(kinds, f.Level+"/"+f.Kind)
		}
		t.Fatalf("audit --metadata-location of a version the first audit found complete: exit %d, complete %v, findings %v; want the first audit's verdict\n%s\n%s",
			code, again.Complete, kinds, strings.TrimSpace(js), errs)
	}
}
