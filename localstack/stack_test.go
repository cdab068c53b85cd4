package localstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/testenv"
)

// A cancelled context starts nothing: no folder is created and no port is
// opened.
func TestStartCancelledCreatesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	base := t.TempDir()

	dir := filepath.Join(base, "stack")
	if s, err := Start(ctx, Options{Dir: dir}); !errors.Is(err, context.Canceled) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Start with a cancelled context: err = %v, want context.Canceled", err)
	}
	s3dir := filepath.Join(base, "s3")
	if s, err := StartS3(ctx, s3dir, 0, Bucket); !errors.Is(err, context.Canceled) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("StartS3 with a cancelled context: err = %v, want context.Canceled", err)
	}
	journal := filepath.Join(base, "schema-registry.jsonl")
	if s, err := StartRegistry(ctx, 0, journal); !errors.Is(err, context.Canceled) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("StartRegistry with a cancelled context: err = %v, want context.Canceled", err)
	}
	updir := filepath.Join(base, "up")
	if l, err := Up(ctx, UpOptions{Dir: updir}); !errors.Is(err, context.Canceled) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("Up with a cancelled context: err = %v, want context.Canceled", err)
	}
	for _, d := range []string{dir, s3dir, journal, updir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s exists after a cancelled start (stat: %v)", d, err)
		}
	}
}

