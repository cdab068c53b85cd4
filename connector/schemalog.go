package connector

import (
	"fmt"

	"github.com/floe-dev/floe/mapping"
)

// noteSchema logs, at INFO, how the table's schema changed since the sink
// last looked (columns its records added or widened, or another writer's
// change), and warns, once a run, of fields whose names differ only in
// case: Iceberg and floe keep both, but the engines that query the table
// mostly resolve names without case, and a producer that renamed a field
// so ("userId" to "userID") split its values over two columns; and warns,
// once a run, when the columns are Debezium change events as they are
// (a topic of them sunk without --envelope debezium).
func (s *Sink) noteSchema() {
	now := s.tbl.Iceberg().Schema()
	if s.schema != nil && s.schema.ID == now.ID {
		return
	}
	if s.schema != nil {
		changes, err := mapping.SchemaChanges(s.schema, now)
		if err != nil {
			s.log.Warn("cannot tell how the table's schema changed", "schema_id", now.ID, "err", err)
		} else if len(changes) > 0 {
			text := make([]string, len(changes))
			for i, c := range changes {
				text[i] = c.String()
			}
			s.log.Info("the table's schema changed", "schema_id", now.ID, "changes", text)
		}
	}
	s.schema = now
	if s.eventsUnwrapped() {
		if at, ok := mapping.DebeziumEventColumns(now); ok {
			s.warnDebeziumEvents("the table's columns", at)
		}
	}
	for _, c := range mapping.CaseClashes(now) {
		if s.caseWarned[c] {
			continue
		}
		s.caseWarned[c] = true
		s.log.Warn(fmt.Sprintf("the table has columns %s and %s, whose names differ only in case: floe writes both, but Spark, Trino and DuckDB resolve names without case and cannot tell them apart; a producer that renamed the field split its values over the two: keep one spelling in the producer", c[0], c[1]),
			"column", c[0], "other", c[1])
	}
}

// eventsUnwrapped reports whether the sink decodes values into columns
// without an envelope, and has not warned yet that they are Debezium
// change events.
func (s *Sink) eventsUnwrapped() bool {
	return s.unwrapped != "" && !s.debeziumWarned.Load()
}

// warnDebeziumEvents warns, once a run, that what (the table's columns, or
// a record that became a dead letter) are Debezium change events, with op,
// after and source at path at ("" for the top level): a topic of them
// sunk without --envelope debezium appends every event as it is, deletes
// nothing, and dead-letters the events whose schemas clash (Kafka
// Connect's JSON with schemas: a new user's run exited 0 with 0 rows).
func (s *Sink) warnDebeziumEvents(what, at string) {
	if !s.debeziumWarned.CompareAndSwap(false, true) {
		return
	}
	where := "the top level"
	if at != "" {
		where = at
	}
	s.log.Warn(fmt.Sprintf("%s are Debezium change events (op, after and source at %s), not the rows they carry: sunk without --envelope debezium, each event is appended as it is and deletes delete nothing; to mirror the source table, sink the topic with --envelope debezium into a new table (docs/upsert.md, Debezium)", what, where),
		"fields_at", where)
}
