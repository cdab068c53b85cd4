package replay

import (
	"context"
	"errors"
	"fmt"
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

// PropOf marks a table created by a replay: its value is the topic
// replayed. Only such a table (or an empty one) accepts a replay without
// --branch, so a replay never writes into someone else's table, and running
// the same replay again resumes it.
const PropOf = "floe.replay.of"

// PropUntil records the end offsets a replay runs to, as an --until value
// (P=OFFSET,...), so that the replay is a finite job: written before its
// first record is read, and used by a later run of the same replay with the
// default --until, which therefore continues to the same end instead of the
// log's end at that run. A replay onto a branch keeps it under PropUntil +
// "." + BRANCH.
const PropUntil = "floe.replay.until"

// PropFromTime records the time a replay --from a time began with
// (RFC 3339, UTC), under PropFromTime + "." + BRANCH for a replay onto a
// branch: once retention deleted the records at that time, the time
// resolves to the log start, and only this tells the same replay run again
// from another one (newPlan keeps the start the target holds for the
// former only).
const PropFromTime = "floe.replay.from-time"

// PropUntilTime records the time an --until TIME replay resolved to its
// end offsets (PropUntil), as PropFromTime does for its start: the same
// replay run again keeps that end, where the time, once retention deleted
// the records after it, resolves to the log start and past records the
// log no longer holds. Under PropUntilTime + "." + BRANCH for a branch.
const PropUntilTime = "floe.replay.until-time"

// untilTimeKey is the table property holding the end time of a replay onto
// branch ("" for a replay into its own table).
func untilTimeKey(branch string) string {
	if branch == "" {
		return PropUntilTime
	}
	return PropUntilTime + "." + branch
}

// FromTimeKey is the table property holding the start time of a replay
// onto branch ("" for a replay into its own table): floe audit names the
// replay as where the partitions began.
func FromTimeKey(branch string) string {
	if branch == "" {
		return PropFromTime
	}
	return PropFromTime + "." + branch
}

// BranchProperties are the table properties a replay onto branch records
// of itself (its bounds): floe drop --branch removes them with a branch
// that was never published.
func BranchProperties(branch string) []string {
	return []string{UntilKey(branch), untilTimeKey(branch), FromTimeKey(branch)}
}

// formatFromTime writes a --from time as PropFromTime holds it.
func formatFromTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// UntilKey is the table property holding the end offsets of a replay
// onto branch ("" for a replay into its own table), as an --until value:
// floe audit tells the log past them from lag.
func UntilKey(branch string) string {
	if branch == "" {
		return PropUntil
	}
	return PropUntil + "." + branch
}

// formatUntil writes end offsets as an --until value.
func formatUntil(end map[int32]int64) string {
	parts := make([]string, 0, len(end))
	for _, p := range slices.Sorted(maps.Keys(end)) {
		parts = append(parts, fmt.Sprintf("%d=%d", p, end[p]))
	}
	return strings.Join(parts, ",")
}

// recordedUntil returns the end an earlier run of this replay recorded in
// its target (PropUntil) as an --until bound. ok is false when there is
// none to continue: no target yet (or not loadable: opening the target
// reports why), an empty ledger, a ledger of another topic, or no recorded
// end.
func recordedUntil(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts Options) (b Bound, ok bool, err error) {
	t, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Branch: opts.Branch})
	if err != nil {
		return Bound{}, false, nil
	}
	if !opts.Until.Time.IsZero() && t.Iceberg().Properties()[untilTimeKey(opts.Branch)] != formatFromTime(opts.Until.Time) {
		// Another --until time than the one the recorded end was
		// resolved from: it replaces it.
		return Bound{}, false, nil
	}
	v := t.Iceberg().Properties()[UntilKey(opts.Branch)]
	if v == "" {
		return Bound{}, false, nil
	}
	l, err := t.Summary(ctx, 0)
	if err != nil || l.Commits == 0 {
		return Bound{}, false, nil
	}
	for _, tp := range l.Partitions() {
		if tp.Topic != opts.Topic {
			return Bound{}, false, nil
		}
	}
	b, err = ParseBound(v, opts.Topic, false)
	if err != nil || b.Offsets == nil {
		return Bound{}, false, fmt.Errorf("table %s: property %s=%q is not the end offsets of a replay (P=OFFSET,...): %v",
			t.Name(), UntilKey(opts.Branch), v, err)
	}
	b.Spec, b.fixed = "end (fixed when this replay started: "+v+")", true
	return b, true, nil
}

// priorLedger returns the summary of each partition of opts.Topic in the
// ledger of the target an earlier run of this replay wrote, or nil when
// there is none (or it cannot be read: opening the target reports why).
// With a --from time, fromTime says whether the earlier run began with
// the same time (PropFromTime).
func priorLedger(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts Options) (prior map[int32]mapping.PartitionSummary, fromTime bool) {
	t, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Branch: opts.Branch})
	if err != nil {
		return nil, false
	}
	fromTime = !opts.From.Time.IsZero() && t.Iceberg().Properties()[FromTimeKey(opts.Branch)] == formatFromTime(opts.From.Time)
	l, err := t.Summary(ctx, 0)
	if err != nil || l.Commits == 0 {
		return nil, false
	}
	out := map[int32]mapping.PartitionSummary{}
	for _, tp := range l.Partitions() {
		if tp.Topic != opts.Topic {
			return nil, false
		}
		out[tp.Partition], _ = l.Partition(tp)
	}
	return out, fromTime
}

