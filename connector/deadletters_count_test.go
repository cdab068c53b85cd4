package connector_test

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestSinkNotBlockedByDeadLetterCountMismatch: the dead-letter table holds
// a commit's dead letter twice, both rows with the commit's id (changed
// outside floe: reconciling cannot tell which copy is floe's). A sink
// session still sinks the data table, saying the mismatch at WARN with the
// commit, the table and floe audit; the audit reports it and floe maintain
// still fails with it.
func TestSinkNotBlockedByDeadLetterCountMismatch(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce(jsonRecords("orders", 0, `{"id":1}`, `oops`))
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	// Each of the dead-letter table's rows twice, commit ids and all.
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	floetest.CopyDeadLetters(t, dlq, 2, true)

	e.Produce(jsonRecords("orders", 0, `{"id":2}`))
	var log bytes.Buffer
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq,
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))}); err != nil {
		t.Fatalf("a sink session on a table whose dead-letter table was changed outside floe: %v", err)
	}
	if n := len(rows(t, tbl)); n != 2 {
		t.Errorf("%d rows after the second session, want 2", n)
	}
	warn := log.String()
	if !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, dlq.Name()) || !strings.Contains(warn, "floe audit") || !strings.Contains(warn, "commit=") {
		t.Errorf("the sink did not warn of the mismatch naming the commit, %s and floe audit: %q", dlq.Name(), warn)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthLedger})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Findings, func(f audit.Finding) bool { return f.Kind == audit.KindCountMismatch }) {
		t.Errorf("the audit does not report the count mismatch: %+v", rep.Findings)
	}
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger()}); !errors.As(err, new(*snapshot.DeadLetterCountError)) {
		t.Errorf("floe maintain: %v, want a DeadLetterCountError", err)
	}
}
