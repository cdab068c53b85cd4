package connector

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/floe-dev/floe/mapping"
)

// Setting names what a connector error is about: a field of Config, or
// Dial's seed brokers. The connector does not know how its caller's users
// set them; the floe command maps each to its flag.
type Setting string

// Settings that errors name.
const (
	SettingBrokers    Setting = "seed brokers"
	SettingTopic      Setting = "Config.Topic"
	SettingStart      Setting = "Config.Start"
	SettingOnDataLoss Setting = "Config.OnDataLoss"
	SettingPartitions Setting = "Config.Partitions"
	SettingRegistry   Setting = "Config.Registry"
	SettingConflict   Setting = "Config.OnSchemaConflict"
	SettingTruncate   Setting = "Config.OnTruncate"
	// SettingPlaceholder is Config.UnavailablePlaceholder.
	SettingPlaceholder Setting = "Config.UnavailablePlaceholder"
	SettingGroup       Setting = "Config.Group"
	SettingTopicRegex  Setting = "TopicWatch.Match"
	// SettingGroupProtocol is Config.GroupProtocol.
	SettingGroupProtocol Setting = "Config.GroupProtocol"
	// SettingSessionTimeout is Config.SessionTimeout.
	SettingSessionTimeout Setting = "Config.SessionTimeout"
)

// ConfigError reports a setting that is missing or whose value cannot be
// used. It is returned before anything is read or written.
type ConfigError struct {
	Setting Setting
	// Value is the value given; "" when the setting is missing.
	Value string
	// Want says what would do.
	Want string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s is not set: want %s", e.Setting, e.Want)
	}
	return fmt.Sprintf("%s %q: want %s", e.Setting, e.Value, e.Want)
}

// CheckError is an error that a different value of one of Settings may
// fix: brokers that do not answer, a topic that does not exist. Its
// message is Err's, which says what failed.
type CheckError struct {
	Settings []Setting
	Err      error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// ErrUnknownTopic is matched (errors.Is) when a topic does not exist on the
// brokers. (A topic missing from a table's ledger is audit's
// ErrTopicNotInLedger.)
var ErrUnknownTopic = errors.New("unknown topic")

// unknownTopic is the error for a topic the brokers seeds do not have;
// have, when set, says which they have.
func unknownTopic(topic string, seeds []string, have string) error {
	return &CheckError{Settings: []Setting{SettingTopic},
		Err: fmt.Errorf("topic %q does not exist on brokers %s: %w%s", topic, strings.Join(seeds, ","), ErrUnknownTopic, have)}
}

// TopicDeletedError is the error of a running sink whose topic the brokers
// no longer have: it existed when the sink started, so it was deleted
// since. It matches ErrUnknownTopic, and is no CheckError: no other --topic
// fixes it.
type TopicDeletedError struct {
	Topic string
	Err   error // the brokers' answer (ErrUnknownTopic)
}

func (e *TopicDeletedError) Error() string {
	return fmt.Sprintf("topic %q was deleted while the sink ran (%s): the table keeps what was committed; "+
		"a topic created again under that name is another topic, which this table refuses: sink it into a new table", e.Topic, e.Err)
}

func (e *TopicDeletedError) Unwrap() error { return ErrUnknownTopic }

// DataLossError reports offsets that retention deleted before they were
// sunk. The sink committed everything before them and stopped; with
// Config.OnDataLoss LossRecord it records them as lost and goes on.
type DataLossError struct {
	Partition mapping.TopicPartition
	Lost      mapping.Interval
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("data loss on %s: offsets %s were deleted by retention before they were sunk; nothing after offset %d was committed, and the sink stopped (every partition: the others resume from the ledger too)",
		e.Partition, e.Lost, e.Lost.Low)
}

// checkPartitions checks that t has every partition of want (nil: all).
func checkPartitions(t Topic, want []int32) error {
	var bad []string
	for _, p := range want {
		if !slices.Contains(t.Partitions, p) {
			bad = append(bad, fmt.Sprint(p))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &ConfigError{Setting: SettingPartitions, Value: strings.Join(bad, ","),
		Want: fmt.Sprintf("partitions of topic %s, which has %d (0 to %d)", t.Name, len(t.Partitions), len(t.Partitions)-1)}
}

// AuthorizationError is a request the brokers refused because the
// principal lacks an ACL (TOPIC_AUTHORIZATION_FAILED,
// GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED). floe only
// reads: it never needs to write, create or alter anything on Kafka.
type AuthorizationError struct {
	// Principal is whom the brokers authorised, "User:NAME"; "" when the
	// broker derives it (mutual TLS, OAUTHBEARER, AWS_MSK_IAM).
	Principal string
	// Operation is the ACL operation lacking: Read, Describe,
	// DescribeConfigs.
	Operation string
	// Resource is topic, group or cluster, and Name its name.
	Resource, Name string
	Err            error
}

func (e *AuthorizationError) Error() string {
	who, principal := "the principal", "PRINCIPAL"
	if e.Principal != "" {
		who, principal = e.Principal, e.Principal
	}
	target := "--" + e.Resource + " " + e.Name
	if e.Resource == "cluster" {
		target = "--cluster"
	}
	return fmt.Sprintf("%s is not allowed to %s %s %s (%s); add the ACL: kafka-acls.sh --add --allow-principal %s --operation %s %s",
		who, e.Operation, e.Resource, e.Name, kerrName(e.Err), principal, e.Operation, target)
}

func (e *AuthorizationError) Unwrap() error { return e.Err }

// kerrName is the Kafka error code's name in err ("" when none).
func kerrName(err error) string {
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Message
	}
	return err.Error()
}

// hiddenTopics says, for a client the brokers know by a principal, that
// they list only the topics it may describe: a pattern that matches none
// of them may match topics its ACLs hide (found by review). "" otherwise.
func (b *Broker) hiddenTopics() string {
	if b.principal == "" {
		return ""
	}
	return fmt.Sprintf(" (the brokers list only the topics %s may Describe: check its ACLs, e.g. kafka-acls --list --principal %s, for Describe and Read on the topics)", b.principal, b.principal)
}

// authorization returns err as an AuthorizationError when the brokers
// refused op on topic (or, for the group and cluster codes, on group or
// the cluster) for lack of an ACL, and err otherwise.
func (b *Broker) authorization(err error, op, topic, group string) error {
	a := &AuthorizationError{Principal: b.principal, Operation: op, Err: err}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		a.Resource, a.Name = "topic", topic
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		a.Resource, a.Name, a.Operation = "group", group, "Read"
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		a.Resource, a.Name = "cluster", "kafka-cluster"
	default:
		return err
	}
	return a
}
