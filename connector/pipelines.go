package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	floecat "github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Pipeline is one topic -> table sink of Pipelines.
type Pipeline struct {
	// Table is created, with its namespace, when missing.
	Table  table.Identifier
	Config Config
	// Layout is how a table Run creates holds records (the zero Layout:
	// raw); an existing table keeps its own, and a non-zero Layout that
	// differs from it is an error.
	Layout mapping.Layout
	// DeadLetters names the dead-letter table of a table whose records are
	// decoded (its layout is not raw), which the table then records
	// (snapshot.PropDeadLetterTable); nil means the one the table
	// records, or snapshot.DeadLetterName(Table). It is created when
	// missing.
	DeadLetters table.Identifier
	// NoDeadLetters runs without a dead-letter table: the first record
	// that cannot become a row stops the sink (Config.DeadLetters).
	NoDeadLetters bool
	// PartitionBy, when set, is the table's partition spec: a new table is
	// created with it, an existing one is evolved to it when its spec
	// differs (snapshot.OpenOptions.PartitionBy). Nil keeps an existing
	// table's spec.
	PartitionBy *mapping.PartitionBy
	// Mode is the mode of the table (snapshot.OpenOptions.Mode): a new
	// table gets it (empty: append), an existing one of another mode is
	// refused. Key is an upsert table's key, refused when an existing
	// table has another.
	Mode mapping.Mode
	Key  *mapping.UpsertKey
	// NewTableRefusal, when set, refuses the flags for a new table only:
	// an existing table judges them by its own mode, key and layout, and
	// refuses them naming the table's, or takes them. It is set with a Key
	// and no Mode (--id-columns without --mode: an existing upsert table
	// of that key takes it, one of another key or mode refuses it), and
	// with an envelope without value and key modes (askedLayout).
	NewTableRefusal error
	// Properties are set on a table Run creates (format-version); an
	// existing table of another format version is warned about.
	Properties map[string]string
	// OnStart, when set, is called with the open table once every pipeline
	// is checked and every table open, just before the pipeline's sink
	// runs (metrics read its ledger here).
	OnStart func(*snapshot.Table)
	// OnStop, when set, is called as the pipeline's sink returns, with its
	// stats and error (nil when it stopped cleanly, also when another
	// pipeline's failure stopped it). Calls of all pipelines are
	// serialized, so they may share a writer.
	OnStop func(tbl *snapshot.Table, stats Stats, err error)
}

// String names the pipeline in messages: TOPIC -> NAMESPACE.TABLE.
func (p Pipeline) String() string { return p.Config.Topic + " -> " + strings.Join(p.Table, ".") }

// Pipelines are sinks that run in one process: they share one broker
// connection and one catalog, and succeed or fail together.
type Pipelines []Pipeline

// Run checks every pipeline, opens their tables and runs their sinks
// concurrently until ctx is cancelled (each commits what it consumed and
// Run returns nil) or every bounded sink is done.
//
// Everything that can be checked is checked before anything is created:
// each Config, that each topic exists on the brokers and has the
// partitions Config.Partitions names, that each existing table can hold
// floe rows, and that each table's columns take its PartitionBy; only then
// are partition specs changed and missing tables and namespaces created. A
// mistake in one pipeline therefore leaves no empty table behind for any,
// nor a changed spec.
//
// When one sink fails, the others are stopped as if ctx were cancelled:
// each commits what it consumed, so nothing is lost or duplicated, and the
// failures are returned (joined, each naming its pipeline when there are
// several).
func (ps Pipelines) Run(ctx context.Context, broker *Broker, cat catalog.Catalog) error {
	return ps.RunWatching(ctx, broker, cat, nil)
}

// TopicWatch adds a pipeline for every topic whose name matches, among the
// topics on the brokers when the run starts and those created while it
// runs (floe sink --topic-regex).
type TopicWatch struct {
	// Match is matched against whole topic names; Pattern is the pattern
	// as its user wrote it (for messages; Match's text when empty).
	Match   *regexp.Regexp
	Pattern string
	// Pipeline returns the pipeline of a matching topic.
	Pipeline func(topic string) (Pipeline, error)
	// Every is how often the brokers' topics are listed; zero means
	// DefaultPartitionCheck, negative only once, at start (bounded runs,
	// which end when their sinks do).
	Every time.Duration
}

