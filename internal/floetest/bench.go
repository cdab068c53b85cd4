package floetest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokerChildEnv makes a test binary whose TestMain calls BrokerChild run
// a kfake broker alone (StartBrokerProcess).
const BrokerChildEnv = "FLOE_TEST_BROKER_CHILD"

// StartBrokerProcess runs a kfake broker in a process of its own (this
// test binary, re-executed: its TestMain must call BrokerChild when
// BrokerChildEnv is set) and returns its address; it stops with the test.
// An in-process broker shares the test's cores and heap with the client it
// serves, which favours a plain consumer over a sink that uses both cores.
func StartBrokerProcess(t testing.TB) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), BrokerChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("broker process: %v", err)
	}
	return strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "brokers ")), ",")
}

// BrokerChild serves a kfake broker until its standard input closes, and
// returns the process's exit code.
func BrokerChild() int {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer c.Close()
	fmt.Printf("brokers %s\n", strings.Join(c.ListenAddrs(), ","))
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// BenchRecords is FLOE_BENCH_RECORDS, the number of records a benchmark
// sinks, 1,000,000 by default.
func BenchRecords(t testing.TB) int {
	s := os.Getenv("FLOE_BENCH_RECORDS")
	if s == "" {
		return 1_000_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("FLOE_BENCH_RECORDS=%q: want a positive count", s)
	}
	return n
}

// ProduceBench creates topic with 4 partitions and produces n records of
// about 200 bytes round-robin: a 14-byte key, a 160-byte value and one
// header, timestamps a millisecond apart. The throughput benchmarks sink
// these.
func (e *Env) ProduceBench(topic string, n int) {
	const partitions = 4
	e.Topic(topic, partitions, nil)
	value := make([]byte, 160)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	batch := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		batch = append(batch, &kgo.Record{Topic: topic, Partition: int32(i % partitions),
			Key:       fmt.Appendf(nil, "key-%08d", i),
			Value:     value,
			Headers:   []kgo.RecordHeader{{Key: "src", Value: []byte("bench")}},
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))})
		if len(batch) == cap(batch) || i == n-1 {
			e.Produce(batch)
			batch = batch[:0]
		}
	}
}
