package main

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestOnlyDeadLettersOtherTopic: lake.shop holds rows of topic shop
// only. A --stop-at-end run of another topic, "other", into it with a
// layout that does not fit that topic (plain text under --value json)
// commits only dead letters. Expected: exit 3, as for a table that never
// held a row: the rows of topic shop say nothing about whether the layout
// fits topic other (docs/exit-codes.md: "its layout fits the topic").
// holdsRows counted the rows of any topic of the ledger, so it exited 0
// (from a review).
func TestOnlyDeadLettersOtherTopic(t *testing.T) {
	st, common := shopStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "other", 1, nil); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for range 4 {
		recs = append(recs, &kgo.Record{Topic: "other", Value: []byte("plain text, not json")})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, slices.Concat([]string{"sink", "-t", "other", "--table", "lake.shop", "--value", "json", "--stop-at-end"}, common)...)
	if !strings.Contains(out, "0 rows and 4 dead letters") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want a run of 4 dead letters", code, out, errs)
	}
	if code != exitOnlyDeadLetters {
		t.Errorf("exit %d, stderr %q; want exit 3: no record of topic other ever became a row of lake.shop", code, errs)
	}
}

// TestStatusDescribeOnlyWithLostOffsets: docs/secured-kafka.md says
// floe status with --brokers needs Describe on the topic, nothing more.
// Retention deleted offsets 20-29 of orders/0 before the table got them,
// so status has lost offsets to show. Expected: floe status as a user
// holding Describe alone exits 0 and reports them: telling aborted-only
// offsets from lost ones (Broker.ClassifyDeleted) fetches the log (Read),
// and without that right status failed, exit 2 (from a review).
func TestStatusDescribeOnlyWithLostOffsets(t *testing.T) {
	const topic = "orders"
	c := readerDescriberCluster(t, topic)
	count := c.topic(t, topic, 1, 20)
	_, catFlags := localCatalog(t)
	run := func(user string, args ...string) (int, string, string) {
		t.Helper()
		return floe(t, append(append(args, c.userFlags("SCRAM-SHA-512", user, floePass)...), catFlags...)...)
	}
	if code, out, errs := run("reader", "sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end"); code != 0 {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	c.produce(t, topic, 1, 20, count)
	if err := c.cluster.DeleteRecords(topic, 0, 30); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run("describer", "status", "--table", "lake.orders", "--json")
	if code != 0 {
		t.Errorf("status as a user holding Describe (docs/secured-kafka.md's row for status): exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}

// TestReplayFurtherOnlyDeadLetters: a replay of topic ext into lake.ext
// made rows; taken further with --until, it reads two records that are
// not JSON, and nothing else. The target holds rows of the topic, so its
// layout fits: exit 0 with the warning, as floe sink --stop-at-end into
// such a table, not 3 with the advice to drop it.
func TestReplayFurtherOnlyDeadLetters(t *testing.T) {
	st, common := shopStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ext", 1, nil); err != nil {
		t.Fatal(err)
	}
	produce := func(values ...string) {
		t.Helper()
		var recs []*kgo.Record
		for _, v := range values {
			recs = append(recs, &kgo.Record{Topic: "ext", Value: []byte(v)})
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
	}
	produce(`{"n":1}`, `{"n":2}`, `{"n":3}`)
	replay := slices.Concat([]string{"replay", "-t", "ext", "--table", "lake.ext", "--value", "json"}, common)
	mustFloe(t, replay...)
	produce("oops", "oops")
	code, out, errs := floe(t, append(replay, "--until", "0=5")...)
	if code != 0 || !strings.Contains(out, "0 rows and 2 dead letters") {
		t.Errorf("replay taken further over two bad records: exit %d, stdout %q, stderr %q; want exit 0 and the summary", code, out, errs)
	}
}

// TestSinkSaysItCreatedTheTable: a sink into a table that does not exist
// creates it, and says so at INFO, as it says it created a new catalog: a
// typo in --table re-sank the whole topic into a new table without a word
// (from a new-user run). A run into the table it made says nothing of it.
func TestSinkSaysItCreatedTheTable(t *testing.T) {
	_, common := shopStack(t)
	sink := slices.Concat([]string{"sink", "-t", "shop", "--table", "lake.ordres", "--stop-at-end"}, common)
	_, _, errs := floe(t, sink...)
	if !strings.Contains(errs, `msg="created a new table" table=lake.ordres`) {
		t.Errorf("the first run's log does not say it created lake.ordres:\n%s", errs)
	}
	if _, _, errs := floe(t, sink...); strings.Contains(errs, "created a new table") {
		t.Errorf("the second run says it created a table:\n%s", errs)
	}
}

// TestListenAddressInUse: --metrics-addr and status --serve on an address
// another process holds name the flag (from a new-user run).
func TestListenAddressInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	code, _, errs := floe(t, "sink", "-t", "orders", "--table", "lake.orders", "-b", "127.0.0.1:1", "--metrics-addr", addr)
	if code != exitError || !strings.Contains(errs, "address already in use: pick a free address, or stop what listens on it; check --metrics-addr") {
		t.Errorf("sink --metrics-addr: exit %d, stderr %q", code, errs)
	}
	_, common := shopStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "-t", "shop", "--table", "lake.shop2", "--stop-at-end"}, common)...)
	code, _, errs = floe(t, slices.Concat([]string{"status", "--table", "lake.shop2", "--serve", addr}, common[2:])...)
	if code != exitError || !strings.Contains(errs, "check --serve") {
		t.Errorf("status --serve: exit %d, stderr %q", code, errs)
	}
}

// TestListenPortHeldByOutgoingConnection: a --metrics-addr port that an
// outgoing connection's local port holds, with nothing listening, says so
// and names the range to stay out of; it said to stop what listens on it
// (an operator's run).
func TestListenPortHeldByOutgoingConnection(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := freeTCPPort(t)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}
	c, err := d.DialContext(t.Context(), "tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	code, _, errs := floe(t, "sink", "-t", "orders", "--table", "lake.orders", "-b", "127.0.0.1:1", "--metrics-addr", addr)
	if code != exitError || !strings.Contains(errs, "nothing listens on that port, so the local port of an outgoing connection holds it") ||
		!strings.Contains(errs, "ip_local_port_range") || !strings.Contains(errs, "check --metrics-addr") {
		t.Errorf("sink --metrics-addr %s: exit %d, stderr %q", addr, code, errs)
	}
}
