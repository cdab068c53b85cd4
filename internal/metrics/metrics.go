// Package metrics exposes a running sink to Prometheus, to health checks
// and to a person: counters and histograms fed by the connector's Config
// callbacks, gauges of each partition's lag polled from the broker, and an
// HTTP handler serving /metrics, /healthz, /readyz and the live status page
// (internal/statuspage) at / and /status.json.
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/statuspage"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Registry holds the metrics of every pipeline of one process.
type Registry struct {
	// Logger receives failed lag polls and a metrics server that stops
	// with an error; nil means slog.Default(). Set it before use.
	Logger *slog.Logger

	reg *prometheus.Registry

	recordsConsumed, bytesConsumed, offsetsConsumed *prometheus.CounterVec
	recordsCommitted, bytesCommitted, commits       *prometheus.CounterVec
	retries, fenced, failures, lagErrors            *prometheus.CounterVec
	sessionRetries                                  *prometheus.CounterVec
	commitSeconds, writeSeconds                     *prometheus.HistogramVec
	flushRecords, flushBytes                        *prometheus.HistogramVec
	lastCommit, up                                  *prometheus.GaugeVec
	lag, lost, next, end                            *prometheus.GaugeVec
	assigned                                        *prometheus.GaugeVec
	deadLettersCommitted                            *prometheus.CounterVec
	schemas                                         *prometheus.CounterVec

	mu        sync.Mutex
	pipelines []*Pipeline
	// down are the lag polls' outages said and not yet over (outage).
	down map[string]bool
	// stopping is set once the process was asked to stop (Stopping).
	stopping atomic.Bool
}

// New returns a registry with floe's metrics and the Go runtime and process
// collectors.
func New() *Registry {
	pl := []string{"topic", "table"}
	ppl := []string{"topic", "partition", "table"}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "floe", Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels []string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "floe", Name: name, Help: help}, labels)
	}
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "floe", Name: name, Help: help, Buckets: buckets}, pl)
	}
	r := &Registry{
		reg:              prometheus.NewRegistry(),
		recordsConsumed:  counter("records_consumed_total", "Records (rows, not transaction markers) read from Kafka.", pl),
		bytesConsumed:    counter("bytes_consumed_total", "Bytes of keys, values and headers read from Kafka.", pl),
		offsetsConsumed:  counter("offsets_consumed_total", "Offsets passed while consuming: records, transaction markers and aborted records.", pl),
		recordsCommitted: counter("records_committed_total", "Rows committed to the table.", pl),
		bytesCommitted:   counter("bytes_committed_total", "Bytes of Parquet data files committed to the table.", pl),
		commits:          counter("commits_total", "Snapshots committed.", pl),
		retries:          counter("commit_retries_total", "Commit attempts beyond the first (lost races with other writers, transient catalog errors).", pl),
		fenced:           counter("fenced_total", "Times another writer advanced one of this sink's partitions, so it dropped its files and re-read the ledger.", pl),
		failures:         counter("sink_failures_total", "Times a pipeline stopped with an error.", pl),
		sessionRetries:   counter("transient_errors_total", "Times a transient storage, catalog or broker error ended a sink session and the sink started again from the ledger after a pause (see --retry-for), or the brokers started refusing its connections (a certificate, SASL credentials).", pl),
		lagErrors:        counter("lag_poll_errors_total", "Failed lag polls: reads of the table's ledger (the catalog and its object store) or of the broker's offsets for the lag gauges.", pl),
		commitSeconds:    hist("commit_duration_seconds", "Time to commit a snapshot's metadata, retries included.", prometheus.ExponentialBuckets(0.005, 2, 14)),
		writeSeconds:     hist("write_duration_seconds", "Time a flush takes to finish its Parquet data files once its records are consumed.", prometheus.ExponentialBuckets(0.005, 2, 14)),
		flushRecords:     hist("flush_records", "Rows per committed flush.", prometheus.ExponentialBuckets(1, 4, 12)),
		flushBytes:       hist("flush_bytes", "Parquet bytes per committed flush.", prometheus.ExponentialBuckets(1024, 4, 12)),
		lastCommit:       gauge("last_commit_timestamp_seconds", "Unix time of the last snapshot this process committed.", pl),
		up:               gauge("sink_up", "1 while the pipeline runs, 0 once it stopped.", pl),
		lag:              gauge("partition_lag", "Retained offsets, up to the broker's last stable offset, that the table does not have yet: last stable offset minus the later of the table's next offset and the log start.", ppl),
		lost:             gauge("partition_lost_offsets", "Offsets from the table's next offset up to the broker's log start: deleted by retention before they were sunk.", ppl),
		next:             gauge("partition_next_offset", "The table's next offset for the partition (its ledger's end).", ppl),
		end:              gauge("partition_end_offset", "The broker's last stable offset for the partition.", ppl),
		deadLettersCommitted: counter("dead_letters_committed_total",
			"Records of the partition committed to the dead-letter table (typed tables: they could not be decoded or did not fit the schema).", ppl),
		schemas: counter("schema_versions_seen_total",
			"Registry schemas (by ID) this process decoded records with, a new one counted at its first record.", pl),
		assigned: newAssigned(),
	}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		r.recordsConsumed, r.bytesConsumed, r.offsetsConsumed, r.recordsCommitted, r.bytesCommitted, r.commits,
		r.retries, r.fenced, r.failures, r.lagErrors, r.sessionRetries, r.commitSeconds, r.writeSeconds, r.flushRecords, r.flushBytes,
		r.lastCommit, r.up, r.lag, r.lost, r.next, r.end, r.deadLettersCommitted, r.schemas, r.assigned)
	return r
}

