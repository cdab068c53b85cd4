package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Options configure Run.
type Options struct {
	Topic       string
	From, Until Bound
	// Branch, when set, writes onto that branch of an existing table,
	// created empty when missing; Publish then makes it main's head.
	Branch  string
	Publish bool
	// PublishDifferent publishes the branch even when it differs from
	// main: it lacks offsets below its next offset that main holds, or an
	// upsert table's differs key by key (CompareWithMain), as a repair of
	// a main known to be wrong does; without it such a branch is not
	// published and Run returns the *DifferError.
	PublishDifferent bool
	// TagMain, with Publish, tags main's head before the publish so, in
	// the publish's commit: the history main leaves (what floe as-of no
	// longer reaches on main) stays readable by Iceberg engines and is kept
	// by snapshot expiry. A name the table already has is refused before
	// the replay reads anything.
	TagMain string
	// Mode is the mode of the target (empty: mapping.ModeAppend), and Key
	// the key of an upsert target (mapping.KeyFor; nil: the record key of
	// a new table's layout, or an existing table's key), as floe sink
	// takes them; a replay into a table of another mode or key is refused.
	Mode mapping.Mode
	Key  *mapping.UpsertKey
	// Properties are set on a new target table (format-version).
	Properties map[string]string
	// Fold is "" or mapping.FoldLatest, an alias of Mode
	// mapping.ModeUpsert with Key mapping.FoldLatestKey: per partition, the
	// latest record of each Kafka key (a KTable's state). It writes an
	// upsert table; a legacy state table (mapping.ModeFold) is read, never
	// written.
	Fold string
	// PartitionBy, when set, is the partition spec of the target: a new
	// table is created with it, this replay's own earlier target is
	// evolved to it (snapshot.OpenOptions.PartitionBy). A branch has its
	// table's spec; asking it for another is a *CheckError.
	PartitionBy *mapping.PartitionBy
	// Layout is how a new target table holds records (the zero Layout:
	// raw); a branch, or this replay's earlier target, keeps its table's
	// and a mode set here that differs is an error. Sink.Registry decodes
	// a registry layout.
	Layout mapping.Layout
	// DeadLetters names the dead-letter table of a target whose records
	// are decoded; nil means snapshot.DeadLetterName of a new table, and
	// snapshot.BranchDeadLetterName for a branch (so that an unpublished
	// branch's dead letters never mix with main's). NoDeadLetters stops
	// the replay at the first record that cannot become a row.
	DeadLetters   table.Identifier
	NoDeadLetters bool
	// Sink carries the flush policy, writer identity, logger and the
	// OnRecords/OnCommit callbacks; Run sets its topic and bounds.
	Sink connector.Config
	// OnStart, when set, is called once the target is open, before the
	// first record is read.
	OnStart func(Start)
}

// Start describes a replay about to run.
type Start struct {
	Plan Plan
	// Target names the table (and branch) written.
	Target string
	// Resumed is set when the target already held part of this replay.
	Resumed bool
	// FixedEnd is set when the default --until was taken from the end this
	// replay recorded when it started (PropUntil), not from the log's end
	// offsets now.
	FixedEnd bool
	// Remaining is the number of offsets left to read.
	Remaining int64
	// SourceTable is the table a --from snapshot:ID was found in.
	SourceTable string
	// Folds is set when the target keeps one row per key (an upsert or
	// state table): one replayed from later than the log start holds
	// only the keys written since.
	Folds bool
}

