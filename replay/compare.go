package replay

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// maxNamedKeys is how many differing keys a *DifferError names; Keys
// counts them all.
const maxNamedKeys = 3

// KeyDifference is one key whose row differs between main and a branch.
type KeyDifference struct {
	// Key renders the key's columns: col=value,...
	Key string
	// Main and Branch say what each side holds for the key: the position
	// of the record its row came from (TOPIC/PARTITION@OFFSET), or "no row".
	Main, Branch string
}

func (d KeyDifference) String() string {
	if d.Main == d.Branch {
		return fmt.Sprintf("%s: %s on both with other values", d.Key, d.Main)
	}
	return fmt.Sprintf("%s: main %s, branch %s", d.Key, d.Main, d.Branch)
}

// DifferError reports that a branch an upsert replay rebuilt differs from
// main, key by key, so Run did not publish it. Nothing was changed on main.
type DifferError struct {
	Table, Branch string
	// Coverage, when set, says that the two ledgers cover different
	// offsets (the tables cannot be the same fold), and how.
	Coverage string
	// MainGone, when set, says that main could not be read because a file
	// it lists is gone from its storage: the branch, rebuilt from the log,
	// is the repair, and there is nothing to compare it with.
	MainGone *snapshot.DataFileGoneError
	// Keys is the number of keys that differ; First names the first of
	// them in key order.
	Keys  int
	First []KeyDifference
	// Published is set when the branch was published all the same
	// (Options.PublishDifferent).
	Published bool
}

func (e *DifferError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "branch %s of %s differs from main", e.Branch, e.Table)
	if e.Coverage != "" {
		fmt.Fprintf(&b, ": %s", e.Coverage)
	}
	if e.MainGone != nil {
		fmt.Fprintf(&b, ": main cannot be read to compare: %v", e.MainGone)
	}
	if e.Keys > 0 {
		names := make([]string, len(e.First))
		for i, d := range e.First {
			names[i] = d.String()
		}
		keys := fmt.Sprintf("%d keys differ", e.Keys)
		if e.Keys == 1 {
			keys = "1 key differs"
		}
		fmt.Fprintf(&b, "; %s, first %s", keys, strings.Join(names, "; "))
	}
	if e.Published {
		b.WriteString(": published all the same")
	} else {
		b.WriteString(": not published, main is unchanged")
	}
	return b.String()
}

// keyedRow is what a comparison keeps of one row: where its record was, and
// a digest of its values.
type keyedRow struct {
	pos    string
	digest [32]byte
}

// CompareWithMain compares the head of branch (a table open on a branch)
// with main's head key by key, rows read with deletes applied: the same
// keys, each held by the row of the same record with the same values. The
// key is the table's identifier fields. It returns nil when they are the
// same, and a *DifferError naming the first keys that differ otherwise;
// keys is the number of keys the branch holds. When main has no snapshot
// there is nothing to compare.
//
// Memory is one entry per key of main (its rendered key, a position and a
// 32-byte digest), then the differing keys.
func CompareWithMain(ctx context.Context, branch *snapshot.Table) (keys int, err error) {
	var mainID int64
	for name, ref := range branch.Iceberg().Metadata().Refs() {
		if name == table.MainBranch {
			mainID = ref.SnapshotID
		}
	}
	return compareWithMainAt(ctx, branch, mainID)
}

