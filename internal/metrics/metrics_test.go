package metrics

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// gauge returns the value of the gauge name with the given labels, as g
// gathers it, and whether it exists.
func gauge(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestPollLagExcludesLoss: offsets deleted by retention before the table
// got to them are lost, not lag (connector.Watermarks.Lag and Lost).
func TestPollLagExcludesLoss(t *testing.T) {
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	recs := localstack.DemoEvents("orders", 1, 100, time.Now().Add(-time.Hour), 1) // all in partition 0
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	if err := st.Cluster.DeleteRecords("orders", 0, 60); err != nil {
		t.Fatal(err)
	}
	b, err := connector.Dial(t.Context(), st.Brokers, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	r := New()
	p := r.Pipeline("orders", "lake.orders", nil)
	p.Started(map[int32]int64{0: 20}) // the table has [0, 20) of partition 0
	if err := p.PollLag(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		partition, name string
		want            float64
	}{
		{"0", "floe_partition_lag", 40}, // [60, 100)
		{"0", "floe_partition_lost_offsets", 40},
		{"0", "floe_partition_next_offset", 20},
		{"0", "floe_partition_end_offset", 100},
		{"1", "floe_partition_lag", 0}, // empty, never sunk
		{"1", "floe_partition_lost_offsets", 0},
	} {
		got, ok := gauge(t, r.Gatherer(), c.name, map[string]string{"topic": "orders", "table": "lake.orders", "partition": c.partition})
		if !ok || got != c.want {
			t.Errorf("%s{partition=%s} = %v (present %v), want %v", c.name, c.partition, got, ok, c.want)
		}
	}
}
