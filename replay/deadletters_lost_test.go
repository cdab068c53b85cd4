package replay_test

import (
	"os"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// TestPublishWithLostDeadLetterFile: main's dead-letter table lost its
// data file (an aws s3 rm). A replay onto a branch runs, its publish lands,
// and Run returns no error: it returned "published branch ...; reconcile
// its dead-letter tables", and floe replay --publish exited 2 after a
// publish that was in, where the sink and floe maintain treat the same
// damage as a warning (from a review).
func TestPublishWithLostDeadLetterFile(t *testing.T) {
	e := newEnv(t)
	dlq := loseMainDeadLetterFile(t, e)
	res, err := e.replay("lake.orders", replay.Options{Topic: "orders", Branch: "rebuild", Publish: true,
		Sink: connector.Config{DeadLetters: dlq}})
	if !res.Published {
		t.Fatalf("not published: %v", err)
	}
	if err != nil {
		t.Errorf("replay published (main is the branch now), yet returned an error: %v", err)
	}
}

// TestAuditBranchNotJudgedByMainsDeadLetters (from a new-user run): the
// audit of a replay branch, before its publish, reported main's
// dead-letter damage (a file main's dead-letter table lost, and main's
// commit whose dead letters it held) as its own: NOT COMPLETE on a
// complete branch. The branch's audit judges its own commits; main's
// reports the damage.
func TestAuditBranchNotJudgedByMainsDeadLetters(t *testing.T) {
	e := newEnv(t)
	loseMainDeadLetterFile(t, e)
	if _, err := e.replay("lake.orders", replay.Options{Topic: "orders", Branch: "rebuild"}); err != nil {
		t.Fatal(err)
	}
	for branch, complete := range map[string]bool{"rebuild": true, "": false} {
		rep, err := audit.Run(e.Ctx, e.openExisting("lake.orders", branch), audit.Options{Depth: audit.DepthRows})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Complete() != complete {
			t.Errorf("audit of branch %q: complete %v, want %v; findings %+v", branch, rep.Complete(), complete, rep.Findings)
		}
	}
}

// loseMainDeadLetterFile sinks lake.orders with a dead letter
// (typedWithDeadLetter) and deletes its dead-letter file from the storage
// behind the table's back; it returns the dead-letter table.
func loseMainDeadLetterFile(t *testing.T, e *env) *snapshot.Table {
	t.Helper()
	typedWithDeadLetter(t, e)
	_, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	files, err := dlq.Files(e.Ctx, 0)
	if err != nil || len(files) != 1 {
		t.Fatalf("dead-letter files %v, %v; want one", files, err)
	}
	if err := os.Remove(strings.TrimPrefix(files[0].Path, "file://")); err != nil {
		t.Fatal(err)
	}
	return dlq
}
