package connector

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
)

// errNoKey is why a record without a key is a dead letter of an upsert
// table keyed by the record key.
var errNoKey = errors.New("the record has no key, and the table is an upsert table keyed by the record key: a row needs one (produce it with a key, or sink the topic into an append table)")

// errDebeziumNoKey is why a Debezium change event without a key, other
// than a delete (whose key is in its before image), is a dead letter: an
// append table, errNoKey's other way, cannot hold change events.
var errDebeziumNoKey = errors.New("the change event has no key: Debezium keys the events of a table that has a primary key by it, so the source table has none; give it one (or name its key columns in the connector's message.key.columns), then an incremental snapshot (Debezium's execute-snapshot signal) writes its rows again, keyed (docs/upsert.md, Debezium)")

// upsertChange returns what record r, decoded as out, does to its key's
// row in an upsert table keyed by key, or why it is a dead letter: a key
// missing or null, a key column without a value, or a struct key whose
// fields are not the table's key columns. A record with a null value (a
// tombstone) deletes its key; a change set by the decoder (a change
// event's delete, or a skipped tombstone) is kept.
func upsertChange(key mapping.UpsertKey, r *kgo.Record, out decoded, envelope mapping.Envelope) (mapping.Change, error) {
	if out.change == mapping.ChangeSkip || out.change == mapping.ChangeTruncate {
		// Neither needs a key.
		return out.change, nil
	}
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
	case mapping.KeyFromKeyFields:
		fields, isObject := out.key.(map[string]any)
		if out.key != nil && !isObject {
			// A key that decoded to a plain value (a registry key of
			// schema "string", a JSON number) has no fields to be columns.
			return 0, fmt.Errorf("the key is %s, not a record or an object: a table keyed by the key's fields (--key json or registry) needs keys with fields; for plain keys sink with --key string (or raw), keyed by the key's text", kindOf(out.key))
		}
		if len(fields) == 0 && envelope == mapping.EnvelopeDebezium {
			return 0, errDebeziumNoKey
		}
		if len(fields) == 0 {
			return 0, errNoKey
		}
		if len(key.Columns) > 0 {
			// Per record: the key's fields are looked at without a copy.
			for f := range fields {
				if !slices.Contains(key.Columns, f) {
					return 0, keyFieldsChanged(slices.Sorted(maps.Keys(fields)), key.Columns, envelope)
				}
			}
		}
		for _, c := range key.Columns {
			if fields[c] == nil {
				return 0, fmt.Errorf("the key has no value for its field %s, a key column of the table", c)
			}
		}
		for f, v := range fields {
			if v == nil {
				return 0, fmt.Errorf("the key has no value for its field %s, a key column of the table", f)
			}
		}
	case mapping.KeyFromValue:
		if out.change == mapping.ChangeUpsert && r.Value == nil {
			return 0, fmt.Errorf("a tombstone (null value) cannot name its key: the table is keyed by the value columns %s (--id-columns)", strings.Join(key.Columns, ","))
		}
		for _, c := range key.Columns {
			if out.value[c] == nil {
				like := ""
				for f := range out.value {
					if strings.EqualFold(f, c) {
						like = fmt.Sprintf("; it has %s: column names are case-sensitive", f)
					}
				}
				return 0, fmt.Errorf("the value has no %s, a key column of the table (--id-columns %s)%s", c, strings.Join(key.Columns, ","), like)
			}
		}
	default:
		return 0, fmt.Errorf("the table is keyed by %s, which this floe cannot take from a record", key)
	}
	if out.change == mapping.ChangeDelete || r.Value == nil {
		return mapping.ChangeDelete, nil
	}
	return mapping.ChangeUpsert, nil
}

// kindOf names the kind of a decoded plain value, for a reason.
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case json.Number, int32, int64, float32, float64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}
