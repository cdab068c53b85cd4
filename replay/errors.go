package replay

import (
	"errors"
	"fmt"
	"strings"
)

// Setting names what a replay error is about: a field of Options, or the
// target table Run is given. The replay package does not know how its
// caller's users set them; the floe command maps each to its flag.
type Setting string

// Settings that errors name.
const (
	SettingTopic   Setting = "Options.Topic"
	SettingFrom    Setting = "Options.From"
	SettingUntil   Setting = "Options.Until"
	SettingBranch  Setting = "Options.Branch"
	SettingPublish Setting = "Options.Publish"
	SettingFold    Setting = "Options.Fold"
	SettingMode    Setting = "Options.Mode"
	SettingKey     Setting = "Options.Key"
	// SettingPublishDifferent is Options.PublishDifferent.
	SettingPublishDifferent Setting = "Options.PublishDifferent"
	// SettingTagMain is Options.TagMain.
	SettingTagMain Setting = "Options.TagMain"
	// SettingPartitionBy is Options.PartitionBy.
	SettingPartitionBy Setting = "Options.PartitionBy"
	// SettingDeadLetters is Options.DeadLetters.
	SettingDeadLetters Setting = "Options.DeadLetters"
	// SettingRawValue is Options.Layout.RawValue.
	SettingRawValue Setting = "Options.Layout.RawValue"
	SettingTable    Setting = "target table"
)

// ErrBadBound is matched (errors.Is) by every error about a replay's start
// or end bound: malformed, in the future, out of the log, or an end before
// the start.
var ErrBadBound = errors.New("bad replay bound")

// BoundError reports a start (SettingFrom) or end (SettingUntil) bound that
// cannot be replayed. It is returned before anything is written.
type BoundError struct {
	Setting Setting
	// Value is the bound as given (Bound.Spec).
	Value string
	// Reason says what is wrong with it.
	Reason string
	// From is set when the end lies before the start: the start's Spec.
	// Reason then says where, or is empty.
	From string
}

func (e *BoundError) Error() string {
	if e.From != "" {
		return fmt.Sprintf("%s %s: is before %s %s%s", e.Setting, e.Value, SettingFrom, e.From, e.Reason)
	}
	return fmt.Sprintf("%s %s: %s", e.Setting, e.Value, e.Reason)
}

func (e *BoundError) Is(target error) bool { return target == ErrBadBound }

// OptionError reports an option that is missing, has a value a replay
// cannot use, or needs another option. It is returned before anything is
// written.
type OptionError struct {
	Setting Setting
	// Value is the value given; "" when the option is missing.
	Value string
	// Want says what would do (with Needs: why Needs is needed).
	Want string
	// Needs, when set, is the option that Setting needs and that is not set.
	Needs Setting
}

func (e *OptionError) Error() string {
	switch {
	case e.Needs != "":
		return fmt.Sprintf("%s needs %s: %s", e.Setting, e.Needs, e.Want)
	case e.Value == "":
		return fmt.Sprintf("%s is not set: want %s", e.Setting, e.Want)
	}
	return fmt.Sprintf("%s %q: want %s", e.Setting, e.Value, e.Want)
}

// CheckError is an error that a different value of one of Settings may
// fix: a target table that holds something else than this replay, or that
// is (or is not) a state table. Its message is Err's, which says what is
// in the way.
type CheckError struct {
	Settings []Setting
	Err      error
	// OnBranch is set when the replay wrote onto a branch (Options.Branch):
	// a target in the way is fixed by another branch then, and by a
	// first one otherwise.
	OnBranch bool
	// Again, when set, is the --from value that continues the replay the
	// target holds: what a run meant as that replay again lacked.
	Again string
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// OtherTopicsError reports that main of Table holds topics besides Topic,
// the replay's: a replay rebuilds one topic, so publishing its branch would
// drop the others' rows from main. Run refuses such a publish before it
// reads the log (the comparison at its end would refuse it, and for an
// upsert table name the other topics' keys as differing: a new user's
// report), unless Options.PublishDifferent.
type OtherTopicsError struct {
	Table, Topic string
	Others       []string
}

func (e *OtherTopicsError) Error() string {
	return fmt.Sprintf("main of %s holds topic %s beside %s, which a replay of %s does not rebuild: publishing its branch would drop their rows from main; nothing was replayed",
		e.Table, strings.Join(e.Others, ", "), e.Topic, e.Topic)
}
