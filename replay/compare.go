package replay

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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
// records over the offsets both cover that main holds and the branch does
// not (mainRowsFewer), and records main holds past the branch's end that a
// sink on main would not read again (mainAheadGone); with the log start of
// topic's partitions as the broker has it now.
//
// Where the topic compacts, compaction removes records inside the offsets
// both cover and past the branch's end, which the ledgers cannot see: the
// positions of main's and the branch's rows and dead letters are read from
// the tables there, and those past the branch's end checked against the
// log. A topic whose configuration cannot be read (a user allowed to read
// the topic but not to describe its configuration) is checked so too.
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
	lost := mainRowsLost(mc, bc, logStart)
	if lost != "" {
		return &DifferError{Table: t.Name(), Branch: t.Branch(), Coverage: lost}
	}
	cfg, cfgErr := broker.TopicConfig(ctx, topic)
	compacted := cfgErr != nil || connector.Compacts(cfg["cleanup.policy"])
	if compacted {
		lost, err = mainPositionsKept(ctx, broker, t, mainID, headID, mc, bc, logStart)
	} else {
		lost, err = mainRowsFewer(ctx, t, mainID, headID, mc, bc)
	}
	if err != nil {
		return wrap(err)
	}
	if lost == "" {
		return nil
	}
	return &DifferError{Table: t.Name(), Branch: t.Branch(), Coverage: lost}
}

// sharedSpans are, per partition, the offsets both main's and the
// branch's ledgers cover (mc and bc: their coverages), from the later
// first offset to the earlier next one.
func sharedSpans(mc, bc map[mapping.TopicPartition]mapping.Coverage) map[mapping.TopicPartition]mapping.Interval {
	shared := map[mapping.TopicPartition]mapping.Interval{}
	for tp, m := range mc {
		if b, ok := bc[tp]; ok {
			if in := (mapping.Interval{Low: max(m.First, b.First), High: min(m.Next, b.Next)}); in.Low < in.High {
				shared[tp] = in
			}
		}
	}
	return shared
}