// RunWatching is Run with the pipelines of w's topics (nil: none) added:
// those on the brokers now before the run starts, those created later as
// the watch finds them, from their first offset (Config.NewTopic). A new
// topic's pipeline is checked and its table
// opened like the others'; a failure stops every pipeline, as any sink's
// does, but for a pipeline of w's whose topic is gone (deleted, or deleted
// and created again), which stops alone, logged at ERROR (a bounded run
// returns its error once the others are done). Topics that ps names
// already are left to ps.
func (ps Pipelines) RunWatching(ctx context.Context, broker *Broker, cat catalog.Catalog, w *TopicWatch) error {
	ps = slices.Clone(ps)
	named := len(ps) // the pipelines of ps; those after them, w's
	seen := &topicSet{m: map[string]bool{}}
	for _, p := range ps {
		seen.m[p.Config.Topic] = true
	}
	if w != nil {
		topics, err := broker.Topics(ctx)
		if err != nil {
			return err
		}
		added, err := w.match(topics, seen)
		if err != nil {
			return err
		}
		ps = append(ps, added...)
		switch {
		case len(ps) > 0:
		case w.Every < 0:
			// A bounded run with nothing to sink is a pattern that names
			// no topic, most likely a typo: say so rather than end in
			// silence.
			return &ConfigError{Setting: SettingTopicRegex, Value: w.pattern(),
				Want: "a pattern that matches at least one whole topic name (this one matches none); the brokers have " + listSome(topics, 10) + broker.hiddenTopics()}
		default:
			slog.Info("no topic matches the pattern yet; waiting for one to be created"+broker.hiddenTopics(), "pattern", w.pattern(), "check_every", w.every())
		}
	}
	if err := ps.Check(ctx, broker); err != nil {
		return err
	}
	sinks, tables, err := ps.prepare(ctx, broker, cat)
	if err != nil {
		return err
	}
	// made are the tables the run created (Stats.NewTable): a table two
	// pipelines write is created by one of them, and opened by the other.
	made := map[string]bool{}
	note := func(tables []*snapshot.Table) {
		for _, t := range tables {
			if t.Created() {
				made[t.Name()] = true
			}
		}
	}
	note(tables)

	// A failing pipeline stops the others.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		// gone are the errors of w's pipelines whose topic went away,
		// which stop them alone.
		gone []error
	)
	run := func(p Pipeline, tbl *snapshot.Table, sink *Sink, watched bool, name func(error) error) {
		wg.Go(func() {
			if p.OnStart != nil {
				p.OnStart(tbl)
			}
			stats, err := sink.Run(runCtx)
			mu.Lock()
			defer mu.Unlock()
			stats.NewTable = made[tbl.Name()]
			if p.OnStop != nil {
				p.OnStop(tbl, stats, err)
			}
			switch {
			case err == nil:
			case watched && topicGone(err) && runCtx.Err() == nil:
				// A pattern's topics come and go (temporary topics): one
				// deleted, or deleted and created again, stopped every
				// other topic's sink (found by review).
				slog.Error("the topic of a pipeline the pattern matches is gone (deleted, or deleted and created again): its pipeline stopped, and the other topics go on; to sink a new topic of that name from its start, drop its table (floe drop), or leave the topic out of the pattern",
					"pipeline", p.String(), "err", err)
				gone = append(gone, name(err))
				// Matched again when the brokers have it again (created
				// anew after its table was dropped).
				seen.forget(p.Config.Topic)
			case errors.Is(err, ErrUnknownTopic) && runCtx.Err() == nil:
				// The topic was there when the pipeline started (Check):
				// it was deleted under the sink. The error said "check
				// --topic", as for a misspelt name (from a new-user run).
				errs = append(errs, name(&TopicDeletedError{Topic: p.Config.Topic, Err: err}))
				cancel()
			default:
				errs = append(errs, name(err))
				cancel()
			}
		})
	}
	for i, p := range ps {
		run(p, tables[i], sinks[i], i >= named, func(err error) error { return ps.wrap(i, err) })
	}
	if w != nil && w.Every >= 0 {
		wg.Go(func() {
			err := w.watch(runCtx, broker, seen, func(p Pipeline) error {
				one := Pipelines{p}
				if err := one.Check(runCtx, broker); err != nil {
					return err
				}
				sinks, tables, err := one.prepare(runCtx, broker, cat)
				if err != nil {
					return err
				}
				mu.Lock()
				note(tables)
				mu.Unlock()
				run(p, tables[0], sinks[0], true, func(err error) error { return fmt.Errorf("pipeline %s: %w", p, err) })
				return nil
			})
			if err != nil && runCtx.Err() == nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	if w != nil && w.Every < 0 {
		// A bounded run says, once the others are done, which topics it
		// could not finish; a live one said so as it happened.
		errs = append(errs, gone...)
	}
	return errors.Join(errs...)
}

// topicGone reports whether err ends a sink because its topic is gone:
// deleted, or deleted and created again under its name.
func topicGone(err error) bool {
	_, recreated := errors.AsType[*snapshot.TopicIDError](err)
	return recreated || errors.Is(err, ErrUnknownTopic)
}

// listSome names up to n of names, and how many more there are.
func listSome(names []string, n int) string {
	switch {
	case len(names) == 0:
		return "no topics"
	case len(names) > n:
		return fmt.Sprintf("topics %s and %d more", strings.Join(names[:n], ", "), len(names)-n)
	}
	return "topics " + strings.Join(names, ", ")
}

// pattern is the pattern as its user wrote it.
func (w *TopicWatch) pattern() string {
	if w.Pattern != "" {
		return w.Pattern
	}
	return w.Match.String()
}

// every is how often the watch lists the brokers' topics.
func (w *TopicWatch) every() time.Duration {
	if w.Every <= 0 {
		return DefaultPartitionCheck
	}
	return w.Every
}

// topicSet is the topics a watch has pipelines of, which it matches no
// more; a pipeline whose topic went away forgets its own.
type topicSet struct {
	mu sync.Mutex
	m  map[string]bool
}

func (s *topicSet) forget(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, topic)
}

// match returns the pipelines of topics that match and are not seen yet,
// and marks them seen.
func (w *TopicWatch) match(topics []string, seen *topicSet) ([]Pipeline, error) {
	seen.mu.Lock()
	defer seen.mu.Unlock()
	var out []Pipeline
	for _, t := range topics {
		if seen.m[t] || !w.Match.MatchString(t) {
			continue
		}
		p, err := w.Pipeline(t)
		if err != nil {
			return nil, fmt.Errorf("topic %s matches %s: %w", t, w.Match, err)
		}
		seen.m[t] = true
		out = append(out, p)
	}
	return out, nil
}

// watch lists the brokers' topics every w.Every until ctx ends, and starts
// the pipeline of each new match. A failed listing is tried again at the
// next tick: the running sinks do not depend on it.
func (w *TopicWatch) watch(ctx context.Context, broker *Broker, seen *topicSet, start func(Pipeline) error) error {
	t := time.NewTicker(w.every())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		topics, err := broker.Topics(ctx)
		if err != nil {
			if ctx.Err() == nil {
				slog.Warn("cannot list the brokers' topics; trying again at the next check", "err", err)
			}
			continue
		}
		added, err := w.match(topics, seen)
		if err != nil {
			return err
		}
		for _, p := range added {
			// Created since the watch began: --start does not apply.
			p.Config.NewTopic = true
			slog.Info("a new topic matches; sinking it", "pipeline", p.String())
			if err := start(p); err != nil {
				return fmt.Errorf("pipeline %s: %w", p, err)
			}
		}
	}
}