func TestStartAndStartS3(t *testing.T) {
	s, err := Start(t.Context(), Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Brokers) != 1 {
		t.Errorf("brokers = %v, want one", s.Brokers)
	}
	// The schema registry answers over HTTP.
	resp, err := http.Get(s.Registry + "/subjects")
	if err != nil {
		t.Fatalf("schema registry at %q: %v", s.Registry, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("GET %s/subjects: %s %s, want 200 []", s.Registry, resp.Status, body)
	}
	srv, err := StartS3(t.Context(), t.TempDir(), 0, Bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if srv.Endpoint == "" {
		t.Error("no endpoint")
	}
}

// A stack that cannot start (its port taken, as by a stack already
// running) removes the folder it created, and leaves one that was there.
func TestUpFailedLeavesNoFolder(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	fresh := filepath.Join(t.TempDir(), "floe-local2")
	existing := t.TempDir()
	for _, dir := range []string{fresh, existing} {
		l, err := Up(t.Context(), UpOptions{Dir: dir, S3Port: port})
		if err == nil {
			l.Close()
			t.Fatalf("Up in %s on a taken S3 port %d started", dir, port)
		}
		if !strings.Contains(err.Error(), "another local stack") {
			t.Errorf("Up on a taken port: %v", err)
		}
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed start (stat: %v)", fresh, err)
	}
	if _, err := os.Stat(existing); err != nil {
		t.Errorf("the existing folder %s is gone after a failed start: %v", existing, err)
	}
}

// TestS3AnswersAsS3: the local S3 lists nothing under a prefix no object
// has (gofakes3's file backend answered a delimited listing of a missing
// folder with NoSuchBucket, and floe maintain --remove-orphans failed on
// every table without data files), and an upload whose client went away
// mid-body leaves no partial object (every later listing of the bucket
// answered 500, for good). Both found by a new-user run.
func TestS3AnswersAsS3(t *testing.T) {
	srv, err := StartS3(t.Context(), t.TempDir(), 0, Bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	list := func(query string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.Endpoint + "/" + Bucket + "?list-type=2" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := list("&prefix=lake.db/t_dlq/data/&delimiter=/"); code != http.StatusOK {
		t.Errorf("listing a prefix no object has: %d %s", code, body)
	}
	put, err := http.NewRequest(http.MethodPut, srv.Endpoint+"/"+Bucket+"/lake.db/t/data/whole.parquet", strings.NewReader("whole"))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	// An upload that announces 100 bytes and sends 10.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.WriteString(conn, "PUT /"+Bucket+"/lake.db/t/data/cut.parquet HTTP/1.1\r\nHost: s3\r\nContent-Length: 100\r\n\r\n0123456789")
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	var code int
	var body string
	for range 50 {
		if code, body = list("&prefix=lake.db/t/data/"); code == http.StatusOK && !strings.Contains(body, "cut.parquet") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code != http.StatusOK || !strings.Contains(body, "whole.parquet") || strings.Contains(body, "cut.parquet") {
		t.Fatalf("listing after a cut upload: %d %s", code, body)
	}
}

// TestUpHoldsItsFolder: a second stack on the folder of a running one is
// refused before it touches anything (it started, and rewrote env.sh and
// floe.yaml to point at itself; from a new-user run); once the first
// stops, the folder is free again.
func TestUpHoldsItsFolder(t *testing.T) {
	dir := t.TempDir()
	opts := func() UpOptions {
		return UpOptions{Dir: dir, KafkaPort: freePort(t), S3Port: freePort(t), RegistryPort: freePort(t)}
	}
	first, err := Up(t.Context(), opts())
	if err != nil {
		t.Fatal(err)
	}
	second, err := Up(t.Context(), opts())
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second stack started on the folder of a running one")
	}
	if !strings.Contains(err.Error(), "another floe localstack up runs on folder") || !strings.Contains(err.Error(), "--dir") {
		t.Errorf("second stack: %v", err)
	}
	first.Close()
	again, err := Up(t.Context(), opts())
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	again.Close()
}

// freePort is testenv.FreePort, failing the test when there is none.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestUpRemembersItsPorts (from a new-user run): a stack started again on
// its folder without ports (floe localstack up --secure after a plain up
// on custom ports) fell back to the default ports, while the folder's
// env.sh and floe.yaml had pointed at the custom ones: it takes the ports
// it last used; a port given wins, and is remembered in turn.
func TestUpRemembersItsPorts(t *testing.T) {
	dir := t.TempDir()
	kafka, s3, registry := freePort(t), freePort(t), freePort(t)
	first, err := Up(t.Context(), UpOptions{Dir: dir, KafkaPort: kafka, S3Port: s3, RegistryPort: registry})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	again, err := Up(t.Context(), UpOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{again.Brokers[0], again.S3.Endpoint, again.Registry}
	again.Close()
	want := []string{fmt.Sprintf("127.0.0.1:%d", kafka), fmt.Sprintf("http://127.0.0.1:%d", s3), fmt.Sprintf("http://127.0.0.1:%d", registry)}
	if !slices.Equal(got, want) {
		t.Fatalf("started again without ports: %v, want %v", got, want)
	}
	other := freePort(t)
	third, err := Up(t.Context(), UpOptions{Dir: dir, KafkaPort: other})
	if err != nil {
		t.Fatal(err)
	}
	third.Close()
	if p := readPorts(dir); p.Kafka != other || p.S3 != s3 {
		t.Fatalf("recorded ports %+v, want kafka %d and s3 %d", p, other, s3)
	}
}

// TestUpRemembersNumPartitions (from a new-user run): a stack started
// again on its folder without --num-partitions made its topics of one
// partition again; it keeps the number it last used, as it keeps its
// ports and its topics.
func TestUpRemembersNumPartitions(t *testing.T) {
	dir := t.TempDir()
	newTopic := func(l *Local, name string) int32 {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(l.Brokers...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		if _, err := adm.CreateTopic(t.Context(), -1, -1, nil, name); err != nil {
			t.Fatal(err)
		}
		td, err := adm.ListTopics(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		return int32(len(td[name].Partitions))
	}
	first, err := Up(t.Context(), UpOptions{Dir: dir, KafkaPort: freePort(t), S3Port: freePort(t), RegistryPort: freePort(t), NumPartitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	n := newTopic(first, "a")
	first.Close()
	again, err := Up(t.Context(), UpOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if m := newTopic(again, "b"); n != 3 || m != 3 || again.NumPartitions != 3 {
		t.Fatalf("topics of %d and %d partitions, NumPartitions %d; want 3", n, m, again.NumPartitions)
	}
}
