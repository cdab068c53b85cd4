package lookup

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// DeadLetterQuery selects the dead letters DeadLetters lists. Its zero
// value selects every one and lists them all.
type DeadLetterQuery struct {
	// Topic selects one topic ("": every one); Partition one partition
	// (nil: every one).
	Topic     string
	Partition *int32
	// From and Until select the offsets [From, Until) (nil: no bound).
	From, Until *int64
	// Since selects the records stamped at or after it (nil: any).
	Since *time.Time
	// Limit is the most dead letters listed, the first by topic,
	// partition and offset (0: every one); Matched and Reasons count all
	// that the query selects.
	Limit int
	// CountOnly lists none: Matched and Reasons only.
	CountOnly bool
}

// DeadLettersResult is the dead letters of a table: the records of a
// typed table that could not become rows, which its ledger sent to its
// dead-letter tables, with why. Its JSON field names are stable (floe
// dead-letters --json).
type DeadLettersResult struct {
	Table string `json:"table"`
	// Commits is the number of commits of the table's ledger.
	Commits int `json:"commits"`
	// DeadLetterTables are the dead-letter tables the ledger sent dead
	// letters to that exist, sorted.
	DeadLetterTables []string `json:"dead_letter_tables"`
	// Counted is the number of dead letters the ledger counts in the
	// selected topic and partition, whatever the offsets and the time
	// selected.
	Counted int64 `json:"counted"`
	// Matched is the number of the dead-letter tables' rows that the
	// ledger accounts for and the query selects. DeadLetters lists the
	// first of them by topic, partition and offset, More says it lists
	// fewer than Matched (the query's Limit).
	Matched     int64        `json:"matched"`
	More        bool         `json:"more"`
	DeadLetters []DeadLetter `json:"dead_letters"`
	// Reasons counts the matched dead letters by reason, most first.
	Reasons []ReasonCount `json:"reasons"`
	// Notes say what the dead-letter tables hold that the ledger does
	// not account for, and what the ledger counts that they lack.
	Notes []string `json:"notes,omitempty"`
}

// DeadLetter is one record that could not become a row, as its
// dead-letter table keeps it.
type DeadLetter struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"` // UTC
	// Error is why the record could not become a row; Reason is the
	// reason DeadLettersResult.Reasons counts it by: Error without what
	// is particular to the record where the dead letters of that reason
	// differ (reasonGroup).
	Error  string `json:"error"`
	Reason string `json:"reason"`
	// SchemaID is the schema registry id the record named, when it named
	// one.
	SchemaID *int32 `json:"schema_id,omitempty"`
	// Key and Value are the record's bytes as produced (base64 in JSON;
	// null when the record had none).
	Key     []byte             `json:"key_base64"`
	Value   []byte             `json:"value_base64"`
	Headers []DeadLetterHeader `json:"headers"`
	// Table is the dead-letter table holding it, File its data file, and
	// CommitID the id of the data table's commit that accounts for it
	// (empty in rows an older floe wrote).
	Table    string `json:"dead_letter_table"`
	File     string `json:"file"`
	CommitID string `json:"commit_id,omitempty"`
}

// DeadLetterHeader is one Kafka header of a dead letter; keys may repeat.
type DeadLetterHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value_base64"`
}

// ReasonCount is how many matched dead letters have one reason, and the
// first of them by position, whose whole error names the fix when the
// sink knew one.
type ReasonCount struct {
	Reason    string `json:"reason"`
	Count     int64  `json:"count"`
	Topic     string `json:"first_topic"`
	Partition int32  `json:"first_partition"`
	Offset    int64  `json:"first_offset"`
	Error     string `json:"first_error"`
}

