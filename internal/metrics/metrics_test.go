package metrics

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
)

// syncBuffer is a bytes.Buffer safe for a logger in another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A failed lag poll is logged to the registry's Logger, not to slog's
// default.
func TestWatchLagLogsToRegistryLogger(t *testing.T) {
	var def syncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prev)

	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := connector.Dial(t.Context(), st.Brokers, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.Close() // every poll fails

	var got syncBuffer
	r := New()
	r.Logger = slog.New(slog.NewTextHandler(&got, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := r.Pipeline("orders", "lake.orders", nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.WatchLag(ctx, b, 5*time.Millisecond)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(got.String(), "lag poll failed") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if !strings.Contains(got.String(), "lag poll failed") {
		s := got.String()
		t.Errorf("registry logger got %q, want the failed lag poll", s[:min(len(s), 300)])
	}
	if s := def.String(); s != "" {
		t.Errorf("slog's default logger got %q, want nothing", s[:min(len(s), 300)])
	}
}
