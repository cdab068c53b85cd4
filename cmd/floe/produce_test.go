package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// floeInput runs the CLI in-process with stdin as its standard input.
func floeInput(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runInput(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// consumeAll reads every record of topic's partitions with a plain
// franz-go consumer, a reader floe produce does not share, in partition
// and offset order.
func consumeAll(t *testing.T, brokers []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		fs := cl.PollFetches(t.Context())
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	slices.SortFunc(got, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return got
}

// TestProduceLinesAsKcat: floe produce writes a line of standard input a
// record, split at -K's delimiter into key and value, with -Z's nulls and
// -H's headers, keyed records of one key in one partition; its summary
// names the offsets each partition's records took; a sink of them audits
// complete. It exists so that the walkthroughs need no kcat.
func TestProduceLinesAsKcat(t *testing.T) {
	st, brokers, loc := partitionedStack(t, "orders", 3)
	var in strings.Builder
	for i := range 60 {
		fmt.Fprintf(&in, "customer-%d:{\"order\":%d}\n", i%7, i)
	}
	in.WriteString("gone:\n:{\"order\":60}") // a tombstone and a null key; no last newline
	code, out, errs := floeInput(t, in.String(), "produce", "--brokers", brokers, "-t", "orders", "-K:", "-Z", "-H", "source=cli", "-H", "n=1")
	if code != 0 {
		t.Fatalf("produce: exit %d\n%s%s", code, out, errs)
	}
	if !regexp.MustCompile(`^produced 62 records to orders: orders/0 \[0, \d+\)(, orders/\d \[0, \d+\))*\n$`).MatchString(out) {
		t.Errorf("produce's summary: %q", out)
	}
	recs := consumeAll(t, st.Brokers, "orders", 62)
	if len(recs) != 62 {
		t.Fatalf("consumed %d records, want 62", len(recs))
	}
	partOf := map[string]int32{}
	var tombstone, nullKey bool
	for _, r := range recs {
		if len(r.Headers) != 2 || r.Headers[0].Key != "source" || string(r.Headers[0].Value) != "cli" || r.Headers[1].Key != "n" {
			t.Fatalf("record %d@%d headers %v, want source=cli and n=1", r.Partition, r.Offset, r.Headers)
		}
		switch {
		case string(r.Key) == "gone":
			tombstone = r.Value == nil
		case r.Key == nil:
			nullKey = string(r.Value) == `{"order":60}`
		default:
			if p, ok := partOf[string(r.Key)]; ok && p != r.Partition {
				t.Errorf("key %s in partitions %d and %d", r.Key, p, r.Partition)
			}
			partOf[string(r.Key)] = r.Partition
		}
	}
	if !tombstone || !nullKey {
		t.Errorf("-Z: tombstone %v, null key %v; want both", tombstone, nullKey)
	}
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	if out := mustFloe(t, append([]string{"audit", "--table", "lake.orders", "--brokers", brokers, "--deep", "--verify-content"}, loc...)...); !strings.Contains(out, "verdict: COMPLETE") {
		t.Errorf("audit of what floe produce wrote:\n%s", out)
	}
}

// TestProduceRefusals: what floe produce refuses names the problem and
// the fix, and records read before a bad line are produced and said.
func TestProduceRefusals(t *testing.T) {
	st, brokers, _ := partitionedStack(t, "orders", 3)
	code, out, errs := floeInput(t, "a:1\nb:2\nno delimiter here\nc:3\n", "produce", "-b", brokers, "-t", "orders", "-K:", "-p", "1")
	if code != exitError || !strings.Contains(errs, `line 3 has no key delimiter ":"`) || out != "produced 2 records to orders: orders/1 [0, 2)\n" {
		t.Errorf("a line without the delimiter: exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	if recs := consumeAll(t, st.Brokers, "orders", 2); len(recs) != 2 || string(recs[1].Value) != "2" {
		t.Errorf("records before the bad line: %d, want a:1 and b:2", len(recs))
	}
	code, out, errs = floeInput(t, "c:3\nd\n", "produce", "-b", brokers, "-t", "orders", "-K:", "-p", "1", "--json")
	var rep struct {
		Records    int64
		Partitions []struct{ Partition, Low, High int64 }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitError || rep.Records != 1 || len(rep.Partitions) != 1 || rep.Partitions[0].Low != 2 || rep.Partitions[0].High != 3 {
		t.Errorf("--json of a run stopped by a bad line: exit %d, %+v (%v)\n%s%s", code, rep, err, out, errs)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"x\n", []string{"-t", "orders", "-p", "7"}, "topic orders has no partition 7: its partitions are 0-2: give one of those with --partition (-p)"},
		// The test stack's broker creates no topic on first use.
		{"x\n", []string{"-t", "ordres"}, `topic "ordres" does not exist on brokers`},
		{"x\n", []string{"-t", "ordres"}, "create it first"},
		{"x\n", []string{"-p", "0"}, "missing --topic NAME"},
		{"x\n", []string{"-t", "orders", "-K:", "-k", "a"}, "give one or the other"},
		{"x\n", []string{"-t", "orders", "-H", "=v"}, `--header "=v": want NAME=VALUE`},
	} {
		code, out, errs := floeInput(t, c.stdin, append([]string{"produce", "-b", brokers}, c.args...)...)
		if code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("produce %v: exit %d, want 2 saying %q\n%s%s", c.args, code, c.want, out, errs)
		}
	}
}

// TestProduceFilesOnLocalStack: on the broker of floe localstack up, which
// creates a topic on first use, each FILE is one record of its bytes (a
// value with a newline and a leading NUL, as a registry's framing has),
// with --key's key.
func TestProduceFilesOnLocalStack(t *testing.T) {
	l := upLocal(t, t.TempDir())
	dir := t.TempDir()
	values := [][]byte{{0, 0, 0, 0, 1, '\n', 2}, []byte("two\nlines")}
	var files []string
	for i, v := range values {
		f := filepath.Join(dir, fmt.Sprintf("r%d.bin", i))
		if err := os.WriteFile(f, v, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	code, out, errs := floeInput(t, "", append([]string{"produce", "-b", l.Brokers[0], "-t", "fresh", "-k", "k1"}, files...)...)
	if code != 0 || !strings.HasPrefix(out, "produced 2 records to fresh: fresh/") {
		t.Fatalf("produce files: exit %d\n%s%s", code, out, errs)
	}
	recs := consumeAll(t, l.Brokers, "fresh", 2)
	if len(recs) != 2 || !bytes.Equal(recs[0].Value, values[0]) || !bytes.Equal(recs[1].Value, values[1]) || string(recs[1].Key) != "k1" {
		t.Errorf("records of the files: %v", recs)
	}
}

// TestProduceSecuredStack: floe produce reaches a broker that takes TLS
// and SCRAM only, with the flags every floe command takes (here from the
// secured local stack's floe.yaml), where kcat cannot log in to it; a
// wrong password is refused naming it.
func TestProduceSecuredStack(t *testing.T) {
	dir := t.TempDir()
	l, _ := upOnFreePorts(t, localstack.UpOptions{Dir: dir, Secure: true})
	t.Cleanup(l.Close)
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "floe.yaml")
	code, out, errs := floeInput(t, "k1:{\"amount\":1}\nk2:{\"amount\":2}\n", "produce", "--config", config, "-t", "orders", "-K:")
	if code != 0 || !strings.HasPrefix(out, "produced 2 records to orders: ") {
		t.Fatalf("produce through TLS and SCRAM: exit %d\n%s%s", code, out, errs)
	}
	mustFloe(t, "sink", "--config", config, "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	checkTable(t, l.Catalog(), "lake.orders", "orders", map[int32]int64{0: 2})
	t.Setenv("FLOE_KAFKA_SASL_PASSWORD", "wrong")
	code, out, errs = floeInput(t, "k3:{}\n", "produce", "--config", config, "-t", "orders", "-K:")
	if code != exitError || !strings.Contains(errs, "wrong user or password") || out != "" {
		t.Errorf("produce with a wrong password: exit %d, want 2 naming it\n%s%s", code, out, errs)
	}
}

// buildFloe builds the floe binary into a temporary folder and returns
// its path: for scripts and docs blocks that run floe as a user does.
func buildFloe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "floe")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build floe: %v\n%s", err, out)
	}
	return bin
}

// TestUpsertDocExamplesRun: docs/upsert.md's first example (three keyed
// topics produced with floe produce, sunk as upsert tables) and its
// Debezium events (produced with -Z for the tombstone, sunk with the
// example's first command), run as written with bash and floe on PATH
// against a stack that creates topics on first use, as the local stack's
// broker does, with the settings its env.sh gives.
func TestUpsertDocExamplesRun(t *testing.T) {
	blocks := docBlocks(t, "docs/upsert.md", "")
	if len(blocks) < 3 || !strings.Contains(blocks[0], "floe produce -t accounts") || !strings.Contains(blocks[2], "floe produce -t dbserver1.inventory.customers") {
		t.Fatalf("docs/upsert.md's first and third blocks are not the examples this test runs:\n%s", strings.Join(blocks[:min(3, len(blocks))], "\n---\n"))
	}
	debezium, _, _ := strings.Cut(blocks[1], "# or,")
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(), Kfake: []kfake.Opt{kfake.AllowAutoTopicCreation()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	bin := buildFloe(t)
	cfg := st.Catalog()
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", blocks[0]+"\n"+blocks[2]+"\n"+debezium)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FLOE_BROKERS="+strings.Join(st.Brokers, ","), "FLOE_CATALOG="+cfg.Catalog, "FLOE_WAREHOUSE="+cfg.Warehouse, "FLOE_SCHEMA_REGISTRY="+st.Registry)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the examples: %v\n%s", err, out)
	}
	for _, want := range []string{"produced 1 record to accounts: accounts/", "produced 5 records to dbserver1.inventory.customers: ",
		"sink lake.accounts (new table): 1 upsert", "sink lake.customers (new table): 1 upsert", "sink lake.people (new table): 1 upsert",
		"sink lake.inventory_customers (new table): 3 upserts, 2 deletes (1 row written)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the examples' output lacks %q:\n%s", want, out)
		}
	}
	// Key 2 was created, deleted and tombstoned: ann's new email is the
	// one row.
	rows := mustFloe(t, "as-of", "--table", "lake.inventory_customers", "--time", "now", "--rows", "--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse)
	if !strings.Contains(rows, "ann@new.example") || strings.Contains(rows, "bob@") {
		t.Errorf("the Debezium table's rows:\n%s", rows)
	}
}