// DeadLetters lists the dead letters of tbl's ledger (its branch head):
// the rows of the dead-letter tables its commits name whose commit is one
// of the ledger's (rows of an older floe without a commit id: whose
// commit, as reconciling and the audit attribute them, is), as the invariant of
// docs/dead-letters.md says. Rows of commits the ledger does not have
// (rolled back, replaced by a published branch) are left out, and said
// in a note, as are dead letters the ledger counts that the tables do not
// hold. A table without floe commits has none (Commits is 0).
//
// A topic the table never held, a partition it does not have and a bound
// no offset can have are refused, as a *QueryError; a dead-letter table
// as tbl, as a *DeadLetterTableError.
func DeadLetters(ctx context.Context, tbl *snapshot.Table, q DeadLetterQuery) (DeadLettersResult, error) {
	res := DeadLettersResult{Table: tbl.Name(), DeadLetterTables: []string{}, DeadLetters: []DeadLetter{}, Reasons: []ReasonCount{}}
	if err := q.validate(); err != nil {
		return res, err
	}
	if err := CheckDataTable(tbl, "which records are its dead letters is for that table's ledger to say"); err != nil {
		return res, err
	}
	sum, err := tbl.Summary(ctx, 0)
	if err != nil {
		return res, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	res.Commits = sum.Commits
	if sum.Commits == 0 {
		return res, nil
	}
	if err := q.check(tbl.Name(), sum); err != nil {
		return res, err
	}
	for tp, p := range sum.Parts {
		if q.selects(tp) {
			res.Counted += p.DeadLetters
		}
	}
	dlqs, err := tbl.DeadLetterTables(ctx)
	if err != nil {
		return res, err
	}
	l := &deadLetterList{q: q, reasons: map[string]*reasonGroup{}, heldOf: map[string]int64{}}
	for _, dlq := range dlqs {
		commits, err := tbl.DeadLetterCommits(ctx, 0, dlq.Name())
		if err != nil {
			return res, fmt.Errorf("read ledger of %s for the commits naming %s: %w", tbl.Name(), dlq.Name(), err)
		}
		if len(commits) == 0 {
			continue // another branch's, or only rolled-back commits named it
		}
		res.DeadLetterTables = append(res.DeadLetterTables, dlq.Name())
		if err := l.read(ctx, tbl, dlq, commits); err != nil {
			return res, err
		}
		if err := l.readLost(ctx, tbl, dlq, commits); err != nil {
			return res, err
		}
	}
	l.finish(&res)
	in := ""
	if q.Topic != "" || q.Partition != nil {
		in = " in the topic and partition selected"
	}
	// The audit to run is of the ledger read: a branch's, for --branch.
	audit, writer := "floe audit --table "+tbl.Name(), "floe sink session"
	if tbl.Branch() != table.MainBranch {
		audit += " --branch " + tbl.Branch()
		writer = "floe replay --branch " + tbl.Branch()
	}
	if tbl.OnTag() {
		// Nothing writes onto a tag: its commits were made on main.
		writer = "floe sink session on the table"
	}
	if l.lost > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the ledger counts %s%s that no dead-letter table holds: recorded as lost by floe maintain --drop-missing-dead-letter-files, their files being gone from the storage (%s); only a replay of the table brings them back, and %s reports them (dead-letters-lost)",
			deadLetterCount(l.lost), in, commitsNamed(l.lostCommits), audit))
	}
	switch {
	case l.held+l.lost < res.Counted:
		res.Notes = append(res.Notes, fmt.Sprintf("the ledger counts %s%s that no dead-letter table holds yet (pending: a sink committed them but could not add them, and the next %s or floe maintain adds them), or whose files are gone; %s tells which",
			deadLetterCount(res.Counted-l.held-l.lost), in, writer, audit))
	case l.held > res.Counted:
		res.Notes = append(res.Notes, fmt.Sprintf("the dead-letter tables hold %s more%s than the ledger counts; %s names the commits", deadLetterCount(l.held-res.Counted), in, audit))
	}
	return res, nil
}

// validate refuses a bound no position can have.
func (q DeadLetterQuery) validate() error {
	switch {
	case q.Partition != nil && *q.Partition < 0:
		return &QueryError{Setting: SettingPartition, Value: fmt.Sprint(*q.Partition), Want: "a partition number, 0 or more"}
	case q.From != nil && *q.From < 0:
		return &QueryError{Setting: SettingFromOffset, Value: fmt.Sprint(*q.From), Want: "an offset, 0 or more"}
	case q.Until != nil && *q.Until <= 0:
		return &QueryError{Setting: SettingUntilOffset, Value: fmt.Sprint(*q.Until), Want: "an offset above 0 (the offsets below it are selected)"}
	case q.From != nil && q.Until != nil && *q.Until <= *q.From:
		return &QueryError{Setting: SettingUntilOffset, Value: fmt.Sprint(*q.Until), Want: fmt.Sprintf("an offset above the first one selected, %d", *q.From)}
	}
	return nil
}

