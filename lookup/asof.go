package lookup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/text"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Sources of a position's cut (Position.Source).
const (
	// SourceGiven: the cut was given (AsOfQuery.Offsets).
	SourceGiven = "given"
	// SourceBroker: from the broker's ListOffsets by timestamp.
	SourceBroker = "broker"
	// SourceTable: from the table's own timestamp column.
	SourceTable = "table"
	// SourceCommit: a commit boundary of an upsert table
	// (AsOfResult.Boundary).
	SourceCommit = "commit"
	// SourceLedger: where main's ledger begins (HistoryStart.Starts).
	SourceLedger = "ledger"
)

// Position is one partition's cut in an AsOfResult.
type Position struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the cut: the table as of it holds the partition's records
	// below it.
	Offset int64 `json:"offset"`
	// Source is where the cut came from: given, broker or table (a record
	// time, from ListOffsets by timestamp or the table's own timestamp
	// column).
	Source string `json:"source"`
}

// AsOfResult is the first snapshot covering a position or a record time.
// Its JSON field names are stable (floe as-of --json).
type AsOfResult struct {
	Table       string     `json:"table"`
	SnapshotID  int64      `json:"snapshot_id"`
	CommittedAt time.Time  `json:"committed_at"`
	Time        *time.Time `json:"time,omitempty"`
	Positions   []Position `json:"positions"`
	// Empty is set when the table as of the position held nothing: every
	// partition's cut is at or below the first offset the table holds of
	// it (a time before its first record, say).
	Empty bool `json:"empty"`
	// Cut is the position: the table as of it is SnapshotID's rows below
	// the cut (Rows). It is nil for an upsert table, whose state as of the
	// position is SnapshotID's rows, all of them.
	Cut mapping.Cut `json:"-"`
	// Mode is the table's mode. An upsert table changes commit by commit,
	// so its state as of a position is the state at the last commit
	// boundary at or below it (mapping.Ledger.StateAt): Boundary gives,
	// per partition of the position, the offset that state reached, Exact
	// says whether it is the position itself, and NextSnapshotID names the
	// commit that reaches past the position when it is not. Empty is the
	// state before the table's first record (without a snapshot before the
	// first commit).
	Mode           mapping.Mode `json:"mode"`
	Boundary       []Position   `json:"boundary,omitempty"`
	Exact          *bool        `json:"exact,omitempty"`
	NextSnapshotID *int64       `json:"next_snapshot_id,omitempty"`
	// Expired is set when SnapshotID has expired (floe maintain): the
	// ledger still places the position, but the table no longer holds the
	// snapshot's files, so its rows are read from the head where that
	// gives the same (RowsSnapshot), or not at all (ExpiredError).
	Expired bool `json:"expired,omitempty"`
	// RowsFromHead is set when rows were asked for and, the snapshot
	// having expired, read from the branch head below the position
	// (RowsSnapshot).
	RowsFromHead bool `json:"rows_from_head,omitempty"`
	// Compacted names the topics of an upsert table's record time whose
	// log compacts: the broker's time index does not see a record
	// compaction removed, which, stamped at or after the time, would cut
	// lower, so the state may hold a change made at or after the time
	// (Exact is then false).
	Compacted []string `json:"compacted_topics,omitempty"`
	// Lost are the ranges below the position the ledger records as lost
	// (retention deleted them before they were sunk): the table as of the
	// position lacks their records.
	Lost []LostRange `json:"lost,omitempty"`
	// Published is set when main's history begins with a replay
	// published onto it that began past offset 0 in a partition of the
	// position: the answer holds none of that partition's rows below
	// where the replay began, which main may have held before the
	// publish.
	Published *HistoryStart `json:"published,omitempty"`
}

// HistoryStart is where main's history begins in the partitions of a
// position when a replay was published onto main (AsOfResult.Published).
type HistoryStart struct {
	// Branch is the replay's branch (snapshot.Table.PublishedBranch).
	Branch string `json:"branch"`
	// Starts are, per partition of the position where it is above 0,
	// the first offset main's ledger holds records of (past the lost
	// ranges it begins with).
	Starts []Position `json:"starts"`
	// Tags are the table's tags whose ledger reaches the position: a tag
	// of main's head before the publish (floe replay --tag-main) holds
	// the rows main had then.
	Tags []string `json:"tags,omitempty"`
}