// prepare opens every pipeline's table (and dead-letter table) and makes
// its sink.
func (ps Pipelines) prepare(ctx context.Context, broker *Broker, cat catalog.Catalog) ([]*Sink, []*snapshot.Table, error) {
	tables, err := ps.open(ctx, cat)
	if err != nil {
		return nil, nil, err
	}
	sinks := make([]*Sink, len(ps))
	for i, p := range ps {
		cfg := p.Config
		if name := p.deadLetterTable(tables[i].Layout(), tables[i].Mode(), tables[i].RecordedDeadLetterTable()); name != nil {
			cfg.DeadLetters, err = snapshot.OpenDeadLetters(ctx, cat, name, tables[i].Name(), true)
			if errors.Is(err, floecat.ErrOwnedByAnotherCatalog) {
				// Members of one group started together race to create
				// it, as for the table (open).
				if err = sleepCtx(ctx, createRace); err == nil {
					cfg.DeadLetters, err = snapshot.OpenDeadLetters(ctx, cat, name, tables[i].Name(), true)
				}
			}
			if err != nil {
				return nil, nil, ps.wrap(i, err)
			}
			if err := tables[i].RecordDeadLetterTable(ctx, p.DeadLetters); err != nil {
				return nil, nil, ps.wrap(i, err)
			}
		}
		if sinks[i], err = NewSink(broker, tables[i], cfg); err != nil {
			return nil, nil, ps.wrap(i, err)
		}
	}
	return sinks, tables, nil
}