// check refuses a topic or a partition that the ledger summed up in sum
// does not have.
func (q DeadLetterQuery) check(table string, sum mapping.Summary) error {
	topics := sum.Topics()
	if q.Topic != "" && !slices.Contains(topics, q.Topic) {
		return &QueryError{Setting: SettingTopic, Value: q.Topic, Want: fmt.Sprintf("a topic %s holds: %s", table, strings.Join(topics, ", "))}
	}
	if q.Partition == nil {
		return nil
	}
	var have []string
	for _, tp := range sum.Partitions() {
		if q.Topic == "" || tp.Topic == q.Topic {
			if tp.Partition == *q.Partition {
				return nil
			}
			have = append(have, tp.String())
		}
	}
	return &QueryError{Setting: SettingPartition, Value: fmt.Sprint(*q.Partition), Want: fmt.Sprintf("a partition %s holds: %s", table, strings.Join(have, ", "))}
}

// selects reports whether the query selects partition tp.
func (q DeadLetterQuery) selects(tp mapping.TopicPartition) bool {
	return (q.Topic == "" || tp.Topic == q.Topic) && (q.Partition == nil || tp.Partition == *q.Partition)
}

// filter is the query's topic and partition as a scan's row filter, which
// prunes the files of other partitions by their bounds; nil when it
// selects every partition. Offsets and times are selected while reading,
// since every row of the partitions counts against the ledger.
func (q DeadLetterQuery) filter() iceberg.BooleanExpression {
	var fs []iceberg.BooleanExpression
	if q.Topic != "" {
		fs = append(fs, iceberg.EqualTo(iceberg.Reference(mapping.ColTopic), q.Topic))
	}
	if q.Partition != nil {
		fs = append(fs, iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), *q.Partition))
	}
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return iceberg.NewAnd(fs[0], fs[1])
}

// matches reports whether the query selects dead letter d of a selected
// partition.
func (q DeadLetterQuery) matches(d *DeadLetter) bool {
	return (q.From == nil || d.Offset >= *q.From) && (q.Until == nil || d.Offset < *q.Until) &&
		(q.Since == nil || !d.Timestamp.Before(*q.Since))
}

// deadLetterList gathers the dead letters of a query from the dead-letter
// tables, keeping the first Limit by position.
type deadLetterList struct {
	q       DeadLetterQuery
	kept    []DeadLetter
	matched int64
	// held counts the rows of the selected partitions that the ledger
	// accounts for, whatever their offsets and times, to compare with
	// the ledger's count.
	held int64
	// heldOf counts held by commit id; lost counts the dead letters of
	// the selected partitions that floe maintain recorded as lost, of
	// lostCommits (readLost).
	heldOf      map[string]int64
	lost        int64
	lostCommits []string
	reasons     map[string]*reasonGroup
	notes       []string
}

// ledgerRows tells the rows of a dead-letter table that a ledger's
// commits account for: a dead-letter table holds the dead letters of
// every branch's and tag's ledger, so a row is the ledger's when it names
// one of its commits, or, without a commit id (written before the column
// existed), when the commit reconciling and the audit attribute it to is
// (snapshot.DeadLetterState.LegacyOwner: docs/dead-letters.md, older
// rows): a tag's legacy row at offsets main sank again is the tag's.
type ledgerRows struct {
	ids map[string]bool
	// data is the data table and dlq the dead-letter table, whose state
	// attributes rows without a commit id; read at the first such row.
	data, dlq *snapshot.Table
	state     *snapshot.DeadLetterState
}

// newLedgerRows returns the rows of dead-letter table dlq of data table
// data that a ledger accounts for, once add gave its commits (dlq nil: set
// before holds is asked).
func newLedgerRows(data, dlq *snapshot.Table) *ledgerRows {
	return &ledgerRows{ids: map[string]bool{}, data: data, dlq: dlq}
}

// add records commit id of the ledger.
func (l *ledgerRows) add(id string) { l.ids[id] = true }