// compareWithMainAt is CompareWithMain with main's head mainID.
func compareWithMainAt(ctx context.Context, branch *snapshot.Table, mainID int64) (keys int, err error) {
	head := branch.Head()
	if mainID == 0 || head == nil {
		return 0, nil
	}
	diff := &DifferError{Table: branch.Name(), Branch: branch.Branch()}
	if diff.Coverage, err = coverageDifference(ctx, branch, mainID, head.SnapshotID); err != nil {
		return 0, err
	}
	keyNames, err := identifierColumns(branch)
	if errors.Is(err, errNoKeyColumns) && noRows(branch, mainID) && noRows(branch, head.SnapshotID) {
		// A table keyed by its key's fields names its key columns with
		// its first rows: without any on either side, there are no keys
		// to compare (found by review: the replay was refused).
		if diff.Coverage == "" {
			return 0, nil
		}
		return 0, diff
	}
	if err != nil {
		return 0, err
	}
	mainRows := map[string]keyedRow{}
	var differ []KeyDifference
	if err := eachKeyedRow(ctx, branch, mainID, keyNames, func(k string, r keyedRow) {
		if _, dup := mainRows[k]; dup {
			differ = append(differ, KeyDifference{Key: k, Main: "two rows", Branch: r.pos})
		}
		mainRows[k] = r
	}); err != nil {
		if gone, ok := errors.AsType[*snapshot.DataFileGoneError](err); ok {
			// The damage a replay is run to repair (the audit's
			// missing-file names it): refusing to publish for it left a
			// table that could not be rebuilt in place (a new user's
			// report).
			diff.MainGone = gone
			return 0, diff
		}
		return 0, fmt.Errorf("compare branch %s of %s with main: read main: %w", branch.Branch(), branch.Name(), err)
	}
	seen := map[string]bool{}
	if err := eachKeyedRow(ctx, branch, head.SnapshotID, keyNames, func(k string, r keyedRow) {
		m, ok := mainRows[k]
		switch {
		case seen[k]:
			differ = append(differ, KeyDifference{Key: k, Main: m.pos, Branch: "two rows"})
		case !ok:
			differ = append(differ, KeyDifference{Key: k, Main: "no row", Branch: r.pos})
		case m != r:
			differ = append(differ, KeyDifference{Key: k, Main: m.pos, Branch: r.pos})
		}
		seen[k] = true
	}); err != nil {
		return 0, fmt.Errorf("compare branch %s of %s with main: read the branch: %w", branch.Branch(), branch.Name(), err)
	}
	for k, m := range mainRows {
		if !seen[k] {
			differ = append(differ, KeyDifference{Key: k, Main: m.pos, Branch: "no row"})
		}
	}
	if len(differ) == 0 && diff.Coverage == "" {
		return len(seen), nil
	}
	slices.SortFunc(differ, func(a, b KeyDifference) int { return cmp.Compare(a.Key, b.Key) })
	diff.Keys = len(differ)
	diff.First = differ[:min(len(differ), maxNamedKeys)]
	return len(seen), diff
}

// checkMainRowsKept returns a *DifferError when publishing the branch of t
// whose head is headID over main's head mainID would drop rows or dead
// letters main holds: offsets the branch does not cover (mainRowsLost),
// records over the offsets both cover that main holds and the branch
// does not (mainRowsFewer), and, on a compacted topic, records main holds
// past the branch's end that the log no longer has for a sink on main to
// read again (mainAheadCompacted); with the log start of topic's
// partitions as the broker has it now.
func checkMainRowsKept(ctx context.Context, broker *connector.Broker, t *snapshot.Table, topic string, mainID, headID int64) error {
	wrap := func(err error) error {
		return fmt.Errorf("check branch %s of %s against main: %w", t.Branch(), t.Name(), err)
	}
	wm, err := broker.Watermarks(ctx, topic)
	if err != nil {
		return wrap(err)
	}
	logStart := map[mapping.TopicPartition]int64{}
	for p, w := range wm {
		logStart[mapping.TopicPartition{Topic: topic, Partition: p}] = w.LogStart
	}
	mc, err := coverages(ctx, t, mainID)
	if err != nil {
		return wrap(err)
	}
	bc, err := coverages(ctx, t, headID)
	if err != nil {
		return wrap(err)
	}
	cfg, err := broker.TopicConfig(ctx, topic)
	if err != nil {
		return wrap(err)
	}
	compacted := connector.Compacts(cfg["cleanup.policy"])
	lost := mainRowsLost(mc, bc, logStart)
	if lost == "" {
		if lost, err = mainRowsFewer(ctx, t, mainID, headID, mc, bc, compacted); err != nil {
			return wrap(err)
		}
	}
	if lost == "" && compacted {
		if lost, err = mainAheadCompacted(ctx, broker, t, mainID, mc, bc, logStart); err != nil {
			return wrap(err)
		}
	}
	if lost == "" {
		return nil
	}
	return &DifferError{Table: t.Name(), Branch: t.Branch(), Coverage: lost}
}

