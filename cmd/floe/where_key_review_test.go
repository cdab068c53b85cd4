package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

// whereKey runs floe where --key --json --brokers on table name and
// returns its answer.
func whereKey(t *testing.T, name, key, brokers string, loc []string) map[string]any {
	t.Helper()
	out := mustFloe(t, append([]string{"where", "--table", name, "--key", key, "--json", "-b", brokers}, loc...)...)
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	return r
}

// TestWhereKeyDeletedAcrossPartitions (from a review): key k's row comes
// from partition 0; the next commit holds k's tombstone in partition 0
// (t=10) and an older record of k in partition 1 (t=5): the tombstone
// wins (mapping.Winner), and the table has no row of k. where --key took
// the last record by the order of the commit's ranges (partition 1's) and
// said the log no longer held the deleting record, and after compaction
// "never seen". It names the tombstone, before and after compaction.
func TestWhereKeyDeletedAcrossPartitions(t *testing.T) {
	const topic = "wx"
	b := func(s string) []byte { return []byte(s) }
	st, sink, loc := upsertStack(t, topic, 2, []*kgo.Record{rec(topic, 0, b("k"), b("first"), 0), rec(topic, 0, b("other"), b("o"), 0)})
	sink = append(sink, "--table", "lake.wx", "--mode", "upsert", "--key", "string")
	mustFloe(t, sink...)
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{rec(topic, 0, b("k"), nil, 10), rec(topic, 1, b("k"), b("older"), 5)}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, sink...)
	if _, ok := stateOf(t, st, "lake.wx", "", "")["k"]; ok {
		t.Fatal("k has a row; the tombstone (t=10) wins over partition 1's record (t=5)")
	}
	for _, stage := range []string{"before compaction", "after compaction"} {
		if stage == "after compaction" {
			mustFloe(t, append([]string{"maintain", "--table", "lake.wx", "--compact"}, loc...)...)
		}
		r := whereKey(t, "lake.wx", "k", st.Brokers[0], loc)
		if r["status"] != "deleted" || r["partition"] != 0.0 || r["offset"] != 2.0 {
			t.Errorf("%s: where --key k: %v; want deleted by wx/0 offset 2", stage, r)
		}
	}
}

// TestWhereKeyDeletedThenDeadLetter (from a review): k gets a value, a
// tombstone, then a value that is not JSON, which goes to the dead-letter
// table and changes no row. where --key took the dead letter for k's last
// record. It names the tombstone, before and after compaction.
func TestWhereKeyDeletedThenDeadLetter(t *testing.T) {
	const topic = "wd"
	b := func(s string) []byte { return []byte(s) }
	st, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, b("k"), b(`{"a":1}`), 0), rec(topic, 0, b("k"), nil, 1), rec(topic, 0, b("k"), b("not json"), 2), rec(topic, 0, b("o"), b(`{"a":2}`), 3)})
	mustFloe(t, append(sink, "--table", "lake.wd", "--mode", "upsert", "--key", "string", "--value", "json")...)
	if _, ok := stateOf(t, st, "lake.wd", "", "")["k"]; ok {
		t.Fatal("k has a row")
	}
	for _, stage := range []string{"before compaction", "after compaction"} {
		if stage == "after compaction" {
			mustFloe(t, append([]string{"maintain", "--table", "lake.wd", "--compact"}, loc...)...)
		}
		r := whereKey(t, "lake.wd", "k", st.Brokers[0], loc)
		if r["status"] != "deleted" || r["offset"] != 1.0 {
			t.Errorf("%s: where --key k: %v; want deleted by wd/0 offset 1", stage, r)
		}
	}
}