// Result describes a finished (or interrupted) replay.
type Result struct {
	Start
	Stats connector.Stats
	// Complete is set when every partition reached its end offset; an
	// interrupted replay is not complete, and running it again resumes it.
	Complete bool
	// Compared is set when the branch of an upsert table was compared with
	// main key by key before publishing (CompareWithMain): ComparedKeys is
	// the keys the branch holds, and Differ, with PublishDifferent, how
	// it differed from main (nil: the same).
	Compared     bool
	ComparedKeys int
	Differ       *DifferError
	// Published is set when Publish moved main: from its previous head to
	// the branch's.
	Published        bool
	MainFrom, MainTo int64
	// Tagged is the tag of main's previous head the publish made (TagMain),
	// or "" (no tag asked for, or main had no head).
	Tagged string
	// MainWasAhead are the partitions whose next offset main's previous
	// head had past the branch's (a sink kept writing main, or --until
	// ended the replay earlier), with that offset: the publish moved main
	// back to the branch's next offset, and the next sink session reads
	// those offsets again, while retention still holds them.
	MainWasAhead map[int32]int64
	// MainHeldBelow are the partitions of which main's previous head held
	// offsets below the first the published ledger holds (the replay
	// began later: --from, or retention had deleted them), as
	// [main's first, the replay's first): main's history, by which floe
	// as-of reached them, is on no branch now. Nil when the replay began
	// where main did.
	MainHeldBelow map[int32]mapping.Interval
	// PublishedBefore is set when the branch's head was published before
	// and main has moved on since (snapshot.PublishedBeforeError): it is
	// not published again, which would drop main's newer commits.
	PublishedBefore bool
	// MainMaintainedOnly is set with PublishedBefore when main's commits
	// since are maintenance only (compaction, expiry): its ledger reaches
	// the branch's next offsets and no further.
	MainMaintainedOnly bool
	// Head is the target's head snapshot when the run ended (0: none), and
	// Next each partition's next offset in its ledger then (absent: none).
	Head int64
	Next map[int32]int64
	// Rows is how many records of the topic became rows of the target, by
	// its ledger when the run ended: this run's and those of a run it
	// resumed.
	Rows int64
}

// deadLetterTable is the dead-letter table of a replay into ident, whose
// layout is layout and which records the dead-letter table recorded
// (snapshot.Table.RecordedDeadLetterTable), or nil when it has none (raw records cannot fail to
// become rows of an append table, nor of a --fold latest table, which
// skips records without a key; and NoDeadLetters).
func (o Options) deadLetterTable(ident table.Identifier, layout mapping.Layout, recorded table.Identifier) table.Identifier {
	mode, key := o.target()
	raw := layout == mapping.RawLayout
	switch {
	case o.NoDeadLetters, raw && mode == mapping.ModeAppend, raw && key != nil && key.Source == mapping.KeyFromPartitionKey:
		return nil
	case o.DeadLetters != nil:
		return o.DeadLetters
	case o.Branch != "":
		return snapshot.BranchDeadLetterName(ident, o.Branch)
	case recorded != nil:
		return recorded
	}
	return snapshot.DeadLetterName(ident)
}

// mainWasAhead returns the partitions of topic whose next offset in the
// ledger of main's head mainFrom (0: none) is past next, the published
// branch's, with that offset; nil when none is.
func mainWasAhead(ctx context.Context, t *snapshot.Table, mainFrom int64, topic string, next map[int32]int64) (map[int32]int64, error) {
	if mainFrom == 0 {
		return nil, nil
	}
	sum, err := t.Summary(ctx, mainFrom)
	if err != nil {
		return nil, fmt.Errorf("read the ledger of main's previous head %d of %s: %w", mainFrom, t.Name(), err)
	}
	var ahead map[int32]int64
	for tp, n := range sum.Next() {
		if tp.Topic == topic && n > next[tp.Partition] {
			if ahead == nil {
				ahead = map[int32]int64{}
			}
			ahead[tp.Partition] = n
		}
	}
	return ahead, nil
}