// mainRowsFewer says which partitions hold, over the offsets main's
// snapshot mainID and the branch's head headID both cover, more rows in
// main than in the branch, or more rows and dead letters: records a
// compaction of the topic removed since main read them, or records that
// became dead letters on the branch and rows in main (a replay whose
// layout or registry does not fit). Both sides cover those offsets, so
// the offsets alone (mainRowsLost) do not tell. Counts are bounded from
// the ledgers so that only a certain difference is reported (heldCounts);
// on a compacted topic (compacted), whose compaction removes records
// inside the offsets both cover, rows are counted as the tables hold them.
// It returns "" when there are none.
func mainRowsFewer(ctx context.Context, t *snapshot.Table, mainID, headID int64, mc, bc map[mapping.TopicPartition]mapping.Coverage, compacted bool) (string, error) {
	shared := map[mapping.TopicPartition]mapping.Interval{}
	for tp, m := range mc {
		if b, ok := bc[tp]; ok {
			if in := (mapping.Interval{Low: max(m.First, b.First), High: min(m.Next, b.Next)}); in.Low < in.High {
				shared[tp] = in
			}
		}
	}
	if len(shared) == 0 {
		return "", nil
	}
	inMain, err := heldCounts(ctx, t, mainID, shared, mc, true, compacted)
	if err != nil {
		return "", err
	}
	onBranch, err := heldCounts(ctx, t, headID, shared, bc, false, compacted)
	if err != nil {
		return "", err
	}
	var rows, records []string
	for _, tp := range slices.SortedFunc(maps.Keys(shared), mapping.TopicPartition.Compare) {
		m, b := inMain[tp], onBranch[tp]
		switch {
		case m.rows > b.rows:
			rows = append(rows, fmt.Sprintf("%s %s: %s in main, %s on the branch", tp, shared[tp], m.rowsText(), b.rowsText()))
		case m.rows+m.deadLetters > b.rows+b.deadLetters:
			records = append(records, fmt.Sprintf("%s %s: %s and at least %d dead letters in main, %s and at most %d dead letters on the branch",
				tp, shared[tp], m.rowsText(), m.deadLetters, b.rowsText(), b.deadLetters))
		}
	}
	switch {
	case len(rows) > 0:
		return "main holds more rows than the branch over offsets both cover (" + strings.Join(rows, "; ") +
			"): the topic's compaction removed records since main read them, or the branch made dead letters of records that are rows in main (check the replay's --value, --key and --schema-registry); publishing would drop them from main", nil
	case len(records) > 0:
		return "main holds more records (rows and dead letters) than the branch over offsets both cover (" + strings.Join(records, "; ") +
			"): the topic's compaction removed records since main read them; publishing would drop them from main and its dead-letter table", nil
	}
	return "", nil
}

// held is what a snapshot holds of some offsets of a partition: its rows
// there, and its dead letters, a bound (heldCounts).
type held struct {
	rows, deadLetters int64
	// bound says whether rows is exact (""), a lower bound ("at least")
	// or an upper one ("at most").
	bound string
}

func (h held) rowsText() string {
	return strings.TrimSpace(fmt.Sprintf("%s %d rows", h.bound, h.rows))
}

