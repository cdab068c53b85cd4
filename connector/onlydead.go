package connector

import "context"

// onlyDeadLettersAdvice is OnlyDeadLettersAdvice for a live commit whose
// records all became dead letters, first being the first one: when the
// table already holds rows of the topic (from this run or an earlier one),
// the layout fits the topic, and "check that --value, --key and
// --schema-registry match" is no advice for one malformed record on a
// quiet topic (found by a new user); floe sink --stop-at-end exempts such
// a table from its exit 3 the same way.
//
// Not for a table that decodes with a schema registry: rows the table
// holds prove the layout, not this run's registry (a sink restarted
// against another environment's, whose every record is a dead letter
// "schema not found", was told the registry fit: found by review). A
// registry given to a sink of a JSON table (a local stack's env.sh sets
// FLOE_SCHEMA_REGISTRY) is not used, and changes nothing (from a new-user
// run).
func (s *Sink) onlyDeadLettersAdvice(ctx context.Context, first string) string {
	advice := OnlyDeadLettersAdvice(first)
	if advice != OnlyDeadLettersAdvice("") || s.tbl.Layout().UsesRegistry() || !s.holdsRows(ctx) {
		return advice
	}
	return "the table holds rows of topic " + s.cfg.Topic + ", so --value, --key and --schema-registry fit it: these records are malformed or of another kind (floe dead-letters --table " + s.tbl.Name() + " lists them with their reasons)"
}

// holdsRows reports whether the table holds rows of the sink's topic: this
// run committed some, or its ledger (as of the commit just made) counts
// some. The ledger's summary is kept by the table and extended per commit,
// so this costs no read of the ledger. A summary that cannot be read says
// no: the warning then keeps its advice.
func (s *Sink) holdsRows(ctx context.Context) bool {
	if s.stats.Records > 0 {
		return true
	}
	l, err := s.tbl.Summary(ctx, 0)
	if err != nil {
		return false
	}
	for tp, p := range l.Parts {
		if tp.Topic == s.cfg.Topic && p.Records > 0 {
			return true
		}
	}
	return false
}
