package lookup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TableStatus is where a table stands against its log: per partition the
// broker's offsets, the ledger's next offset, the lag and the loss. Its
// JSON field names are stable (floe status --json); fields that are not
// known are omitted.
type TableStatus struct {
	Table string `json:"table"`
	// MetadataLocation is the table's current metadata file: engines
	// without a catalog of floe's (DuckDB's iceberg_scan, Spark) read the
	// table from it.
	MetadataLocation string `json:"metadata_location"`
	// SnapshotID is the branch head; absent while the table is empty.
	SnapshotID *int64 `json:"snapshot_id,omitempty"`
	// Mode is the table's mode (append, upsert, or fold for a legacy
	// state table), and KeyColumns an upsert table's key columns.
	Mode       mapping.Mode `json:"mode"`
	KeyColumns []string     `json:"key_columns,omitempty"`
	// Partitions are sorted by topic and partition.
	Partitions []PartitionStatus `json:"partitions"`
	// MissingTopics are the topics of the ledger that the brokers do not
	// have (deleted since they were sunk, or another cluster's brokers):
	// their partitions show the table's side only.
	MissingTopics []string `json:"missing_topics,omitempty"`
	// RecreatedTopics are the topics of the ledger that the brokers have
	// under another topic ID (deleted and created again since they were
	// sunk): their partitions show the table's side only.
	RecreatedTopics []string `json:"recreated_topics,omitempty"`
	// Refs are the table's branches but main (whose head is SnapshotID),
	// then its tags, each with its snapshot and commit time: a replay's
	// branch, and the tag floe replay --tag-main gave main's history
	// before a publish, which floe audit, dead-letters, as-of, where and
	// files read with --branch.
	Refs []snapshot.Ref `json:"refs,omitempty"`
}

// PartitionStatus is one partition of a TableStatus.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// BrokersUnknown is set when the brokers' side (LogStart, EndOffset,
	// HighWatermark, Lag, Lost) is not known: no brokers, brokers that
	// failed or refused, a topic they do not have, a sink that has not
	// read their offsets yet. Without it a reader of the JSON could not
	// tell an unknown loss from none, both leaving Lost out.
	BrokersUnknown bool `json:"brokers_unknown,omitempty"`
	// LogStart, EndOffset (the last stable offset, where a read_committed
	// consumer ends) and HighWatermark are the broker's; absent without a
	// broker.
	LogStart      *int64 `json:"log_start,omitempty"`
	EndOffset     *int64 `json:"end_offset,omitempty"`
	HighWatermark *int64 `json:"high_watermark,omitempty"`
	// TableNext is the ledger's next offset; absent when never sunk.
	TableNext *int64 `json:"table_next,omitempty"`
	// Lag is the retained offsets up to EndOffset that the table does not
	// have yet: EndOffset minus the later of TableNext and LogStart
	// (connector.Watermarks.Lag).
	Lag *int64 `json:"lag,omitempty"`
	// Lost is the offsets from TableNext up to LogStart: deleted by
	// retention before they were sunk (the next sink run fails on them, or
	// records them as lost). Absent when none.
	Lost *int64 `json:"lost,omitempty"`
	// LastCommit is when a commit last advanced the partition.
	LastCommit *time.Time `json:"last_commit,omitempty"`
	// DeadLetters is the records of the partition that its ranges sent to
	// the dead-letter table (a typed table's records that could not be
	// decoded); absent when never sunk.
	DeadLetters *int64 `json:"dead_letters,omitempty"`
	// Upserts, Deletes and Skipped count, in an upsert table, the records
	// of the partition's ranges that upserted a row, deleted their key and
	// were skipped on purpose (mapping.Range); absent for other tables and
	// when never sunk.
	Upserts *int64 `json:"upserts,omitempty"`
	Deletes *int64 `json:"deletes,omitempty"`
	Skipped *int64 `json:"skipped,omitempty"`
	// OnlyDeadLetters is set when the partition's last range that held
	// records sent every one to the dead-letter table, none to a row: most
	// likely the table's layout does not match how the topic's records are
	// written now.
	OnlyDeadLetters bool `json:"only_dead_letters,omitempty"`
}

// CountChanges adds what range r of an upsert table did to the partition's
// upserts, deletes and skipped records.
func (p *PartitionStatus) CountChanges(r mapping.Range) {
	if p.Upserts == nil {
		p.Upserts, p.Deletes, p.Skipped = new(int64), new(int64), new(int64)
	}
	*p.Upserts += r.Records
	*p.Deletes += r.Deletes
	*p.Skipped += r.Skipped
}

// Refs are tbl's branches but main, then its tags, as last loaded, each
// with its snapshot and commit time: what floe status --table lists, and
// the status pages of floe status --serve and of a running floe sink.
func Refs(tbl *snapshot.Table) []snapshot.Ref {
	var refs []snapshot.Ref
	for _, r := range tbl.Refs() {
		if r.Name != table.MainBranch {
			refs = append(refs, r)
		}
	}
	return refs
}