// mainHeldBelow returns the partitions of topic of which the ledger of
// main's previous head mainFrom (0: none) held offsets below the first
// that published, the ledger main has now, holds, as [main's first, the
// published ledger's first); nil when none. A partition the published
// ledger lacks is main's whole.
func mainHeldBelow(ctx context.Context, t *snapshot.Table, mainFrom int64, topic string, published mapping.Summary) (map[int32]mapping.Interval, error) {
	if mainFrom == 0 {
		return nil, nil
	}
	sum, err := t.Summary(ctx, mainFrom)
	if err != nil {
		return nil, fmt.Errorf("read the ledger of main's previous head %d of %s: %w", mainFrom, t.Name(), err)
	}
	// Where each ledger's own records begin, past the lost ranges it
	// begins with: a replay from earliest records as lost what retention
	// deleted since main sank it (review s67: "the replay began where
	// main's ledger did" of such a replay, whose history holds none of
	// main's rows there).
	wasHeld, err := t.HeldFirst(ctx, mainFrom, sum)
	if err != nil {
		return nil, fmt.Errorf("read the ledger of main's previous head %d of %s: %w", mainFrom, t.Name(), err)
	}
	nowHeld, err := t.HeldFirst(ctx, 0, published)
	if err != nil {
		return nil, fmt.Errorf("read the ledger of %s: %w", t.Name(), err)
	}
	var below map[int32]mapping.Interval
	for _, tp := range sum.Partitions() {
		was, _ := sum.Partition(tp)
		low := wasHeld[tp]
		if tp.Topic != topic || was.Next() <= low {
			continue
		}
		high := was.Next()
		if _, ok := published.Partition(tp); ok {
			high = min(high, nowHeld[tp])
		}
		if low < high {
			if below == nil {
				below = map[int32]mapping.Interval{}
			}
			below[tp.Partition] = mapping.Interval{Low: low, High: high}
		}
	}
	return below, nil
}

// checkMainTopic refuses a replay onto a branch of a table whose main
// ledger holds other topics and not opts.Topic: a published branch
// replaces main, so a branch rebuilds main's topic. The publish refused it
// only after the whole replay, saying main's offsets were missing from the
// branch (found by a new user).
func checkMainTopic(ctx context.Context, tbl *snapshot.Table, opts Options) error {
	if opts.Branch == "" {
		return nil
	}
	main := tbl.Iceberg().Metadata().SnapshotByName(table.MainBranch)
	if main == nil {
		return nil
	}
	sum, err := tbl.Summary(ctx, main.SnapshotID)
	if err != nil {
		return fmt.Errorf("read the ledger of %s's main branch: %w", tbl.Name(), err)
	}
	var topics []string
	for _, tp := range sum.Partitions() {
		if tp.Topic == opts.Topic {
			return nil
		}
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	return &CheckError{Settings: []Setting{SettingTable}, Err: fmt.Errorf("replay topic %s onto branch %s of %s, whose main branch holds topic %s: a published branch replaces main, so a branch rebuilds main's topics; replay %s into a new --table",
		opts.Topic, opts.Branch, tbl.Name(), strings.Join(topics, ", "), opts.Topic)}
}

// tableMode returns opts with the mode and key of the existing table ident
// when they name none (no Mode, no Fold), as floe sink keeps an existing
// table's: a replay onto a branch of an upsert table needs no --mode.
func tableMode(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts Options) (Options, error) {
	if opts.Mode != "" || opts.Fold != "" {
		return opts, nil
	}
	t, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{})
	if errors.Is(err, snapshot.ErrTableNotFound) {
		return opts, nil
	}
	if err != nil {
		return opts, err
	}
	if t.Mode() == mapping.ModeUpsert {
		k := t.UpsertKey()
		opts.Mode, opts.Key = mapping.ModeUpsert, &k
	}
	return opts, nil
}

// target returns the mode and key of the table the replay writes, with
// Fold resolved to the upsert table it stands for.
func (o Options) target() (mapping.Mode, *mapping.UpsertKey) {
	if o.Fold != "" {
		k := mapping.FoldLatestKey()
		return mapping.ModeUpsert, &k
	}
	if o.Mode == "" {
		return mapping.ModeAppend, nil
	}
	return o.Mode, o.Key
}

