package connector

import (
	"fmt"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// noteSchema logs, at INFO, how the table's schema changed since the sink
// last looked (columns its records added or widened, or another writer's
// change), and warns, once a run, of fields whose names differ only in
// case: Iceberg and floe keep both, but the engines that query the table
// mostly resolve names without case, and a producer that renamed a field
// so ("userId" to "userID") split its values over two columns; and warns,
// once a run, when the columns are Debezium change events as they are
// (a topic of them sunk without --envelope debezium; Avro and Protobuf
// values, which lookForEvents cannot read).
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
	if s.eventsUnwarned() {
		if at, ok := mapping.DebeziumEventColumns(now); ok {
			s.warnDebeziumEvents("the table's columns", at, s.tbl.Layout().Value)
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

// eventsUnwarned reports whether the sink looks for Debezium change
// events among its records (Sink.lookForEvents) and has not warned of
// them yet.
func (s *Sink) eventsUnwarned() bool {
	return s.lookForEvents && s.debeziumWarning.Load() == nil
}

// warnDebeziumEvents warns, once a run, that what (the table's columns,
// or the records) are Debezium change events, with op, after and source
// at path at ("" for the top level), written as values decodes them: a
// topic of them sunk without --envelope debezium makes a table of the
// events, whose deletes delete nothing (a new user's run exited 0 with a
// table of events, or with 0 rows when Kafka Connect's JSON events with
// schemas clashed). The warning is worded for the table's mode, names
// the flags that mirror the source table and how to undo this table
// (floe drop only when it held no rows before this run: Sink.heldRows);
// the run's summary repeats it (Stats.DebeziumEvents).
func (s *Sink) warnDebeziumEvents(what, at string, values mapping.ValueMode) {
	where := "the top level"
	if at != "" {
		where = at
	}
	kept := "each event is appended as it is and deletes delete nothing"
	if s.tbl.Mode() != mapping.ModeAppend {
		// A tombstone deletes its key, as in any upsert table; the delete
		// event before it is a row like the others.
		kept = "each key's row is its latest event as it is, not the source table's row, and a delete event is a row like the others (only a tombstone, when the connector writes them, deletes the key)"
	}
	// --envelope debezium needs --value and --key of the connector's
	// converters (decodeFlags.layout refuses it without).
	flags := "--envelope debezium --value json --key json"
	if values == mapping.ValueRegistry {
		flags = "--envelope debezium --value registry --key registry"
	}
	undo := fmt.Sprintf("and remove this one with floe drop --table %s, which lists what it drops (docs/upsert.md, Debezium)", s.tbl.Name())
	switch {
	case s.tbl.Branch() != table.MainBranch:
		// A replay onto a branch: dropping the branch undoes it, and
		// leaves main as it is.
		undo = fmt.Sprintf("and remove the branch with floe drop --table %s --branch %s --yes, which leaves main and its rows as they are (docs/upsert.md, Debezium)", s.tbl.Name(), s.tbl.Branch())
	case s.heldRows:
		// Rows from before this run, which floe drop would lose: a topic
		// of events sunk into a good table by mistake is undone as a
		// wrong --topic is (docs/deployment.md).
		undo = fmt.Sprintf("(docs/upsert.md, Debezium); this one held rows before this run, which floe drop would lose: if these events went into it by mistake, floe replay --topic RIGHT --table %s --branch rebuild --publish --publish-different rebuilds it from its own topic, leaving them out (docs/deployment.md, Recovering from mistakes)", s.tbl.Name())
	}
	msg := fmt.Sprintf("%s are Debezium change events (op, after and source at %s), not the rows they carry: sunk without --envelope debezium, %s; to mirror the source table, sink the topic with %s into a new table %s; --envelope none says the events are what is meant and silences this",
		what, where, kept, flags, undo)
	if !s.debeziumWarning.CompareAndSwap(nil, &msg) {
		return
	}
	s.log.Warn(msg, "fields_at", where)
}
