package metrics

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestReadyzDuringOutage (F2, from an operator's run): during a storage
// outage /healthz answers 200 "ok" with the pipeline retrying, on purpose
// (a liveness probe must not restart a sink that recovers on its own), so
// plain HTTP probes could not see the outage. /readyz answers 200 only
// while every pipeline runs, 503 with the same document otherwise.
func TestReadyzDuringOutage(t *testing.T) {
	r := New()
	p := r.Pipeline("orders", "lake.orders", nil)
	var cfg connector.Config
	p.Hook(&cfg)
	h := r.Handler()
	probe := func(path string) (int, health) {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		var doc health
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, w.Body)
		}
		return w.Code, doc
	}
	want := func(what string, code int, status, state string) {
		t.Helper()
		got, doc := probe("/readyz")
		if got != code || doc.Status != status || len(doc.Pipelines) != 1 || doc.Pipelines[0].State != state {
			t.Errorf("/readyz %s: %d %+v; want %d, status %q, state %q", what, got, doc, code, status, state)
		}
	}
	want("while starting", http.StatusServiceUnavailable, ReadyNot, StateStarting)
	p.Started(mapping.Summary{})
	want("once running", http.StatusOK, ReadyOK, StateRunning)

	cfg.OnRetry(errors.New("object store unreachable: dial tcp 127.0.0.1:9000: connection refused"), time.Second)
	want("while retrying", http.StatusServiceUnavailable, ReadyNot, StateRetrying)
	if code, doc := probe("/readyz"); code == http.StatusServiceUnavailable && doc.Pipelines[0].Error == "" {
		t.Errorf("/readyz while retrying does not say the error: %+v", doc)
	}
	if code, doc := probe("/healthz"); code != http.StatusOK || doc.Status != "ok" {
		t.Errorf("/healthz while retrying: %d %+v; want 200 ok (liveness)", code, doc)
	}
	cfg.OnSession()
	want("running again", http.StatusOK, ReadyOK, StateRunning)

	cfg.OnGroupDropped(errors.New("UNKNOWN_MEMBER_ID"))
	want("dropped by the group", http.StatusServiceUnavailable, ReadyNot, StateRetrying)
	cfg.OnSession()
	want("assigned again", http.StatusOK, ReadyOK, StateRunning)

	r.Stopping()
	want("stopping", http.StatusServiceUnavailable, ReadyStopping, StateRunning)
	p.Stopped(nil)
	if code, doc := probe("/healthz"); code != http.StatusOK || doc.Pipelines[0].State != StateDone {
		t.Errorf("/healthz once stopped: %d %+v", code, doc)
	}

	failed := New()
	fp := failed.Pipeline("orders", "lake.orders", nil)
	fp.Stopped(errors.New("gave up after retrying for 5m0s without a commit: object store unreachable"))
	if ok, doc := failed.Ready(); ok || doc.Status != ReadyNot || doc.Pipelines[0].Error == "" {
		t.Errorf("Ready with a failed pipeline: %v %+v", ok, doc)
	}
}