// Validate reports the first option of o that no replay can use, as an
// *OptionError, a *BoundError or the sink's *connector.ConfigError, without
// asking the brokers or the catalog. Run calls it first; a caller may call
// it sooner, before it connects to anything.
func (o Options) Validate() error {
	switch {
	case o.Topic == "":
		return &OptionError{Setting: SettingTopic, Want: "a topic name"}
	case o.Fold != "" && o.Fold != mapping.FoldLatest:
		return &OptionError{Setting: SettingFold, Value: o.Fold, Want: mapping.FoldLatest}
	case o.Fold != "" && (o.Mode != "" || o.Key != nil):
		return &OptionError{Setting: SettingFold, Value: o.Fold,
			Want: "no --mode and no key columns beside it: --fold latest is --mode upsert keyed by the Kafka key within its partition"}
	case o.Mode == mapping.ModeFold:
		return &OptionError{Setting: SettingMode, Value: string(o.Mode),
			Want: "append or upsert: floe no longer writes copy-on-write state tables (--fold latest writes an upsert table)"}
	case o.Mode != "" && o.Mode != mapping.ModeAppend && o.Mode != mapping.ModeUpsert:
		return &OptionError{Setting: SettingMode, Value: string(o.Mode), Want: "append or upsert"}
	case o.Mode != mapping.ModeUpsert && o.Key != nil:
		return &OptionError{Setting: SettingKey, Value: o.Key.String(), Needs: SettingMode, Want: "key columns are for an upsert table (--mode upsert)"}
	case o.PublishDifferent && !o.Publish:
		return &OptionError{Setting: SettingPublishDifferent, Needs: SettingPublish, Want: "it says what publishing does when the branch differs from main"}
	case o.TagMain != "" && !o.Publish:
		return &OptionError{Setting: SettingTagMain, Needs: SettingPublish, Want: "it names the tag a publish keeps main's previous head as"}
	case o.TagMain != "" && (o.TagMain == table.MainBranch || o.TagMain == o.Branch):
		return &OptionError{Setting: SettingTagMain, Value: o.TagMain, Want: "a name other than main and the branch"}
	case o.Publish && o.Branch == "":
		return &OptionError{Setting: SettingPublish, Needs: SettingBranch, Want: "a replay into a new table has nothing to publish"}
	case o.Branch == table.MainBranch:
		return &OptionError{Setting: SettingBranch, Value: o.Branch, Want: "a branch other than main (publish it to make it main's head)"}
	case o.Until.Snapshot != 0:
		return &BoundError{Setting: SettingUntil, Value: o.Until.Spec, Reason: "a snapshot is a start position; want end, a time or offsets"}
	}
	// The sink's settings (on data loss, start) are checked here too:
	// connector.NewSink would check them only once the target table or
	// branch exists.
	cfg := o.Sink
	cfg.Topic = o.Topic
	return cfg.Validate()
}

