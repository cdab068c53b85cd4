package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// AuxiliaryTableError reports a table that floe keeps for another table (a
// dead-letter table, PropDeadLettersOf) named as the table a sink or a
// replay writes its rows into: its rows would be foreign to it, and the
// audit of the table it serves would blame that table's partitions.
type AuxiliaryTableError struct {
	Table string
	// Of is the table it serves.
	Of string
}

func (e *AuxiliaryTableError) Error() string {
	return fmt.Sprintf("table %s is the dead-letter table of %s (property %s): floe writes only %s's dead letters into it; give --table a data table (%s's dead letters go to %s by themselves)",
		e.Table, e.Of, PropDeadLettersOf, e.Of, e.Of, e.Table)
}

// CheckDataTable refuses, with an *AuxiliaryTableError, a table that floe
// keeps for another table: the table a sink or a replay writes rows into
// must be a data table.
func (t *Table) CheckDataTable() error {
	if of := t.tbl.Properties()[PropDeadLettersOf]; of != "" {
		return &AuxiliaryTableError{Table: t.Name(), Of: of}
	}
	return nil
}

// CheckDeadLetters checks, creating nothing, that ident can be the
// dead-letter table of the data table named of: a table that does not
// exist yet (OpenDeadLetters creates it) or a dead-letter table of that
// very table. The data table itself, another data table and another
// table's dead-letter table are refused with an error that says which.
func CheckDeadLetters(ctx context.Context, cat catalog.Catalog, ident table.Identifier, of string) error {
	name := strings.Join(ident, ".")
	if name == of {
		return fmt.Errorf("--dlq-table %s names the table itself: a table's dead letters go to another table (default: %s)", name, strings.Join(DeadLetterName(ident), "."))
	}
	_, err := OpenDeadLetters(ctx, cat, ident, of, false)
	if errors.Is(err, ErrTableNotFound) {
		return nil
	}
	return err
}
