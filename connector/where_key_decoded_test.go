package connector_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestWhereKeyDecodedSearchesLog: floe where --key on a Debezium table
// (keyed by the decoded key struct's id) with --brokers finds a deleted
// key's deleting record in the log, as it does for a table keyed by the
// Kafka key: before a compaction it names the offset of the record behind
// the delete found in the equality-delete files, after the compaction
// (which applied and dropped those) it finds the delete in the log, and a
// key no record had is never_seen. It answered "unknown" after the
// compaction and named no offset, since floe searched the log for Kafka
// keys only. A table decoded with the schema registry needs it for the
// search: without it the table answers alone, and says so.
func TestWhereKeyDecodedSearchesLog(t *testing.T) {
	e := newEnv(t)
	for _, enc := range []floetest.CDCEncoding{floetest.CDCPlainJSON, floetest.CDCAvro} {
		t.Run(enc.String(), func(t *testing.T) {
			topic := "dbserver1.inventory.wherekey-" + enc.String()
			e.Topic(topic, 2, nil)
			c := floetest.NewCustomers(topic, 2)
			c.Story(30, 120, 7)
			recs := c.Records(t, enc, e.Stack.Registry)
			e.Produce(recs)
			tbl, dlq := e.debeziumTable("lake.wherekey_"+enc.String(), enc)
			cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 23, DeadLetters: dlq, Registry: e.Registry()}
			if _, err := e.sink(tbl, cfg); err != nil {
				t.Fatal(err)
			}

			// Each id's last record, as the sink decodes it: a fresh topic
			// without transactions numbers each partition's records in the
			// order they were produced.
			type last struct {
				partition int32
				offset    int64
				deletes   bool
			}
			rd, err := connector.NewRowDecoder(tbl.Layout(), e.Registry(), tbl.Iceberg().Schema(), nil)
			if err != nil {
				t.Fatal(err)
			}
			lasts := map[int64]last{}
			next := map[int32]int64{}
			for _, r := range recs {
				off := next[r.Partition]
				next[r.Partition]++
				key, _, change, dead, err := rd.DecodeChange(e.Ctx, r, tbl.UpsertKey())
				if err != nil || dead != nil {
					t.Fatalf("%s offset %d: %v %v", topic, off, dead, err)
				}
				if change == mapping.ChangeUpsert || change == mapping.ChangeDelete {
					lasts[keyID(t, enc, key)] = last{r.Partition, off, change == mapping.ChangeDelete}
				}
			}
			state := c.State()
			var deleted []int64
			for id, l := range lasts {
				if _, live := state[int32(id)]; live == l.deletes {
					t.Fatalf("id %d: last record deletes %v, in the final state %v", id, l.deletes, live)
				}
				if l.deletes {
					deleted = append(deleted, id)
				}
			}
			if len(deleted) == 0 {
				t.Fatal("the story deleted no customer")
			}

			where := func(key string, opts ...lookup.KeyOption) lookup.KeyResult {
				t.Helper()
				r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), key, opts...)
				if err != nil {
					t.Fatalf("where --key %s: %v", key, err)
				}
				return r
			}
			checkDeleted := func(when, foundBy string) {
				t.Helper()
				for _, id := range deleted {
					key := fmt.Sprintf(`{"id":%d}`, id)
					r := where(key, lookup.WithRegistry(e.Registry()))
					want := lasts[id]
					if r.Status != lookup.KeyStatusDeleted || r.FoundBy != foundBy || r.Offset == nil || *r.Offset != want.offset || r.Partition == nil || *r.Partition != want.partition {
						t.Fatalf("%s: key %s: %+v; want deleted (found by %s) by partition %d offset %d", when, key, r, foundBy, want.partition, want.offset)
					}
				}
			}
			checkDeleted("before the compaction", lookup.FoundByDeleteFiles)

			res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20})
			if err != nil || res.DroppedDeletes == 0 {
				t.Fatalf("compaction: %+v, %v; want its delete files dropped", res, err)
			}
			checkDeleted("after the compaction", lookup.FoundByLog)
			if r := where(`{"id":99999}`, lookup.WithRegistry(e.Registry())); r.Status != lookup.KeyStatusNeverSeen {
				t.Fatalf("a key no record had: %+v", r)
			}
			for id := range state {
				key := fmt.Sprintf(`{"id":%d}`, id)
				if r := where(key, lookup.WithRegistry(e.Registry())); r.Status != lookup.KeyStatusRow || *r.Offset != lasts[int64(id)].offset {
					t.Fatalf("key %s: %+v; want its row, the record at offset %d", key, r, lasts[int64(id)].offset)
				}
			}

			// Without the log, the compaction leaves it open.
			r, err := lookup.WhereKey(e.Ctx, tbl, nil, fmt.Sprintf(`{"id":%d}`, deleted[0]))
			if err != nil || r.Status != lookup.KeyStatusUnknown {
				t.Fatalf("without --brokers: %+v, %v; want unknown", r, err)
			}
			if !enc.Registry() {
				return
			}
			// Without the registry the table answers alone, and says what
			// would search the log.
			r, err = lookup.WhereKey(e.Ctx, tbl, e.Broker(), fmt.Sprintf(`{"id":%d}`, deleted[0]))
			if err != nil || r.Status != lookup.KeyStatusUnknown || !strings.Contains(r.Explanation, "pass --schema-registry too") {
				t.Fatalf("a registry table's log searched without the registry: %+v, %v; want unknown, asking for --schema-registry", r, err)
			}
		})
	}
}
