package lookup

import "fmt"

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
