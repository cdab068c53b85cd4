package localstack

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