// TestProduceInterruptedWhileReading: an interrupt while floe produce waits
// for its next line (a terminal, or a pipe held open) ends it at once,
// after writing what it read, which its summary names; it waited for a
// line that would never come, every interrupt but the second swallowed.
func TestProduceInterruptedWhileReading(t *testing.T) {
	st, brokers, _ := partitionedStack(t, "orders", 1)
	cmd := exec.CommandContext(t.Context(), buildFloe(t), "produce", "-b", brokers, "-t", "orders", "-K:")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if _, err := io.WriteString(stdin, "a:1\nb:2\n"); err != nil {
		t.Fatal(err)
	}
	if recs := consumeAll(t, st.Brokers, "orders", 2); len(recs) != 2 {
		t.Fatalf("the two lines written: %d records", len(recs))
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("floe produce still waits for input 10 s after an interrupt\n%s%s", out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "produced 2 records to orders: orders/0 [0, 2)") || !strings.Contains(errs.String(), "interrupted before the end of the input (Ctrl-D ends typed input)") {
		t.Errorf("an interrupted produce's output:\n%s%s", out.String(), errs.String())
	}
}

// TestProduceLinesAsTyped: lines as a newcomer types or saves them are
// records as kcat makes them. An empty line is none (it made an empty
// record, or with -K was refused as a line without the delimiter); a
// Windows line ending is not part of the value (with -K: -Z, "a1:\r\n"
// upserted "\r" rather than deleting a1); -K '\t' splits at a tab, as
// kcat reads it (taken literally, every line was refused).
func TestProduceLinesAsTyped(t *testing.T) {
	st, brokers, _ := partitionedStack(t, "orders", 1)
	code, out, errs := floeInput(t, "k1:{\"a\":1}\r\n\r\n\nk2:{\"a\":2}\r\na1:\r\nk3\tv3\n\n", "produce", "-b", brokers, "-t", "orders", "-K:", "-Z")
	if code != exitError || !strings.Contains(errs, `line 6 has no key delimiter ":"`) || out != "produced 3 records to orders: orders/0 [0, 3)\n" {
		t.Fatalf("produce: exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	code, out, errs = floeInput(t, "k3\tv3\r\n\n", "produce", "-b", brokers, "-t", "orders", `-K\t`)
	if code != 0 || out != "produced 1 record to orders: orders/0 [3, 4)\n" {
		t.Fatalf("produce -K '\\t': exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	recs := consumeAll(t, st.Brokers, "orders", 4)
	want := []struct{ key, value string }{{"k1", `{"a":1}`}, {"k2", `{"a":2}`}, {"a1", ""}, {"k3", "v3"}}
	if len(recs) != len(want) {
		t.Fatalf("consumed %d records, want %d", len(recs), len(want))
	}
	for i, w := range want {
		if string(recs[i].Key) != w.key || string(recs[i].Value) != w.value {
			t.Errorf("record %d: key %q value %q, want %q %q", i, recs[i].Key, recs[i].Value, w.key, w.value)
		}
	}
	if recs[2].Value != nil {
		t.Errorf("a1:\\r\\n with -Z: value %q, want a tombstone", recs[2].Value)
	}
	for _, c := range []struct{ delim, want string }{{`\x`, `\x wants a hex byte`}, {`\n`, "holds a newline"}} {
		if code, _, errs := floeInput(t, "x\n", "produce", "-b", brokers, "-t", "orders", "-K", c.delim); code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("-K %s: exit %d, want 2 saying %q\n%s", c.delim, code, c.want, errs)
		}
	}
}

// TestProduceRefusalsNameTheFlag: a partition the topic lacks is refused
// naming floe produce's --partition (it said "check --partitions", floe
// sink's flag, and a topic of one partition had "partitions 0-0"); a FILE
// that cannot be read is refused before the brokers create the topic.
func TestProduceRefusalsNameTheFlag(t *testing.T) {
	l := upLocal(t, t.TempDir())
	b := l.Brokers[0]
	code, _, errs := floeInput(t, "x\n", "produce", "-b", b, "-t", "one", "-p", "3")
	if code != exitError || !strings.Contains(errs, "its partitions are 0: give one of those with --partition (-p), or leave --partition out") || strings.Contains(errs, "--partitions") {
		t.Errorf("-p 3 on a topic of one partition: exit %d\n%s", code, errs)
	}
	code, _, errs = floeInput(t, "", "produce", "-b", b, "-t", "never", filepath.Join(t.TempDir(), "missing.bin"))
	if code != exitError || !strings.Contains(errs, "record file: stat ") || !strings.Contains(errs, "no such file") {
		t.Errorf("a missing FILE: exit %d\n%s", code, errs)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("never") {
		t.Errorf("a produce refused for its missing FILE created topic never")
	}
}

// TestProduceDevNullIsNoTerminal: a script's </dev/null, a character
// device, is not a terminal: floe produce does not tell it to press
// Ctrl-D.
func TestProduceDevNullIsNoTerminal(t *testing.T) {
	_, brokers, _ := partitionedStack(t, "orders", 1)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	var out, errb bytes.Buffer
	code := runInput([]string{"produce", "-b", brokers, "-t", "orders"}, null, &out, &errb)
	if code != 0 || out.String() != "produced 0 records to orders\n" || strings.Contains(errb.String(), "Ctrl-D") {
		t.Errorf("produce </dev/null: exit %d\n%s%s", code, out.String(), errb.String())
	}
}

// TestProduceHeaderWithoutValue: -H NAME is a header without a value, as
// kcat's (it was refused as "want NAME=VALUE"); NAME= has an empty one.
func TestProduceHeaderWithoutValue(t *testing.T) {
	st, brokers, _ := partitionedStack(t, "orders", 1)
	if code, out, errs := floeInput(t, "x\n", "produce", "-b", brokers, "-t", "orders", "-H", "trace", "-H", "empty="); code != 0 {
		t.Fatalf("produce -H trace: exit %d\n%s%s", code, out, errs)
	}
	recs := consumeAll(t, st.Brokers, "orders", 1)
	if len(recs) != 1 || len(recs[0].Headers) != 2 || recs[0].Headers[0].Key != "trace" || recs[0].Headers[0].Value != nil ||
		recs[0].Headers[1].Key != "empty" || recs[0].Headers[1].Value == nil {
		t.Errorf("headers %+v, want trace without a value and empty with an empty one", recs[0].Headers)
	}
}

// TestProduceTooLarge: a line over the producer's limit is refused
// saying the limit and that the records before it were written (it said
// MESSAGE_TOO_LARGE and a size only); a 100 KiB line, past bufio's
// default 64 KiB, is a record.
func TestProduceTooLarge(t *testing.T) {
	_, brokers, _ := partitionedStack(t, "orders", 1)
	in := "k1:" + strings.Repeat("x", 100<<10) + "\nk2:" + strings.Repeat("y", 2<<20) + "\n"
	code, out, errs := floeInput(t, in, "produce", "-b", brokers, "-t", "orders", "-K:")
	if code != exitError || out != "produced 1 record to orders: orders/0 [0, 1)\n" || !strings.Contains(errs, "larger than floe produce sends (about 1 MB") {
		t.Errorf("a 2 MiB line after a 100 KiB one: exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
}

// TestProduceTakesKcatP: a kcat line with floe produce for kcat keeps
// kcat's -P (produce mode), which was an unknown flag.
func TestProduceTakesKcatP(t *testing.T) {
	_, brokers, _ := partitionedStack(t, "orders", 1)
	if code, out, errs := floeInput(t, "k1:v1\n", "produce", "-b", brokers, "-t", "orders", "-P", "-K:"); code != 0 || out != "produced 1 record to orders: orders/0 [0, 1)\n" {
		t.Errorf("produce -P: exit %d\n%s%s", code, out, errs)
	}
}