// holds reports whether row i, at offset of tp, is the ledger's: ids is
// the batch's commit id column, nil when the table has none.
func (l *ledgerRows) holds(ctx context.Context, ids *array.String, i int, tp mapping.TopicPartition, offset int64) (bool, error) {
	id, err := l.owner(ctx, ids, i, tp, offset)
	return id != "", err
}

// owner returns the id of the ledger's commit that row i, at offset of
// tp, belongs to, "" when it is not the ledger's (see holds).
func (l *ledgerRows) owner(ctx context.Context, ids *array.String, i int, tp mapping.TopicPartition, offset int64) (string, error) {
	id := ""
	if ids != nil && ids.IsValid(i) {
		id = ids.Value(i)
	} else {
		if l.state == nil {
			st, err := l.data.DeadLetterState(ctx, l.dlq)
			if err != nil {
				return "", fmt.Errorf("attribute the dead letters of %s without a commit id (an older floe's) to commits: %w", l.dlq.Name(), err)
			}
			l.state = st
		}
		id = l.state.LegacyOwner(tp, offset)
	}
	if !l.ids[id] {
		return "", nil
	}
	return id, nil
}

// read adds the rows of dead-letter table dlq that commits (those of the
// ledger of data table data naming it) account for.
func (l *deadLetterList) read(ctx context.Context, data, dlq *snapshot.Table, commits []mapping.Commit) error {
	head := dlq.Head()
	if head == nil {
		return nil // its first dead letters are pending: the ledger's count says so
	}
	accounted := newLedgerRows(data, dlq)
	for _, c := range commits {
		accounted.add(c.ID)
	}
	_, hasIDs := dlq.Iceberg().Schema().FindFieldByName(mapping.ColCommitID)
	var stale int64
	var lost, unreadable []string
	err := dlq.ScanFiles(ctx, head.SnapshotID, snapshot.ScanOptions{Filter: l.q.filter(), MissingOK: true}, func(fb snapshot.FileBatch) error {
		switch {
		case fb.Missing:
			lost = append(lost, fb.Path)
		case fb.Unreadable != nil:
			unreadable = append(unreadable, fmt.Sprintf("%s (%v)", fb.Path, fb.Unreadable))
		case len(fb.GoneDeletes) > 0:
			unreadable = append(unreadable, fmt.Sprintf("%s (its delete files %s are gone from its storage)", fb.Path, strings.Join(fb.GoneDeletes, ", ")))
		}
		if fb.Done {
			return nil
		}
		b := fb.Batch
		reason, ok1 := column[*array.String](b, mapping.ColError)
		schema, ok2 := column[*array.Int32](b, mapping.ColSchemaID)
		var ids *array.String
		ok3 := true
		if hasIDs {
			ids, ok3 = column[*array.String](b, mapping.ColCommitID)
		}
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("dead-letter file %s: unexpected column types %s", fb.Path, b.Schema())
		}
		next := 0 // eachRow goes through the batch's rows in order
		return eachRow(b, mapping.DeadLetterLayout.RawValueColumn(), func(r Row) error {
			i := next
			next++
			d := DeadLetter{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Table: dlq.Name(), File: fb.Path}
			hasID := ids != nil && ids.IsValid(i)
			if hasID {
				d.CommitID = ids.Value(i)
			}
			tp := mapping.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			owner, err := accounted.owner(ctx, ids, i, tp, r.Offset)
			if err != nil {
				return err
			}
			if owner == "" {
				stale++
				return nil
			}
			l.held++
			l.heldOf[owner]++
			if !l.q.matches(&d) {
				return nil
			}
			if reason.IsValid(i) {
				d.Error = reason.Value(i)
			}
			if schema.IsValid(i) {
				id := schema.Value(i)
				d.SchemaID = &id
			}
			d.Key, d.Value = bytesOf(r.Key), bytesOf(r.Value)
			d.Headers = make([]DeadLetterHeader, 0, len(r.Headers))
			for _, h := range r.Headers {
				d.Headers = append(d.Headers, DeadLetterHeader{Key: h.Key, Value: bytesOf(h.Value)})
			}
			l.add(d)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("read the dead letters of %s: %w", dlq.Name(), err)
	}
	for _, what := range unreadable {
		// Read as far as it could be (ScanOptions.MissingOK): said, as
		// a file the storage lost is.
		l.notes = append(l.notes, fmt.Sprintf("%s lists data file %s, which cannot be read: its dead letters (or the rest of them) are not listed; see floe audit --deep", dlq.Name(), what))
	}
	for _, path := range lost {
		l.notes = append(l.notes, fmt.Sprintf("%s lists data file %s, which its storage no longer has (deleted outside floe): its dead letters are not listed; see floe audit, and docs/dead-letters.md on files the storage lost", dlq.Name(), path))
	}
	if stale > 0 {
		l.notes = append(l.notes, fmt.Sprintf("%s also holds %s of commits this table's ledger does not have (rolled back, replaced by a published branch, or another branch's or a tag's): not listed; the next floe sink session or floe maintain removes those no branch or tag has",
			dlq.Name(), deadLetterCount(stale)))
	}
	return nil
}

// readLost counts the dead letters of the selected partitions of
// commits (those of the ledger of data table data naming dead-letter
// table dlq) that floe maintain --drop-missing-dead-letter-files recorded
// as lost and that still are, which the audit reports as
// dead-letters-lost (lostState), once read has counted what dlq holds.
func (l *deadLetterList) readLost(ctx context.Context, data, dlq *snapshot.Table, commits []mapping.Commit) error {
	st, err := lostState(ctx, data, dlq)
	if err != nil || st == nil {
		return err
	}
	for _, c := range st.GivenUp {
		if !slices.ContainsFunc(commits, func(o mapping.Commit) bool { return o.ID == c.ID }) {
			continue // another ref's
		}
		if n := l.q.deadLettersOf(c) - l.heldOf[c.ID]; n > 0 {
			l.lost += n
			l.lostCommits = append(l.lostCommits, c.ID)
		}
	}
	return nil
}

// deadLettersOf is the number of dead letters c's ranges count in the
// partitions the query selects.
func (q DeadLetterQuery) deadLettersOf(c mapping.Commit) int64 {
	var n int64
	for _, r := range c.Ranges {
		if q.selects(r.TopicPartition) {
			n += r.DeadLetters
		}
	}
	return n
}

// lostState returns the state of dead-letter table dlq of data table
// data when its properties record the dead letters of some commit as
// lost (snapshot.PropDeadLettersLostPrefix), nil when they record none:
// its GivenUp are the commits still so, as the audit reads them.
func lostState(ctx context.Context, data, dlq *snapshot.Table) (*snapshot.DeadLetterState, error) {
	recorded := false
	for key := range dlq.Iceberg().Properties() {
		recorded = recorded || strings.HasPrefix(key, snapshot.PropDeadLettersLostPrefix)
	}
	if !recorded {
		return nil, nil
	}
	st, err := data.DeadLetterState(ctx, dlq)
	if err != nil {
		return nil, fmt.Errorf("read which dead letters of %s floe maintain recorded as lost in %s: %w", data.Name(), dlq.Name(), err)
	}
	return st, nil
}

// givenUp returns commit id of st.GivenUp, if it is one.
func givenUp(st *snapshot.DeadLetterState, id string) (mapping.Commit, bool) {
	if st != nil {
		for _, c := range st.GivenUp {
			if c.ID == id {
				return c, true
			}
		}
	}
	return mapping.Commit{}, false
}

// commitsNamed names commit ids in words: every one up to three.
func commitsNamed(ids []string) string {
	if len(ids) == 1 {
		return "commit " + ids[0]
	}
	if len(ids) <= 3 {
		return "commits " + strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%d commits, the first %s", len(ids), ids[0])
}

// deadLetterCount is n dead letters in words.
func deadLetterCount(n int64) string {
	if n == 1 {
		return "1 dead letter"
	}
	return fmt.Sprintf("%d dead letters", n)
}

// bytesOf copies b, which is valid only while its batch is, nil when null.
func bytesOf(b Bytes) []byte {
	if b.Null {
		return nil
	}
	return append(make([]byte, 0, len(b.B)), b.B...)
}

// add counts matched dead letter d and keeps it while it is among the
// first Limit by position. Kept ones are cut back to Limit when they
// reach twice as many, so that memory is set by the limit.
func (l *deadLetterList) add(d DeadLetter) {
	l.matched++
	parts := reasonPartsOf(d.Error)
	// The key until finish shows the reason.
	d.Reason = parts.key()
	rc := l.reasons[d.Reason]
	if rc == nil {
		rc = &reasonGroup{ReasonCount: ReasonCount{Reason: d.Reason, Topic: d.Topic, Partition: d.Partition, Offset: d.Offset, Error: d.Error},
			parts: parts, alike: make([]bool, len(parts.parts))}
		for i := range rc.alike {
			rc.alike[i] = true
		}
		l.reasons[d.Reason] = rc
	}
	rc.add(parts)
	rc.Count++
	if comparePositions(d.Topic, d.Partition, d.Offset, rc.Topic, rc.Partition, rc.Offset) < 0 {
		rc.Topic, rc.Partition, rc.Offset, rc.Error = d.Topic, d.Partition, d.Offset, d.Error
	}
	if l.q.CountOnly {
		return
	}
	l.kept = append(l.kept, d)
	if l.q.Limit > 0 && len(l.kept) >= 2*l.q.Limit {
		l.cut()
	}
}

// cut sorts the kept dead letters and keeps the first Limit.
func (l *deadLetterList) cut() {
	slices.SortFunc(l.kept, func(a, b DeadLetter) int {
		return cmp.Or(comparePositions(a.Topic, a.Partition, a.Offset, b.Topic, b.Partition, b.Offset), cmp.Compare(a.Table, b.Table))
	})
	if l.q.Limit > 0 && len(l.kept) > l.q.Limit {
		clear(l.kept[l.q.Limit:])
		l.kept = l.kept[:l.q.Limit]
	}
}

// finish puts what was gathered into res.
func (l *deadLetterList) finish(res *DeadLettersResult) {
	l.cut()
	if l.kept != nil {
		res.DeadLetters = l.kept
	}
	res.Matched = l.matched
	res.More = int64(len(res.DeadLetters)) < l.matched && !l.q.CountOnly
	for _, rc := range l.reasons {
		rc.Reason = rc.parts.render(rc.alike)
		res.Reasons = append(res.Reasons, rc.ReasonCount)
	}
	for i, d := range res.DeadLetters {
		res.DeadLetters[i].Reason = l.reasons[d.Reason].Reason
	}
	slices.SortFunc(res.Reasons, func(a, b ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), comparePositions(a.Topic, a.Partition, a.Offset, b.Topic, b.Partition, b.Offset))
	})
	res.Notes = append(res.Notes, l.notes...)
}

// reasonGroup is a reason's count, with the parts of its first dead
// letter's error and whether every dead letter of the reason has each
// alike. The reason shows those as they are: the key replaces what may
// be particular to a record, and a byte, a number or a remark that no
// record differs in is part of what the error says (the magic byte 0 a
// first byte is not, a fix's example (1.0)), garbled by its holder.
type reasonGroup struct {
	ReasonCount
	parts reasonParts
	alike []bool
}

// add compares the parts of another dead letter's error of the reason.
func (g *reasonGroup) add(p reasonParts) {
	if len(p.parts) != len(g.parts.parts) {
		// A remark left out that one error has and another has not:
		// the parts do not pair up, so none is known alike.
		clear(g.alike)
		return
	}
	for i, part := range p.parts {
		g.alike[i] = g.alike[i] && part == g.parts.parts[i]
	}
}

func comparePositions(at string, ap int32, ao int64, bt string, bp int32, bo int64) int {
	return cmp.Or(cmp.Compare(at, bt), cmp.Compare(ap, bp), cmp.Compare(ao, bo))
}

// column is column name of b as an A, and whether b has it so.
func column[A arrow.Array](b arrow.RecordBatch, name string) (A, bool) {
	var zero A
	idx := b.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return zero, false
	}
	c, ok := b.Column(idx[0]).(A)
	return c, ok
}

