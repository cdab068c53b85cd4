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
// so ("userId" to "userID") split its values over two columns.
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
	for _, c := range mapping.CaseClashes(now) {
		if s.caseWarned[c] {
			continue
		}
		s.caseWarned[c] = true
		s.log.Warn(fmt.Sprintf("the table has columns %s and %s, whose names differ only in case: floe writes both, but Spark, Trino and DuckDB resolve names without case and cannot tell them apart; a producer that renamed the field split its values over the two: keep one spelling in the producer", c[0], c[1]),
			"column", c[0], "other", c[1])
	}
}