// Status reports where tbl's branch stands: every partition of its ledger,
// and with a broker (nil: none) every partition of the ledger's topics and
// of topics, with the broker's offsets, the lag and the offsets lost to
// retention before they were sunk. A partition the table has never sunk
// counts everything retained as lag.
func Status(ctx context.Context, tbl *snapshot.Table, broker *connector.Broker, topics []string) (TableStatus, error) {
	st := TableStatus{Table: tbl.Name(), MetadataLocation: tbl.Iceberg().MetadataLocation(), Mode: tbl.Mode()}
	upsert := tbl.Mode() == mapping.ModeUpsert
	if upsert {
		st.KeyColumns = tbl.UpsertKey().Columns
	}
	ledger, err := tbl.Summary(ctx, 0)
	if err != nil {
		return st, fmt.Errorf("read ledger of %s: %w", tbl.Name(), err)
	}
	if of := tbl.Iceberg().Properties()[snapshot.PropDeadLettersOf]; of != "" && ledger.Commits == 0 {
		return st, fmt.Errorf("%s is the dead-letter table of %s and has no ledger of its own: floe status --table %s counts its dead letters per partition", tbl.Name(), of, of)
	}
	if h := tbl.Head(); h != nil {
		st.SnapshotID = &h.SnapshotID
	}
	st.Refs = Refs(tbl)
	rows := map[mapping.TopicPartition]*PartitionStatus{}
	row := func(tp mapping.TopicPartition) *PartitionStatus {
		if rows[tp] == nil {
			rows[tp] = &PartitionStatus{Topic: tp.Topic, Partition: tp.Partition}
		}
		return rows[tp]
	}
	for tp, ps := range ledger.Parts {
		p := row(tp)
		next, dead := ps.High, ps.DeadLetters
		p.TableNext, p.DeadLetters = &next, &dead
		if at := ps.LastCommitAt(); !at.IsZero() {
			// None for a partition only a start recorded.
			p.LastCommit = &at
		}
		p.OnlyDeadLetters = ps.Written && ps.OnlyDeadLetters
		if upsert {
			p.CountChanges(mapping.Range{TopicPartition: tp, Records: ps.Records, Deletes: ps.Deletes, Skipped: ps.Skipped})
		}
	}
	asked := len(topics)
	topics = slices.Clone(topics)
	followed := map[string]bool{} // the topics of the ledger
	for _, tp := range ledger.Partitions() {
		followed[tp.Topic] = true
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	if broker != nil {
		for i, topic := range topics {
			if err := sameTopic(ctx, tbl.Name(), ledger, broker, topic); err != nil {
				if _, recreated := errors.AsType[*snapshot.TopicIDError](err); recreated && i >= asked {
					// The brokers' offsets are another topic's: the
					// table's side only, and the others' broker side.
					st.RecreatedTopics = append(st.RecreatedTopics, topic)
					continue
				}
				return st, err
			}
			wm, err := broker.Watermarks(ctx, topic)
			if i >= asked && errors.Is(err, connector.ErrUnknownTopic) {
				// A topic of the ledger, not of the caller's --topic: the
				// other topics' broker side is still worth showing (it
				// failed whole, "check --topic": found by review).
				st.MissingTopics = append(st.MissingTopics, topic)
				continue
			}
			if err != nil {
				return st, err
			}
			for p, w := range wm {
				r := row(mapping.TopicPartition{Topic: topic, Partition: p})
				r.LogStart, r.EndOffset, r.HighWatermark = &w.LogStart, &w.LastStable, &w.HighWatermark
				next := w.LogStart // a topic never sunk: everything retained is lag
				switch {
				case r.TableNext != nil:
					next = *r.TableNext
				case followed[topic]:
					// A partition added to a topic the table follows: the
					// sink begins it at 0, and what retention deleted of it
					// is lost (it showed none: found by review).
					next = 0
				}
				lag := w.Lag(next)
				r.Lag = &lag
				if lost := w.Lost(next); lost > 0 {
					// As the sink judges them: offsets that held only
					// aborted records are no loss. Telling needs the Read
					// right, which status does not otherwise: without it
					// (or any answer), they count as lost, as before.
					if v, err := broker.ClassifyDeleted(ctx, topic, p, next, w.LogStart); err != nil || v.Deleted != connector.DeletedAborted {
						r.Lost = &lost
					}
				}
			}
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(rows), mapping.TopicPartition.Compare) {
		r := rows[tp]
		r.BrokersUnknown = r.Lag == nil // set whenever the brokers' side is known
		st.Partitions = append(st.Partitions, *r)
	}
	return st, nil
}
