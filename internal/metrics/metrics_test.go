package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/internal/statuspage"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// A failed lag poll is logged to the registry's Logger, not to slog's
// default.
func TestWatchLagLogsToRegistryLogger(t *testing.T) {
	var def floetest.SyncBuffer
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

	var got floetest.SyncBuffer
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

// value returns the value of the gauge or counter name with the given
// labels, as g gathers it, and whether it exists.
func value(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
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
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
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
	// Partition 1, which the table never sank though it follows the topic
	// (added since, as the sink begins such a partition at 0): 30 records,
	// of which retention deleted 10 (shown as lag, not loss: found by
	// review).
	var more []*kgo.Record
	for i := range 30 {
		more = append(more, &kgo.Record{Topic: "orders", Partition: 1, Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, more, kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
		t.Fatal(err)
	}
	if err := st.Cluster.DeleteRecords("orders", 1, 10); err != nil {
		t.Fatal(err)
	}
	b, err := connector.Dial(t.Context(), st.Brokers, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	r := New()
	p := r.Pipeline("orders", "lake.orders", nil)
	// The table has [0, 20) of partition 0.
	p.Started(mapping.Ledger{Commits: []mapping.Commit{{SnapshotID: 1, CommittedAt: time.Now(), Ranges: []mapping.Range{
		{TopicPartition: mapping.TopicPartition{Topic: "orders", Partition: 0}, Interval: mapping.Interval{High: 20}, Records: 20}}}}}.Summarize())
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
		{"1", "floe_partition_lag", 20}, // [10, 30)
		{"1", "floe_partition_lost_offsets", 10},
		{"1", "floe_partition_next_offset", 0},
	} {
		got, ok := value(t, r.Gatherer(), c.name, map[string]string{"topic": "orders", "table": "lake.orders", "partition": c.partition})
		if !ok || got != c.want {
			t.Errorf("%s{partition=%s} = %v (present %v), want %v", c.name, c.partition, got, ok, c.want)
		}
	}
}

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServeExposesSinkMetrics runs a real sink with its callbacks hooked to
// a registry served on a loopback port, and checks what /metrics and
// /healthz say over HTTP against the sink's stats and what the registry
// gathers.
func TestServeExposesSinkMetrics(t *testing.T) {
	e := floetest.New(t)
	e.Topic("orders", 2, nil)
	e.Produce(append(floetest.Records("orders", 0, 120, "a"), floetest.Records("orders", 1, 80, "a")...))

	r := New()
	r.Logger = floetest.QuietLogger()
	p := r.Pipeline("orders", "lake.orders", nil)
	cfg := connector.Config{Topic: "orders", StopAtEnd: true, FlushRecords: 50}
	p.Hook(&cfg)
	stats, err := e.Sink(e.Broker(), e.Table("lake.orders"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Stopped(nil)
	if err := p.PollLag(e.Ctx, e.Broker()); err != nil {
		t.Fatal(err)
	}
	failed := r.Pipeline("payments", "lake.payments", nil) // a second pipeline, still starting

	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	addr, err := r.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("Serve listens on %s, want a loopback port", addr)
	}
	base := "http://" + addr

	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	pl := map[string]string{"topic": "orders", "table": "lake.orders"}
	part := func(p string) map[string]string {
		return map[string]string{"topic": "orders", "table": "lake.orders", "partition": p}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"floe_records_committed_total", pl, float64(stats.Records)},
		{"floe_commits_total", pl, float64(stats.Commits)},
		{"floe_records_consumed_total", pl, 200},
		{"floe_sink_up", pl, 0},
		{"floe_fenced_total", pl, 0},
		{"floe_partition_next_offset", part("0"), 120},
		{"floe_partition_next_offset", part("1"), 80},
		{"floe_partition_end_offset", part("0"), 120},
		{"floe_partition_lag", part("0"), 0},
		{"floe_partition_lag", part("1"), 0},
		{"floe_partition_lost_offsets", part("1"), 0},
		{"floe_partition_assigned", part("0"), 1}, // outside a group, every partition it sinks
		{"floe_partition_assigned", part("1"), 1},
	} {
		got, ok := value(t, r.Gatherer(), c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("gathered %s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
		// The exposition over HTTP says the same: labels sorted by name.
		keys := slices.Sorted(maps.Keys(c.labels))
		var ls []string
		for _, k := range keys {
			ls = append(ls, fmt.Sprintf("%s=%q", k, c.labels[k]))
		}
		line := fmt.Sprintf("%s{%s} %s", c.name, strings.Join(ls, ","), strconv.FormatFloat(c.want, 'g', -1, 64))
		if !slices.Contains(strings.Split(body, "\n"), line) {
			t.Errorf("/metrics has no line %q", line)
		}
	}
	if stats.Records != 200 || stats.Commits < 2 {
		t.Errorf("sink stats %+v: want 200 records in several commits (flushes of 50)", stats)
	}
	for _, want := range []string{"# TYPE floe_commit_duration_seconds histogram", "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}

	code, body = get(t, base+"/healthz")
	if code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) || !strings.Contains(body, `"state":"done"`) || !strings.Contains(body, `"state":"starting"`) {
		t.Errorf("/healthz with one pipeline done and one starting: %d %s", code, body)
	}
	failed.Stopped(errors.New("catalog unreachable"))
	code, body = get(t, base+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"status":"failed"`) || !strings.Contains(body, "catalog unreachable") {
		t.Errorf("/healthz with a failed pipeline: %d %s", code, body)
	}
	if got, _ := value(t, r.Gatherer(), "floe_sink_failures_total", map[string]string{"topic": "payments", "table": "lake.payments"}); got != 1 {
		t.Errorf("floe_sink_failures_total of the failed pipeline = %v, want 1", got)
	}

	// The status page and its document say the same as the metrics.
	code, body = get(t, base+"/")
	if code != http.StatusOK || !strings.Contains(body, "<title>floe status</title>") {
		t.Errorf("/: %d %.200s", code, body)
	}
	code, body = get(t, base+"/status.json")
	var page statuspage.Page
	if err := json.Unmarshal([]byte(body), &page); err != nil || code != http.StatusOK {
		t.Fatalf("/status.json: %d %v\n%s", code, err, body)
	}
	if page.Source != statuspage.SourceSink || len(page.Pipelines) != 2 {
		t.Fatalf("/status.json: %s", body)
	}
	orders, payments := page.Pipelines[0], page.Pipelines[1]
	if orders.State != StateDone || *orders.Commits != int64(stats.Commits) || *orders.Fenced != 0 || orders.LastCommit == nil ||
		orders.OffsetsAt == nil || len(orders.Partitions) != 2 {
		t.Errorf("status of orders: %+v", orders)
	}
	for i, want := range []int64{120, 80} {
		ps := orders.Partitions[i]
		if *ps.TableNext != want || *ps.EndOffset != want || *ps.Lag != 0 || ps.LastCommit == nil || *ps.DeadLetters != 0 {
			t.Errorf("status of orders/%d: %+v", i, ps)
		}
	}
	if payments.State != StateFailed || payments.Error != "catalog unreachable" || len(payments.Partitions) != 0 {
		t.Errorf("status of payments: %+v", payments)
	}
	if code, _ := get(t, base+"/nothing-here"); code != http.StatusNotFound {
		t.Errorf("/nothing-here: %d, want 404", code)
	}

	// Cancelling the context stops the server.
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("the metrics server still answers after its context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A typed sink reports the dead letters it committed per partition and the
// registry schemas it decoded records with.
func TestTypedSinkMetrics(t *testing.T) {
	e := floetest.New(t)
	e.Topic("shipments", 2, nil)
	v1 := `{"type":"record","name":"s","fields":[{"name":"a","type":"long"}]}`
	v2 := `{"type":"record","name":"s","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"],"default":null}]}`
	var ids []int
	for _, s := range []string{v1, v2} {
		id, err := localstack.RegisterSchema(e.Ctx, e.Stack.Registry, "shipments-value", sr.Schema{Schema: s})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	e.Produce([]*kgo.Record{
		{Topic: "shipments", Partition: 0, Value: localstack.WireFormat(ids[0], nil, []byte{0x02})},
		{Topic: "shipments", Partition: 0, Value: []byte("not in the wire format")},
		{Topic: "shipments", Partition: 1, Value: localstack.WireFormat(ids[1], nil, []byte{0x04, 0x00})},
		{Topic: "shipments", Partition: 1, Value: localstack.WireFormat(ids[0], nil, []byte{0x06})},
	})
	tbl, dlq := e.TypedTable("lake.shipments", mapping.Layout{Value: mapping.ValueRegistry})

	r := New()
	r.Logger = floetest.QuietLogger()
	p := r.Pipeline("shipments", "lake.shipments", nil)
	cfg := connector.Config{Topic: "shipments", StopAtEnd: true, DeadLetters: dlq, Registry: e.Registry()}
	p.Hook(&cfg)
	if _, err := e.Sink(e.Broker(), tbl, cfg); err != nil {
		t.Fatal(err)
	}
	pl := map[string]string{"topic": "shipments", "table": "lake.shipments"}
	part := func(p string) map[string]string {
		return map[string]string{"topic": "shipments", "table": "lake.shipments", "partition": p}
	}
	if got, _ := value(t, r.Gatherer(), "floe_schema_versions_seen_total", pl); got != 2 {
		t.Errorf("floe_schema_versions_seen_total = %v, want 2", got)
	}
	if got, _ := value(t, r.Gatherer(), "floe_dead_letters_committed_total", part("0")); got != 1 {
		t.Errorf("floe_dead_letters_committed_total of partition 0 = %v, want 1", got)
	}
	if _, ok := value(t, r.Gatherer(), "floe_dead_letters_committed_total", part("1")); ok {
		t.Errorf("partition 1 has no dead letters, but a series")
	}
}

// TestWatchLagAfterCommit (from a new-user run): the broker's offsets the
// status page shows are read again after a commit, so that they are not
// below the table's next offsets until the next --lag-interval (a live
// sink showed end offset 1500 beside a table at 1600).
func TestWatchLagAfterCommit(t *testing.T) {
	e := floetest.New(t)
	e.Topic("orders", 1, nil)
	e.Produce(floetest.Records("orders", 0, 20, "a"))
	r := New()
	r.Logger = floetest.QuietLogger()
	p := r.Pipeline("orders", "lake.orders", nil)
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	go p.WatchLag(ctx, e.Broker(), time.Hour)
	waitFor := func(what string, ok func(end, next int64) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			st := p.status()
			if len(st.Partitions) == 1 && st.Partitions[0].EndOffset != nil {
				next := int64(-1)
				if st.Partitions[0].TableNext != nil {
					next = *st.Partitions[0].TableNext
				}
				if ok(*st.Partitions[0].EndOffset, next) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %+v", what, st.Partitions)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("the first poll", func(end, _ int64) bool { return end == 20 })
	e.Produce(floetest.Records("orders", 0, 30, "b"))
	cfg := connector.Config{Topic: "orders", StopAtEnd: true}
	p.Hook(&cfg)
	if _, err := e.Sink(e.Broker(), e.Table("lake.orders"), cfg); err != nil {
		t.Fatal(err)
	}
	waitFor("after the commit", func(end, next int64) bool { return next == 50 && end == 50 })
}

// TestWatchLagIntervalUnderASecond (from a review): polls after commits
// are additional: with --lag-interval 100ms and a commit every 10 ms the
// interval's polls go on, where each commit held them back to one a
// second.
func TestWatchLagIntervalUnderASecond(t *testing.T) {
	e := floetest.New(t)
	e.Topic("orders", 1, nil)
	e.Produce(floetest.Records("orders", 0, 5, "a"))
	r := New()
	r.Logger = floetest.QuietLogger()
	p := r.Pipeline("orders", "lake.orders", nil)
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	e.Broker() // connect before timing
	go p.WatchLag(ctx, e.Broker(), 100*time.Millisecond)
	count := func(commits bool) int {
		polls := map[time.Time]bool{}
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if commits {
				select { // a commit, as Hook's OnCommit signals it
				case p.committedNow <- struct{}{}:
				default:
				}
			}
			p.mu.Lock()
			if !p.polled.IsZero() {
				polls[p.polled] = true
			}
			p.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
		return len(polls)
	}
	t.Logf("%d polls in 3s at --lag-interval 100ms without commits", count(false))
	polls := count(true)
	t.Logf("%d polls in 3s at --lag-interval 100ms with a commit every 10ms (commits in a busy sink)", polls)
	if polls < 8 { // about 30 expected; 3 or 4 when commits held the polls back
		t.Errorf("%d polls in 3s at --lag-interval 100ms: commits hold the interval's polls back to one a second", polls)
	}
}

// TestRunningAgainAfterRetry (from an operator's run): /healthz said
// "retrying" with the old error after the sink had started a new session,
// until a record came, for ever on a quiet topic. A session that starts
// sets it running again, without the error.
func TestRunningAgainAfterRetry(t *testing.T) {
	r := New()
	p := r.Pipeline("orders", "lake.orders", nil)
	var cfg connector.Config
	p.Hook(&cfg)
	cfg.OnRetry(errors.New("object store unreachable"), time.Second)
	if _, doc := r.Health(); doc.Pipelines[0].State != StateRetrying || doc.Pipelines[0].Error == "" {
		t.Fatalf("after a retry: %+v", doc.Pipelines[0])
	}
	cfg.OnSession()
	if _, doc := r.Health(); doc.Pipelines[0].State != StateRunning || doc.Pipelines[0].Error != "" {
		t.Fatalf("after the next session started: %+v", doc.Pipelines[0])
	}
}

// TestWatchLagSaysTableOutageOnce (from a new-user run): a live sink of
// two topics into one table logged "lag poll reads the table's ledger
// (the catalog and its object store) again" twice in the same
// millisecond: each pipeline's poller reads the table's ledger, and each
// said the outage and its end. The outage of one table's ledger is said
// once, and so is its end.
func TestWatchLagSaysTableOutageOnce(t *testing.T) {
	e := floetest.New(t)
	e.Topic("orders", 1, nil)
	e.Topic("returns", 1, nil)
	var got floetest.SyncBuffer
	r := New()
	r.Logger = slog.New(slog.NewTextHandler(&got, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var down atomic.Bool
	down.Store(true)
	ctx, cancel := context.WithCancel(e.Ctx)
	var polled [2]atomic.Int64
	done := make(chan struct{}, 2)
	for i, topic := range []string{"orders", "returns"} {
		p := r.Pipeline(topic, "lake.orders", nil)
		p.FollowTable(func(context.Context) (TableView, error) {
			if down.Load() {
				return TableView{}, errors.New("catalog unreachable")
			}
			polled[i].Add(1)
			return TableView{Ledger: &mapping.Summary{}}, nil
		})
		go func() {
			defer func() { done <- struct{}{} }()
			p.WatchLag(ctx, e.Broker(), 5*time.Millisecond)
		}()
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s; log:\n%s", what, got.String())
			}
		}
	}
	for _, topic := range []string{"orders", "returns"} {
		wait("three failed polls of "+topic, func() bool {
			n, _ := value(t, r.Gatherer(), "floe_lag_poll_errors_total", map[string]string{"topic": topic, "table": "lake.orders"})
			return n >= 3
		})
	}
	down.Store(false)
	wait("both pipelines polling again", func() bool { return polled[0].Load() >= 3 && polled[1].Load() >= 3 })
	cancel()
	<-done
	<-done
	log := got.String()
	if n, m := strings.Count(log, "lag poll cannot read the table's ledger"), strings.Count(log, "lag poll reads the table's ledger (the catalog and its object store) again"); n != 1 || m != 1 {
		t.Errorf("the outage said %d times and its end %d times, want once each:\n%s", n, m, log)
	}
}

// TestWatchLagWarnsOncePerOutage (from a new-user run): a catalog outage
// under idle sinks was seen nowhere: the lag poller's failed ledger reads
// counted under a help naming the broker only, logged at debug level, and
// /healthz said ok. The first failed poll of an outage warns, naming the
// ledger; the next ones do not; the end of the outage is said.
func TestWatchLagWarnsOncePerOutage(t *testing.T) {
	e := floetest.New(t)
	e.Topic("orders", 1, nil)
	var got floetest.SyncBuffer
	r := New()
	r.Logger = slog.New(slog.NewTextHandler(&got, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p := r.Pipeline("orders", "lake.orders", nil)
	var down atomic.Bool
	down.Store(true)
	p.FollowTable(func(context.Context) (TableView, error) {
		if down.Load() {
			return TableView{}, errors.New("catalog unreachable")
		}
		return TableView{Ledger: &mapping.Summary{}}, nil
	})
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.WatchLag(ctx, e.Broker(), 5*time.Millisecond)
	}()
	labels := map[string]string{"topic": "orders", "table": "lake.orders"}
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s; log:\n%s", what, got.String())
			}
		}
	}
	wait("three failed polls", func() bool { n, _ := value(t, r.Gatherer(), "floe_lag_poll_errors_total", labels); return n >= 3 })
	down.Store(false)
	wait("the end of the outage said", func() bool {
		return strings.Contains(got.String(), "lag poll reads the table's ledger (the catalog and its object store) again")
	})
	cancel()
	<-done
	log := got.String()
	if n := strings.Count(log, "level=WARN"); n != 1 || !strings.Contains(log, "lag poll cannot read the table's ledger (the catalog and its object store)") || !strings.Contains(log, "catalog unreachable") {
		t.Errorf("%d warnings, want one naming the ledger:\n%s", n, log)
	}
	var help string
	mfs, _ := r.Gatherer().Gather()
	for _, mf := range mfs {
		if mf.GetName() == "floe_lag_poll_errors_total" {
			help = mf.GetHelp()
		}
	}
	if !strings.Contains(help, "ledger") {
		t.Errorf("floe_lag_poll_errors_total's help %q does not say it counts failed ledger reads", help)
	}
}
