package connector_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestDeadLetterFileLostFromStorage (from a new-user run): a data file of
// the dead-letter table deleted from its storage behind floe's back (an
// aws s3 rm) blocked the data table: floe sink, floe maintain and the
// default floe audit all stopped with "file does not exist". The sink now
// goes on, warning with the file and the way out; the audit reports the
// lost file; floe maintain does the rest of its work and fails naming the
// file, and with DropMissingDeadLetterFiles removes it from the
// dead-letter table, which readers can scan again, the later dead letters
// intact, and records the commit whose dead letter it held as lost: later
// sinks and maintenance leave it alone, and the audit keeps reporting it.
func TestDeadLetterFileLostFromStorage(t *testing.T) {
	e := newEnv(t)
	tbl, dlq, lost := e.loseDeadLetterFile()

	e.Produce(jsonRecords("orders", 0, `{"id":2}`, `oops again`))
	var log bytes.Buffer
	warnings := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq, Logger: warnings}); err != nil {
		t.Fatalf("a sink session whose dead-letter table lost a file: %v", err)
	}
	if n := len(rows(t, tbl)); n != 2 {
		t.Errorf("%d rows after the second session, want 2", n)
	}
	if w := log.String(); !strings.Contains(w, "level=WARN") || !strings.Contains(w, lost) || !strings.Contains(w, "--drop-missing-dead-letter-files") {
		t.Errorf("the sink did not warn naming the lost file and --drop-missing-dead-letter-files: %q", w)
	}

	lostFinding := func(rep *audit.Report) bool {
		return slices.ContainsFunc(rep.Findings, func(f audit.Finding) bool { return f.Kind == audit.KindMissingFile && f.File == lost })
	}
	for _, depth := range []audit.Depth{audit.DepthFiles, audit.DepthRows} {
		rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: depth})
		if err != nil {
			t.Fatalf("audit at depth %v: %v", depth, err)
		}
		if rep.Complete() || !lostFinding(rep) {
			t.Errorf("audit at depth %v: findings %+v; want a missing-file finding of %s", depth, rep.Findings, lost)
		}
	}

	var lostErr *snapshot.DeadLetterFilesLostError
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger()}); !errors.As(err, &lostErr) || !strings.Contains(err.Error(), lost) {
		t.Fatalf("floe maintain: %v; want a DeadLetterFilesLostError naming %s", err, lost)
	}
	res, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true})
	if err != nil {
		t.Fatalf("floe maintain dropping the lost file: %v", err)
	}
	if !slices.Equal(res.DroppedDeadLetterFiles, []string{lost}) || res.DeadLetters.RecordedLost != 1 {
		t.Errorf("maintain dropped %v and recorded the dead letters of %d commits as lost; want [%s], and the first commit's (its dead letter is gone for good)",
			res.DroppedDeadLetterFiles, res.DeadLetters.RecordedLost, lost)
	}
	// Once recorded, the loss fails no later maintenance: only the audit
	// reports it.
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger()}); err != nil {
		t.Errorf("floe maintain after the loss was recorded: %v", err)
	}
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	dead := rows(t, dlq)
	if len(dead) != 1 || dead[0].Offset != 3 {
		t.Errorf("dead letters after the drop: %v; want the one at offset 3", dead)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete() || len(rep.Findings) != 1 || rep.Findings[0].Kind != audit.KindDeadLettersLost {
		t.Errorf("audit after the drop: findings %+v; want the first commit's dead letters lost (and nothing else)", rep.Findings)
	}

	e.Produce(jsonRecords("orders", 0, `{"id":3}`))
	log.Reset()
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq, Logger: warnings}); err != nil {
		t.Fatalf("a sink session after the drop: %v", err)
	}
	if w := log.String(); w != "" {
		t.Errorf("a sink session after the loss was recorded warned: %q", w)
	}
	if n := len(rows(t, tbl)); n != 3 {
		t.Errorf("%d rows after the third session, want 3", n)
	}
}

// TestDeadLetterCompactedFileLost: the storage lost a dead-letter file
// that compaction merged from two commits' files, which the snapshot
// before it still references. Reconciling adds nothing while the lost file
// is listed (the commits' files again would double their dead letters
// once it is restored); once floe maintain drops it, reconciling adds the
// two commits' own files again, and the audit finds the table complete.
func TestDeadLetterCompactedFileLost(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	for _, bad := range []string{`oops`, `oops again`} {
		e.Produce(jsonRecords("orders", 0, `{"id":1}`, bad))
		if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tbl.CompactAll(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	files, err := dlq.Files(e.Ctx, 0)
	if err != nil || len(files) != 1 {
		t.Fatalf("dead-letter files after compaction %v, %v; want one", files, err)
	}
	if err := os.Remove(strings.TrimPrefix(files[0].Path, "file://")); err != nil {
		t.Fatal(err)
	}
	e.Produce(jsonRecords("orders", 0, `{"id":3}`))
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
		t.Fatalf("a sink session whose dead-letter table lost its compacted file: %v", err)
	}
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := dlq.Files(e.Ctx, 0); len(got) != 1 {
		t.Fatalf("the sink changed the dead-letter table whose storage lost a file: files %v", got)
	}
	res, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Logger: quietLogger(), DropMissingDeadLetterFiles: true})
	if err != nil {
		t.Fatalf("floe maintain dropping the lost compacted file: %v", err)
	}
	if len(res.DroppedDeadLetterFiles) != 1 || res.DeadLetters.Added != 2 {
		t.Errorf("maintain dropped %v and added the dead letters of %d commits; want the compacted file, and 2", res.DroppedDeadLetterFiles, res.DeadLetters.Added)
	}
	var offsets []int64
	for _, r := range rows(t, dlq) {
		offsets = append(offsets, r.Offset)
	}
	slices.Sort(offsets)
	if !slices.Equal(offsets, []int64{1, 3}) {
		t.Errorf("dead letters at offsets %v after the drop, want [1 3]", offsets)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Errorf("audit after the drop: %+v; want complete", rep.Findings)
	}
}

// loseDeadLetterFile sinks, into a typed table lake.orders of a topic
// orders of one partition, a row and a dead letter, and deletes the
// dead-letter file from the storage behind the table's back: it returns
// the tables and that file.
func (e *env) loseDeadLetterFile() (tbl, dlq *snapshot.Table, lost string) {
	t := e.T
	t.Helper()
	e.Topic("orders", 1, nil)
	tbl, dlq = e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce(jsonRecords("orders", 0, `{"id":1}`, `oops`))
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	files, err := dlq.Files(e.Ctx, 0)
	if err != nil || len(files) != 1 {
		t.Fatalf("dead-letter files %v, %v; want one", files, err)
	}
	lost = files[0].Path
	if err := os.Remove(strings.TrimPrefix(lost, "file://")); err != nil {
		t.Fatal(err)
	}
	return tbl, dlq, lost
}
