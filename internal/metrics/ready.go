package metrics

import (
	"encoding/json"
	"net/http"
)

// Readiness statuses of /readyz.
const (
	ReadyOK       = "ok"
	ReadyNot      = "not ready"
	ReadyStopping = "stopping"
)

// Ready reports whether every pipeline makes progress, for /readyz: each
// is running (a group member waiting for, or without, an assignment is
// running: it is the group's standby) or done, and the process was not
// asked to stop. Starting, retrying (a storage, catalog or broker outage,
// or a member the group dropped) and failed are not ready: /healthz says
// ok while retrying, so that a liveness probe does not restart a sink
// that recovers on its own, and plain HTTP probes could not see an
// outage. The document is /healthz's, with the readiness as its status.
func (r *Registry) Ready() (ok bool, doc health) {
	_, doc = r.Health()
	stopping := r.stopping.Load()
	ok = !stopping
	for _, ph := range doc.Pipelines {
		if ph.State != StateRunning && ph.State != StateDone {
			ok = false
		}
	}
	switch {
	case stopping:
		doc.Status = ReadyStopping
	case ok:
		doc.Status = ReadyOK
	default:
		doc.Status = ReadyNot
	}
	return ok, doc
}

// Stopping records that the process was asked to stop (a signal): /readyz
// answers 503 from then on while the sinks commit what they consumed.
func (r *Registry) Stopping() { r.stopping.Store(true) }

// serveReady answers /readyz: 200 while Ready, 503 otherwise.
func (r *Registry) serveReady(w http.ResponseWriter, _ *http.Request) {
	ok, doc := r.Ready()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(doc)
}
