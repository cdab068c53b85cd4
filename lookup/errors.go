package lookup

import (
	"fmt"

	"github.com/floe-dev/floe/snapshot"
)

// Setting names what a lookup error is about: a field of AsOfQuery, an
// argument of Where, or the broker connection. The lookup package does not
// know how its caller's users give them; the floe command maps each to its
// flag.
type Setting string

// Settings that errors name.
const (
	SettingOffsets   Setting = "AsOfQuery.Offsets"
	SettingTime      Setting = "AsOfQuery.Time"
	SettingTopic     Setting = "topic"
	SettingPartition Setting = "partition"
	SettingOffset    Setting = "offset"
	SettingBroker    Setting = "broker"
	SettingKey       Setting = "key"
	// SettingFromOffset and SettingUntilOffset bound the offsets of a
	// DeadLetterQuery.
	SettingFromOffset  Setting = "DeadLetterQuery.From"
	SettingUntilOffset Setting = "DeadLetterQuery.Until"
)

// QueryError reports a question that has no true answer: a malformed
// position, a time still to come, a negative offset.
type QueryError struct {
	Setting Setting
	// Value is the value given.
	Value string
	// Want says what would do.
	Want string
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("%s %q: want %s", e.Setting, e.Value, e.Want)
}

// CheckError is an error that giving one of Settings may fix: a state
// table's record times can only be placed with a broker. Its message is
// Err's, which says why.
type CheckError struct {
	Settings []Setting
	Err      error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// DeadLetterTableError reports a lookup by position or time in a
// dead-letter table: it holds the dead letters of its data table Of, but
// the ledger that places them is Of's.
type DeadLetterTableError struct {
	Table, Of string
	// Lacks says what the lookup found no answer for.
	Lacks string
}

func (e *DeadLetterTableError) Error() string {
	return fmt.Sprintf("%s is the dead-letter table of %s and has no ledger of its own, so %s: ask %s (floe dead-letters --table %s lists its dead letters and why each could not become a row; floe where --table %s --partition P --offset O finds one and its file), or read %s with floe files or any Iceberg reader",
		e.Table, e.Of, e.Lacks, e.Of, e.Of, e.Of, e.Table)
}

// CheckDataTable returns a *DeadLetterTableError, saying it has lacks,
// when tbl is a dead-letter table (snapshot.PropDeadLettersOf), which a
// lookup whose ledger has no commit would call empty; nil otherwise.
func CheckDataTable(tbl *snapshot.Table, lacks string) error {
	if of := tbl.Iceberg().Properties()[snapshot.PropDeadLettersOf]; of != "" {
		return &DeadLetterTableError{Table: tbl.Name(), Of: of, Lacks: lacks}
	}
	return nil
}
