package connector

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
)

// errNoKey is why a record without a key is a dead letter of an upsert
// table keyed by the Kafka key.
var errNoKey = errors.New("the record has no key, and the table is an upsert table keyed by the record key: a row needs one (produce it with a key, or sink the topic into an append table)")

// upsertChange returns what record r, decoded as out, does to its key's
// row in an upsert table keyed by key, or why it is a dead letter (a key
// missing, null, or without the key's columns). A record with a null
// value (a tombstone) deletes its key; a change set by the decoder (a
// change event's delete, or a skipped tombstone) is kept.
func upsertChange(key mapping.UpsertKey, r *kgo.Record, out decoded) (mapping.Change, error) {
	switch key.Source {
	case mapping.KeyFromKafkaKey:
		if r.Key == nil {
			return 0, errNoKey
		}
	case mapping.KeyFromPartitionKey:
		if r.Key == nil {
			// A KTable drops a record without a key.
			return mapping.ChangeSkip, nil
		}
	default:
		return 0, fmt.Errorf("the table is keyed by %s, which this floe cannot take from a record", key)
	}
	if out.change != mapping.ChangeUpsert {
		return out.change, nil
	}
	if r.Value == nil {
		return mapping.ChangeDelete, nil
	}
	return mapping.ChangeUpsert, nil
}
