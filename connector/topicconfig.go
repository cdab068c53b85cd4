package connector

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// DefaultCleanupPolicy is Kafka's cleanup.policy when a topic sets none.
const DefaultCleanupPolicy = "delete"

// CleanupPolicy returns topic's cleanup.policy ("delete", "compact" or
// "compact,delete"), as the broker describes the topic's configuration.
func (b *Broker) CleanupPolicy(ctx context.Context, topic string) (string, error) {
	rcs, err := b.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("describe the configuration of topic %s: %w", topic, b.authorization(err, "DescribeConfigs", topic, ""))
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return "", fmt.Errorf("describe the configuration of topic %s: %w", topic, b.authorization(err, "DescribeConfigs", topic, ""))
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil {
			return *c.Value, nil
		}
	}
	return DefaultCleanupPolicy, nil
}

// Compacts reports whether a cleanup.policy value includes compact: only
// then may records be missing from inside a partition's retained log
// (retention, under delete, removes records from its start only).
func Compacts(policy string) bool {
	return slices.ContainsFunc(strings.Split(policy, ","), func(p string) bool {
		return strings.EqualFold(strings.TrimSpace(p), "compact")
	})
}