func (r *Registry) log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Gatherer returns the registry for tests and custom exposition.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Pipeline state values reported by /healthz.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	// StateRetrying: a transient error ended a session and the sink waits
	// to start again, or the consumer group dropped this member, which
	// waits to be assigned partitions again; /healthz stays 200 (the error
	// is shown).
	StateRetrying = "retrying"
	StateDone     = "done"
	StateFailed   = "failed"
)

// Pipeline is the metrics and health of one topic -> table sink.
type Pipeline struct {
	r            *Registry
	topic, table string
	labels       prometheus.Labels

	mu         sync.Mutex
	state      string
	err        string
	lastCommit time.Time
	next       map[int32]int64 // the table's next offset per partition
	partitions []int32         // nil: all
	// What the status page shows beside the gauges: this process's commits
	// and fencings, and per partition the last commit that advanced it,
	// its dead letters in the ledger, and the broker's offsets as last
	// polled (at polled).
	commits, fenced int64
	// warning says that the last commit with records had dead letters
	// only, and names the first; a commit with rows clears it.
	warning     string
	committed   map[int32]time.Time
	deadLetters map[int32]int64
	offsets     map[int32]connector.Watermarks
	polled      time.Time
	// mode and keyColumns are the table's (Table); changes, for an upsert
	// table, each partition's upserts, deletes and skipped records in the
	// ledger.
	mode       mapping.Mode
	keyColumns []string
	changes    map[int32]*lookup.PartitionStatus
	// committedNow wakes WatchLag after a commit: the table's next offsets
	// moved, and the broker's offsets polled before it may lie below them.
	committedNow chan struct{}
	// readTable, when set (FollowTable), reads the table anew before each lag
	// poll; refs are its branches but main and its tags as last read.
	readTable func(context.Context) (TableView, error)
	refs      []snapshot.Ref
	// group is the consumer group of a member (Config.Group), and owned
	// the partitions the group assigned to it now.
	group string
	owned map[int32]bool
	// unconfirmed, when set, is why the group's coordinator has not
	// confirmed this member's partitions (connector.Config.OnUnconfirmed).
	unconfirmed string
	// unreadable, when set, is why the last lag poll could not read the
	// table (FollowTable): an idle sink touches its storage only now and
	// then, and /readyz said ok through a storage outage under it.
	unreadable string
}

// Pipeline registers a pipeline. partitions restricts the lag gauges to the
// partitions it sinks; nil means all.
func (r *Registry) Pipeline(topic, table string, partitions []int32) *Pipeline {
	p := &Pipeline{r: r, topic: topic, table: table, labels: prometheus.Labels{"topic": topic, "table": table},
		state: StateStarting, next: map[int32]int64{}, partitions: partitions,
		committed: map[int32]time.Time{}, deadLetters: map[int32]int64{}, offsets: map[int32]connector.Watermarks{},
		changes: map[int32]*lookup.PartitionStatus{}, committedNow: make(chan struct{}, 1)}
	// Make every series exist from the start, so rates work from zero.
	for _, v := range []*prometheus.CounterVec{r.recordsConsumed, r.bytesConsumed, r.offsetsConsumed, r.recordsCommitted,
		r.bytesCommitted, r.commits, r.retries, r.fenced, r.failures, r.lagErrors, r.sessionRetries, r.schemas} {
		v.With(p.labels)
	}
	r.up.With(p.labels).Set(1)
	r.mu.Lock()
	r.pipelines = append(r.pipelines, p)
	r.mu.Unlock()
	return p
}

