package audit_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestWideTable: a topic of 300 partitions sunk in commits whose ranges
// are in ranges files audits complete at every level, content included;
// a ranges file deleted or altered afterwards makes the audit fail with an
// error naming it, never a report without its ranges.
func TestWideTable(t *testing.T) {
	e := newEnv(t)
	const topic, partitions = "wide", 300
	e.Topic(topic, partitions, nil)
	for p := range int32(partitions) {
		e.Produce(records(topic, p, 4, "w"))
	}
	tbl := e.Table("lake.wide")
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 600})
	dir := strings.TrimPrefix(tbl.Iceberg().Location(), "file://") + "/metadata/floe-ranges"
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) < 2 {
		t.Fatalf("ranges files %v, %v: want the wide commits' ranges in files", ents, err)
	}
	rep := auditEveryLevel(t, e, tbl)
	var rows int64
	for _, p := range rep.Partitions {
		rows += p.Rows
	}
	if rows != partitions*4 || len(rep.Partitions) != partitions {
		t.Fatalf("audit counted %d rows of %d partitions, want %d of %d", rows, len(rep.Partitions), partitions*4, partitions)
	}

	// The head commit's file: it holds data ranges of 4 rows.
	victim := strings.TrimPrefix(tbl.Head().Summary.Properties[mapping.KeyRangesFile], "file://")
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(b), ":4,", ":3,", 1)
	if tampered == string(b) {
		t.Fatalf("nothing to tamper with in %s", b)
	}
	for _, damage := range []string{"tampered", "deleted"} {
		switch damage {
		case "tampered":
			err = os.WriteFile(victim, []byte(tampered), 0o644)
		case "deleted":
			err = os.Remove(victim)
		}
		if err != nil {
			t.Fatal(err)
		}
		// As floe audit does, in a process of its own.
		fresh := e.OpenTable(tbl.Name(), snapshot.OpenOptions{})
		_, err := audit.Run(e.Ctx, fresh, audit.Options{Depth: audit.DepthLedger})
		if !errors.Is(err, mapping.ErrRangesFile) || !strings.Contains(err.Error(), filepath.Base(victim)) {
			t.Fatalf("audit with a %s ranges file: %v, want an error naming it", damage, err)
		}
	}
}