// heldCounts counts, per partition, what the snapshot id of t holds at the
// offsets of spans, bounded from the ledger (cov: its coverages) for main
// from below (lower) and for the branch from above: a range's dead letters
// less its offsets outside the span, or up to its offsets inside; rows of
// main's ranges wholly inside the span that overlap no range counted
// before it (a table holding duplicates is what a replay rebuilds), or of
// every branch range that touches the span. With scan, rows are counted
// as the table holds them instead (read from its position columns,
// deletes applied), but for a partition whose ranges overlap in main's
// ledger; main's files that are gone from their storage are not counted
// (the audit's missing-file: the branch is the repair).
func heldCounts(ctx context.Context, t *snapshot.Table, id int64, spans map[mapping.TopicPartition]mapping.Interval, cov map[mapping.TopicPartition]mapping.Coverage, lower, scan bool) (map[mapping.TopicPartition]held, error) {
	out := map[mapping.TopicPartition]held{}
	// fromLedger: the partitions whose rows are the ledger's bound.
	fromLedger := func(tp mapping.TopicPartition) bool {
		return !scan || lower && len(cov[tp].Overlaps) > 0
	}
	taken := map[mapping.TopicPartition]int64{}
	for c, err := range t.Commits(ctx, id) {
		if err != nil {
			return nil, fmt.Errorf("ledger at snapshot %d: %w", id, err)
		}
		for _, r := range c.Ranges {
			in, ok := spans[r.TopicPartition]
			overlap := min(r.High, in.High) - max(r.Low, in.Low)
			if !ok || overlap <= 0 {
				continue
			}
			h := out[r.TopicPartition]
			ledger := fromLedger(r.TopicPartition)
			switch {
			case !lower:
				h.deadLetters += min(r.DeadLetters, overlap)
				if ledger {
					h.rows, h.bound = h.rows+r.Records, "at most"
				}
			case r.Low < taken[r.TopicPartition]:
				continue // a range below one already counted
			default:
				taken[r.TopicPartition] = r.High
				h.deadLetters += max(0, r.DeadLetters-(r.Len()-overlap))
				if ledger {
					h.bound = "at least"
					if r.Low >= in.Low && r.High <= in.High {
						h.rows += r.Records
					}
				}
			}
			out[r.TopicPartition] = h
		}
	}
	var filter iceberg.BooleanExpression = iceberg.AlwaysFalse{}
	for tp, in := range spans {
		if fromLedger(tp) {
			continue
		}
		filter = iceberg.NewOr(filter, iceberg.NewAnd(iceberg.NewAnd(
			iceberg.EqualTo(iceberg.Reference(mapping.ColTopic), tp.Topic),
			iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), tp.Partition)), iceberg.NewAnd(
			iceberg.GreaterThanEqual(iceberg.Reference(mapping.ColOffset), in.Low),
			iceberg.LessThan(iceberg.Reference(mapping.ColOffset), in.High))))
	}
	if _, none := filter.(iceberg.AlwaysFalse); none {
		return out, nil
	}
	err := t.ScanFiles(ctx, id, snapshot.ScanOptions{Columns: []string{mapping.ColTopic, mapping.ColPartition, mapping.ColOffset}, Filter: filter, MissingOK: lower},
		func(fb snapshot.FileBatch) error {
			if fb.Batch == nil {
				return nil
			}
			topic, ok1 := columnOf[*array.String](fb.Batch, mapping.ColTopic)
			part, ok2 := columnOf[*array.Int32](fb.Batch, mapping.ColPartition)
			off, ok3 := columnOf[*array.Int64](fb.Batch, mapping.ColOffset)
			if !ok1 || !ok2 || !ok3 {
				return fmt.Errorf("data file %s: unexpected position columns %s", fb.Path, fb.Batch.Schema())
			}
			for i := range int(fb.Batch.NumRows()) {
				tp := mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)}
				if in, ok := spans[tp]; ok && !fromLedger(tp) && in.Contains(off.Value(i)) {
					h := out[tp]
					h.rows++
					out[tp] = h
				}
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("count rows at snapshot %d: %w", id, err)
	}
	return out, nil
}