// LostRange is a range of offsets [Low, High) of a partition the ledger
// records as lost.
type LostRange struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Low       int64  `json:"low"`
	High      int64  `json:"high"`
}

// ExpiredError reports rows asked for as of a position whose snapshot has
// expired.
type ExpiredError struct {
	Table      string
	SnapshotID int64
	// Why says why the current snapshot cannot stand in for the expired
	// one, where it can for other positions (RowsSnapshot); empty where it
	// never can.
	Why string
	// Rebuild is the floe replay command that rebuilds the table as of the
	// position into a new table, when the caller knows it.
	Rebuild string
}

func (e *ExpiredError) Error() string {
	msg := fmt.Sprintf("snapshot %d of %s, the table as of that position, has expired (snapshot expiry): the table no longer holds its files, so its rows cannot be read", e.SnapshotID, e.Table)
	if e.Why != "" {
		msg += " (" + e.Why + ")"
	}
	return msg + "; " + rebuildHint(e.Rebuild)
}

// rebuildHint says how to rebuild a table as of a position: with the
// command when known, else by naming it.
func rebuildHint(command string) string {
	if command == "" {
		return "floe replay --until the position rebuilds it into a new table"
	}
	return "rebuild it into a new table with: " + command
}

// BeforeHistoryError reports a position of a table that main's
// history no longer reaches: a published replay replaced main's earlier
// commits, and the first commit of main's ledger since reaches past the
// position. The state at the boundary below it would be the empty table,
// which the table was not then.
type BeforeHistoryError struct {
	Table string
	Cut   mapping.Cut
	// Branch is the branch whose published head main's head descends
	// from (snapshot.Table.PublishedBranch).
	Branch string
	// FirstSnapshot is the snapshot of the first commit reaching past the
	// position.
	FirstSnapshot int64
	// Rebuild is as ExpiredError's.
	Rebuild string
	// Tags are the table's tags whose ledger reaches the position: each
	// holds the state main's history lost (floe replay --tag-main).
	Tags []string
}

func (e *BeforeHistoryError) Error() string {
	msg := fmt.Sprintf("%s as of %s: main's history no longer reaches back to that position: a replay published from branch %s replaced main's earlier commits, and main's first commit since (snapshot %d) reaches past it, so main holds no state as of the position (the empty table before that commit is not what it held then); ",
		e.Table, e.Cut, e.Branch, e.FirstSnapshot)
	if len(e.Tags) == 0 {
		return msg + fmt.Sprintf("that state is in a snapshot main had before the publish, which no tag of the table reaches: a tag made by the publish (floe replay --tag-main) keeps it, else snapshot expiry removes it; %s", rebuildHint(e.Rebuild))
	}
	reads := make([]string, len(e.Tags))
	for i, tag := range e.Tags {
		reads[i] = fmt.Sprintf("floe as-of --table %s --branch %s --offsets %s", e.Table, tag, e.Cut)
	}
	what := "tag " + e.Tags[0] + " holds"
	if len(e.Tags) > 1 {
		what = "tags " + strings.Join(e.Tags, ", ") + " hold"
	}
	return msg + fmt.Sprintf("%s main's history before the publish up to the position: read it with %s; or %s", what, strings.Join(reads, "; "), rebuildHint(e.Rebuild))
}