// deadLetterTable is the dead-letter table of the pipeline when its table
// has layout and mode and records the dead-letter table recorded
// (snapshot.PropDeadLetterTable), or nil when it has none (raw records of
// an append table cannot fail to become rows, and NoDeadLetters).
func (p Pipeline) deadLetterTable(layout mapping.Layout, mode mapping.Mode, recorded table.Identifier) table.Identifier {
	switch {
	case (layout == mapping.RawLayout && mode != mapping.ModeUpsert) || p.NoDeadLetters:
		return nil
	case p.DeadLetters != nil:
		return p.DeadLetters
	case recorded != nil:
		return recorded
	}
	return snapshot.DeadLetterName(p.Table)
}

// Check checks what Run checks before it opens anything: each Config,
// that each topic exists on the brokers with the partitions
// Config.Partitions names, that no member of a Config.Group sinks
// another table, and that the schema registry of a pipeline whose flags
// decode with it answers. A caller that creates things before Run (a
// catalog) calls it first.
func (ps Pipelines) Check(ctx context.Context, broker *Broker) error {
	for i, p := range ps {
		if err := p.Config.Validate(); err != nil {
			return ps.wrap(i, err)
		}
	}
	for i, p := range ps {
		t, err := broker.Topic(ctx, p.Config.Topic)
		if err == nil {
			err = checkPartitions(t, p.Config.Partitions)
		}
		if err == nil && p.Config.Group != "" {
			err = broker.checkGroupTable(ctx, p.Config.Group, strings.Join(p.Table, "."), "")
		}
		if err != nil {
			return ps.wrap(i, err)
		}
	}
	checked := map[*Registry]bool{}
	for i, p := range ps {
		// Only a pipeline that asks for the registry's decoding: one of
		// JSON or raw values was stopped by a registry it never uses,
		// set for others (FLOE_SCHEMA_REGISTRY in the local stack's
		// env.sh). An existing table that decodes with it, sunk without
		// --value or --key, meets it at its first record, where a
		// registry that does not answer is retried for Config.RetryFor.
		if r := p.Config.Registry; r != nil && p.Layout.UsesRegistry() && !checked[r] {
			checked[r] = true
			if err := r.Check(ctx); err != nil {
				return ps.wrap(i, err)
			}
		}
	}
	return nil
}

// PipelineError is an error of pipeline Index of the Pipelines, so that
// a caller can tell where that pipeline came from (a config file's line).
type PipelineError struct {
	Index    int
	Pipeline string // the pipeline as String names it
	// Named says that the message names the pipeline: there are several.
	Named bool
	Err   error
}

func (e *PipelineError) Error() string {
	if e.Named {
		return fmt.Sprintf("pipeline %s: %v", e.Pipeline, e.Err)
	}
	return e.Err.Error()
}