// TestWhereKeyTruncatedInOneCommit (from a review): a Debezium table with
// --on-truncate delete-all written in one flush: a snapshot read of ids
// 1-6, a delete of id 3, the truncate, then a create and a delete of id
// 50. The truncate's commit writes no equality delete, so no snapshot
// ever held ids 3, 5 or 50: where --key answered "never seen" for them,
// certain. It says a truncate may have removed them.
func TestWhereKeyTruncatedInOneCommit(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	c.Snapshot(6, rng)
	c.Delete(3)
	c.Truncate()
	c.Insert(floetest.NewCustomer(2, rng))
	c.Insert(floetest.NewCustomer(50, rng))
	c.Delete(50)
	st, sink, loc := upsertStack(t, topic, 1, c.Records(t, floetest.CDCConnectJSON, ""))
	mustFloe(t, slices.Concat(sink, []string{"--table", "lake.cdc", "--envelope", "debezium", "--value", "json", "--key", "json", "--on-truncate", "delete-all"})...)
	c.CheckTable(t, floetest.Rows(t, openTable(t, st.Catalog(), "lake.cdc")), floetest.CDCConnectJSON, true)
	for _, id := range []int{3, 5, 50} {
		r := whereKey(t, "lake.cdc", fmt.Sprintf(`{"id":%d}`, id), st.Brokers[0], loc)
		if r["status"] == "never_seen" || !strings.Contains(fmt.Sprint(r["explanation"]), "truncate") {
			t.Errorf("where id %d: %v; want an answer that names the truncate", id, r)
		}
	}
}

// TestWhereKeyDeadLettersPending (from a review): where --key with
// --brokers asks a range's dead-letter table whether the key's latest
// record is a dead letter; a dead-letter table without a snapshot yet (a
// writer stopped between its data commit and the dead letters' commit)
// failed the lookup, and a dropped one would have. The answer is what the
// data table and the log say.
func TestWhereKeyDeadLettersPending(t *testing.T) {
	const topic = "wdp"
	b := func(s string) []byte { return []byte(s) }
	st, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, b("k"), b(`{"a":1}`), 0), rec(topic, 0, b("k"), nil, 1), rec(topic, 0, b("o"), b("not json"), 2), rec(topic, 0, b("p"), b(`{"a":2}`), 3)})
	mustFloe(t, append(sink, "--table", "lake.wdp", "--mode", "upsert", "--key", "string", "--value", "json")...)
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent("lake.wdp_dlq")
	at := strings.TrimPrefix(openTable(t, st.Catalog(), "lake.wdp_dlq").Iceberg().Location(), "file://")
	for _, stage := range []string{"dropped", "pending"} {
		if stage == "dropped" {
			if err := cat.DropTable(t.Context(), ident); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(at); err != nil {
				t.Fatal(err)
			}
		} else if _, err := snapshot.OpenDeadLetters(t.Context(), cat, ident, "lake.wdp", true); err != nil {
			t.Fatal(err)
		}
		if r := whereKey(t, "lake.wdp", "k", st.Brokers[0], loc); r["status"] != "deleted" || r["offset"] != 1.0 {
			t.Errorf("dead-letter table %s: where --key k: %v; want deleted by wdp/0 offset 1", stage, r)
		}
	}
}

// TestWhereKeyErrorNamesKeyAsGiven (from a new-user run): floe where --key
// k1 on a table whose data file is gone said "look key map[kafka_key:k1]
// up in lake.moved", a Go map. It names the key as it was given.
func TestWhereKeyErrorNamesKeyAsGiven(t *testing.T) {
	const topic = "mv"
	st, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, []byte("k1"), []byte("v"), 0)})
	mustFloe(t, append(sink, "--table", "lake.moved", "--mode", "upsert", "--key", "string")...)
	tbl := openTable(t, st.Catalog(), "lake.moved")
	data := filepath.Join(strings.TrimPrefix(tbl.Iceberg().Location(), "file://"), "data")
	removed := 0
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".parquet") {
			removed++
			return os.Remove(path)
		}
		return err
	})
	if err != nil || removed == 0 {
		t.Fatalf("remove the data files under %s: %v (%d removed)", data, err, removed)
	}
	code, out, errs := floe(t, append([]string{"where", "--table", "lake.moved", "--key", "k1"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "look key k1 up in lake.moved") || strings.Contains(errs, "map[") {
		t.Fatalf("where --key k1 with the data file gone: exit %d\n%s\n%s", code, out, errs)
	}
}
