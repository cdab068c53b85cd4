package connector

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultCleanupPolicy is Kafka's cleanup.policy when a topic sets none.
const DefaultCleanupPolicy = "delete"

// CleanupPolicy returns topic's cleanup.policy ("delete", "compact" or
// "compact,delete"), as the broker describes the topic's configuration.
func (b *Broker) CleanupPolicy(ctx context.Context, topic string) (string, error) {
	cfg, err := b.TopicConfig(ctx, topic)
	if err != nil {
		return "", err
	}
	if p, ok := cfg["cleanup.policy"]; ok {
		return p, nil
	}
	return DefaultCleanupPolicy, nil
}

// TopicConfig returns the configuration of topic the broker describes
// (its own settings and the broker's defaults it reports), by key.
func (b *Broker) TopicConfig(ctx context.Context, topic string) (map[string]string, error) {
	rcs, err := b.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe the configuration of topic %s: %w", topic, b.authorization(err, "DescribeConfigs", topic, ""))
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return nil, fmt.Errorf("describe the configuration of topic %s: %w", topic, b.authorization(err, "DescribeConfigs", topic, ""))
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out, nil
}

// DeletedBefore returns the time before which every record that
// retention deleted from topic was stamped, as its configuration bounds
// it: a topic deleting by time alone (retention.ms set, retention.bytes
// unlimited, not compacted) deletes a record only once it is older than
// retention.ms, so every deleted record is stamped before now minus
// retention.ms. ok is false when the configuration bounds nothing (size
// retention, compaction, or settings the broker does not report).
func (b *Broker) DeletedBefore(ctx context.Context, topic string, now time.Time) (before time.Time, ok bool, err error) {
	cfg, err := b.TopicConfig(ctx, topic)
	if err != nil {
		return time.Time{}, false, err
	}
	ms, err := strconv.ParseInt(cfg["retention.ms"], 10, 64)
	if err != nil || ms < 0 || Compacts(cfg["cleanup.policy"]) {
		return time.Time{}, false, nil
	}
	if bytes, ok := cfg["retention.bytes"]; ok && bytes != "-1" {
		return time.Time{}, false, nil
	}
	return now.Add(-time.Duration(ms) * time.Millisecond), true, nil
}

// Compacts reports whether a cleanup.policy value includes compact: only
// then may records be missing from inside a partition's retained log
// (retention, under delete, removes records from its start only).
func Compacts(policy string) bool {
	return slices.ContainsFunc(strings.Split(policy, ","), func(p string) bool {
		return strings.EqualFold(strings.TrimSpace(p), "compact")
	})
}