func (e *PipelineError) Unwrap() error { return e.Err }

// wrap ties err to pipeline i, naming it in the message when there are
// several.
func (ps Pipelines) wrap(i int, err error) error {
	return &PipelineError{Index: i, Pipeline: ps[i].String(), Named: len(ps) > 1, Err: err}
}

// open opens every pipeline's table: first those that exist, so that a
// table that cannot hold floe rows, or a partition spec a table cannot
// take, fails before any table is created or changed; then it evolves the
// existing tables' specs and creates the missing ones, with their
// namespaces.
func (ps Pipelines) open(ctx context.Context, cat catalog.Catalog) ([]*snapshot.Table, error) {
	tables := make([]*snapshot.Table, len(ps))
	var missing []int
	for i, p := range ps {
		layout, mode := p.Layout, p.Mode
		asked, err := p.askedLayout(ctx, cat)
		var t *snapshot.Table
		if err == nil {
			t, err = snapshot.Open(ctx, cat, p.Table, snapshot.OpenOptions{Write: true, Layout: asked, Mode: p.Mode, Key: p.Key,
				EnvelopeLeftOut: p.envelopeLeftOut()})
		}
		switch {
		case errors.Is(err, snapshot.ErrTableNotFound) && p.NewTableRefusal != nil:
			err = p.NewTableRefusal
		case errors.Is(err, snapshot.ErrTableNotFound):
			err = ps.create(i).CheckNew()
			if err == nil {
				err = CheckNewTable(strings.Join(p.Table, "."), p.Config, p.Layout, p.Properties)
			}
			missing = append(missing, i)
			if err == nil {
				err = layout.Normalize()
			}
		case err == nil && p.Mode == "" && p.Key != nil && t.Mode() != mapping.ModeUpsert:
			err = fmt.Errorf("table %s is of mode %s, and --id-columns %s keys an upsert table: a table keeps the mode it was created with; leave --id-columns out, or sink into a new table with --mode upsert",
				t.Name(), t.Mode(), strings.Join(p.Key.Columns, ","))
		case err == nil:
			layout, mode = t.Layout(), t.Mode()
			if v := p.Properties[table.PropertyFormatVersion]; v != "" && v != strconv.Itoa(t.Iceberg().Metadata().Version()) {
				// It applies to new tables: said, where it was ignored
				// without a word (found by review).
				slog.Warn("the table exists and keeps its Iceberg format version: --format-version applies to new tables only",
					"table", t.Name(), "format_version", t.Iceberg().Metadata().Version(), "asked", v)
			}
			if err = t.CheckDataTable(); err == nil {
				err = CheckTable(t, p.Config)
			}
			switch {
			case err != nil:
			case p.PartitionBy != nil:
				err = t.CheckPartitionBy(*p.PartitionBy)
			default:
				err = t.CheckSpecFillable()
			}
		}
		if err == nil {
			var recorded table.Identifier
			if t != nil {
				recorded = t.RecordedDeadLetterTable()
			}
			err = ps.checkDeadLetters(ctx, cat, i, layout, mode, recorded)
		}
		if err != nil {
			return nil, ps.wrap(i, err)
		}
		tables[i] = t
	}
	for i, t := range tables {
		if t != nil && ps[i].PartitionBy != nil {
			if err := t.SetPartitionBy(ctx, *ps[i].PartitionBy, ps[i].Config.Logger); err != nil {
				return nil, ps.wrap(i, err)
			}
		}
	}
	for _, i := range missing {
		t, err := snapshot.Open(ctx, cat, ps[i].Table, ps.create(i))
		if errors.Is(err, floecat.ErrOwnedByAnotherCatalog) {
			// Processes of one group started together race to create the
			// table: the loser can find the winner's metadata file before
			// the winner's catalog entry. Once the entry is in, the table
			// opens; a location that belongs to another catalog fails
			// again.
			if err = sleepCtx(ctx, createRace); err == nil {
				t, err = snapshot.Open(ctx, cat, ps[i].Table, ps.create(i))
			}
		}
		if err != nil {
			return nil, ps.wrap(i, err)
		}
		tables[i] = t
	}
	return tables, nil
}

