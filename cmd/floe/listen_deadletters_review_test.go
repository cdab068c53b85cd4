package main

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestListenPortHeldByServerOnOtherAddress (from a review): a --metrics-addr :PORT whose
// port a server holds on one address of the host (here 127.0.0.2, as a
// server bound to one interface's address would) fails with EADDRINUSE;
// something does listen, but listening() dials only 127.0.0.1, finds
// nothing, and the error tells the operator an outgoing connection holds
// the port and to pick one outside the ephemeral range, instead of to stop
// what listens on it.
func TestListenPortHeldByServerOnOtherAddress(t *testing.T) {
	port := freeTCPPort(t)
	srv, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	defer srv.Close()
	addr := fmt.Sprintf(":%d", port)
	code, _, errs := floe(t, "sink", "-t", "orders", "--table", "lake.orders", "-b", "127.0.0.1:1", "--metrics-addr", addr)
	if code != exitError {
		t.Fatalf("sink --metrics-addr %s: exit %d, stderr %q", addr, code, errs)
	}
	if strings.Contains(errs, "nothing listens on that port") || !strings.Contains(errs, "stop what listens on it") {
		t.Errorf("sink --metrics-addr %s while a server listens on 127.0.0.2:%d: stderr %q\nwant: stop what listens on it (a server does), not an outgoing connection", addr, port, errs)
	}
}

// TestDeadLettersOfBranchNotesNameTheBranch (from a review): dead-letters --branch's notes
// send the operator to floe audit --table T, which audits main, not the
// branch listed: with the branch's dead-letter files gone, the note must
// say floe audit --table lake.ev --branch rebuild.
func TestDeadLettersOfBranchNotesNameTheBranch(t *testing.T) {
	st, cat := deadLettersStack(t)
	mustFloe(t, slices.Concat([]string{"replay", "-t", "ev", "--table", "lake.ev", "--branch", "rebuild", "--value", "json", "-b", st.Brokers[0]}, cat)...)
	dlq := foreignTable(t, st.Catalog(), "lake.ev_rebuild_dlq")
	tasks, err := dlq.Scan().PlanFiles(t.Context())
	if err != nil || len(tasks) == 0 {
		t.Fatalf("dead-letter files of the branch: %v %v", tasks, err)
	}
	for _, task := range tasks {
		if err := os.Remove(strings.TrimPrefix(task.File.FilePath(), "file://")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	res := deadLettersJSON(t, slices.Concat([]string{"--branch", "rebuild", "--table", "lake.ev"}, cat)...)
	var audit []string
	for _, n := range res.Notes {
		if strings.Contains(n, "floe audit --table") {
			audit = append(audit, n)
		}
	}
	if len(audit) == 0 {
		t.Fatalf("dead-letters --branch rebuild with its files gone: notes %q, want one sending to floe audit", res.Notes)
	}
	for _, n := range audit {
		if !strings.Contains(n, "--branch rebuild") {
			t.Errorf("dead-letters --branch rebuild: note %q sends to floe audit of main; want floe audit --table lake.ev --branch rebuild", n)
		}
	}
}
