// Package statuspage serves floe's live status page: one plain HTML
// document with inline CSS and a little inline JavaScript (no build step,
// nothing fetched but its own JSON) that shows, per pipeline, each
// partition's next offset, lag, loss, dead letters and last commit, and
// refreshes itself every two seconds from a JSON endpoint beside it.
//
// floe sink --metrics-addr serves it from the sink's own counters
// (internal/metrics); floe status --serve serves it for a table without a
// running sink, from the table's ledger and the broker (lookup.Status).
// Both fill the same Page.
package statuspage

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// Paths the handler serves.
const (
	PathPage = "/"
	PathJSON = "/status.json"
)

// Sources of a Page.
const (
	// SourceSink: a running floe sink's view of its pipelines.
	SourceSink = "sink"
	// SourceTable: a table's ledger and the broker, read by floe status
	// --serve; no sink runs in that process.
	SourceTable = "table"
)

// Page is the document of PathJSON, and what the page shows. Its field
// names are stable; fields that are not known are omitted.
type Page struct {
	Source      string     `json:"source"`
	GeneratedAt time.Time  `json:"generated_at"`
	Pipelines   []Pipeline `json:"pipelines"`
}

// Pipeline is one topic -> table sink (SourceSink) or one table
// (SourceTable).
type Pipeline struct {
	// Topic is the topic a sink reads; empty for a table, whose partitions
	// name their topics.
	Topic string `json:"topic,omitempty"`
	Table string `json:"table"`
	// State is the sink's state (starting, running, retrying, done,
	// failed, as /healthz says) and Error its last error; empty for a
	// table.
	State string `json:"state,omitempty"`
	Error string `json:"error,omitempty"`
	// Warning says what a running sink should not be doing although it
	// has no error: its last commit wrote dead letters and no row (every
	// record it read failed to decode), naming the first.
	Warning string `json:"warning,omitempty"`
	// Mode is the table's mode (append, upsert, or fold for a legacy state
	// table) and KeyColumns an upsert table's key columns; absent before a
	// sink opened the table.
	Mode       string   `json:"mode,omitempty"`
	KeyColumns []string `json:"key_columns,omitempty"`
	// MetadataLocation and SnapshotID are the table's current metadata
	// file and branch head (SourceTable).
	MetadataLocation string `json:"metadata_location,omitempty"`
	SnapshotID       *int64 `json:"snapshot_id,omitempty"`
	// Refs are the table's branches but main and its tags, as floe status
	// --table lists them (lookup.Refs): a replay's branch, and the tag of
	// main's history before a publish, which the commands that read
	// tables read with --branch.
	Refs []snapshot.Ref `json:"refs,omitempty"`
	// LastCommit is when a commit last advanced one of the partitions.
	LastCommit *time.Time `json:"last_commit,omitempty"`
	// Commits and Fenced count this sink process's commits and the times
	// another writer fenced it; absent for a table.
	Commits *int64 `json:"commits,omitempty"`
	Fenced  *int64 `json:"fenced,omitempty"`
	// Group is the consumer group a sink is a member of (--group), and
	// Assigned the partitions of the topic the group assigned to this
	// member now, sorted (absent: none); Partitions lists every partition,
	// the other members' too. Both absent outside a group.
	Group    string  `json:"group,omitempty"`
	Assigned []int32 `json:"assigned,omitempty"`
	// DeadLetters is the sum of the partitions' dead letters.
	DeadLetters int64 `json:"dead_letters"`
	// OffsetsAt is when the broker's offsets were read (a sink polls them
	// every --lag-interval); absent before the first read or without a
	// broker.
	OffsetsAt *time.Time `json:"offsets_at,omitempty"`
	// Partitions are sorted by topic and partition.
	Partitions []lookup.PartitionStatus `json:"partitions"`
}

// FromTable is the page's pipeline of a table's status.
func FromTable(st lookup.TableStatus, offsetsAt *time.Time) Pipeline {
	p := Pipeline{Table: st.Table, MetadataLocation: st.MetadataLocation, SnapshotID: st.SnapshotID, Refs: st.Refs,
		Partitions: st.Partitions, OffsetsAt: offsetsAt, Mode: string(st.Mode), KeyColumns: st.KeyColumns}
	var onlyDead []string
	for _, ps := range st.Partitions {
		if ps.LastCommit != nil && (p.LastCommit == nil || ps.LastCommit.After(*p.LastCommit)) {
			p.LastCommit = ps.LastCommit
		}
		if ps.DeadLetters != nil {
			p.DeadLetters += *ps.DeadLetters
		}
		if ps.OnlyDeadLetters {
			onlyDead = append(onlyDead, fmt.Sprintf("%s/%d", ps.Topic, ps.Partition))
		}
	}
	if len(onlyDead) > 0 {
		p.Warning = OnlyDeadLettersWarning(st.Table, onlyDead)
	}
	if p.Partitions == nil {
		p.Partitions = []lookup.PartitionStatus{}
	}
	return p
}

// OnlyDeadLettersWarning is a table's Warning (and floe status's note)
// when the last records of its partitions (TOPIC/PARTITION) were all dead
// letters.
func OnlyDeadLettersWarning(table string, partitions []string) string {
	return fmt.Sprintf("the last records committed of %s were all dead letters, none became a row: check that the table's value and key modes match the topic's records, unless a schema change made a field's type conflict with its column, a field is named like one of floe's columns, or they were Debezium truncate events, which are dead letters without --on-truncate delete-all (floe dead-letters --table %s lists them with their reasons)",
		strings.Join(partitions, ", "), table)
}

//go:embed status.html
var page []byte

// minInterval is the least time between two calls of a handler's source:
// every open page asks every two seconds, and a table's status reloads
// metadata and asks the broker, so viewers share one answer per second.
const minInterval = time.Second

// Handler serves the page at PathPage and the Page that source returns at
// PathJSON. source is called at most once per second, by one request at a
// time; other requests get its last answer. An error is answered with 503
// and {"error": "..."}, which the page shows.
func Handler(source func(context.Context) (Page, error)) http.Handler {
	c := &cached{source: source}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPage+"{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// The page runs its own inline script and style only.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("GET "+PathJSON, func(w http.ResponseWriter, r *http.Request) {
		p, err := c.get(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			writeJSON(w, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, p)
	})
	return mux
}

// writeJSON writes v as floe status --json does: <, > and & as they are.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

type cached struct {
	source func(context.Context) (Page, error)
	mu     sync.Mutex
	at     time.Time
	page   Page
	err    error
}

func (c *cached) get(ctx context.Context) (Page, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) >= minInterval {
		c.page, c.err = c.source(ctx)
		c.at = time.Now()
	}
	return c.page, c.err
}

// Serve listens on addr and serves h until ctx ends. It returns the
// address it listens on (useful with port 0) once listening; a server
// that stops with an error later is logged to logger.
func Serve(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "addr", l.Addr().String(), "err", err)
		}
	}()
	return l.Addr().String(), nil
}