// snapshotPositions returns the next offset per partition of topic that
// snapshot id of a floe table had reached, and the table's name.
func snapshotPositions(ctx context.Context, broker *connector.Broker, cat catalog.Catalog, target table.Identifier, topic string, id int64) (string, map[int32]int64, error) {
	src, err := snapshot.FindSnapshot(ctx, cat, id, target)
	if err != nil {
		return "", nil, fmt.Errorf("start bound snapshot:%d: %w", id, err)
	}
	s, err := src.SummaryOf(ctx, id)
	if err != nil {
		return "", nil, fmt.Errorf("start bound snapshot:%d: ledger of %s: %w", id, src.Name(), err)
	}
	out := map[int32]int64{}
	for tp, next := range s.Next() {
		if tp.Topic == topic {
			out[tp.Partition] = next
		}
	}
	if len(out) == 0 {
		return "", nil, &BoundError{Setting: SettingFrom, Value: fmt.Sprintf("snapshot:%d", id),
			Reason: fmt.Sprintf("snapshot of %s has no positions of topic %s", src.Name(), topic)}
	}
	// The positions name records of the topic the ledger read: not of a
	// topic of that name created since.
	if recorded := s.TopicID(topic); recorded != "" {
		t, err := broker.Topic(ctx, topic)
		if err != nil {
			return "", nil, err
		}
		if t.ID != "" && t.ID != recorded {
			return "", nil, &BoundError{Setting: SettingFrom, Value: fmt.Sprintf("snapshot:%d", id),
				Reason: fmt.Sprintf("its positions are offsets of topic %s with ID %s, but the brokers' topic %s has ID %s: the topic was deleted and recreated (or this is another cluster), so they name other records; replay from earliest, a time or offsets",
					topic, recorded, topic, t.ID)}
		}
	}
	return src.Name(), out, nil
}

// openTarget opens the table a replay writes: a new table (created with the
// replay marker), an empty one, or this replay's own earlier target; or,
// with a branch, that branch of an existing table, created empty.
func openTarget(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts Options) (*snapshot.Table, error) {
	name := strings.Join(ident, ".")
	mode, key := opts.target()
	checkMode := func(t *snapshot.Table) error {
		if err := t.Writable(); err != nil {
			return &CheckError{Settings: []Setting{SettingTable}, Err: err}
		}
		if t.Mode() != mode {
			return &CheckError{Settings: []Setting{SettingMode, SettingTable}, Err: &mapping.ModeError{Table: name, Has: t.Mode(), Want: mode}}
		}
		// A key of the key's fields is named by its first record: before
		// that, its source alone tells it.
		if key != nil && !t.UpsertKey().Equal(*key) && (key.Source != mapping.KeyFromKeyFields || len(key.Columns) > 0 || t.UpsertKey().Source != key.Source) {
			return &CheckError{Settings: []Setting{SettingKey, SettingTable}, Err: &snapshot.KeyChangeError{Table: name, Has: t.UpsertKey(), Want: *key}}
		}
		return nil
	}
	if opts.Branch == "" {
		props := map[string]string{PropOf: opts.Topic}
		// An existing table is checked before its spec may change, and
		// the dead-letter table before the target is created.
		t, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Layout: opts.Layout})
		switch {
		case errors.Is(err, snapshot.ErrTableNotFound):
			layout := opts.Layout
			if err = layout.Normalize(); err == nil {
				err = checkDeadLetters(ctx, cat, ident, opts, layout, nil)
			}
			if err == nil && mode == mapping.ModeUpsert && key == nil {
				var k mapping.UpsertKey
				k, err = mapping.KeyFor(layout, nil)
				key = &k
			}
			if err == nil {
				create := maps.Clone(opts.Properties)
				if create == nil {
					create = map[string]string{}
				}
				maps.Copy(create, props)
				if err := connector.CheckNewTable(name, opts.Sink, layout, create); err != nil {
					return nil, err
				}
				t, err = snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Create: true, Layout: opts.Layout, Properties: create, PartitionBy: opts.PartitionBy, Logger: opts.Sink.Logger,
					Mode: mode, Key: key})
			}
		case err == nil:
			err = checkTarget(ctx, cat, t, ident, opts)
		}
		if err != nil {
			return nil, err
		}
		if err := checkMode(t); err != nil {
			return nil, err
		}
		if t.Head() != nil && t.Iceberg().Properties()[PropOf] != opts.Topic {
			return nil, &CheckError{Settings: []Setting{SettingTable, SettingBranch},
				Err: fmt.Errorf("table %s exists and is not empty: a replay writes a new table, or onto a branch of an existing one", name)}
		}
		if opts.PartitionBy != nil {
			if err := t.SetPartitionBy(ctx, *opts.PartitionBy, opts.Sink.Logger); err != nil {
				return nil, err
			}
		}
		if t.Iceberg().Properties()[PropOf] != opts.Topic {
			// An empty table someone created: mark it, so that running
			// this replay again resumes.
			if err := t.SetProperties(ctx, props); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
	t, err := snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Layout: opts.Layout})
	if err != nil {
		return nil, fmt.Errorf("a replay onto branch %s writes onto a branch of an existing table: %w", opts.Branch, err)
	}
	if err := checkTarget(ctx, cat, t, ident, opts); err != nil {
		return nil, err
	}
	if err := checkMode(t); err != nil {
		return nil, err
	}
	if err := checkBranchSpec(t, opts.PartitionBy); err != nil {
		return nil, err
	}
	if err := checkMainTopic(ctx, t, opts); err != nil {
		return nil, err
	}
	if err := checkBranchDeadLetterName(t, ident, opts); err != nil {
		return nil, err
	}
	// A tag name the table has is refused before the branch is made,
	// unless the branch was published before: this command run again,
	// whose publish may have made the tag. The publish checks again where
	// it would publish.
	if t.Iceberg().Properties()[snapshot.PropPublished+opts.Branch] == "" {
		if err := t.CheckNewRef(opts.TagMain); err != nil {
			return nil, err
		}
	}
	if !t.HasBranch(opts.Branch) {
		if err := t.CreateEmptyBranch(ctx, opts.Branch); err != nil {
			return nil, err
		}
	}
	return snapshot.Open(ctx, cat, ident, snapshot.OpenOptions{Branch: opts.Branch})
}

