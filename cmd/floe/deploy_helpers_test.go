package main

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// floeCtx runs the CLI in-process under ctx (so a test can stop a live
// sink) and returns its error and output.
func floeCtx(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

// mustFloe runs the CLI and fails the test unless it exits 0.
func mustFloe(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := floe(t, args...)
	if code != 0 {
		t.Fatalf("floe %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errs)
	}
	return out
}

// freeTCPPort is testenv.FreePort, failing the test when there is none.
func freeTCPPort(t testing.TB) int {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// refusedTCPAddr is an address on which every connection is refused, for
// the test's duration: a socket bound to it but not listening holds the
// port, so that no server started meanwhile (by a test running in
// parallel) takes it, as one did a port freeTCPPort had let go.
func refusedTCPAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// produceRound produces n records round-robin over partitions of topic and
// adds them to count, the number of records per partition so far.
func produceRound(t *testing.T, brokers []string, topic string, partitions int32, n int, count map[int32]int64) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		p := int32(i) % partitions
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i),
			Value: fmt.Appendf(nil, `{"i":%d,"p":%d,"n":%d}`, i, p, count[p])}
		count[p]++
	}
	if err := localstack.Produce(t.Context(), brokers, recs); err != nil {
		t.Fatal(err)
	}
}

// floeRun is how a floe run in the background ended (liveFloe).
type floeRun struct {
	out, errs string
	err       error
}

// liveFloe runs floe with args in the background until it ends or ctx
// does, and returns where its end arrives.
func liveFloe(ctx context.Context, args ...string) <-chan floeRun {
	done := make(chan floeRun, 1)
	go func() {
		out, errs, err := floeCtx(ctx, args...)
		done <- floeRun{out, errs, err}
	}()
	return done
}

// openTable opens a table for checks.
func openTable(t testing.TB, cfg catalog.Config, name string) *snapshot.Table {
	t.Helper()
	cat, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ident, err := catalog.ParseIdent(name)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// checkTable proves that the table holds exactly offsets [0, want[p]) of
// each partition of topic, once each: the ledger is contiguous from 0 with
// no gap, overlap or loss, ends at want, its record counts add up, and the
// rows' (partition, offset) pairs are unique and complete.
func checkTable(t *testing.T, cfg catalog.Config, name, topic string, want map[int32]int64) mapping.Ledger {
	t.Helper()
	tbl := openTable(t, cfg, name)
	ledger, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for p, n := range want {
		c := mapping.Cover(ledger.Ranges(mapping.TopicPartition{Topic: topic, Partition: p}))
		if c.First != 0 || c.Next != n || len(c.Gaps) > 0 || len(c.Overlaps) > 0 || len(c.Lost) > 0 || c.Records != n {
			t.Errorf("partition %d: ledger covers [%d, %d) with %d records, gaps %v, overlaps %v, lost %v; want [0, %d) with %d records",
				p, c.First, c.Next, c.Records, c.Gaps, c.Overlaps, c.Lost, n, n)
		}
	}
	seen := map[int32]map[int64]int{}
	if tbl.Head() != nil {
		at, err := tbl.Iceberg().Scan(table.WithSelectedFields(mapping.ColPartition, mapping.ColOffset)).ToArrowTable(t.Context())
		if err != nil {
			t.Fatalf("scan %s: %v", name, err)
		}
		defer at.Release()
		pi := at.Schema().FieldIndices(mapping.ColPartition)[0]
		oi := at.Schema().FieldIndices(mapping.ColOffset)[0]
		for c := range at.Column(pi).Data().Chunks() {
			parts := at.Column(pi).Data().Chunk(c).(*array.Int32)
			offs := at.Column(oi).Data().Chunk(c).(*array.Int64)
			for i := range parts.Len() {
				p := parts.Value(i)
				if seen[p] == nil {
					seen[p] = map[int64]int{}
				}
				seen[p][offs.Value(i)]++
			}
		}
	}
	for p, n := range want {
		if int64(len(seen[p])) != n {
			t.Errorf("partition %d: %d distinct offsets in the table, want %d", p, len(seen[p]), n)
		}
		for o, k := range seen[p] {
			if k != 1 || o < 0 || o >= n {
				t.Errorf("partition %d offset %d: %d rows (want one row per offset in [0, %d))", p, o, k, n)
			}
		}
	}
	return ledger
}

// waitFor polls cond every 50ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
