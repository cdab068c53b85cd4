package localstack

import (
	"context"
	"errors"
	"io"
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