// mainRowsFewer says, for a topic that does not compact, which partitions
// hold more rows in main than in the branch over the offsets both cover,
// or more rows and dead letters: records that became dead letters on the
// branch and rows in main (a replay whose layout or registry does not
// fit). Both sides cover those offsets and the log held every record of
// them for both, so the offsets alone (mainRowsLost) do not tell. The
// counts come from the ledgers, bounded so that only a certain difference
// is reported: main's counts of the ranges wholly inside those offsets
// that overlap no range counted before (a table holding duplicates is
// what a replay rebuilds), against the branch's of every range that
// touches them. It returns "" when there are none.
func mainRowsFewer(ctx context.Context, t *snapshot.Table, mainID, headID int64, mc, bc map[mapping.TopicPartition]mapping.Coverage) (string, error) {
	shared := sharedSpans(mc, bc)
	if len(shared) == 0 {
		return "", nil
	}
	type counts struct{ rows, deadLetters int64 }
	inMain, onBranch := map[mapping.TopicPartition]counts{}, map[mapping.TopicPartition]counts{}
	taken := map[mapping.TopicPartition]int64{}
	for c, err := range t.Commits(ctx, mainID) {
		if err != nil {
			return "", fmt.Errorf("ledger at snapshot %d: %w", mainID, err)
		}
		for _, r := range c.Ranges {
			in, ok := shared[r.TopicPartition]
			if !ok || r.Low < in.Low || r.High > in.High || r.Low < taken[r.TopicPartition] || r.Len() == 0 {
				continue
			}
			n := inMain[r.TopicPartition]
			inMain[r.TopicPartition] = counts{n.rows + r.Records, n.deadLetters + r.DeadLetters}
			taken[r.TopicPartition] = r.High
		}
	}
	for c, err := range t.Commits(ctx, headID) {
		if err != nil {
			return "", fmt.Errorf("ledger at snapshot %d: %w", headID, err)
		}
		for _, r := range c.Ranges {
			if in, ok := shared[r.TopicPartition]; ok && r.Low < in.High && r.High > in.Low {
				n := onBranch[r.TopicPartition]
				onBranch[r.TopicPartition] = counts{n.rows + r.Records, n.deadLetters + r.DeadLetters}
			}
		}
	}
	var parts []string
	for _, tp := range slices.SortedFunc(maps.Keys(shared), mapping.TopicPartition.Compare) {
		if m, b := inMain[tp], onBranch[tp]; m.rows > b.rows || m.rows+m.deadLetters > b.rows+b.deadLetters {
			parts = append(parts, fmt.Sprintf("%s %s: at least %d rows and %d dead letters in main, at most %d rows and %d dead letters on the branch", tp, shared[tp], m.rows, m.deadLetters, b.rows, b.deadLetters))
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	return "main holds more rows than the branch over offsets both cover (" + strings.Join(parts, "; ") +
		"): the branch made dead letters of records that are rows in main (check the replay's --value, --key and --schema-registry); publishing would drop them from main", nil
}

// mainPositionsKept says, for a topic that compacts, which positions main's
// snapshot mainID holds a row or a dead letter of that publishing the
// branch's head headID would drop: over the offsets both cover, those the
// branch holds no row or dead letter of (compaction removed the record
// since main read it), and rows the branch made dead letters of (a replay
// whose layout or registry does not fit); past the branch's next offset,
// which a sink on main reads again, those whose record the log no longer
// holds. Positions are read from the tables (rows with deletes applied,
// dead letters of the ledger's commits), a bit per offset, in batches of
// partitions (positionBatches); main's data files that are
// gone from their storage are not counted (the audit's missing-file: the
// branch is the repair). It returns "" when there are none.
func mainPositionsKept(ctx context.Context, broker *connector.Broker, t *snapshot.Table, mainID, headID int64, mc, bc map[mapping.TopicPartition]mapping.Coverage, logStart map[mapping.TopicPartition]int64) (string, error) {
	shared, ahead := sharedSpans(mc, bc), map[mapping.TopicPartition]mapping.Interval{}
	for tp, m := range mc {
		if b, ok := bc[tp]; ok {
			if in := (mapping.Interval{Low: max(b.Next, logStart[tp], m.First), High: m.Next}); in.Low < in.High {
				ahead[tp] = in
			}
		}
	}
	var parts []string
	for _, batch := range positionBatches(shared) {
		mainHeld, err := heldPositions(ctx, t, mainID, batch, true)
		if err != nil {
			return "", err
		}
		branchHeld, err := heldPositions(ctx, t, headID, batch, false)
		if err != nil {
			return "", err
		}
		for _, tp := range slices.SortedFunc(maps.Keys(batch), mapping.TopicPartition.Compare) {
			m, b := mainHeld[tp], branchHeld[tp]
			gone := m.rows.union(m.deadLetters).minus(b.rows.union(b.deadLetters))
			demoted := m.rows.intersect(b.deadLetters)
			if !gone.empty() {
				parts = append(parts, fmt.Sprintf("%s: main holds %s the branch has no record of (the topic's compaction removed them since main read them)", tp, gone))
			}
			if !demoted.empty() {
				parts = append(parts, fmt.Sprintf("%s: main holds rows of %s, which the branch made dead letters (check the replay's --value, --key and --schema-registry)", tp, demoted))
			}
		}
	}
	for _, batch := range positionBatches(ahead) {
		mainHeld, err := heldPositions(ctx, t, mainID, batch, true)
		if err != nil {
			return "", err
		}
		for _, tp := range slices.SortedFunc(maps.Keys(batch), mapping.TopicPartition.Compare) {
			in := batch[tp]
			inLog := newOffsetSet(in)
			err := broker.ReadLog(ctx, tp.Topic, tp.Partition, in.Low, in.High, func(r *kgo.Record, _ int64) bool {
				if !r.Attrs.IsControl() {
					// An aborted record is no row or dead letter of
					// main's: counting it present changes nothing.
					inLog.add(r.Offset)
				}
				return true
			})
			if err != nil {
				return "", fmt.Errorf("read %s %s: %w", tp, in, err)
			}
			m := mainHeld[tp]
			if gone := m.rows.union(m.deadLetters).minus(inLog); !gone.empty() {
				parts = append(parts, fmt.Sprintf("%s: main holds %s past the branch's end whose records the topic's compaction has removed from the log since main read them: publishing moves main back to the branch's end, and a sink on main would not read them again (replay to main's end with --until, or further)", tp, gone))
			}
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	return strings.Join(parts, "; ") + "; publishing would drop them from main", nil
}

// maxBatchOffsets bounds the offsets of the spans whose positions
// mainPositionsKept reads at once: its sets, a bit per offset, take 64 MiB
// each at most, whatever the number of partitions (one partition's span
// longer than it is read alone).
const maxBatchOffsets = 1 << 29

// positionBatches splits spans into batches of partitions whose spans
// hold maxBatchOffsets offsets at most together, or one partition.
func positionBatches(spans map[mapping.TopicPartition]mapping.Interval) []map[mapping.TopicPartition]mapping.Interval {
	var out []map[mapping.TopicPartition]mapping.Interval
	var n int64
	for _, tp := range slices.SortedFunc(maps.Keys(spans), mapping.TopicPartition.Compare) {
		in := spans[tp]
		if len(out) == 0 || n+in.Len() > maxBatchOffsets {
			out, n = append(out, map[mapping.TopicPartition]mapping.Interval{}), 0
		}
		out[len(out)-1][tp] = in
		n += in.Len()
	}
	return out
}

// positions are the offsets of one partition a snapshot holds rows and
// dead letters of, within one span.
type positions struct{ rows, deadLetters *offsetSet }

// heldPositions reads, per partition, the offsets within spans that
// snapshot id of t holds rows of (its data files, deletes applied; with
// missingOK, files gone from their storage are left out) and dead letters
// of (the rows of its dead-letter tables of the commits of its ledger; an
// older floe's rows without a commit id are not counted).
func heldPositions(ctx context.Context, t *snapshot.Table, id int64, spans map[mapping.TopicPartition]mapping.Interval, missingOK bool) (map[mapping.TopicPartition]positions, error) {
	out := map[mapping.TopicPartition]positions{}
	for tp, in := range spans {
		out[tp] = positions{rows: newOffsetSet(in), deadLetters: newOffsetSet(in)}
	}
	// place adds each position to the set that pick chooses of its
	// partition's, which leaves out an offset outside its span.
	place := func(pick func(positions) *offsetSet) func(mapping.TopicPartition, int64) {
		return func(tp mapping.TopicPartition, off int64) {
			if p, ok := out[tp]; ok {
				pick(p).add(off)
			}
		}
	}
	if err := t.ScanPositions(ctx, id, spans, snapshot.PositionOptions{MissingOK: missingOK}, place(func(p positions) *offsetSet { return p.rows })); err != nil {
		return nil, fmt.Errorf("read the rows of snapshot %d: %w", id, err)
	}
	dlqs, err := t.DeadLetterTables(ctx)
	if err != nil {
		return nil, err
	}
	for _, dlq := range dlqs {
		commits, err := t.DeadLetterCommits(ctx, id, dlq.Name())
		if err != nil {
			return nil, fmt.Errorf("read the ledger at snapshot %d for the commits naming %s: %w", id, dlq.Name(), err)
		}
		if len(commits) == 0 || dlq.Head() == nil {
			continue
		}
		keep := map[string]bool{}
		for _, c := range commits {
			keep[c.ID] = true
		}
		opts := snapshot.PositionOptions{MissingOK: true, Commits: keep}
		if err := dlq.ScanPositions(ctx, 0, spans, opts, place(func(p positions) *offsetSet { return p.deadLetters })); err != nil {
			return nil, fmt.Errorf("read the dead letters of snapshot %d in %s: %w", id, dlq.Name(), err)
		}
	}
	return out, nil
}

// offsetSet is a set of offsets within one span, a bit per offset.
type offsetSet struct {
	span mapping.Interval
	bits []uint64
}

func newOffsetSet(span mapping.Interval) *offsetSet {
	return &offsetSet{span: span, bits: make([]uint64, (span.Len()+63)/64)}
}

// add puts o in the set; an offset outside its span is left out.
func (s *offsetSet) add(o int64) {
	if s.span.Contains(o) {
		i := o - s.span.Low
		s.bits[i/64] |= 1 << (i % 64)
	}
}

// combine is the set of s's span whose words are op of s's and o's (o
// of the same span).
func (s *offsetSet) combine(o *offsetSet, op func(a, b uint64) uint64) *offsetSet {
	out := newOffsetSet(s.span)
	for i := range out.bits {
		out.bits[i] = op(s.bits[i], o.bits[i])
	}
	return out
}

func (s *offsetSet) union(o *offsetSet) *offsetSet {
	return s.combine(o, func(a, b uint64) uint64 { return a | b })
}

func (s *offsetSet) minus(o *offsetSet) *offsetSet {
	return s.combine(o, func(a, b uint64) uint64 { return a &^ b })
}

func (s *offsetSet) intersect(o *offsetSet) *offsetSet {
	return s.combine(o, func(a, b uint64) uint64 { return a & b })
}

func (s *offsetSet) empty() bool {
	return !slices.ContainsFunc(s.bits, func(w uint64) bool { return w != 0 })
}

// String names how many offsets the set holds and the first of them.
func (s *offsetSet) String() string {
	var n int
	var first []string
	for i, w := range s.bits {
		for ; w != 0; w &= w - 1 {
			if n < 3 {
				first = append(first, strconv.FormatInt(s.span.Low+int64(i)*64+int64(bits.TrailingZeros64(w)), 10))
			}
			n++
		}
	}
	text := fmt.Sprintf("%d offsets", n)
	if n == 1 {
		text = "1 offset"
	}
	if n > len(first) {
		first = append(first, "...")
	}
	return text + " (" + strings.Join(first, ", ") + ")"
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