// checkTarget refuses an existing table t that a replay cannot write: one
// floe keeps for another table (a dead-letter table), or one whose
// dead-letter table for this replay cannot be its.
func checkTarget(ctx context.Context, cat catalog.Catalog, t *snapshot.Table, ident table.Identifier, opts Options) error {
	if err := t.CheckDataTable(); err != nil {
		return err
	}
	if err := connector.CheckTable(t, opts.Sink); err != nil {
		return err
	}
	return checkDeadLetters(ctx, cat, ident, opts, t.Layout(), t.RecordedDeadLetterTable())
}

// checkDeadLetters checks, creating nothing, the dead-letter table of a
// replay into ident whose layout is layout and which records the
// dead-letter table recorded (snapshot.CheckDeadLetters).
func checkDeadLetters(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts Options, layout mapping.Layout, recorded table.Identifier) error {
	dlq := opts.deadLetterTable(ident, layout, recorded)
	if dlq == nil {
		return nil
	}
	return snapshot.CheckDeadLetters(ctx, cat, dlq, strings.Join(ident, "."))
}

// checkBranchDeadLetterName refuses a replay onto a branch whose default
// dead-letter table (snapshot.BranchDeadLetterName, which makes the
// characters of a branch name other than letters, digits and underscores
// underscores) is another branch's too: a-b and a_b would share one, as
// would A and a in a catalog that lowercases names (Glue).
func checkBranchDeadLetterName(t *snapshot.Table, ident table.Identifier, opts Options) error {
	if opts.DeadLetters != nil || opts.deadLetterTable(ident, t.Layout(), t.RecordedDeadLetterTable()) == nil {
		return nil
	}
	if t.HasBranch(opts.Branch) {
		// This replay run again to continue (an older floe made both):
		// they share the table already, and each one's drop keeps it for
		// the other (review s61).
		return nil
	}
	own := strings.Join(snapshot.BranchDeadLetterName(ident, opts.Branch), ".")
	for _, ref := range t.Refs() {
		if ref.Kind != snapshot.RefBranch || ref.Name == opts.Branch || ref.Name == table.MainBranch {
			continue
		}
		// Case aside: Glue lowercases table names (A's is a's there).
		if strings.EqualFold(strings.Join(snapshot.BranchDeadLetterName(ident, ref.Name), "."), own) {
			return &CheckError{Settings: []Setting{SettingBranch, SettingDeadLetters}, OnBranch: true,
				Err: fmt.Errorf("branch %s of %s would write its dead letters to %s, the dead-letter table of its branch %s too (characters other than letters, digits and _ become _ in that name): their dead letters would mix in one table",
					opts.Branch, t.Name(), own, ref.Name)}
		}
	}
	return nil
}

// checkBranchSpec refuses a replay onto a branch of t that asks for
// another partition spec than t's: the spec is the table's, shared by its
// branches, so changing it for the replay would change it for the writers
// of main too.
func checkBranchSpec(t *snapshot.Table, want *mapping.PartitionBy) error {
	if want == nil {
		return nil
	}
	asked, err := t.PartitionBy()
	if err != nil {
		return err
	}
	if (asked != nil && asked.Equal(*want)) || t.PartitionSpec() == want.String() {
		return nil
	}
	return &CheckError{Settings: []Setting{SettingPartitionBy, SettingBranch},
		Err: fmt.Errorf("table %s is partitioned by %s, and its branches share its partition spec, so a replay onto a branch of it cannot ask for %s", t.Name(), t.PartitionSpec(), want)}
}