// askedLayout is the layout p asks an existing table for. An envelope
// left out is the table's, which snapshot.Open takes
// (OpenOptions.EnvelopeLeftOut): a table floe wrote keeps its envelope,
// and docs/upsert.md lets a later run leave --envelope out, also when it
// gives --value and --key (which the table then judges as its own). An
// envelope given without the value and key modes (a new table refuses it:
// NewTableRefusal), or given as none (Config.EnvelopeGiven), is judged by
// the table first: a table floe wrote of another envelope refuses it
// naming its own, and one of the same envelope fills in the modes left out
// with its own. A table floe never wrote takes the flags' layout, so that
// it gets the new table's refusal.
func (p Pipeline) askedLayout(ctx context.Context, cat catalog.Catalog) (mapping.Layout, error) {
	l := p.Layout
	switch {
	case p.envelopeLeftOut():
		return l, nil
	case l.Envelope == mapping.EnvelopeNone && l.Value == "":
		// --envelope none alone, which snapshot.Open takes for no ask.
	case l.Envelope == mapping.EnvelopeNone || (l.Value != "" && l.Key != ""):
		return l, nil
	}
	t, err := snapshot.Open(ctx, cat, p.Table, snapshot.OpenOptions{})
	if err != nil {
		return l, err
	}
	if !t.FloeWrote() {
		return p.Layout, p.NewTableRefusal
	}
	has := t.Layout()
	if has.Envelope != l.Envelope {
		return l, &mapping.LayoutError{Table: t.Name(), Setting: "envelope", Value: l.Envelope.String(), Want: has.Envelope.String()}
	}
	if l.Value == "" {
		l.Value = has.Value
	}
	if l.Key == "" {
		l.Key = has.Key
	}
	return l, nil
}

// envelopeLeftOut reports whether p asks for no envelope (--envelope left
// out), so that an existing table's is taken.
func (p Pipeline) envelopeLeftOut() bool {
	return p.Layout.Envelope == mapping.EnvelopeNone && !p.Config.EnvelopeGiven
}

// checkDeadLetters checks, creating nothing, the dead-letter table of
// pipeline i, whose table has layout and mode and records the dead-letter
// table recorded: that it can be that table's
// (snapshot.CheckDeadLetters), and that it is neither the table of another
// pipeline nor the dead-letter table of another pipeline's table.
func (ps Pipelines) checkDeadLetters(ctx context.Context, cat catalog.Catalog, i int, layout mapping.Layout, mode mapping.Mode, recorded table.Identifier) error {
	dlq := ps[i].deadLetterTable(layout, mode, recorded)
	if dlq == nil {
		return nil
	}
	name, of := strings.Join(dlq, "."), strings.Join(ps[i].Table, ".")
	for j, p := range ps {
		switch other := strings.Join(p.Table, "."); {
		case j == i || other == of:
		case other == name:
			return fmt.Errorf("the dead-letter table of %s, %s, is the table of pipeline %s: a table's dead letters go to a table of their own (name another with --dlq-table)", of, name, p)
		case p.DeadLetters != nil && strings.Join(p.DeadLetters, ".") == name:
			return fmt.Errorf("--dlq-table %s would hold the dead letters of both %s and %s: each table needs a dead-letter table of its own (leave --dlq-table out for TABLE_dlq)", name, of, other)
		}
	}
	return snapshot.CheckDeadLetters(ctx, cat, dlq, of)
}

// createRace is how long a process that lost the race to create a table
// waits for the winner's catalog entry.
const createRace = 2 * time.Second

// create is how pipeline i opens its table when it is missing.
func (ps Pipelines) create(i int) snapshot.OpenOptions {
	p := ps[i]
	return snapshot.OpenOptions{Create: true, Layout: p.Layout, PartitionBy: p.PartitionBy, Logger: p.Config.Logger,
		Mode: p.Mode, Key: p.Key, Properties: p.Properties}
}
