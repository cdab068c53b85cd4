package localstack

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DemoCustomer is one row of the demo's captured customers table.
type DemoCustomer struct {
	ID      int32  `json:"id"`
	Name    string `json:"name"`
	Email   string `json:"email"`
	Country string `json:"country"`
}

// DemoCustomerChanges is the demo's change log of a PostgreSQL table
// inventory.customers: a snapshot reads five rows (op r), then three
// inserts (c), three updates (u) and two deletes (d). Each record is keyed
// by the primary key ({"id": N}). With Debezium's envelope, as its
// PostgreSQL connector writes it with the JSON converter and
// schemas.enable=false, a value is the change event (before, after,
// source, op, ts_ms, transaction) and each delete is followed by its
// tombstone (the key with a null value); without it, a value is the row
// after the change and a delete is the tombstone alone. Final holds the
// table's rows after the last change, by id.
type DemoCustomerChanges struct {
	Records []*kgo.Record
	Final   map[int32]DemoCustomer
	// Snapshot, Inserts, Updates and Deletes count the events of each op.
	Snapshot, Inserts, Updates, Deletes int
}

// DemoCustomers returns the demo's customer changes for topic (partition
// 0), stamped from start one second apart, as Debezium change events when
// debezium is set, else as rows and tombstones.
func DemoCustomers(topic string, start time.Time, debezium bool) (DemoCustomerChanges, error) {
	out := DemoCustomerChanges{Final: map[int32]DemoCustomer{}}
	at := start
	lsn := int64(33_000_000)
	add := func(op string, before, after *DemoCustomer) error {
		id := int32(0)
		switch {
		case after != nil:
			id = after.ID
		case before != nil:
			id = before.ID
		}
		key, err := json.Marshal(map[string]int32{"id": id})
		if err != nil {
			return err
		}
		lsn += 512
		snap := "false"
		if op == "r" {
			snap = "true"
		}
		env := map[string]any{
			"before": before, "after": after, "op": op, "ts_ms": at.UnixMilli() + 7, "transaction": nil,
			"source": map[string]any{
				"version": "2.7.3.Final", "connector": "postgresql", "name": "dbserver1",
				"ts_ms": at.UnixMilli(), "snapshot": snap, "db": "inventory", "schema": "inventory",
				"table": "customers", "txId": 780 + len(out.Records), "lsn": lsn, "xmin": nil,
				"sequence": fmt.Sprintf(`["%d","%d"]`, lsn-512, lsn),
			},
		}
		var value []byte
		switch {
		case debezium:
			value, err = json.Marshal(env)
		case after != nil:
			value, err = json.Marshal(after)
		}
		if err != nil {
			return err
		}
		out.Records = append(out.Records, &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: at})
		at = at.Add(time.Second)
		if op == "d" && debezium {
			// Debezium's tombstone, so that log compaction can drop the key.
			out.Records = append(out.Records, &kgo.Record{Topic: topic, Key: key, Timestamp: at})
			at = at.Add(time.Second)
		}
		switch op {
		case "r":
			out.Snapshot++
		case "c":
			out.Inserts++
		case "u":
			out.Updates++
		case "d":
			out.Deletes++
		}
		if after != nil {
			out.Final[after.ID] = *after
		} else {
			delete(out.Final, id)
		}
		return nil
	}
	rows := []DemoCustomer{
		{1, "Sally Thomas", "sally.thomas@acme.com", "US"},
		{2, "George Bailey", "gbailey@foobar.com", "US"},
		{3, "Edward Walker", "ed@walker.com", "UK"},
		{4, "Anne Kretchmar", "annek@noanswer.org", "DE"},
		{5, "Jonas Berg", "jonas@berg.se", "SE"},
		{6, "Maria Rossi", "maria@rossi.it", "IT"},
		{7, "Kenji Sato", "kenji@sato.jp", "JP"},
		{8, "Ana Silva", "ana@silva.br", "BR"},
	}
	for i := range rows {
		op := "r"
		if i >= 5 {
			op = "c"
		}
		if err := add(op, nil, &rows[i]); err != nil {
			return out, err
		}
	}
	update := func(id int32, change func(*DemoCustomer)) error {
		before := out.Final[id]
		after := before
		change(&after)
		return add("u", &before, &after)
	}
	del := func(id int32) error {
		before := out.Final[id]
		return add("d", &before, nil)
	}
	for _, step := range []func() error{
		func() error { return update(2, func(c *DemoCustomer) { c.Email = "george.bailey@bedford.com" }) },
		func() error { return del(3) },
		func() error { return update(6, func(c *DemoCustomer) { c.Country = "FR" }) },
		func() error { return update(2, func(c *DemoCustomer) { c.Name = "George B. Bailey" }) },
		func() error { return del(7) },
	} {
		if err := step(); err != nil {
			return out, err
		}
	}
	return out, nil
}