// Hook sets cfg's callbacks to feed the pipeline's metrics, keeping any
// callbacks already set.
func (p *Pipeline) Hook(cfg *connector.Config) {
	r := p.r
	onCommit, onConsumed, onRecords, onFenced, onRetry, onSchema := cfg.OnCommit, cfg.OnConsumed, cfg.OnRecords, cfg.OnFenced, cfg.OnRetry, cfg.OnSchema
	onOnlyDead := cfg.OnOnlyDeadLetters
	p.hookOwned(cfg)
	cfg.OnCommit = func(res snapshot.Result) {
		r.commits.With(p.labels).Inc()
		r.recordsCommitted.With(p.labels).Add(float64(res.Rows))
		r.bytesCommitted.With(p.labels).Add(float64(res.Bytes))
		r.retries.With(p.labels).Add(float64(max(0, res.Attempts-1)))
		r.commitSeconds.With(p.labels).Observe(res.CommitTime.Seconds())
		r.writeSeconds.With(p.labels).Observe(res.WriteTime.Seconds())
		r.flushRecords.With(p.labels).Observe(float64(res.Rows))
		r.flushBytes.With(p.labels).Observe(float64(res.Bytes))
		at := res.Commit.CommittedAt
		if at.IsZero() {
			at = time.Now()
		}
		r.lastCommit.With(p.labels).Set(float64(at.UnixMilli()) / 1000)
		p.mu.Lock()
		p.state, p.lastCommit, p.err = StateRunning, at, ""
		p.commits++
		if res.Rows > 0 {
			p.warning = ""
		}
		for _, rg := range res.Commit.Ranges {
			if rg.Topic != p.topic {
				continue
			}
			p.next[rg.Partition] = max(p.next[rg.Partition], rg.High)
			if rg.Len() > 0 {
				// A start does not advance the partition.
				p.committed[rg.Partition] = at
			}
			p.deadLetters[rg.Partition] += rg.DeadLetters
			p.countChanges(rg)
			if rg.DeadLetters > 0 {
				r.deadLettersCommitted.With(prometheus.Labels{"topic": p.topic, "partition": strconv.Itoa(int(rg.Partition)), "table": p.table}).Add(float64(rg.DeadLetters))
			}
		}
		p.mu.Unlock()
		p.pollSoon()
		if onCommit != nil {
			onCommit(res)
		}
	}
	cfg.OnConsumed = func(records int, bytes int64) {
		r.recordsConsumed.With(p.labels).Add(float64(records))
		r.bytesConsumed.With(p.labels).Add(float64(bytes))
		if onConsumed != nil {
			onConsumed(records, bytes)
		}
	}
	cfg.OnRecords = func(offsets int64) {
		r.offsetsConsumed.With(p.labels).Add(float64(offsets))
		p.setState(StateRunning)
		if onRecords != nil {
			onRecords(offsets)
		}
	}
	cfg.OnFenced = func(err error) {
		r.fenced.With(p.labels).Inc()
		p.mu.Lock()
		p.fenced++
		p.mu.Unlock()
		if onFenced != nil {
			onFenced(err)
		}
	}
	cfg.OnRetry = func(err error, wait time.Duration) {
		r.sessionRetries.With(p.labels).Inc()
		p.setState(StateRetrying)
		p.mu.Lock()
		p.err = err.Error()
		p.mu.Unlock()
		if onRetry != nil {
			onRetry(err, wait)
		}
	}
	onSession := cfg.OnSession
	cfg.OnSession = func() {
		// Running again: a status page said "retrying" with the old error
		// until a record came, for ever on a quiet topic (found by an
		// operator).
		p.mu.Lock()
		if p.state == StateRetrying {
			p.state, p.err = StateRunning, ""
		}
		p.mu.Unlock()
		if onSession != nil {
			onSession()
		}
	}
	onDropped := cfg.OnGroupDropped
	cfg.OnGroupDropped = func(err error) {
		// Retrying until the group assigns partitions again (OnSession):
		// a member the group keeps dropping (one of the other
		// --group-protocol) sinks nothing, and said "running" (found by an
		// operator).
		p.setState(StateRetrying)
		p.mu.Lock()
		p.err = err.Error()
		p.mu.Unlock()
		if onDropped != nil {
			onDropped(err)
		}
	}
	cfg.OnOnlyDeadLetters = func(dead int64, first string) {
		p.mu.Lock()
		p.warning = fmt.Sprintf("every record of the last commit is a dead letter (%d); first: %s; floe dead-letters --table %s lists them all", dead, first, p.table)
		p.mu.Unlock()
		if onOnlyDead != nil {
			onOnlyDead(dead, first)
		}
	}
	cfg.OnSchema = func(id int) {
		r.schemas.With(p.labels).Inc()
		if onSchema != nil {
			onSchema(id)
		}
	}
}

