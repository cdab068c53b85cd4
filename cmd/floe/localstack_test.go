package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
)

// TestLocalstackUpSurvivesRestart runs the stack 'floe localstack up'
// starts (persistent broker, in-process S3, SQLite catalog with an s3://
// warehouse), sinks through its generated config file, stops it, starts it
// again on the same folder and ports, and proves that the topic, its
// records, the table and its files are all still there: the second sink
// resumes from the ledger and the table holds every offset exactly once.
func TestLocalstackUpSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	opts := localstack.UpOptions{Dir: dir, KafkaPort: freeTCPPort(t), S3Port: freeTCPPort(t)}
	l, err := localstack.Up(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	if err := localstack.CreateTopic(t.Context(), l.Brokers, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, l.Brokers, "orders", 2, 120, count)
	conf := filepath.Join(dir, "floe.yaml")
	mustFloe(t, "sink", "--config", conf, "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	checkTable(t, l.Catalog(), "lake.orders", "orders", count)
	l.Close()

	l, err = localstack.Up(t.Context(), opts)
	if err != nil {
		t.Fatalf("restart on the same folder: %v", err)
	}
	defer l.Close()
	produceRound(t, l.Brokers, "orders", 2, 60, count)
	out := mustFloe(t, "sink", "--config", conf, "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	if !strings.Contains(out, "60 rows") {
		t.Errorf("second sink should add exactly the 60 new records, got:\n%s", out)
	}
	checkTable(t, l.Catalog(), "lake.orders", "orders", count)

	// The data files are plain files of the local S3 bucket.
	var parquet int
	filepath.WalkDir(filepath.Join(dir, "s3"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			parquet++
		}
		return nil
	})
	if parquet == 0 {
		t.Error("no Parquet file under the local S3 folder")
	}

	// floe status through the same config file: no lag.
	js := mustFloe(t, "status", "--config", conf, "--table", "lake.orders", "--format", "json")
	var st lookup.TableStatus
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatalf("status json: %v\n%s", err, js)
	}
	if len(st.Partitions) != 2 || !strings.HasPrefix(st.MetadataLocation, "s3://warehouse/lake.db/orders/metadata/") {
		t.Fatalf("status: %+v", st)
	}
	for _, p := range st.Partitions {
		if p.Lag == nil || *p.Lag != 0 || p.TableNext == nil || *p.TableNext != count[p.Partition] || p.LastCommit == nil {
			t.Errorf("status of partition %d: %+v", p.Partition, p)
		}
	}
}

// TestLocalstackCreatesTopicsOnFirstUse: the broker of 'floe localstack up'
// creates a topic a client names for the first time, as a default Kafka
// broker does, so the documented first step (kcat -P on a new topic) works.
func TestLocalstackCreatesTopicsOnFirstUse(t *testing.T) {
	kcat := testenv.Tool(t, "kcat", "apt-get install kcat")
	dir := t.TempDir()
	l, err := localstack.Up(t.Context(), localstack.UpOptions{Dir: dir, KafkaPort: freeTCPPort(t), S3Port: freeTCPPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), kcat, "-b", l.Brokers[0], "-t", "fresh", "-P", "-K:")
	cmd.Stdin = strings.NewReader("k1:{\"amount\":3}\nk2:{\"amount\":4}\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P on a topic that does not exist: %v\n%s", err, out)
	}
	out := mustFloe(t, "sink", "--config", filepath.Join(dir, "floe.yaml"), "--topic", "fresh", "--table", "lake.fresh", "--stop-at-end")
	if !strings.Contains(out, "2 rows") {
		t.Fatalf("sink of the topic kcat created:\n%s", out)
	}
	checkTable(t, l.Catalog(), "lake.fresh", "fresh", map[int32]int64{0: 2})
}