var (
	// quotedText is a Go-quoted string in a reason: a value of the
	// record (describeValue, quoteStart).
	quotedText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	// quotedChar is a quoted character ('o', '{'), as a JSON syntax
	// error names one; an apostrophe inside a word ("table's") is not.
	quotedChar = regexp.MustCompile(`(^|[^\pL\pN])'(?:[^'\\]|\\.){1,8}'`)
	// number is a number standing alone (after a space, a parenthesis
	// or a sign), decimal or hex: an offset into the value, a byte, a
	// schema id. Digits inside a word, a type (int32, struct<0: ...>) or
	// an address (127.0.0.1:8081) are not.
	number = regexp.MustCompile(`(^|[\s(=,])(?:0x[0-9a-fA-F]+|-?[0-9]+(?:\.[0-9]+)?)\b`)
)

// reasonParts is a dead letter's error cut into the text that every
// record failing for the same cause has and the parts that may be
// particular to the record: quoted values, quoted characters, numbers
// standing alone, and the parenthesised remarks holding any of them (a
// JSON syntax error's position, the character a first byte stands for).
type reasonParts struct {
	// text holds the pieces around the parts: text[i] comes before
	// parts[i], the last one after the last part.
	text []string
	// parts are the particular parts as this error has them, holders
	// what stands for each where the records of a reason differ in it
	// ("" for a remark, which is left out).
	parts, holders []string
}

