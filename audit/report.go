package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/floe-dev/floe/internal/text"
	"github.com/floe-dev/floe/mapping"
)

// JSONSchema identifies the JSON report's schema. It changes only when a
// field changes meaning or is removed; fields may be added within a version.
const JSONSchema = "floe.audit/v1"

// span is a half-open offset interval [low, high) in JSON: a two-element
// array.
type span [2]int64

func spans(ivs []mapping.Interval) []span {
	out := make([]span, 0, len(ivs))
	for _, iv := range ivs {
		out = append(out, span{iv.Low, iv.High})
	}
	return out
}

type jsonReport struct {
	Schema           string          `json:"schema"`
	Table            string          `json:"table"`
	Branch           string          `json:"branch"`
	Tag              bool            `json:"tag,omitempty"`
	Fold             *string         `json:"fold"`
	Mode             mapping.Mode    `json:"mode"`
	UpsertKey        *string         `json:"upsert_key"`
	SnapshotID       int64           `json:"snapshot_id"`
	MetadataLocation string          `json:"metadata_location"`
	AuditedAt        string          `json:"audited_at"`
	DurationMs       int64           `json:"duration_ms"`
	Levels           []Level         `json:"levels"`
	Brokers          []string        `json:"brokers"`
	ClusterID        *string         `json:"cluster_id"`
	Complete         bool            `json:"complete"`
	Verdict          string          `json:"verdict"`
	Files            *int            `json:"files"`
	RowsRead         int64           `json:"rows_read"`
	DeadLettersRead  int64           `json:"dead_letters_read,omitempty"`
	Partitions       []jsonPartition `json:"partitions"`
	Findings         []jsonFinding   `json:"findings"`
	// Accepted and AcceptedFrom are present only with --accept.
	Accepted     []jsonFinding `json:"accepted,omitempty"`
	AcceptedFrom *string       `json:"accepted_from,omitempty"`
	Notes        []string      `json:"notes"`
	Evidence     jsonEvidence  `json:"evidence"`
}

type jsonPartition struct {
	Topic         string       `json:"topic"`
	Partition     int32        `json:"partition"`
	InLedger      bool         `json:"in_ledger"`
	First         *int64       `json:"first"`
	Next          *int64       `json:"next"`
	Started       bool         `json:"started"`
	Ranges        int          `json:"ranges"`
	Records       int64        `json:"records"`
	DeadLetters   int64        `json:"dead_letters"`
	Deletes       *int64       `json:"deletes,omitempty"`
	Skipped       *int64       `json:"skipped,omitempty"`
	Gaps          []span       `json:"gaps"`
	Overlaps      []span       `json:"overlaps"`
	Lost          []span       `json:"lost"`
	Aborted       []span       `json:"aborted"`
	Files         *int         `json:"files"`
	Rows          *int64       `json:"rows"`
	LogStart      *int64       `json:"log_start"`
	LastStable    *int64       `json:"last_stable"`
	HighWatermark *int64       `json:"high_watermark"`
	Lag           *int64       `json:"lag"`
	PastReplayEnd int64        `json:"past_replay_end,omitempty"`
	Content       *jsonContent `json:"content"`
	Findings      int          `json:"findings"`
	Status        string       `json:"status"`
	// RowsMissing counts the partition's accepted findings that say rows
	// are missing (missingKinds).
	RowsMissing int `json:"accepted_rows_missing,omitempty"`
}

type jsonContent struct {
	Verified     int64 `json:"verified"`
	Markers      int64 `json:"markers"`
	Aborted      int64 `json:"aborted"`
	Compacted    int64 `json:"compacted"`
	Folded       int64 `json:"folded"`
	Unverifiable int64 `json:"unverifiable"`
	DeadLetters  int64 `json:"dead_letters"`
}

type jsonFinding struct {
	Level      Level   `json:"level"`
	Kind       Kind    `json:"kind"`
	Topic      *string `json:"topic"`
	Partition  *int32  `json:"partition"`
	Offsets    *span   `json:"offsets"`
	File       *string `json:"file"`
	SnapshotID *int64  `json:"snapshot_id"`
	Detail     string  `json:"detail"`
	// OtherPartitions are Finding.Others, when there are.
	OtherPartitions []jsonPartitionRef `json:"other_partitions,omitempty"`
}