// mainAheadCompacted says, for a compacted topic, which partitions main's
// snapshot mainID holds more records of past the branch's next offset
// than the log holds now: a publish moves main back to the branch's next
// offsets and a sink on main reads them again, but compaction may have
// removed records since main read them, whose rows or dead letters the
// publish would then drop for good. It returns "" when there are none.
func mainAheadCompacted(ctx context.Context, broker *connector.Broker, t *snapshot.Table, mainID int64, mc, bc map[mapping.TopicPartition]mapping.Coverage, logStart map[mapping.TopicPartition]int64) (string, error) {
	ahead := map[mapping.TopicPartition]mapping.Interval{}
	for tp, m := range mc {
		if b, ok := bc[tp]; ok {
			if in := (mapping.Interval{Low: max(b.Next, logStart[tp], m.First), High: m.Next}); in.Low < in.High {
				ahead[tp] = in
			}
		}
	}
	if len(ahead) == 0 {
		return "", nil
	}
	inMain, err := heldCounts(ctx, t, mainID, ahead, mc, true, true)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, tp := range slices.SortedFunc(maps.Keys(ahead), mapping.TopicPartition.Compare) {
		in := ahead[tp]
		var inLog int64
		err := broker.ReadLog(ctx, tp.Topic, tp.Partition, in.Low, in.High, func(r *kgo.Record, _ int64) bool {
			if !r.Attrs.IsControl() {
				inLog++
			}
			return true
		})
		if err != nil {
			return "", fmt.Errorf("read %s %s: %w", tp, in, err)
		}
		if m := inMain[tp]; m.rows+m.deadLetters > inLog {
			parts = append(parts, fmt.Sprintf("%s %s: %s and at least %d dead letters in main, %d records in the log", tp, in, m.rowsText(), m.deadLetters, inLog))
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	return "main holds records past the branch's end that the topic's compaction has removed from the log since main read them (" + strings.Join(parts, "; ") +
		"): publishing moves main back to the branch's end, and a sink on main would not read them again; replay to main's end (--until) or further", nil
}

// otherTopics returns an *OtherTopicsError naming the topics besides
// topic whose offsets main's ledger holds (a table sunk from several
// topics): a replay rebuilds one topic, so publishing its branch would
// drop theirs from main, whatever the comparison found.
func otherTopics(ctx context.Context, t *snapshot.Table, topic string) error {
	main := t.Iceberg().Metadata().SnapshotByName(table.MainBranch)
	if main == nil {
		return nil
	}
	sum, err := t.Summary(ctx, main.SnapshotID)
	if err != nil {
		return fmt.Errorf("read main's ledger of %s: %w", t.Name(), err)
	}
	var others []string
	for tp, p := range sum.Parts {
		if tp.Topic != topic && p.MaxHigh > 0 && !slices.Contains(others, tp.Topic) {
			others = append(others, tp.Topic)
		}
	}
	if len(others) == 0 {
		return nil
	}
	slices.Sort(others)
	return &OtherTopicsError{Table: t.Name(), Topic: topic, Others: others}
}

// sameTopic returns a *DifferError when main's snapshot mainID and the
// branch's head headID recorded different Kafka topic IDs for topic: the
// topic was deleted and recreated, and main's rows are of the deleted
// one, whose offsets the new one reuses: comparing offsets would take
// them for the same records, and a publish would drop main's for good.
func sameTopic(ctx context.Context, t *snapshot.Table, topic string, mainID, headID int64) error {
	m, err := t.Summary(ctx, mainID)
	if err != nil {
		return fmt.Errorf("check branch %s of %s against main: %w", t.Branch(), t.Name(), err)
	}
	b, err := t.Summary(ctx, headID)
	if err != nil {
		return fmt.Errorf("check branch %s of %s against main: %w", t.Branch(), t.Name(), err)
	}
	if mid, bid := m.TopicID(topic), b.TopicID(topic); mid != "" && bid != "" && mid != bid {
		return &DifferError{Table: t.Name(), Branch: t.Branch(),
			Coverage: fmt.Sprintf("main read topic %s with ID %s, the branch with ID %s: the topic was deleted and recreated, and main's rows are of the deleted one, which no log holds any more (publishing would drop them for good; sink the new topic into a new table)", topic, mid, bid)}
	}
	return nil
}

// mainRowsLost says which offsets below the branch's next offset main's
// snapshot holds (covers and does not record lost: mc) that the branch's
// head does not (bc: it starts later, records them lost to retention, or
// has a gap): publishing the branch would drop them, since a sink on main
// resumes from the branch's next offsets.
// logStart is each partition's log start offset now (absent: unknown, 0):
// a sink reads nothing below it again.
// It returns "" when there are none.
func mainRowsLost(mc, bc map[mapping.TopicPartition]mapping.Coverage, logStart map[mapping.TopicPartition]int64) string {
	var parts []string
	for _, tp := range slices.SortedFunc(maps.Keys(mc), mapping.TopicPartition.Compare) {
		m := mc[tp]
		b, onBranch := bc[tp]
		// Offsets at or after the branch's next offset are read again by
		// a sink on main; those below its first (a replay --from a later
		// start) are dropped, as upsert tables' comparison refuses too.
		missing := heldOffsets(m)
		for _, in := range heldOffsets(b) {
			missing = subtract(missing, in)
		}
		// A partition the branch has no range of (another topic of a
		// table holding several) has no next offset on the branch: a sink
		// on main begins it where its start policy says, so nothing of
		// it is read again for sure.
		if onBranch {
			from := max(b.Next, logStart[tp])
			missing = subtract(missing, mapping.Interval{Low: from, High: max(from, m.Next)})
		}
		for _, in := range missing {
			parts = append(parts, fmt.Sprintf("%s %s", tp, in))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "main holds " + strings.Join(parts, ", ") + ", which the branch does not hold (it starts later, or retention deleted them before the replay or since it ended): publishing would drop them from main"
}

// subtract removes cut from every interval of in.
func subtract(in []mapping.Interval, cut mapping.Interval) []mapping.Interval {
	var out []mapping.Interval
	for _, i := range in {
		if cut.High <= i.Low || cut.Low >= i.High || cut.Low >= cut.High {
			out = append(out, i)
			continue
		}
		if i.Low < cut.Low {
			out = append(out, mapping.Interval{Low: i.Low, High: cut.Low})
		}
		if cut.High < i.High {
			out = append(out, mapping.Interval{Low: cut.High, High: i.High})
		}
	}
	return out
}

// coverageDifference says how the ledgers of two snapshots of t hold
// different offsets, or "" when they hold the same: what each covers but
// for its gaps and recorded losses. A replay from offset 0 of a topic
// whose start retention deleted covers the deleted offsets as lost where
// main, begun later, has no range of them: the same offsets are held, and
// it was refused as differing (found by a new user).
func coverageDifference(ctx context.Context, t *snapshot.Table, mainID, branchID int64) (string, error) {
	held := func(id int64) (string, error) {
		cvs, err := coverages(ctx, t, id)
		if err != nil {
			return "", fmt.Errorf("compare branch %s of %s with main: %w", t.Branch(), t.Name(), err)
		}
		var parts []string
		for _, tp := range slices.SortedFunc(maps.Keys(cvs), mapping.TopicPartition.Compare) {
			ivs := heldOffsets(cvs[tp])
			if len(ivs) == 0 {
				continue
			}
			names := make([]string, len(ivs))
			for i, iv := range ivs {
				names[i] = iv.String()
			}
			parts = append(parts, fmt.Sprintf("%s %s", tp, strings.Join(names, " ")))
		}
		return orNone(strings.Join(parts, ", ")), nil
	}
	m, err := held(mainID)
	if err != nil {
		return "", err
	}
	b, err := held(branchID)
	if err != nil {
		return "", err
	}
	if m == b {
		return "", nil
	}
	return fmt.Sprintf("main's ledger holds %s, the branch's %s", m, b), nil
}

// heldOffsets are the offsets a partition's coverage holds: from its first
// to its next offset, but for its gaps and the offsets it records lost.
func heldOffsets(c mapping.Coverage) []mapping.Interval {
	if c.Next <= c.First {
		// Only empty ranges (a partition with no record yet).
		return nil
	}
	out := []mapping.Interval{{Low: c.First, High: c.Next}}
	for _, holes := range [][]mapping.Interval{c.Gaps, c.Lost} {
		for _, h := range holes {
			out = subtract(out, h)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// identifierColumns names the table's key columns: its schema's
// identifier fields.
func identifierColumns(t *snapshot.Table) ([]string, error) {
	sc := t.Iceberg().Schema()
	var names []string
	for _, id := range sc.IdentifierFieldIDs {
		name, ok := sc.FindColumnName(id)
		if !ok {
			return nil, fmt.Errorf("table %s: identifier field %d is not in its schema", t.Name(), id)
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("table %s: %w", t.Name(), errNoKeyColumns)
	}
	return names, nil
}

// errNoKeyColumns is identifierColumns' error for a table without them.
var errNoKeyColumns = errors.New("no identifier fields: only an upsert table that holds rows is compared key by key")

// noRows reports whether snapshot id of t holds no rows, by its summary.
func noRows(t *snapshot.Table, id int64) bool {
	s := t.Iceberg().Metadata().SnapshotByID(id)
	return s != nil && s.Summary != nil && s.Summary.Properties["total-records"] == "0"
}

// eachKeyedRow calls fn with every row of a snapshot of t (deletes
// applied): its rendered key, the position of its record and a digest of
// its non-null columns by name (so that a column one snapshot's schema
// lacks reads as null in both).
func eachKeyedRow(ctx context.Context, t *snapshot.Table, snapshotID int64, keyNames []string, fn func(string, keyedRow)) error {
	return t.Rows(ctx, snapshotID, nil, func(b arrow.RecordBatch) error {
		sc := b.Schema()
		keyIdx := make([]int, len(keyNames))
		for i, name := range keyNames {
			idx := sc.FieldIndices(name)
			if len(idx) != 1 {
				return fmt.Errorf("rows have no key column %q", name)
			}
			keyIdx[i] = idx[0]
		}
		cols := make([]int, sc.NumFields())
		for i := range cols {
			cols[i] = i
		}
		slices.SortFunc(cols, func(a, b int) int { return cmp.Compare(sc.Field(a).Name, sc.Field(b).Name) })
		topic, _ := columnOf[*array.String](b, mapping.ColTopic)
		part, _ := columnOf[*array.Int32](b, mapping.ColPartition)
		off, _ := columnOf[*array.Int64](b, mapping.ColOffset)
		var kb, vb strings.Builder
		for i := range int(b.NumRows()) {
			kb.Reset()
			for j, c := range keyIdx {
				if j > 0 {
					kb.WriteByte(',')
				}
				kb.WriteString(keyNames[j])
				kb.WriteByte('=')
				kb.WriteString(renderValue(b.Column(c), i))
			}
			vb.Reset()
			for _, c := range cols {
				if b.Column(c).IsNull(i) {
					continue
				}
				vb.WriteString(sc.Field(c).Name)
				vb.WriteByte(0)
				vb.WriteString(b.Column(c).ValueStr(i))
				vb.WriteByte(0)
			}
			r := keyedRow{digest: sha256.Sum256([]byte(vb.String()))}
			if topic != nil && part != nil && off != nil {
				r.pos = topic.Value(i) + "/" + strconv.Itoa(int(part.Value(i))) + "@" + strconv.FormatInt(off.Value(i), 10)
			}
			fn(kb.String(), r)
		}
		return nil
	})
}

// renderValue renders a key column's value: binary as text when it is
// UTF-8, null as null.
func renderValue(c arrow.Array, i int) string {
	if c.IsNull(i) {
		return "null"
	}
	if bin, ok := c.(*array.Binary); ok && utf8.Valid(bin.Value(i)) {
		return strconv.Quote(string(bin.Value(i)))
	}
	if s, ok := c.(*array.String); ok {
		return strconv.Quote(s.Value(i))
	}
	return c.ValueStr(i)
}

// columnOf returns the named column of b as type A, or false.
func columnOf[A arrow.Array](b arrow.RecordBatch, name string) (A, bool) {
	var zero A
	idx := b.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return zero, false
	}
	a, ok := b.Column(idx[0]).(A)
	return a, ok
}

// summaryAt is the summary of t's ledger as of snapshot id, which t must
// hold: what a reader of each partition's first and next offsets needs,
// without reading the ranges.
func summaryAt(ctx context.Context, t *snapshot.Table, id int64) (mapping.Summary, error) {
	if _, err := t.Snapshot(id); err != nil {
		return mapping.Summary{}, err
	}
	s, err := t.Summary(ctx, id)
	if err != nil {
		return mapping.Summary{}, fmt.Errorf("ledger at snapshot %d: %w", id, err)
	}
	return s, nil
}

// coverages is the coverage of each partition of t's ledger as of
// snapshot id, which t must hold, read commit by commit: it holds each
// partition's gaps, losses and overlaps, not its ranges.
func coverages(ctx context.Context, t *snapshot.Table, id int64) (map[mapping.TopicPartition]mapping.Coverage, error) {
	if _, err := t.Snapshot(id); err != nil {
		return nil, err
	}
	cvs := map[mapping.TopicPartition]*mapping.Coverer{}
	for c, err := range t.Commits(ctx, id) {
		if err != nil {
			return nil, fmt.Errorf("ledger at snapshot %d: %w", id, err)
		}
		for _, r := range c.Ranges {
			cv := cvs[r.TopicPartition]
			if cv == nil {
				cv = &mapping.Coverer{}
				cvs[r.TopicPartition] = cv
			}
			cv.Add(r)
		}
	}
	out := make(map[mapping.TopicPartition]mapping.Coverage, len(cvs))
	for tp, cv := range cvs {
		out[tp] = cv.Coverage()
	}
	return out, nil
}