// reasonPartsOf cuts err into its reasonParts. Each kind of part is
// looked for in err with the parts found before masked, as if they were
// replaced already: a number inside a quoted value is no part of its own,
// and a parenthesis inside one opens no remark.
func reasonPartsOf(err string) reasonParts {
	type span struct {
		start, end int
		holder     string
	}
	var spans []span
	masked := []byte(err)
	claim := func(start, end int, holder string, mask byte) {
		spans = append(spans, span{start, end, holder})
		for i := start; i < end; i++ {
			masked[i] = mask
		}
	}
	for _, m := range quotedText.FindAllIndex(masked, -1) {
		claim(m[0], m[1], `"…"`, '"')
	}
	for _, m := range quotedChar.FindAllSubmatchIndex(masked, -1) {
		claim(m[3], m[1], `'…'`, '\'')
	}
	for _, m := range number.FindAllSubmatchIndex(masked, -1) {
		claim(m[3], m[1], "#", '#')
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	// The outermost remarks holding a part become one part, with the
	// spaces before them; scanning stops at an unbalanced one, kept as
	// it is.
	var merged []span
	next := 0 // the first span not merged yet
	for from := 0; ; {
		open := bytes.IndexByte(masked[from:], '(')
		if open < 0 {
			break
		}
		open += from
		end, depth := -1, 0
		for i := open; i < len(masked) && end < 0; i++ {
			switch masked[i] {
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					end = i + 1
				}
			}
		}
		if end < 0 {
			break
		}
		inside := next
		for inside < len(spans) && spans[inside].start < end {
			inside++
		}
		if inside > next && spans[inside-1].start >= open {
			for next < len(spans) && spans[next].start < open {
				merged = append(merged, spans[next])
				next++
			}
			start := open
			for start > 0 && err[start-1] == ' ' {
				start--
			}
			merged = append(merged, span{start, end, ""})
			next = inside
		}
		from = end
	}
	merged = append(merged, spans[next:]...)
	var p reasonParts
	at := 0
	for _, s := range merged {
		p.text = append(p.text, err[at:s.start])
		p.parts = append(p.parts, err[s.start:s.end])
		p.holders = append(p.holders, s.holder)
		at = s.end
	}
	p.text = append(p.text, err[at:])
	return p
}

// key is the error without what may be particular to the record, so
// that dead letters that failed for the same cause have the same key:
// quoted values become "…", quoted characters '…', numbers standing
// alone #, and a remark holding any of them is left out. What the error
// says to do stays.
//
//	decode json: not valid JSON: "not json" (at byte 2: invalid character 'o' ...)
//
// is
//
//	decode json: not valid JSON: "…"
//
// DeadLetters counts by it; the reason it shows keeps the parts that
// all the dead letters of the key have alike (reasonGroup).
func (p reasonParts) key() string { return p.render(nil) }

// render is the reason with the parts alike marks (nil: none) as they
// are and the others replaced by their holders.
func (p reasonParts) render(alike []bool) string {
	var b strings.Builder
	for i, part := range p.parts {
		b.WriteString(p.text[i])
		if alike != nil && alike[i] {
			b.WriteString(part)
		} else {
			b.WriteString(p.holders[i])
		}
	}
	b.WriteString(p.text[len(p.parts)])
	return strings.Join(strings.Fields(b.String()), " ")
}