// Started records that the pipeline runs, and what the table's ledger says
// of its topic before the first commit: each partition's next offset, the
// last commit that advanced it and its dead letters.
func (p *Pipeline) Started(l mapping.Summary) {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.deadLetters)
	clear(p.changes)
	for tp, ps := range l.Parts {
		if tp.Topic == p.topic {
			p.next[tp.Partition] = max(p.next[tp.Partition], ps.High)
			if at := ps.LastCommitAt(); !at.IsZero() {
				p.committed[tp.Partition] = at
			}
			p.deadLetters[tp.Partition] += ps.DeadLetters
			p.countChanges(mapping.Range{TopicPartition: tp, Records: ps.Records, Deletes: ps.Deletes, Skipped: ps.Skipped})
		}
	}
	if p.state == StateStarting {
		p.state = StateRunning
	}
}

// Table records the mode of the pipeline's table and an upsert table's
// key columns, which the status page shows; call it before Started.
func (p *Pipeline) Table(mode mapping.Mode, key mapping.UpsertKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.keyColumns = mode, key.Columns
}

// countChanges adds an upsert table's range rg to its partition's counts.
// The caller holds p.mu.
func (p *Pipeline) countChanges(rg mapping.Range) {
	if p.mode != mapping.ModeUpsert {
		return
	}
	c := p.changes[rg.Partition]
	if c == nil {
		c = &lookup.PartitionStatus{}
		p.changes[rg.Partition] = c
	}
	c.CountChanges(rg)
}

func (p *Pipeline) setState(s string) {
	p.mu.Lock()
	if p.state != StateFailed {
		p.state = s
		if s == StateRunning {
			p.err = "" // the retry's, which is over
		}
	}
	p.mu.Unlock()
}

// Stopped records that the pipeline returned, with its error or nil.
func (p *Pipeline) Stopped(err error) {
	p.r.up.With(p.labels).Set(0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.state, p.err = StateFailed, err.Error()
		p.r.failures.With(p.labels).Inc()
		return
	}
	p.state = StateDone
}

// WatchLag polls the broker's last stable offsets every interval until ctx
// ends and sets the lag gauges against the table's next offsets; also
// after a commit (at most once a second), so that the broker's offsets
// shown are not older than the table's.
func (p *Pipeline) WatchLag(ctx context.Context, b *connector.Broker, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	// failing names what the polls cannot read, so that an outage is
	// warned about once, not at every poll: an idle sink commits nothing,
	// so a catalog outage is otherwise seen nowhere.
	failing := ""
	// The pipelines of one table read one ledger: its outage is said
	// once, and its end, not by each of them (a sink of two topics into
	// one table said both twice in the same millisecond).
	keyOf := func(what string) string {
		if what == ledgerFailing {
			return what + " " + p.table
		}
		return what + " " + p.topic + " " + p.table
	}
	defer func() {
		if failing != "" {
			p.r.outage(keyOf(failing), false)
		}
	}()
	for {
		last := time.Now()
		err := p.PollLag(ctx, b)
		ledgerDown := errors.As(err, new(*ledgerError))
		if ctx.Err() == nil {
			// A broker's error comes after the table was read.
			p.mu.Lock()
			p.unreadable = ""
			if ledgerDown {
				p.unreadable = "the lag poll cannot read the table: " + err.Error()
			}
			p.mu.Unlock()
		}
		switch {
		case err != nil && ctx.Err() == nil:
			p.r.lagErrors.With(p.labels).Inc()
			what := "the broker's offsets"
			if ledgerDown {
				what = ledgerFailing
			} else {
				// franz-go's timeout names no broker (a deploy walker's).
				err = b.NameHung(err)
			}
			if what != failing {
				if failing != "" {
					p.r.outage(keyOf(failing), false) // failing on something else now
				}
				if p.r.outage(keyOf(what), true) {
					p.r.log().Warn("lag poll cannot read "+what+"; the lag gauges and the status page keep the last poll's values until it can",
						"topic", p.topic, "table", p.table, "err", err)
				}
				failing = what
			} else {
				p.r.log().Debug("lag poll failed", "topic", p.topic, "err", err)
			}
		case err == nil && failing != "":
			if p.r.outage(keyOf(failing), false) {
				p.r.log().Info("lag poll reads "+failing+" again", "topic", p.topic, "table", p.table)
			}
			failing = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.committedNow:
			if wait := time.Second - time.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				case <-t.C: // an interval below a second polls as often as it says
				}
			}
		}
	}
}