// RowsSnapshot is the snapshot whose rows below r.Cut are the table as of
// r's position: r's own, or, when it has expired, the branch head (0, and
// fromHead set) where that gives the same rows: an append table, whose
// floe commits only add rows past each partition's next offset (its
// compactions rewrite them unchanged), whose schema never changed (or
// whose position is empty: no row to read), for a cut naming every
// partition of its ledger. Otherwise an expired snapshot
// is an *ExpiredError. A writer other than floe that removed rows since
// would show in floe audit.
func RowsSnapshot(ctx context.Context, tbl *snapshot.Table, r AsOfResult) (snapshotID int64, fromHead bool, err error) {
	if !r.Expired {
		return r.SnapshotID, false, nil
	}
	expired := func(why string) error {
		return &ExpiredError{Table: tbl.Name(), SnapshotID: r.SnapshotID, Why: why}
	}
	if r.Mode != mapping.ModeAppend {
		return 0, false, expired("")
	}
	// The head reads its files in its own schema: where the position's was
	// another (a column added since, a type widened), the same records
	// would read otherwise than as of the position. A typed table's first
	// rows add its columns to the schema it was created with, so every
	// such table has two: the archive records the position's (found by a
	// new user: every typed table was refused once its snapshot expired).
	// An empty position (every cut at or below its partition's first
	// offset) has no row to read otherwise: the schema does not matter
	// (review s67: the empty table was refused).
	meta := tbl.Iceberg().Metadata()
	if n := len(meta.Schemas()); n > 1 && !r.Empty {
		id, known, err := tbl.SchemaOf(ctx, r.SnapshotID)
		switch {
		case err != nil:
			return 0, false, fmt.Errorf("read the schema of snapshot %d of %s: %w", r.SnapshotID, tbl.Name(), err)
		case !known:
			return 0, false, expired(fmt.Sprintf("the current snapshot holds the same records below the position, but the table's schema changed since it began, %d schemas, and the archive does not say which the position read in: floe records it for snapshots it archives from 2026-12-05 on", n))
		case id != meta.CurrentSchema().ID:
			return 0, false, expired("the current snapshot holds the same records below the position, but the table's schema changed since the position, so they would read otherwise")
		}
	}
	sum, err := tbl.Summary(ctx, 0)
	if err != nil {
		return 0, false, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	var left []string
	for _, tp := range sum.Partitions() {
		if _, ok := r.Cut[tp]; !ok {
			left = append(left, tp.String())
		}
	}
	if len(left) > 0 {
		// Every one, not the first only: the position that reads from the
		// head must name them all (a new user's report).
		return 0, false, expired(fmt.Sprintf("the current snapshot holds the same rows below a position that names every partition of the table; this one leaves out %s", text.AndList(left)))
	}
	return 0, true, nil
}

// AsOfQuery is a position or a record time; exactly one is set.
type AsOfQuery struct {
	// Offsets is a position as floe as-of --offsets takes it:
	// TOPIC/P=OFFSET[,...], or P=OFFSET when the table holds one topic.
	Offsets string
	// Time is a record time: every partition of the ledger is cut before
	// its first record whose timestamp is at or after it.
	Time *time.Time
}

// Validate reports a query that has no true answer whatever the table
// holds: neither or both of a position and a time, or a record time still
// to come (a *QueryError). AsOf calls it first; a caller may call it before
// it opens anything.
func (q AsOfQuery) Validate() error {
	if (q.Offsets == "") == (q.Time == nil) {
		return errors.New("as-of: give exactly one of a position and a record time")
	}
	// A cut at a time still to come would move as records arrive: the
	// answer would be the table now, not as of that time.
	if now := time.Now(); q.Time != nil && q.Time.After(now) {
		return &QueryError{Setting: SettingTime, Value: q.Time.Format(time.RFC3339Nano),
			Want: fmt.Sprintf("a time that has passed (now is %s): no record can be at or after it yet", now.UTC().Format(time.RFC3339))}
	}
	return nil
}

// AsOf resolves q into a cut and finds the first snapshot of tbl's branch
// covering it. For a time, each partition's cut comes from the broker's
// ListOffsets by timestamp when broker is given and still retains
// everything the table holds of the partition, else from the table's
// timestamp column. A position the table has not reached yet is an error
// saying how far the table got.
func AsOf(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, q AsOfQuery) (AsOfResult, error) {
	res := AsOfResult{Table: tbl.Name()}
	if err := q.Validate(); err != nil {
		return res, err
	}
	res.Mode = tbl.Mode()
	ledger, err := tbl.Summary(ctx, 0)
	if err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	if ledger.Commits == 0 {
		if err := CheckDataTable(tbl, "no table as of a position or time"); err != nil {
			return res, err
		}
		return res, fmt.Errorf("%s has no floe commits yet: nothing was sunk into it, so it has no table as of a position or time", tbl.Name())
	}
	// The lost ranges, read once: a time's cut checks them, and the answer
	// lists those below the position.
	lost, err := tbl.LostRanges(ctx, 0, ledger, ledger.Partitions())
	if err != nil {
		return res, err
	}
	source := map[mapping.TopicPartition]string{}
	var cut mapping.Cut
	if q.Offsets != "" {
		def := ""
		topics := ledger.Topics()
		if len(topics) == 1 {
			def = topics[0]
		}
		if cut, err = mapping.ParseCut(q.Offsets, def); err != nil {
			want := err.Error()
			if len(topics) > 1 {
				want += fmt.Sprintf(" (%s holds the topics %s)", tbl.Name(), strings.Join(topics, ", "))
			}
			return res, &QueryError{Setting: SettingOffsets, Value: q.Offsets, Want: want}
		}
		for tp := range cut {
			if !slices.Contains(topics, tp.Topic) {
				// As floe where names them: "the table has nothing of
				// nope/0" did not say what it has (a new user's run).
				return res, &QueryError{Setting: SettingOffsets, Value: q.Offsets,
					Want: fmt.Sprintf("offsets of a topic %s holds: %s", tbl.Name(), strings.Join(topics, ", "))}
			}
		}
		for tp := range cut {
			source[tp] = SourceGiven
		}
	} else {
		t := *q.Time
		res.Time = &t
		if cut, res.Compacted, err = timeCut(ctx, tbl, broker, ledger, lost, t, source); err != nil {
			return res, err
		}
	}
	tps := slices.SortedFunc(maps.Keys(cut), mapping.TopicPartition.Compare)
	for _, tp := range tps {
		res.Positions = append(res.Positions, Position{Topic: tp.Topic, Partition: tp.Partition, Offset: cut[tp], Source: source[tp]})
	}
	for _, tp := range tps {
		for _, iv := range lost[tp] {
			if iv.Low < cut[tp] {
				res.Lost = append(res.Lost, LostRange{Topic: tp.Topic, Partition: tp.Partition, Low: iv.Low, High: min(iv.High, cut[tp])})
			}
		}
	}
	held := ledger.HeldFirst(lost)
	if res.Mode == mapping.ModeUpsert {
		b, err := tbl.StateAt(ctx, 0, cut)
		if err != nil {
			return res, fmt.Errorf("%s as of %s: %w", tbl.Name(), cut, err)
		}
		if err := checkInHistory(tbl, ledger, held, cut, b); err != nil {
			err.Tags = tagsReaching(ctx, tbl, cut)
			return res, err
		}
		exact := b.Exact(cut) && len(res.Compacted) == 0
		res.Exact, res.Empty = &exact, b.Empty || beforeFirst(ledger, cut)
		if !b.Empty {
			res.SnapshotID, res.CommittedAt = b.Commit.SnapshotID, b.Commit.CommittedAt
		}
		if !res.Empty && beforeFirst(ledger, b.At) {
			// A boundary at the first offset of every partition named (a
			// sink's start commit, below a position inside the first
			// commit) is the empty table too, unless a partition the
			// position leaves out had rows then: "empty": false came
			// with 0 rows (a new user's run).
			if res.Empty, err = noRecords(ctx, tbl, b.Commit.SnapshotID); err != nil {
				return res, fmt.Errorf("%s as of %s: %w", tbl.Name(), cut, err)
			}
		}
		if b.Next != nil {
			res.NextSnapshotID = &b.Next.SnapshotID
		}
		for _, tp := range tps {
			res.Boundary = append(res.Boundary, Position{Topic: tp.Topic, Partition: tp.Partition, Offset: b.At[tp], Source: SourceCommit})
		}
		res.Expired = !res.Empty && tbl.Iceberg().Metadata().SnapshotByID(res.SnapshotID) == nil
		res.Published = historyStart(ctx, tbl, held, cut)
		return res, nil
	}
	c, err := tbl.FirstCovering(ctx, 0, cut)
	if err != nil {
		return res, fmt.Errorf("%s as of %s: %w", tbl.Name(), cut, err)
	}
	if err := checkBeforePublished(tbl, ledger, held, cut, c.SnapshotID); err != nil {
		err.Tags = tagsReaching(ctx, tbl, cut)
		return res, err
	}
	res.SnapshotID, res.CommittedAt, res.Cut = c.SnapshotID, c.CommittedAt, cut
	res.Expired = tbl.Iceberg().Metadata().SnapshotByID(res.SnapshotID) == nil
	res.Empty = beforeFirst(ledger, cut)
	res.Published = historyStart(ctx, tbl, held, cut)
	return res, nil
}

// checkInHistory returns a *BeforeHistoryError when boundary b of an upsert
// table holds none of cut's partitions while the cut is past the first
// offset main's ledger holds of one, when main's head descends from a
// replay published onto it (publishedOnto): that ledger began with the
// replay, and the state before its first commit is not the state main had
// then (a new user read 0 rows, as of an empty table).
//
// A cut above 0 and at or below that first offset in any partition is
// refused too, as checkBeforePublished refuses it of an append table:
// main may have held keys of those offsets before the publish, and the
// answer was "the empty table" (review s67).
func checkInHistory(tbl *snapshot.Table, ledger mapping.Summary, held map[mapping.TopicPartition]int64, cut mapping.Cut, b mapping.Boundary) *BeforeHistoryError {
	if !belowHeld(cut, held) {
		if beforeFirst(ledger, cut) || b.Next == nil {
			return nil
		}
		for tp := range cut {
			if ps, ok := ledger.Partition(tp); ok && b.At[tp] > ps.First() {
				return nil
			}
		}
	}
	branch := publishedOnto(tbl)
	if branch == "" {
		return nil
	}
	first := b.Commit.SnapshotID
	if b.Next != nil {
		first = b.Next.SnapshotID
	}
	return &BeforeHistoryError{Table: tbl.Name(), Cut: cut, Branch: branch, FirstSnapshot: first}
}

// belowHeld reports whether cut is, in some partition, above 0 and at or
// below where main's ledger holds its own records (held,
// mapping.Summary.HeldFirst): a position main's history no longer reaches
// once a replay was published onto it.
func belowHeld(cut mapping.Cut, held map[mapping.TopicPartition]int64) bool {
	for tp, o := range cut {
		if h, ok := held[tp]; ok && o > 0 && o <= h {
			return true
		}
	}
	return false
}

// historyStart returns where main's history begins in the partitions of
// cut, when a replay published onto main began past offset 0 in one of
// them (AsOfResult.Published), or nil: an answer past that start held the
// replay's rows only, and said nothing of those main may have held below
// it before the publish (review s67). A position at or below the start is
// refused (checkBeforePublished, checkInHistory), not answered.
func historyStart(ctx context.Context, tbl *snapshot.Table, held map[mapping.TopicPartition]int64, cut mapping.Cut) *HistoryStart {
	var starts []Position
	for _, tp := range slices.SortedFunc(maps.Keys(cut), mapping.TopicPartition.Compare) {
		if h := held[tp]; h > 0 && cut[tp] > h {
			starts = append(starts, Position{Topic: tp.Topic, Partition: tp.Partition, Offset: h, Source: SourceLedger})
		}
	}
	if len(starts) == 0 {
		return nil
	}
	branch := publishedOnto(tbl)
	if branch == "" {
		return nil
	}
	return &HistoryStart{Branch: branch, Starts: starts, Tags: tagsReaching(ctx, tbl, cut)}
}

// publishedOnto returns the branch whose head, published onto main, main's
// head descends from (snapshot.Table.PublishedBranch): main's ledger begins
// with that replay's commits, and main's commits before the publish are not
// in its history. Of a main replaced twice, it is the later replay's
// branch: the table's properties record every publish, main's ancestry
// tells which one its ledger begins with. It returns "" for a table open
// on another branch, and for a main that descends from no published head.
func publishedOnto(tbl *snapshot.Table) string {
	head := tbl.Head()
	if tbl.Branch() != table.MainBranch || head == nil {
		return ""
	}
	return tbl.PublishedBranch(head.SnapshotID)
}

// checkBeforePublished returns a *BeforeHistoryError when cut is, in some
// partition, above 0 and at or below the first offset main's ledger holds
// of it, when main's head descends from a replay published onto it
// (publishedOnto): main's ledger begins where the replay began (--from),
// and main may have held rows of those offsets before the publish, which
// its history no longer reaches; "the table held nothing then" was not
// true (a new user's report). So also when the cut is past the first
// offset in another partition: the answer had that partition's rows and
// none of this one's (review s67). first is main's first commit covering
// the cut.
func checkBeforePublished(tbl *snapshot.Table, ledger mapping.Summary, held map[mapping.TopicPartition]int64, cut mapping.Cut, first int64) *BeforeHistoryError {
	if !belowHeld(cut, held) {
		return nil
	}
	branch := publishedOnto(tbl)
	if branch == "" {
		return nil
	}
	return &BeforeHistoryError{Table: tbl.Name(), Cut: cut, Branch: branch, FirstSnapshot: first}
}

// tagsReaching returns the table's tags whose ledger (their snapshot's
// ancestry) reaches cut in every partition of it, sorted: floe as-of
// --branch TAG answers from such a tag what main's history no longer
// reaches (floe replay --tag-main makes one of main's head before a
// publish). Only a refusal asks, so reading each tag's ledger costs no
// answer anything; a tag whose ledger cannot be read is left out.
func tagsReaching(ctx context.Context, tbl *snapshot.Table, cut mapping.Cut) []string {
	var tags []string
	for _, r := range tbl.Refs() {
		if r.Kind != snapshot.RefTag {
			continue
		}
		s, err := tbl.Summary(ctx, r.SnapshotID)
		if err != nil {
			continue
		}
		reaches := true
		for tp, o := range cut {
			if ps, ok := s.Partition(tp); !ok || ps.High < o {
				reaches = false
			}
		}
		if reaches {
			tags = append(tags, r.Name)
		}
	}
	return tags
}

// beforeFirst reports whether every partition's cut is at or below the
// first offset the table holds of it: the table held nothing then.
func beforeFirst(ledger mapping.Summary, cut mapping.Cut) bool {
	for tp, o := range cut {
		if ps, ok := ledger.Partition(tp); ok && o > ps.First() {
			return false
		}
	}
	return true
}

// noRecords reports whether the ledger as of snapshot id has committed no
// record as a row in any partition.
func noRecords(ctx context.Context, tbl *snapshot.Table, id int64) (bool, error) {
	sum, err := tbl.SummaryOf(ctx, id)
	if err != nil {
		return false, err
	}
	for _, tp := range sum.Partitions() {
		if p, _ := sum.Partition(tp); p.Records > 0 {
			return false, nil
		}
	}
	return true, nil
}

// sameTopic returns a *snapshot.TopicIDError when the brokers' topic has
// another ID than the one the ledger of table recorded: its offsets name
// other records (the topic was deleted and recreated, or this is another
// cluster), so the broker cannot answer for the table. A topic the brokers
// do not have is not an error: the table's side answers.
func sameTopic(ctx context.Context, table string, ledger mapping.Summary, broker *connector.Broker, topic string) error {
	t, err := broker.Topic(ctx, topic)
	if errors.Is(err, connector.ErrUnknownTopic) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := snapshot.CheckTopicID(table, ledger, topic, t.ID); err != nil {
		return fmt.Errorf("%w; without --brokers floe answers from the table alone", err)
	}
	return nil
}

// timeCut maps a record time to a cut over every partition of the ledger:
// from the broker where it retains everything the table holds of a
// partition, else from the table's timestamp column. It records each
// partition's source in source; lost are the ledger's lost ranges
// (snapshot.Table.LostRanges), past which the column cannot place a time. On a compacted topic the broker may no
// longer have a record the table holds, stamped at or after t: an append
// table's column lowers the broker's cut to it; an upsert table's cannot
// (its rows are each key's latest value), and compacted names the topics
// it took such a cut of from the broker (a review found a row too many).
func timeCut(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, ledger mapping.Summary, lost map[mapping.TopicPartition][]mapping.Interval, t time.Time, source map[mapping.TopicPartition]string) (cut mapping.Cut, compacted []string, err error) {
	cut = mapping.Cut{}
	isAppend := tbl.Mode() == mapping.ModeAppend
	var fromTable, lower []mapping.TopicPartition
	byTopic := map[string]map[int32]int64{}
	starts := map[string]map[int32]connector.Watermarks{}
	compacts := map[string]bool{}
	for _, tp := range ledger.Partitions() {
		if broker != nil {
			if _, ok := byTopic[tp.Topic]; !ok {
				if err := sameTopic(ctx, tbl.Name(), ledger, broker, tp.Topic); err != nil {
					return nil, nil, err
				}
				offs, err := broker.OffsetsForTime(ctx, tp.Topic, t)
				if errors.Is(err, connector.ErrUnknownTopic) {
					// The topic is gone: the table's column answers.
					byTopic[tp.Topic] = nil
					fromTable = append(fromTable, tp)
					continue
				}
				if err != nil {
					return nil, nil, err
				}
				wm, err := broker.Watermarks(ctx, tp.Topic)
				if err != nil {
					return nil, nil, err
				}
				byTopic[tp.Topic], starts[tp.Topic] = offs, wm
				// A policy the brokers do not describe (no DescribeConfigs
				// right) is taken for compaction: an append table's column
				// gives the same cut either way, at a scan's cost.
				policy, err := broker.CleanupPolicy(ctx, tp.Topic)
				compacts[tp.Topic] = err != nil || connector.Compacts(policy)
			}
			w, ok := starts[tp.Topic][tp.Partition]
			o, listed := byTopic[tp.Topic][tp.Partition]
			if ps, _ := ledger.Partition(tp); ok && listed && w.LogStart <= ps.First() {
				cut[tp], source[tp] = o, SourceBroker
				switch {
				case compacts[tp.Topic] && isAppend:
					lower = append(lower, tp)
				case compacts[tp.Topic] && !slices.Contains(compacted, tp.Topic):
					compacted = append(compacted, tp.Topic)
				}
				continue
			}
		}
		fromTable = append(fromTable, tp)
	}
	if len(fromTable) == 0 && len(lower) == 0 {
		return cut, compacted, nil
	}
	if mode := tbl.Mode(); !isAppend {
		kind := "a state table"
		if mode == mapping.ModeUpsert {
			kind = "an upsert table"
		}
		return nil, nil, &CheckError{Settings: []Setting{SettingBroker},
			Err: fmt.Errorf("%s is %s: its rows are only each key's latest value, so its timestamps cannot place a record time; the log can, from a broker that still retains it", tbl.Name(), kind)}
	}
	tc, err := tbl.TimeCut(ctx, 0, t)
	if errors.Is(err, snapshot.ErrDeadLettersNotHeld) {
		return nil, nil, &CheckError{Settings: []Setting{SettingBroker},
			Err: fmt.Errorf("%w: the times of those records are unknown, so the table's own timestamps cannot place a record time; the log can, from a broker that still retains it", err)}
	}
	if err != nil {
		return nil, nil, err
	}
	for _, tp := range fromTable {
		for _, iv := range lost[tp] {
			// Any cut in or at the end of the loss gives the same rows;
			// one past it depends on times nobody knows (from a review:
			// all rows, where a lost record stamped after the time cut
			// before every one).
			if tc[tp] > iv.High {
				return nil, nil, fmt.Errorf("%s as of %s: the ledger records offsets %s of %s as lost to retention before they were sunk, and their record times are unknown: one stamped at or after the time would cut there, below rows the table's timestamps place before it; give the position instead (--offsets %s=OFFSET)",
					tbl.Name(), t.UTC().Format(time.RFC3339Nano), iv, tp, tp)
			}
		}
		cut[tp], source[tp] = tc[tp], SourceTable
	}
	if publishedOnto(tbl) != "" {
		if err := lowerToHistory(ctx, tbl, ledger, cut, fromTable); err != nil {
			return nil, nil, err
		}
	}
	for _, tp := range lower {
		// Only a row lowers it: the column's cut of a partition without a
		// row at or after the time is the table's next offset, which a
		// table behind the log would take for the time's position.
		if ps, _ := ledger.Partition(tp); tc[tp] < cut[tp] && tc[tp] < ps.Next() {
			cut[tp], source[tp] = tc[tp], SourceTable
		}
	}
	return cut, compacted, nil
}

// lowerToHistory lowers the cut of each partition of tps (cut from the
// table's timestamp column) to the first offset main's ledger holds of it
// when the table holds no record, row or dead letter, from there to the
// cut: the offsets between held only aborted records or markers, which the
// column does not see, so the time may fall anywhere up to the first
// offset, and below it in main's history before a publish
// (checkBeforePublished then refuses the position, as it does the broker's
// cut: found by review s67, the answer was none of the partition's rows).
// The rows below the cut are the same either way.
func lowerToHistory(ctx context.Context, tbl *snapshot.Table, ledger mapping.Summary, cut mapping.Cut, tps []mapping.TopicPartition) error {
	spans := map[mapping.TopicPartition]mapping.Interval{}
	for _, tp := range tps {
		if ps, ok := ledger.Partition(tp); ok && cut[tp] > ps.First() {
			spans[tp] = mapping.Interval{Low: ps.First(), High: cut[tp]}
		}
	}
	if len(spans) == 0 {
		return nil
	}
	dlqs, err := tbl.DeadLetterTables(ctx)
	if err != nil {
		return err
	}
	held := map[mapping.TopicPartition]bool{}
	for _, t := range append([]*snapshot.Table{tbl}, dlqs...) {
		if t.Head() == nil {
			continue
		}
		err := t.ScanPositions(ctx, 0, spans, snapshot.PositionOptions{}, func(tp mapping.TopicPartition, _ int64) { held[tp] = true })
		if err != nil {
			return fmt.Errorf("read the positions of %s: %w", t.Name(), err)
		}
	}
	for tp, span := range spans {
		if !held[tp] {
			cut[tp] = span.Low
		}
	}
	return nil
}

// ExactAt checks that tbl's rows of snapshotID below cut are exactly the
// table as of the cut. They are for an event table. A state table's rows
// are each key's latest value as of the snapshot, so its rows are the
// table as of a cut only where the cut is the snapshot's end of the
// partition (or at or below its first offset): use the first snapshot
// covering the cut (AsOf). A cut inside a range is an error naming the
// range's ends, the nearest exact offsets. It reads the ledger's summary,
// and the archive block holding a cut's offset only when that offset is
// inside the partition's span.
func ExactAt(ctx context.Context, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut) error {
	if tbl.Mode() == mapping.ModeAppend {
		return nil
	}
	sum, err := tbl.Summary(ctx, snapshotID)
	if err != nil {
		return err
	}
	for tp, o := range cut {
		ps, ok := sum.Partition(tp)
		if !ok || o <= ps.First() || o == ps.High {
			continue
		}
		loc, err := tbl.Locate(ctx, snapshotID, tp, o-1)
		if err != nil {
			return err
		}
		return fmt.Errorf("%s is a state table: it is exact only at the end of a commit, and %s=%d lies inside range [%d, %d); use offset %d or %d",
			tbl.Name(), tp, o, loc.Range.Low, loc.Range.High, loc.Range.Low, loc.Range.High)
	}
	return nil
}