// Run rebuilds a table from the log with the same sink that sinks live
// data (connector.Sink, bounded by the plan): from opts.From to opts.Until
// into a new table ident (refusing a table that holds anything but this
// replay), or onto a branch of an existing one. The sink's settings, and
// every bound against the broker, are checked before anything is written.
// Interrupting it (cancelling ctx) commits what was read; running the same
// replay again resumes from the target's ledger. With Publish, the branch
// of an upsert table is first compared with main (CompareWithMain): when
// they differ nothing is published and Run returns the *DifferError,
// unless PublishDifferent.
//
// A replay is a finite job: the default --until (opts.Until is the edge)
// is the log's end offsets when the replay starts, recorded in the target
// (PropUntil). Running the same replay again continues to that end, never
// past it, so a complete replay run again reads and writes nothing even
// when the log has grown since. An explicit --until replaces the recorded
// end.
func Run(ctx context.Context, broker *connector.Broker, cat catalog.Catalog, ident table.Identifier, opts Options) (Result, error) {
	var res Result
	name := strings.Join(ident, ".")
	if err := opts.Validate(); err != nil {
		return res, err
	}
	from := opts.From
	if from.Snapshot != 0 {
		src, offsets, err := snapshotPositions(ctx, broker, cat, ident, opts.Topic, from.Snapshot)
		if err != nil {
			return res, err
		}
		from.Offsets, res.SourceTable = offsets, src
	}
	until := opts.Until
	if until.IsEdge() || !until.Time.IsZero() {
		// The default end, or an --until time, is the end a run of this
		// replay recorded, when there is one (PropUntil, PropUntilTime).
		fixed, ok, err := recordedUntil(ctx, cat, ident, opts)
		if err != nil {
			return res, err
		}
		if ok {
			until, res.FixedEnd = fixed, true
		}
	}
	prior, sameTime := priorLedger(ctx, cat, ident, opts)
	plan, err := newPlan(ctx, broker, opts.Topic, from, until, time.Now(), prior, sameTime)
	if err != nil {
		return res, err
	}
	if res.FixedEnd {
		// A partition added to the topic after the replay started has
		// nothing to replay: its end offset at start did not exist.
		for _, part := range plan.Partitions {
			if _, ok := until.Offsets[part]; !ok {
				plan.End[part] = plan.Start[part]
			}
		}
	}
	res.Plan = plan

	if r := opts.Sink.Registry; r != nil {
		// Before openTarget may create the target.
		if err := r.Check(ctx); err != nil {
			return res, err
		}
	}
	if opts, err = tableMode(ctx, cat, ident, opts); err != nil {
		return res, err
	}
	tbl, err := openTarget(ctx, cat, ident, opts)
	if err != nil {
		return res, err
	}
	if opts.Publish && !opts.PublishDifferent {
		// Before reading the log: the publish would be refused at the end.
		if err := otherTopics(ctx, tbl, opts.Topic); err != nil {
			return res, err
		}
	}
	res.Target = name
	res.Folds = tbl.Mode() == mapping.ModeUpsert || tbl.Mode() == mapping.ModeFold
	if opts.Branch != "" {
		res.Target = name + " branch " + opts.Branch
	}
	ledger, err := tbl.Summary(ctx, 0)
	if err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", res.Target, err)
	}
	if ledger.Commits > 0 {
		if err := plan.CheckResume(res.Target, ledger); err != nil {
			if ce, ok := errors.AsType[*CheckError](err); ok {
				ce.OnBranch = opts.Branch != ""
				againFrom(ce, tbl.Iceberg().Properties(), opts.Branch, from, plan, ledger)
			}
			return res, err
		}
		if err := plan.checkEnd(until, res.Target, ledger); err != nil {
			return res, err
		}
		res.Resumed = true
	}
	// Record the replay's end before reading anything, so that an
	// interrupted run continues to it.
	set := map[string]string{}
	if key, v := UntilKey(opts.Branch), formatUntil(plan.End); tbl.Iceberg().Properties()[key] != v {
		set[key] = v
	}
	untilAt := ""
	if !until.Time.IsZero() {
		untilAt = formatFromTime(until.Time)
	}
	if key := untilTimeKey(opts.Branch); tbl.Iceberg().Properties()[key] != untilAt && !(untilAt == "" && res.FixedEnd) {
		// Kept while the end it resolved to is (a default --until run
		// again continues to it); replaced by another time, dropped by
		// explicit offsets.
		set[key] = untilAt
	}
	if !from.Time.IsZero() && ledger.Commits == 0 {
		// The time this replay begins with, before its first commit.
		if key, v := FromTimeKey(opts.Branch), formatFromTime(from.Time); tbl.Iceberg().Properties()[key] != v {
			set[key] = v
		}
	}
	if len(set) > 0 {
		if err := tbl.SetProperties(ctx, set); err != nil {
			return res, err
		}
	}
	res.Remaining = plan.Remaining(ledger)
	if opts.OnStart != nil {
		opts.OnStart(res.Start)
	}

	cfg := plan.Config(opts.Sink)
	if dlq := opts.deadLetterTable(ident, tbl.Layout(), tbl.RecordedDeadLetterTable()); dlq != nil {
		if cfg.DeadLetters, err = snapshot.OpenDeadLetters(ctx, cat, dlq, tbl.Name(), true); err != nil {
			return res, err
		}
		// As floe sink does: a later run that names none writes there.
		if err := tbl.RecordDeadLetterTable(ctx, opts.DeadLetters); err != nil {
			return res, err
		}
	}
	sink, err := connector.NewSink(broker, tbl, cfg)
	if err != nil {
		return res, err
	}
	res.Stats, err = sink.Run(ctx)
	if err != nil {
		return res, err
	}
	if err := tbl.Refresh(context.WithoutCancel(ctx)); err != nil {
		return res, err
	}
	if ledger, err = tbl.Summary(context.WithoutCancel(ctx), 0); err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", res.Target, err)
	}
	res.Complete = plan.Complete(ledger)
	res.Next = map[int32]int64{}
	for tp, n := range ledger.Next() {
		if tp.Topic == plan.Topic {
			res.Next[tp.Partition] = n
			res.Rows += ledger.Parts[tp].Records
		}
	}
	if h := tbl.Head(); h != nil {
		res.Head = h.SnapshotID
	}
	if res.Complete && opts.Publish && ctx.Err() != nil {
		// Interrupted as the last commit landed: complete, not published.
		return res, fmt.Errorf("replay onto branch %s of %s is complete, but was interrupted before publishing it; run the same command again to publish: %w", opts.Branch, tbl.Name(), context.Cause(ctx))
	}
	if res.Complete && opts.Publish && ctx.Err() == nil {
		mode, _ := opts.target()
		// Checked against main's head as the swap asserts it, again
		// whenever main moved meanwhile (PublishChecked).
		check := func(ctx context.Context, mainID int64) error {
			res.Compared, res.ComparedKeys, res.Differ = false, 0, nil
			if mainID == 0 {
				return nil
			}
			err := sameTopic(ctx, tbl, opts.Topic, mainID, res.Head)
			switch {
			case err != nil:
			case mode == mapping.ModeUpsert:
				res.Compared = true
				res.ComparedKeys, err = compareWithMainAt(ctx, tbl, mainID)
			default:
				err = checkMainRowsKept(ctx, broker, tbl, opts.Topic, mainID, res.Head)
			}
			if differ, ok := errors.AsType[*DifferError](err); ok && opts.PublishDifferent {
				differ.Published = true
				res.Differ, err = differ, nil
			}
			return err
		}
		res.MainFrom, res.MainTo, err = tbl.PublishChecked(ctx, opts.TagMain, check)
		var before *snapshot.PublishedBeforeError
		if errors.As(err, &before) {
			res.PublishedBefore, res.MainFrom, res.MainTo = true, before.Main, before.Main
			main, err := tbl.Summary(context.WithoutCancel(ctx), before.Main)
			if err != nil {
				return res, fmt.Errorf("read the ledger of main's head %d of %s: %w", before.Main, tbl.Name(), err)
			}
			res.MainMaintainedOnly = maps.Equal(main.Next(), ledger.Next())
			return res, nil
		}
		if err != nil {
			return res, err
		}
		res.Published = true
		if opts.TagMain != "" && res.MainFrom != 0 && res.MainFrom != res.MainTo {
			res.Tagged = opts.TagMain
		}
		// The settings the branch was written with are main's now (from
		// a review: main's sink, restarted without the flags, undid the
		// repair).
		if err := connector.RecordDebezium(ctx, tbl, cfg); err != nil {
			return res, fmt.Errorf("published branch %s of %s: %w", tbl.Branch(), tbl.Name(), err)
		}
		if res.MainWasAhead, err = mainWasAhead(ctx, tbl, res.MainFrom, opts.Topic, res.Next); err != nil {
			return res, err
		}
		if res.MainHeldBelow, err = mainHeldBelow(ctx, tbl, res.MainFrom, opts.Topic, ledger); err != nil {
			return res, err
		}
		// The dead letters of main's earlier commits belong to no ledger
		// now: removed here, not by the next sink session or maintain.
		// Damage to a dead-letter table (a file its storage lost) does
		// not undo the publish: it is said, as a sink says it.
		err = tbl.ReconcileDeadLetterTables(ctx, cfg.Logger)
		if snapshot.IsDeadLetterDamage(err) {
			log := cfg.Logger
			if log == nil {
				log = slog.Default()
			}
			log.Warn("published; a dead-letter table does not match the ledger and reconciling cannot repair it (floe audit reports it)", "table", tbl.Name(), "err", err)
			err = nil
		}
		if err != nil {
			return res, fmt.Errorf("published branch %s of %s; reconcile its dead-letter tables (floe maintain does it again): %w", tbl.Branch(), tbl.Name(), err)
		}
	}
	return res, nil
}