// ledgerFailing is what a lag poll that cannot read its table's ledger
// fails on.
const ledgerFailing = "the table's ledger (the catalog and its object store)"

// outage records that the lag polls of key begin (down) or end failing,
// and reports whether that is news, to be said: not when another
// pipeline's poll of the same key said it already.
func (r *Registry) outage(key string, down bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down[key] == down {
		return false
	}
	if r.down == nil {
		r.down = map[string]bool{}
	}
	if down {
		r.down[key] = true
	} else {
		delete(r.down, key)
	}
	return true
}

// pollSoon wakes WatchLag for a poll within a second: the table's next
// offsets moved (a commit) or the partitions this member sinks did.
func (p *Pipeline) pollSoon() {
	select {
	case p.committedNow <- struct{}{}:
	default:
	}
}

// TableView is what a lag poll reads of the pipeline's table anew
// (FollowTable).
type TableView struct {
	// Ledger, when not nil, is the table's ledger, from which the poll
	// takes the next offsets (and dead letters) of the table's partitions:
	// a member of a consumer group commits only its own partitions, so
	// without it the gauges and the status page would show the others' as
	// of the member's start, lagging more and more. A sink that sinks
	// every partition of its topic knows them from its own commits.
	Ledger *mapping.Summary
	// Refs are the table's branches but main and its tags (lookup.Refs),
	// which the status page lists as floe status --serve's does.
	Refs []snapshot.Ref
}