// jsonPartitionRef names a partition in a finding.
type jsonPartitionRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type jsonEvidence struct {
	Digest           string `json:"digest"`
	MetadataLocation string `json:"metadata_location"`
	SnapshotID       int64  `json:"snapshot_id"`
	LedgerCommits    int    `json:"ledger_commits"`
}

func ptr[T any](v T) *T { return &v }

// WriteJSON writes the report as one JSON document (schema JSONSchema,
// described in docs/audit.md), indented, followed by a newline.
func (r *Report) WriteJSON(w io.Writer) error {
	ran := func(l Level) bool { return slices.Contains(r.Levels, l) }
	out := jsonReport{
		Schema:           JSONSchema,
		Table:            r.Table,
		Branch:           r.Branch,
		Tag:              r.Tag,
		SnapshotID:       r.Evidence.SnapshotID,
		MetadataLocation: r.Evidence.MetadataLocation,
		AuditedAt:        r.Started.Format(time.RFC3339),
		DurationMs:       r.Duration.Milliseconds(),
		Levels:           r.Levels,
		Brokers:          r.Brokers,
		Complete:         r.Complete(),
		RowsRead:         r.RowsRead,
		DeadLettersRead:  r.DeadLettersRead,
		Partitions:       []jsonPartition{},
		Findings:         []jsonFinding{},
		Notes:            append([]string{}, r.Notes...),
		Evidence: jsonEvidence{
			Digest:           r.Evidence.Digest,
			MetadataLocation: r.Evidence.MetadataLocation,
			SnapshotID:       r.Evidence.SnapshotID,
			LedgerCommits:    r.Evidence.Commits,
		},
	}
	out.Verdict, _ = r.verdict()
	missing, _ := r.acceptedMissing()
	if r.ClusterID != "" {
		out.ClusterID = &r.ClusterID
	}
	if ran(LevelFiles) {
		out.Files = ptr(r.Files)
	}
	if r.Fold != "" {
		out.Fold = ptr(r.Fold)
	}
	out.Mode = r.Mode
	if r.UpsertKey != "" {
		out.UpsertKey = ptr(r.UpsertKey)
	}
	for _, p := range r.Partitions {
		jp := jsonPartition{
			Topic: p.Topic, Partition: p.Partition, InLedger: p.InLedger, Started: p.Started,
			Ranges: p.Ranges, Records: p.Records, DeadLetters: p.DeadLetters,
			Gaps: spans(p.Gaps), Overlaps: spans(p.Overlaps), Lost: spans(p.Lost), Aborted: spans(p.Aborted),
			Findings: p.Findings, Status: p.status(), RowsMissing: missing[p.TopicPartition],
		}
		if p.InLedger {
			jp.First, jp.Next = ptr(p.First), ptr(p.Next)
			if r.Fold != "" || r.UpsertKey != "" {
				// records counts the upserts; these the rest.
				jp.Deletes, jp.Skipped = ptr(p.Deletes), ptr(p.Skipped)
			}
		}
		if ran(LevelFiles) {
			jp.Files = ptr(p.Files)
		}
		if p.Rows >= 0 {
			jp.Rows = ptr(p.Rows)
		}
		if b := p.Broker; b != nil {
			jp.LogStart, jp.LastStable, jp.HighWatermark, jp.Lag = ptr(b.LogStart), ptr(b.LastStable), ptr(b.HighWatermark), ptr(b.Lag)
			jp.PastReplayEnd = b.PastReplayEnd
		}
		if c := p.Content; c != nil {
			jp.Content = &jsonContent{Verified: c.Verified, Markers: c.Markers, Aborted: c.Aborted, Compacted: c.Compacted,
				Folded: c.Folded, Unverifiable: c.Unverifiable, DeadLetters: c.DeadLetters}
		}
		out.Partitions = append(out.Partitions, jp)
	}
	for _, f := range r.Findings {
		out.Findings = append(out.Findings, jsonFindingOf(f))
	}
	if r.AcceptedFrom != "" {
		out.AcceptedFrom = ptr(r.AcceptedFrom)
		out.Accepted = []jsonFinding{}
		for _, f := range r.Accepted {
			out.Accepted = append(out.Accepted, jsonFindingOf(f))
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write audit report as JSON: %w", err)
	}
	return nil
}

// jsonFindingOf is f as the JSON report lists it.
func jsonFindingOf(f Finding) jsonFinding {
	jf := jsonFinding{Level: f.Level, Kind: f.Kind, Detail: f.Detail}
	if f.HasPartition {
		jf.Partition = ptr(f.Partition.Partition)
		if f.Partition.Topic != "" {
			jf.Topic = ptr(f.Partition.Topic)
		}
	}
	if f.HasOffsets {
		jf.Offsets = &span{f.Offsets.Low, f.Offsets.High}
	}
	if f.File != "" {
		jf.File = ptr(f.File)
	}
	if f.SnapshotID != 0 {
		jf.SnapshotID = ptr(f.SnapshotID)
	}
	for _, o := range f.Others {
		jf.OtherPartitions = append(jf.OtherPartitions, jsonPartitionRef{Topic: o.Topic, Partition: o.Partition})
	}
	return jf
}

func (p PartitionReport) status() string {
	if p.Findings == 0 {
		return "complete"
	}
	return "findings"
}

// maxTextFindings bounds the findings the text report lists.
const maxTextFindings = 50

// textWidth is the terminal width the text report fits (paths excepted).
const textWidth = 80

// WriteText writes the report for a person at an 80-column terminal: a
// header, one line per partition, the findings, notes and a verdict line.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	ref := "branch"
	if r.Tag {
		ref = "tag"
	}
	fmt.Fprintf(&b, "audit of %s (%s %s) at snapshot %d\n", r.Table, ref, r.Branch, r.Evidence.SnapshotID)
	levels := make([]string, len(r.Levels))
	for i, l := range r.Levels {
		levels[i] = string(l)
	}
	fmt.Fprintf(&b, "levels: %s\n", strings.Join(levels, ", "))
	if len(r.Brokers) > 0 {
		fmt.Fprintf(&b, "log: %s\n", r.brokersPhrase())
	}
	if r.UpsertKey != "" {
		fmt.Fprintf(&b, "upsert table (key %s): one row per key, its winning record\n", r.UpsertKey)
	}
	if r.Fold != "" {
		fmt.Fprintf(&b, "state table (floe.fold=%s): one row per key, its latest record\n", r.Fold)
	}
	fmt.Fprintf(&b, "read: %s", plural(r.Evidence.Commits, "ledger commit"))
	if slices.Contains(r.Levels, LevelFiles) {
		fmt.Fprintf(&b, ", %s", plural(r.Files, "live data file"))
	}
	fmt.Fprintf(&b, "%s\n\n", r.readPhrase())
	r.partitionTable(&b)
	if c := r.contentTotals(); c != nil {
		b.WriteString("\n")
		folded := ""
		if r.Fold != "" || r.UpsertKey != "" {
			folded = fmt.Sprintf(", %d folded away (superseded, tombstones and the keys they delete, no key)", c.Folded)
		}
		dead := ""
		if c.DeadLetters > 0 {
			dead = fmt.Sprintf(", %s (verified against the log)", plural(c.DeadLetters, "dead letter"))
		}
		wrap(&b, "", fmt.Sprintf("content: %s verified against the log; offsets inside ranges without rows: %s, %d aborted, %d compacted%s%s; %s no longer in the log to compare",
			plural(c.Verified, "row"), plural(c.Markers, "transaction marker"), c.Aborted, c.Compacted, folded, dead, plural(c.Unverifiable, "row")))
	}
	if len(r.Findings) > 0 {
		fmt.Fprintf(&b, "\nFINDINGS\n")
		writeFindings(&b, r.Findings)
	}
	if r.AcceptedFrom != "" && len(r.Accepted) > 0 {
		fmt.Fprintf(&b, "\nACCEPTED (findings of %s, not counted in the verdict)\n", r.AcceptedFrom)
		writeFindings(&b, r.Accepted)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(&b, "\nNOTES\n")
		for _, n := range r.Notes {
			wrap(&b, "    ", n)
		}
	}
	b.WriteString("\n")
	head, text := r.verdict()
	wrap(&b, "", "verdict: "+head+", "+text)
	fmt.Fprintf(&b, "evidence %s\n", r.Evidence.Digest)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFindings lists findings for a person, at most maxTextFindings.
func writeFindings(b *strings.Builder, findings []Finding) {
	for i, f := range findings {
		if i == maxTextFindings {
			fmt.Fprintf(b, "... and %d more (the JSON report lists them all)\n", len(findings)-i)
			break
		}
		head := fmt.Sprintf("%s %s", f.Level, f.Kind)
		if f.HasPartition {
			head += " " + partName(f.Partition)
		}
		if f.HasOffsets {
			head += " " + f.Offsets.String()
		}
		fmt.Fprintf(b, "- %s\n", head)
		wrap(b, "    ", f.textDetail())
		if len(f.Others) > 0 {
			names := make([]string, len(f.Others))
			for i, o := range f.Others {
				names[i] = partName(o)
			}
			if f.HasPartition {
				wrap(b, "    ", "also concerns "+strings.Join(names, ", ")+" (their rows are counted together)")
			} else {
				wrap(b, "    ", "concerns "+strings.Join(names, ", "))
			}
		}
		if f.File != "" {
			fmt.Fprintf(b, "    file %s\n", f.File)
		}
	}
}

// partitionTable writes one aligned line per partition. An upsert
// table's count the ledger's upserts, deletes and skipped records, as its
// HTML report does: its records are no rows (a table of 9 rows showed
// ROWS 14, from a new user's run).
func (r *Report) partitionTable(b *strings.Builder) {
	upsert := r.UpsertKey != ""
	counts := []string{"ROWS"}
	if upsert {
		counts = []string{"UPSERTS", "DELETES", "SKIPPED"}
	}
	header := slices.Concat([]string{"PARTITION", "FIRST", "NEXT", "RANGES"}, counts, []string{"GAPS", "OVLP", "LOST", "LAG", "STATUS"})
	rows := [][]string{header}
	parts, folds := r.Partitions, []partitionFold(nil)
	if len(parts) > maxTextPartitions {
		parts, folds = foldPartitions(parts)
	}
	for _, f := range folds {
		row := []string{f.name(), "-", "-", fmt.Sprint(f.ranges), fmt.Sprint(f.records)}
		if upsert {
			row = append(row, fmt.Sprint(f.deletes), fmt.Sprint(f.skipped))
		}
		lag := "-"
		if f.lagged {
			lag = fmt.Sprint(f.lag)
		}
		rows = append(rows, append(row, "0", "0", fmt.Sprint(f.lost), lag, "ok"))
	}
	for _, p := range parts {
		row := []string{partName(p.TopicPartition), "-", "-", "-"}
		if p.InLedger {
			row[1], row[2], row[3] = fmt.Sprint(p.First), fmt.Sprint(p.Next), fmt.Sprint(p.Ranges)
			row = append(row, fmt.Sprint(p.Records))
			if upsert {
				row = append(row, fmt.Sprint(p.Deletes), fmt.Sprint(p.Skipped))
			}
			row = append(row, fmt.Sprint(total(p.Gaps)), fmt.Sprint(total(p.Overlaps)), fmt.Sprint(total(p.Lost)))
		} else {
			for range len(counts) + 3 {
				row = append(row, "-")
			}
		}
		lag := "-"
		if p.Broker != nil {
			lag = fmt.Sprint(p.Broker.Lag)
		}
		status := "ok"
		if p.Findings > 0 {
			status = fmt.Sprintf("%d FINDINGS", p.Findings)
			if p.Findings == 1 {
				status = "1 FINDING"
			}
		}
		rows = append(rows, append(row, lag, status))
	}
	widths := make([]int, len(header))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, row := range rows {
		var line strings.Builder
		for i, c := range row {
			switch i {
			case 0:
				fmt.Fprintf(&line, "%-*s", widths[i], c)
			case len(row) - 1:
				fmt.Fprintf(&line, " %s", c)
			default:
				fmt.Fprintf(&line, " %*s", widths[i], c)
			}
		}
		b.WriteString(line.String() + "\n")
	}
	b.WriteString("(GAPS, OVLP and LOST count offsets; LAG counts retained offsets not yet sunk)\n")
	if len(folds) > 0 {
		wrap(b, "", fmt.Sprintf("(of %d partitions, those without findings are summed per topic, FIRST and NEXT left out; --json and --html list each)", len(r.Partitions)))
	}
	var dead int64
	for _, p := range r.Partitions {
		dead += p.DeadLetters
	}
	// The notes are wrapped to the report's width, as its other prose.
	var note string
	switch {
	case upsert && dead > 0:
		note = fmt.Sprintf("(UPSERTS, DELETES and SKIPPED count the ledger's records by what they did to their keys, the table keeping one row per key; %s went to the dead-letter table, accounted for in the ledger: floe dead-letters --table %s lists them)", plural(dead, "more record"), r.Table)
	case upsert:
		note = "(UPSERTS, DELETES and SKIPPED count the ledger's records by what they did to their keys; the table keeps one row per key)"
	case r.Fold != "" && dead > 0:
		note = fmt.Sprintf("(ROWS counts the records folded, the table keeping each key's latest; %s went to the dead-letter table, accounted for in the ledger: floe dead-letters --table %s lists them)", plural(dead, "more record"), r.Table)
	case r.Fold != "":
		note = "(ROWS counts the records folded; the table keeps each key's latest)"
	case dead > 0:
		note = fmt.Sprintf("(ROWS counts rows of the table; %s went to the dead-letter table, accounted for in the ledger: floe dead-letters --table %s lists them)", plural(dead, "more record"), r.Table)
	}
	if note != "" {
		wrap(b, "", note)
	}
}

// maxTextPartitions is how many partitions the text report lists one by
// one; above it, those without findings are summed per topic (a
// 1,000-partition topic's report was 1,000 lines of "ok").
const maxTextPartitions = 16

// partitionFold is a topic's partitions in the ledger without findings,
// summed.
type partitionFold struct {
	topic                           string
	parts                           []int32
	ranges                          int
	records, deletes, skipped, lost int64
	lag                             int64
	lagged                          bool
}

// name is "orders/0-499 (498 partitions)", or without the runs when they
// are long (findings scattered among the partitions).
func (f partitionFold) name() string {
	runs := text.Ranges(f.parts)
	if len(runs) > 24 {
		return fmt.Sprintf("%s (%s)", f.topic, plural(len(f.parts), "partition"))
	}
	return fmt.Sprintf("%s/%s (%s)", f.topic, runs, plural(len(f.parts), "partition"))
}

// foldPartitions returns the partitions the text report lists one by one
// (with findings, not in the ledger, or with gaps or overlaps: --accept
// takes their findings off the count, and the fold's line says 0 of each)
// and the others summed per topic.
func foldPartitions(ps []PartitionReport) (listed []PartitionReport, folds []partitionFold) {
	byTopic := map[string]int{}
	for _, p := range ps {
		if p.Findings > 0 || !p.InLedger || len(p.Gaps) > 0 || len(p.Overlaps) > 0 {
			listed = append(listed, p)
			continue
		}
		i, ok := byTopic[p.Topic]
		if !ok {
			i = len(folds)
			byTopic[p.Topic] = i
			folds = append(folds, partitionFold{topic: p.Topic})
		}
		f := &folds[i]
		f.parts = append(f.parts, p.Partition)
		f.ranges += p.Ranges
		f.records += p.Records
		f.deletes += p.Deletes
		f.skipped += p.Skipped
		f.lost += total(p.Lost)
		if p.Broker != nil {
			f.lag += p.Broker.Lag
			f.lagged = true
		}
	}
	for i := range folds {
		slices.Sort(folds[i].parts)
	}
	return listed, folds
}

func (r *Report) contentTotals() *ContentStats {
	var (
		sum  ContentStats
		seen bool
	)
	for _, p := range r.Partitions {
		if c := p.Content; c != nil {
			seen = true
			sum.Verified += c.Verified
			sum.Markers += c.Markers
			sum.Aborted += c.Aborted
			sum.Compacted += c.Compacted
			sum.Folded += c.Folded
			sum.Unverifiable += c.Unverifiable
			sum.DeadLetters += c.DeadLetters
		}
	}
	if !seen {
		return nil
	}
	return &sum
}

// The heads of a verdict: an audit complete as accepted is complete, with
// accepted findings that say rows are missing (acceptedMissing).
const (
	verdictComplete    = "COMPLETE"
	verdictAccepted    = "COMPLETE AS ACCEPTED"
	verdictNotComplete = "NOT COMPLETE"
)

// verdict is the verdict's head (COMPLETE, COMPLETE AS ACCEPTED or NOT
// COMPLETE) and what it says.
func (r *Report) verdict() (head, text string) {
	if !r.Complete() {
		return verdictNotComplete, r.findingSummary() + r.acceptedPhrase()
	}
	parts, whole := r.acceptedMissing()
	if len(parts) == 0 && !whole {
		return verdictComplete, r.completeVerdict("every offset") + r.acceptedPhrase()
	}
	which := "the table"
	if !whole {
		which = plural(len(parts), "partition")
	}
	return verdictAccepted, fmt.Sprintf("accepted findings say rows of %s are missing from the table or differ from their records; %s%s",
		which, r.completeVerdict("every other offset"), r.acceptedPhrase())
}

// missingKinds are the kinds of finding that say rows of offsets the
// ledger accounts for are not in the table now, or not as their records:
// accepting one does not put the rows back, so the verdict of an audit
// that accepted one does not claim every offset.
var missingKinds = []Kind{KindMissingFile, KindCountMismatch, KindFileContent, KindDeleteFiles, KindMissingRow, KindContentMismatch}

// acceptedMissing counts the accepted findings of missingKinds per
// partition they concern; whole is set when one names no partition (a
// file of several).
func (r *Report) acceptedMissing() (parts map[mapping.TopicPartition]int, whole bool) {
	parts = map[mapping.TopicPartition]int{}
	for _, f := range r.Accepted {
		if !slices.Contains(missingKinds, f.Kind) {
			continue
		}
		whole = whole || !f.HasPartition && len(f.Others) == 0
		if f.HasPartition {
			parts[f.Partition]++
		}
		for _, o := range f.Others {
			parts[o]++
		}
	}
	return parts, whole
}

// completeVerdict says what a complete table's verdict covers: every
// offset up to the table's next offsets. Lag is not a finding, so the
// verdict says whether the log holds more, or that no broker was asked.
// every is the verdict's subject ("every offset").
func (r *Report) completeVerdict(every string) string {
	parts := plural(len(r.Partitions), "partition")
	// A sink that began past the log start (--start latest) sank what
	// follows: the verdict does not claim the offsets before.
	if slices.ContainsFunc(r.Partitions, func(p PartitionReport) bool { return p.Started && p.First > 0 }) {
		by := "the sink"
		if r.ReplayFrom != "" {
			by = "the replay"
		}
		parts += ", from where " + by + " began them,"
		if len(r.Partitions) == 1 {
			parts = "1 partition, from where " + by + " began it,"
		}
	}
	var lag, past int64
	broker := false
	for _, p := range r.Partitions {
		if p.Broker != nil {
			broker, lag, past = true, lag+p.Broker.Lag, past+p.Broker.PastReplayEnd
		}
	}
	by, unread := r.levelsPhrase()
	paren := func(notes ...string) string {
		notes = slices.DeleteFunc(notes, func(n string) bool { return n == "" })
		if len(notes) == 0 {
			return ""
		}
		return " (" + strings.Join(notes, "; ") + ")"
	}
	// A replay's target that reached its recorded end does not lag the
	// log past it: the replay, a bounded job, never takes it.
	beyond := func(end string) string {
		return fmt.Sprintf("the log holds %s past %s, which the replay does not take", plural(past, "offset"), end)
	}
	switch {
	case !broker:
		return fmt.Sprintf("%s of %s up to the table's next offset is accounted for by %s%s", every, parts, by, paren(unread, "lag not checked: no --brokers"))
	case past > 0 && lag == 0:
		return fmt.Sprintf("%s of %s is accounted for by %s%s, up to the end the replay recorded (table property %s); %s", every, parts, by, paren(unread), r.ReplayEnd, beyond("it"))
	case past > 0:
		return fmt.Sprintf("%s of %s up to the table's next offset is accounted for by %s%s; %s of the log up to the end the replay recorded (table property %s) not replayed yet (lag, not a finding), and %s", every, parts, by, paren(unread), plural(lag, "offset"), r.ReplayEnd, beyond("that end"))
	case lag == 0:
		return fmt.Sprintf("%s of %s is accounted for by %s, up to the end of the log%s", every, parts, by, paren(unread))
	default:
		return fmt.Sprintf("%s of %s up to the table's next offset is accounted for by %s%s; %s of the log not sunk yet (lag, not a finding)", every, parts, by, paren(unread), plural(lag, "offset"))
	}
}

// levelsPhrase says what a complete verdict rests on, by the levels that
// ran ("the ledger and the file list"), and what the audit did not read,
// with the flag that reads it ("" when it read every data file): the
// default level reads no data file, so a deleted one goes unseen.
func (r *Report) levelsPhrase() (by, unread string) {
	ran := func(l Level) bool { return slices.Contains(r.Levels, l) }
	read := []string{"the ledger"}
	if ran(LevelFiles) {
		read = append(read, "the file list")
	}
	if ran(LevelRows) {
		read = append(read, "the data files' rows")
	}
	if ran(LevelContent) {
		read = append(read, "the log's records")
	}
	by = text.AndList(read)
	switch {
	case ran(LevelRows):
	case !ran(LevelFiles):
		unread = "manifests and data files not read"
	case ran(LevelContent):
		unread = "data files read only where the log retains their records: --deep reads them all"
	default:
		unread = "data files not read: --deep reads them"
	}
	return by, unread
}

// findingSummary counts the findings by kind, for example "3 findings: 1
// gap, 2 missing-file".
func (r *Report) findingSummary() string { return summarize(r.Findings) }

// acceptedPhrase adds to a verdict the findings --accept set aside: "; and
// 1 accepted finding of base.json: 1 lost" ("" when none).
func (r *Report) acceptedPhrase() string {
	if len(r.Accepted) == 0 {
		return ""
	}
	return fmt.Sprintf("; besides, accepted as in %s, %s", r.AcceptedFrom, summarize(r.Accepted))
}

// summarize counts findings by kind: "3 findings: 1 gap, 2 missing-file".
func summarize(findings []Finding) string {
	var kinds []Kind
	count := map[Kind]int{}
	for _, f := range findings {
		if count[f.Kind] == 0 {
			kinds = append(kinds, f.Kind)
		}
		count[f.Kind]++
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", count[k], k)
	}
	noun := "findings"
	if len(findings) == 1 {
		noun = "finding"
	}
	return fmt.Sprintf("%d %s: %s", len(findings), noun, strings.Join(parts, ", "))
}

// plural formats a count and a noun, adding an s unless the count is one.
func plural[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func partName(tp mapping.TopicPartition) string {
	if tp.Topic == "" {
		return fmt.Sprintf("?/%d", tp.Partition)
	}
	return tp.String()
}

func total(ivs []mapping.Interval) int64 {
	var n int64
	for _, iv := range ivs {
		n += iv.Len()
	}
	return n
}

// wrap writes text word-wrapped to textWidth, each line starting with
// indent.
func wrap(b *strings.Builder, indent, text string) {
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > textWidth {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
}

// brokersPhrase names the log the broker level read: "brokers
// 127.0.0.1:9092 (cluster abc; set by FLOE_BROKERS)".
func (r *Report) brokersPhrase() string {
	var about []string
	if r.ClusterID != "" {
		about = append(about, "cluster "+r.ClusterID)
	}
	if r.BrokersSource != "" {
		about = append(about, "set by "+r.BrokersSource)
	}
	s := "brokers " + strings.Join(r.Brokers, ",")
	if len(about) > 0 {
		s += " (" + strings.Join(about, "; ") + ")"
	}
	return s
}

// readPhrase says what the rows and content levels read: ", 2 rows and 1
// dead letter read" ("" when they read nothing).
func (r *Report) readPhrase() string {
	switch {
	case r.DeadLettersRead > 0:
		return fmt.Sprintf(", %s and %s read", plural(r.RowsRead, "row"), plural(r.DeadLettersRead, "dead letter"))
	case r.RowsRead > 0:
		return ", " + plural(r.RowsRead, "row") + " read"
	}
	return ""
}