// FollowTable makes every lag poll first read the table anew with read.
// Call it before WatchLag.
func (p *Pipeline) FollowTable(read func(context.Context) (TableView, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readTable = read
}

// beginsAt is where the sink begins a partition its table never sank, as
// connector's start policy says: offset 0 when the table follows the topic
// already (a partition added to it since: every record of it was written
// since, and what retention deleted of it is lost), else its log start
// (everything retained is lag). Called with p.mu held.
func (p *Pipeline) beginsAt(w connector.Watermarks) int64 {
	if len(p.next) > 0 {
		return 0
	}
	return w.LogStart
}

// ledgerError is a lag poll's failure to read the table (FollowTable): its
// ledger, or its metadata for its branches and tags; WatchLag tells it from
// the broker's.
type ledgerError struct {
	table string
	err   error
}

func (e *ledgerError) Error() string { return fmt.Sprintf("read the ledger of %s: %v", e.table, e.err) }
func (e *ledgerError) Unwrap() error { return e.err }

// PollLag reads the broker's offsets once and updates the lag gauges.
func (p *Pipeline) PollLag(ctx context.Context, b *connector.Broker) error {
	p.mu.Lock()
	read := p.readTable
	p.mu.Unlock()
	if read != nil {
		v, err := read(ctx)
		if err != nil {
			return &ledgerError{table: p.table, err: err}
		}
		if v.Ledger != nil {
			p.Started(*v.Ledger)
		}
		p.mu.Lock()
		p.refs = v.Refs
		p.mu.Unlock()
	}
	wm, err := b.Watermarks(ctx, p.topic)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for part, w := range wm {
		if p.partitions != nil && !slices.Contains(p.partitions, part) {
			continue
		}
		next, ok := p.next[part]
		if !ok {
			next = p.beginsAt(w)
		}
		p.offsets[part] = w
		l := prometheus.Labels{"topic": p.topic, "partition": strconv.Itoa(int(part)), "table": p.table}
		p.r.end.With(l).Set(float64(w.LastStable))
		p.r.next.With(l).Set(float64(next))
		p.r.lag.With(l).Set(float64(w.Lag(next)))
		p.r.lost.With(l).Set(float64(w.Lost(next)))
		p.setAssigned(part)
	}
	p.polled = time.Now()
	return nil
}

// status is the pipeline on the status page.
func (p *Pipeline) status() statuspage.Pipeline {
	p.mu.Lock()
	defer p.mu.Unlock()
	commits, fenced := p.commits, p.fenced
	state, err := p.shownState()
	sp := statuspage.Pipeline{Topic: p.topic, Table: p.table, State: state, Error: err, Warning: p.warning,
		Commits: &commits, Fenced: &fenced, Partitions: []lookup.PartitionStatus{}, Mode: string(p.mode), KeyColumns: p.keyColumns,
		Group: p.group, Assigned: p.ownedList(), Refs: p.refs}
	if !p.lastCommit.IsZero() {
		t := p.lastCommit
		sp.LastCommit = &t
	}
	if !p.polled.IsZero() {
		t := p.polled
		sp.OffsetsAt = &t
	}
	parts := map[int32]bool{}
	for part := range p.next {
		parts[part] = true
	}
	for part := range p.offsets {
		parts[part] = true
	}
	for _, part := range slices.Sorted(maps.Keys(parts)) {
		if p.partitions != nil && !slices.Contains(p.partitions, part) {
			continue
		}
		ps := lookup.PartitionStatus{Topic: p.topic, Partition: part}
		next, sunk := p.next[part]
		if sunk {
			ps.TableNext = &next
			dl := p.deadLetters[part]
			ps.DeadLetters = &dl
			sp.DeadLetters += dl
		}
		if t, ok := p.committed[part]; ok {
			ps.LastCommit = &t
		}
		if c := p.changes[part]; c != nil {
			u, d, s := *c.Upserts, *c.Deletes, *c.Skipped
			ps.Upserts, ps.Deletes, ps.Skipped = &u, &d, &s
		}
		if w, ok := p.offsets[part]; ok {
			if !sunk {
				next = p.beginsAt(w)
			}
			lag := w.Lag(next)
			ps.LogStart, ps.EndOffset, ps.HighWatermark, ps.Lag = &w.LogStart, &w.LastStable, &w.HighWatermark, &lag
			if lost := w.Lost(next); lost > 0 {
				ps.Lost = &lost
			}
		} else {
			ps.BrokersUnknown = true
		}
		sp.Partitions = append(sp.Partitions, ps)
	}
	return sp
}

// StatusPage is what the status page shows: every pipeline of the process.
func (r *Registry) StatusPage() statuspage.Page {
	r.mu.Lock()
	pipes := slices.Clone(r.pipelines)
	r.mu.Unlock()
	page := statuspage.Page{Source: statuspage.SourceSink, GeneratedAt: time.Now().UTC(), Pipelines: []statuspage.Pipeline{}}
	for _, p := range pipes {
		page.Pipelines = append(page.Pipelines, p.status())
	}
	return page
}

// health is the /healthz document.
type health struct {
	Status    string           `json:"status"`
	Pipelines []pipelineHealth `json:"pipelines"`
}

type pipelineHealth struct {
	Topic      string     `json:"topic"`
	Table      string     `json:"table"`
	State      string     `json:"state"`
	LastCommit *time.Time `json:"last_commit,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// Health reports whether every pipeline is starting, running or done
// without error, and each one's state.
func (r *Registry) Health() (ok bool, doc health) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok = true
	for _, p := range r.pipelines {
		p.mu.Lock()
		state, err := p.shownState()
		ph := pipelineHealth{Topic: p.topic, Table: p.table, State: state, Error: err}
		if !p.lastCommit.IsZero() {
			t := p.lastCommit
			ph.LastCommit = &t
		}
		p.mu.Unlock()
		if ph.State == StateFailed {
			ok = false
		}
		doc.Pipelines = append(doc.Pipelines, ph)
	}
	doc.Status = "ok"
	if !ok {
		doc.Status = "failed"
	}
	return ok, doc
}

// Handler serves /metrics (Prometheus text format), /healthz (200 with a
// JSON document while no pipeline failed, 503 otherwise), /readyz (the
// same document, 200 while Ready, 503 otherwise), and the status page at
// / with its document at /status.json.
func (r *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", statuspage.Handler(func(context.Context) (statuspage.Page, error) { return r.StatusPage(), nil }))
	mux.Handle("/metrics", promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		ok, doc := r.Health()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("/readyz", r.serveReady)
	return mux
}

// Serve listens on addr and serves Handler until ctx ends. It returns the
// address it listens on (useful with port 0) once listening.
func (r *Registry) Serve(ctx context.Context, addr string) (string, error) {
	a, err := statuspage.Serve(ctx, addr, r.Handler(), r.log())
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	return a, nil
}
