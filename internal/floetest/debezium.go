package floetest

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/floe-dev/floe/localstack"
)

// Customer is one row of the inventory.customers table that Customers
// captures, as PostgreSQL holds it:
//
//	id integer PRIMARY KEY, first_name, last_name, email varchar NOT NULL,
//	balance numeric(10,2), created_at timestamp (without time zone),
//	active boolean
//
// (balance in cents; nil for NULL).
type Customer struct {
	ID                         int32
	FirstName, LastName, Email string
	Balance                    *int64
	CreatedAt                  time.Time
	Active                     *bool
}

// CDCEncoding is how Customers writes its change events: the converters a
// Debezium connector is configured with.
type CDCEncoding int

// The encodings.
const (
	// CDCConnectJSON is Kafka Connect's JsonConverter with
	// schemas.enable=true (its default): key and value each {"schema": …,
	// "payload": …}.
	CDCConnectJSON CDCEncoding = iota
	// CDCPlainJSON is JsonConverter with schemas.enable=false: the payloads
	// alone.
	CDCPlainJSON
	// CDCAvro is Confluent's AvroConverter: the schema registry's wire
	// format, the schemas registered under TOPIC-key and TOPIC-value.
	CDCAvro
	// CDCJSONSchema is Confluent's JsonSchemaConverter: JSON in the
	// registry's wire format, decimals as JSON numbers.
	CDCJSONSchema
	// CDCProtobuf is Confluent's ProtobufConverter with
	// optional.for.nullables=true: proto3 messages in the registry's wire
	// format (message index 0), nullable fields optional, decimals as
	// their unscaled bytes.
	CDCProtobuf
)

func (e CDCEncoding) String() string {
	return [...]string{"json-wrapped", "json", "avro", "json-schema", "protobuf"}[e]
}

// Registry reports whether the encoding is the schema registry's.
func (e CDCEncoding) Registry() bool { return e == CDCAvro || e == CDCJSONSchema || e == CDCProtobuf }

// Customers simulates Debezium's PostgreSQL connector (2.x) capturing the
// table inventory.customers of database inventory into topic Topic
// (server name dbserver1): a snapshot, then inserts, updates, deletes and
// truncates, each an event in Debezium's own shape (envelope with before,
// after, source, transaction, op, ts_ms; key the primary key struct; a
// delete followed by a tombstone; a truncate without a key). The table has
// REPLICA IDENTITY FULL, so that updates and deletes carry the whole
// before image. It keeps the table's state, which a sink of the events
// must end with.
type Customers struct {
	Topic      string
	Partitions int32

	// state is the table now, last the event that wrote each row;
	// untruncated and untruncatedLast the same as if no truncate had
	// happened (what a sink that dead-letters truncates ends with).
	state, untruncated    map[int32]Customer
	last, untruncatedLast map[int32]cdcEvent
	events                []cdcEvent
	lsn                   int64
	txID                  int64
	clock                 time.Time

	// Upserts, Deletes, Tombstones and Truncates count the events of each
	// kind: c, r and u events; d events; the tombstones after them; t events.
	// Unavailable counts the updates whose email was left out
	// (UpdateUnavailable), which are not among the Upserts.
	Upserts, Deletes, Tombstones, Truncates, Unavailable int
	// Placeholder is the connector's unavailable.value.placeholder, as
	// text; empty: Debezium's default.
	Placeholder string
}

// cdcEvent is one record Customers writes: a change event, or the
// tombstone after a delete (tombstone set, key only).
type cdcEvent struct {
	op            string
	before, after *Customer
	key           int32
	tombstone     bool
	snapshot      string // source.snapshot: true, last, or false
	tsMs          int64  // source.ts_ms
	txID, lsn     int64
	at            time.Time
	seq           int // its index among the events
	// unavailable: an update whose after image lacks a TOASTed value
	// (UpdateUnavailable); it changes no row of the state.
	unavailable bool
}

// NewCustomers returns the capture of an empty customers table into topic.
func NewCustomers(topic string, partitions int32) *Customers {
	return &Customers{Topic: topic, Partitions: partitions, state: map[int32]Customer{}, untruncated: map[int32]Customer{},
		last: map[int32]cdcEvent{}, untruncatedLast: map[int32]cdcEvent{},
		lsn: 24023000, txID: 770, clock: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}
}

// State returns the table's rows now, by id.
func (c *Customers) State() map[int32]Customer {
	out := make(map[int32]Customer, len(c.state))
	for k, v := range c.state {
		out[k] = v
	}
	return out
}

func (c *Customers) tick() time.Time {
	c.clock = c.clock.Add(1500 * time.Millisecond)
	c.lsn += 48
	return c.clock
}

func (c *Customers) emit(e cdcEvent) {
	e.at = c.tick()
	e.tsMs = e.at.Add(-200 * time.Millisecond).UnixMilli()
	e.lsn = c.lsn
	if e.snapshot == "" {
		e.snapshot = "false"
		c.txID++
	}
	e.txID = c.txID
	e.seq = len(c.events)
	c.events = append(c.events, e)
	switch {
	case e.unavailable:
		// No row changes: a sink dead-letters the event.
	case e.op == "c", e.op == "r", e.op == "u":
		c.state[e.key], c.untruncated[e.key] = *e.after, *e.after
		c.last[e.key], c.untruncatedLast[e.key] = e, e
	case e.op == "d":
		delete(c.state, e.key)
		delete(c.untruncated, e.key)
		delete(c.last, e.key)
		delete(c.untruncatedLast, e.key)
	case e.op == "t":
		clear(c.state)
		clear(c.last)
	}
}

// NewCustomer returns customer id with generated values.
func NewCustomer(id int32, rng *rand.Rand) Customer {
	first := []string{"Sally", "George", "Edward", "Anne", "Kenji", "Amara", "Lucía", "Oskar"}
	last := []string{"Thomas", "Bailey", "Walker", "Kretchmar", "Sato", "Okafor", "García", "Nilsson"}
	cu := Customer{ID: id, FirstName: first[rng.IntN(len(first))], LastName: last[rng.IntN(len(last))],
		CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(300*24*3600)) * time.Second).Add(time.Duration(rng.IntN(1e6)) * time.Microsecond)}
	cu.Email = fmt.Sprintf("%s.%s.%d@example.com", cu.FirstName, cu.LastName, id)
	if rng.IntN(5) != 0 {
		b := rng.Int64N(10_000_000) - 1_000_000
		cu.Balance = &b
	}
	if rng.IntN(4) != 0 {
		a := rng.IntN(2) == 0
		cu.Active = &a
	}
	return cu
}

// Snapshot reads every row of the table, as the connector's initial
// snapshot does (op r, source.snapshot true, last for the last row), after
// inserting rows 1..n into it.
func (c *Customers) Snapshot(n int, rng *rand.Rand) {
	rows := make([]Customer, n)
	for i := range rows {
		rows[i] = NewCustomer(int32(i+1), rng)
	}
	for i := 1; i <= n; i++ {
		after := rows[i-1]
		snap := "true"
		if i == n {
			snap = "last"
		}
		c.emit(cdcEvent{op: "r", after: &after, key: int32(i), snapshot: snap})
		c.Upserts++
	}
}

// Insert inserts cu (op c).
func (c *Customers) Insert(cu Customer) {
	c.emit(cdcEvent{op: "c", after: &cu, key: cu.ID})
	c.Upserts++
}

// Update changes row id with change (op u, before and after).
func (c *Customers) Update(id int32, change func(*Customer)) {
	before, after := c.changed(id, change)
	c.emit(cdcEvent{op: "u", before: &before, after: &after, key: id})
	c.Upserts++
}

// changed returns row id, and the row change makes of it.
func (c *Customers) changed(id int32, change func(*Customer)) (before, after Customer) {
	before, ok := c.state[id]
	if !ok {
		panic(fmt.Sprintf("update of customer %d, which the table does not have", id))
	}
	after = before
	change(&after)
	return before, after
}

// UpdateUnavailable changes row id with change as an update does under
// the table's default REPLICA IDENTITY when email is a TOASTed value the
// update left unchanged: PostgreSQL does not send it, and Debezium writes
// its placeholder (Placeholder, else mapping.UnavailableValue) in its
// stead, with no before image. A sink cannot make the row of it: the state
// keeps the row as it was, as the sink's table does.
func (c *Customers) UpdateUnavailable(id int32, change func(*Customer)) {
	_, after := c.changed(id, change)
	after.Email = cmp.Or(c.Placeholder, "__debezium_unavailable_value")
	c.emit(cdcEvent{op: "u", after: &after, key: id, unavailable: true})
	c.Unavailable++
}

// Delete deletes row id (op d, then a tombstone of the same key).
func (c *Customers) Delete(id int32) {
	before, ok := c.state[id]
	if !ok {
		panic(fmt.Sprintf("delete of customer %d, which the table does not have", id))
	}
	c.emit(cdcEvent{op: "d", before: &before, key: id})
	c.emit(cdcEvent{op: "", key: id, tombstone: true})
	c.txID-- // the tombstone is part of the delete's transaction
	c.Deletes++
	c.Tombstones++
}

// Truncate empties the table (op t: no key, no before or after).
func (c *Customers) Truncate() {
	c.emit(cdcEvent{op: "t", key: -1})
	c.Truncates++
}

// Story writes a typical capture: a snapshot of n rows, then changes
// random updates, inserts and deletes (roughly 6:2:2), from seed.
func (c *Customers) Story(n, changes int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	c.Snapshot(n, rng)
	next := int32(n + 1)
	for range changes {
		ids := c.ids()
		switch r := rng.IntN(10); {
		case r < 6 && len(ids) > 0:
			c.Update(ids[rng.IntN(len(ids))], func(cu *Customer) {
				cu.Email = fmt.Sprintf("%s.%d.%d@example.org", cu.FirstName, cu.ID, rng.IntN(1000))
				b := rng.Int64N(10_000_000)
				cu.Balance = &b
			})
		case r < 8 || len(ids) == 0:
			c.Insert(NewCustomer(next, rng))
			next++
		default:
			c.Delete(ids[rng.IntN(len(ids))])
		}
	}
}

// CheckTable compares rows, the rows of a Debezium table read back
// (Rows), with the customers table: one row per customer, every column
// as encoding enc types it, __op and __source_ts_ms those of the event
// that wrote the row, and the kafka_* columns of its record. truncated
// says whether the sink applied truncates (--on-truncate delete-all);
// otherwise the table is compared with the rows no truncate deleted.
func (c *Customers) CheckTable(t testing.TB, rows []Row, enc CDCEncoding, truncated bool) {
	t.Helper()
	state, last := c.state, c.last
	if !truncated {
		state, last = c.untruncated, c.untruncatedLast
	}
	if len(rows) != len(state) {
		t.Fatalf("%d rows, the customers table has %d", len(rows), len(state))
	}
	// Each event's offset: its place among its partition's records.
	offsets := make([]int64, len(c.events))
	next := map[int32]int64{}
	for i, e := range c.events {
		p := c.partition(e)
		offsets[i] = next[p]
		next[p]++
	}
	seen := map[int32]bool{}
	for _, r := range rows {
		id64, err := strconv.ParseInt(r.Columns["id"], 10, 32)
		if err != nil {
			t.Fatalf("row %+v: id: %v", r, err)
		}
		id := int32(id64)
		cu, ok := state[id]
		if !ok || seen[id] {
			t.Fatalf("row of customer %d: the table has none, or it has two rows", id)
		}
		seen[id] = true
		e := last[id]
		want := map[string]string{"first_name": cu.FirstName, "last_name": cu.LastName, "email": cu.Email,
			"active": "(null)", "__op": e.op, "__source_ts_ms": strconv.FormatInt(e.tsMs, 10)}
		if cu.Active != nil {
			want["active"] = strconv.FormatBool(*cu.Active)
		}
		for k, w := range want {
			if r.Columns[k] != w {
				t.Errorf("customer %d: %s %q, want %q", id, k, r.Columns[k], w)
			}
		}
		if r.TS != e.at.UnixMicro() || r.TP.Topic != c.Topic || r.TP.Partition != c.partition(e) || r.Offset != offsets[e.seq] {
			t.Errorf("customer %d: kafka_* of %s offset %d at %d, want those of its event's record, offset %d at %s", id, r.TP, r.Offset, r.TS, offsets[e.seq], e.at)
		}
		checkBalance(t, id, r.Columns["balance"], cu.Balance, enc)
		created := r.Columns["created_at"]
		if enc == CDCConnectJSON {
			// io.debezium.time.MicroTimestamp typed by the Connect schema.
			at, err := time.Parse("2006-01-02T15:04:05.999999999", created)
			if err != nil || !at.Equal(cu.CreatedAt) {
				t.Errorf("customer %d: created_at %q, want timestamp %s (%v)", id, created, cu.CreatedAt, err)
			}
		} else if created != strconv.FormatInt(cu.CreatedAt.UnixMicro(), 10) {
			t.Errorf("customer %d: created_at %q, want the microseconds %d", id, created, cu.CreatedAt.UnixMicro())
		}
	}
}

// checkBalance compares a balance column as Arrow prints it with the
// customer's, as enc types it: decimal(10,2) by the Connect, Avro and
// JSON Schema schemas (the JsonSchemaConverter titles the number a Connect
// Decimal), the unscaled bytes (printed in base64) without a schema and by
// Protobuf.
func checkBalance(t testing.TB, id int32, got string, want *int64, enc CDCEncoding) {
	t.Helper()
	if want == nil {
		if got != "(null)" {
			t.Errorf("customer %d: balance %q, want null", id, got)
		}
		return
	}
	exact := big.NewRat(*want, 100)
	switch enc {
	case CDCPlainJSON, CDCProtobuf:
		if w := base64.StdEncoding.EncodeToString(twosComplement(*want)); got != w {
			t.Errorf("customer %d: balance %q, want base64 %q", id, got, w)
		}
	default:
		r, ok := new(big.Rat).SetString(got)
		if !ok || r.Cmp(exact) != 0 {
			t.Errorf("customer %d: balance %q, want %s", id, got, exact.FloatString(2))
		}
	}
}

// ids returns the table's ids in order.
func (c *Customers) ids() []int32 {
	out := make([]int32, 0, len(c.state))
	for id := range c.state {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Records returns the events written so far as Kafka records in encoding
// enc, keyed records on partition id mod Partitions (a truncate, which has
// no key, on partition 0). CDCAvro registers the schemas in the registry
// at registryURL first.
func (c *Customers) Records(t testing.TB, enc CDCEncoding, registryURL string) []*kgo.Record {
	t.Helper()
	var keyID, valueID int
	var keySchema, valueSchema avro.Schema
	var keyMsg, valueMsg protoreflect.MessageDescriptor
	if enc.Registry() {
		key, value := sr.Schema{Schema: CustomersKeyAvro}, sr.Schema{Schema: CustomersEnvelopeAvro}
		switch enc {
		case CDCJSONSchema:
			key, value = sr.Schema{Type: sr.TypeJSON, Schema: customersKeyJSONSchema}, sr.Schema{Type: sr.TypeJSON, Schema: customersEnvelopeJSONSchema()}
		case CDCProtobuf:
			key, value = sr.Schema{Type: sr.TypeProtobuf, Schema: customersKeyProto}, sr.Schema{Type: sr.TypeProtobuf, Schema: customersEnvelopeProto}
			keyMsg, valueMsg = protoMessage(t, customersKeyProto, "Key"), protoMessage(t, customersEnvelopeProto, "Envelope")
		}
		var err error
		ctx := context.Background()
		if keyID, err = localstack.RegisterSchema(ctx, registryURL, c.Topic+"-key", key); err != nil {
			t.Fatal(err)
		}
		if valueID, err = localstack.RegisterSchema(ctx, registryURL, c.Topic+"-value", value); err != nil {
			t.Fatal(err)
		}
		keySchema, valueSchema = avro.MustParse(CustomersKeyAvro), avro.MustParse(CustomersEnvelopeAvro)
	}
	out := make([]*kgo.Record, 0, len(c.events))
	for _, e := range c.events {
		r := &kgo.Record{Topic: c.Topic, Timestamp: e.at, Partition: c.partition(e)}
		if e.key >= 0 {
			key := map[string]any{"id": e.key}
			switch enc {
			case CDCConnectJSON:
				r.Key = mustJSON(t, map[string]any{"schema": json.RawMessage(customersKeyConnect), "payload": key})
			case CDCPlainJSON:
				r.Key = mustJSON(t, key)
			case CDCAvro:
				b, err := avro.Marshal(keySchema, key)
				if err != nil {
					t.Fatal(err)
				}
				r.Key = localstack.WireFormat(keyID, nil, b)
			case CDCJSONSchema:
				r.Key = localstack.WireFormat(keyID, nil, mustJSON(t, key))
			case CDCProtobuf:
				r.Key = localstack.WireFormat(keyID, []int{0}, protoOf(t, keyMsg, mustJSON(t, key)))
			}
		}
		if e.tombstone {
			out = append(out, r)
			continue
		}
		switch enc {
		case CDCConnectJSON:
			r.Value = mustJSON(t, map[string]any{"schema": json.RawMessage(customersEnvelopeConnect()), "payload": c.jsonEnvelope(e)})
		case CDCPlainJSON:
			r.Value = mustJSON(t, c.jsonEnvelope(e))
		case CDCAvro:
			b, err := avro.Marshal(valueSchema, c.avroEnvelope(e))
			if err != nil {
				t.Fatal(err)
			}
			r.Value = localstack.WireFormat(valueID, nil, b)
		case CDCJSONSchema:
			env := c.jsonEnvelope(e)
			env["before"], env["after"] = jsonSchemaRow(e.before), jsonSchemaRow(e.after)
			r.Value = localstack.WireFormat(valueID, nil, mustJSON(t, env))
		case CDCProtobuf:
			r.Value = localstack.WireFormat(valueID, []int{0}, protoOf(t, valueMsg, mustJSON(t, c.jsonEnvelope(e))))
		}
		out = append(out, r)
	}
	return out
}

// partition is the partition of an event's record: its key's id mod
// Partitions, 0 for a truncate (which has no key).
func (c *Customers) partition(e cdcEvent) int32 {
	if e.key < 0 {
		return 0
	}
	return e.key % c.Partitions
}

// protoMessage compiles a .proto as a producer's build would and returns
// its message name.
func protoMessage(t testing.TB, text, name string) protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"customers.proto": text})})}
	fds, err := c.Compile(context.Background(), "customers.proto")
	if err != nil {
		t.Fatal(err)
	}
	md := fds[0].Messages().ByName(protoreflect.Name(name))
	if md == nil {
		t.Fatalf("no message %s", name)
	}
	return md
}

// protoOf encodes, as a message of md, the JSON a converter of the same
// event writes (null fields left unset).
func protoOf(t testing.TB, md protoreflect.MessageDescriptor, js []byte) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal(js, m); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// source is the event's source block (io.debezium.connector.postgresql.Source).
func (c *Customers) source(e cdcEvent) map[string]any {
	return map[string]any{"version": "2.7.3.Final", "connector": "postgresql", "name": "dbserver1",
		"ts_ms": e.tsMs, "snapshot": e.snapshot, "db": "inventory",
		"sequence": fmt.Sprintf(`["%d","%d"]`, e.lsn-48, e.lsn), "schema": "inventory", "table": "customers",
		"txId": e.txID, "lsn": e.lsn, "xmin": nil}
}

// jsonRow is a row as the JsonConverter writes it: numeric(10,2) as the
// base64 of its unscaled big-endian two's-complement bytes, timestamp as
// microseconds (io.debezium.time.MicroTimestamp).
func jsonRow(cu *Customer) any {
	if cu == nil {
		return nil
	}
	var balance any
	if cu.Balance != nil {
		balance = base64.StdEncoding.EncodeToString(twosComplement(*cu.Balance))
	}
	var active any
	if cu.Active != nil {
		active = *cu.Active
	}
	return map[string]any{"id": cu.ID, "first_name": cu.FirstName, "last_name": cu.LastName, "email": cu.Email,
		"balance": balance, "created_at": cu.CreatedAt.UnixMicro(), "active": active}
}

// jsonSchemaRow is a row as the JsonSchemaConverter writes it: the
// decimal as a JSON number.
func jsonSchemaRow(cu *Customer) any {
	if cu == nil {
		return nil
	}
	row := jsonRow(cu).(map[string]any)
	if cu.Balance != nil {
		row["balance"] = json.Number(big.NewRat(*cu.Balance, 100).FloatString(2))
	}
	return row
}

func (c *Customers) jsonEnvelope(e cdcEvent) map[string]any {
	var tx any
	if e.snapshot == "false" {
		tx = map[string]any{"id": strconv.FormatInt(e.txID, 10) + ":" + strconv.FormatInt(e.lsn, 10), "total_order": 1, "data_collection_order": 1}
	}
	return map[string]any{"before": jsonRow(e.before), "after": jsonRow(e.after), "source": c.source(e),
		"transaction": tx, "op": e.op, "ts_ms": e.at.UnixMilli()}
}

// avroRow is a row as the AvroConverter writes it, for hamba/avro: a
// nullable union as map[branch]value.
func avroRow(cu *Customer) any {
	if cu == nil {
		return nil
	}
	row := map[string]any{"id": cu.ID, "first_name": cu.FirstName, "last_name": cu.LastName, "email": cu.Email,
		"balance": nil, "created_at": map[string]any{"long": cu.CreatedAt.UnixMicro()}, "active": nil}
	if cu.Balance != nil {
		row["balance"] = map[string]any{"bytes.decimal": big.NewRat(*cu.Balance, 100)}
	}
	if cu.Active != nil {
		row["active"] = map[string]any{"boolean": *cu.Active}
	}
	return map[string]any{"dbserver1.inventory.customers.Value": row}
}

func (c *Customers) avroEnvelope(e cdcEvent) map[string]any {
	src := c.source(e)
	src["snapshot"] = map[string]any{"string": e.snapshot}
	src["sequence"] = map[string]any{"string": src["sequence"]}
	src["txId"] = map[string]any{"long": e.txID}
	src["lsn"] = map[string]any{"long": e.lsn}
	var tx any
	if e.snapshot == "false" {
		tx = map[string]any{"event.block": map[string]any{"id": strconv.FormatInt(e.txID, 10) + ":" + strconv.FormatInt(e.lsn, 10), "total_order": int64(1), "data_collection_order": int64(1)}}
	}
	return map[string]any{"before": avroRow(e.before), "after": avroRow(e.after), "source": src,
		"transaction": tx, "op": e.op, "ts_ms": map[string]any{"long": e.at.UnixMilli()}}
}

// twosComplement returns n as the shortest big-endian two's-complement
// bytes, as Kafka Connect's Decimal writes an unscaled value.
func twosComplement(n int64) []byte {
	b := []byte{byte(n >> 56), byte(n >> 48), byte(n >> 40), byte(n >> 32), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	for len(b) > 1 && ((b[0] == 0 && b[1]&0x80 == 0) || (b[0] == 0xff && b[1]&0x80 != 0)) {
		b = b[1:]
	}
	return b
}

// The schemas Debezium's PostgreSQL connector registers for
// inventory.customers: the JsonConverter's (schemas.enable=true) and the
// AvroConverter's.
const (
	customersKeyConnect = `{"type":"struct","fields":[{"type":"int32","optional":false,"default":0,"field":"id"}],"optional":false,"name":"dbserver1.inventory.customers.Key"}`

	customersValueConnect = `{"type":"struct","fields":[` +
		`{"type":"int32","optional":false,"default":0,"field":"id"},` +
		`{"type":"string","optional":false,"field":"first_name"},` +
		`{"type":"string","optional":false,"field":"last_name"},` +
		`{"type":"string","optional":false,"field":"email"},` +
		`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"balance"},` +
		`{"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1,"field":"created_at"},` +
		`{"type":"boolean","optional":true,"field":"active"}],` +
		`"optional":true,"name":"dbserver1.inventory.customers.Value","field":"%s"}`

	customersSourceConnect = `{"type":"struct","fields":[` +
		`{"type":"string","optional":false,"field":"version"},` +
		`{"type":"string","optional":false,"field":"connector"},` +
		`{"type":"string","optional":false,"field":"name"},` +
		`{"type":"int64","optional":false,"field":"ts_ms"},` +
		`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,last,false,incremental"},"default":"false","field":"snapshot"},` +
		`{"type":"string","optional":false,"field":"db"},` +
		`{"type":"string","optional":true,"field":"sequence"},` +
		`{"type":"string","optional":false,"field":"schema"},` +
		`{"type":"string","optional":false,"field":"table"},` +
		`{"type":"int64","optional":true,"field":"txId"},` +
		`{"type":"int64","optional":true,"field":"lsn"},` +
		`{"type":"int64","optional":true,"field":"xmin"}],` +
		`"optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source"}`

	customersBlockConnect = `{"type":"struct","fields":[` +
		`{"type":"string","optional":false,"field":"id"},` +
		`{"type":"int64","optional":false,"field":"total_order"},` +
		`{"type":"int64","optional":false,"field":"data_collection_order"}],` +
		`"optional":true,"name":"event.block","version":1,"field":"transaction"}`

	// CustomersKeyAvro is the AvroConverter's key schema.
	CustomersKeyAvro = `{"type":"record","name":"Key","namespace":"dbserver1.inventory.customers","fields":[{"name":"id","type":"int"}],"connect.name":"dbserver1.inventory.customers.Key"}`

	// CustomersEnvelopeAvro is the AvroConverter's value schema.
	CustomersEnvelopeAvro = `{"type":"record","name":"Envelope","namespace":"dbserver1.inventory.customers","fields":[
  {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
    {"name":"id","type":"int"},
    {"name":"first_name","type":"string"},
    {"name":"last_name","type":"string"},
    {"name":"email","type":"string"},
    {"name":"balance","type":["null",{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}],"default":null},
    {"name":"created_at","type":["null",{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTimestamp"}],"default":null},
    {"name":"active","type":["null","boolean"],"default":null}],
    "connect.name":"dbserver1.inventory.customers.Value"}],"default":null},
  {"name":"after","type":["null","Value"],"default":null},
  {"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[
    {"name":"version","type":"string"},
    {"name":"connector","type":"string"},
    {"name":"name","type":"string"},
    {"name":"ts_ms","type":"long"},
    {"name":"snapshot","type":[{"type":"string","connect.version":1,"connect.parameters":{"allowed":"true,last,false,incremental"},"connect.default":"false","connect.name":"io.debezium.data.Enum"},"null"],"default":"false"},
    {"name":"db","type":"string"},
    {"name":"sequence","type":["null","string"],"default":null},
    {"name":"schema","type":"string"},
    {"name":"table","type":"string"},
    {"name":"txId","type":["null","long"],"default":null},
    {"name":"lsn","type":["null","long"],"default":null},
    {"name":"xmin","type":["null","long"],"default":null}],
    "connect.name":"io.debezium.connector.postgresql.Source"}},
  {"name":"transaction","type":["null",{"type":"record","name":"block","namespace":"event","fields":[
    {"name":"id","type":"string"},
    {"name":"total_order","type":"long"},
    {"name":"data_collection_order","type":"long"}],
    "connect.version":1,"connect.name":"event.block"}],"default":null},
  {"name":"op","type":"string"},
  {"name":"ts_ms","type":["null","long"],"default":null}],
  "connect.version":1,"connect.name":"dbserver1.inventory.customers.Envelope"}`
)

// customersEnvelopeConnect returns the JsonConverter's value schema.
func customersEnvelopeConnect() string {
	return `{"type":"struct","fields":[` +
		fmt.Sprintf(customersValueConnect, "before") + `,` +
		fmt.Sprintf(customersValueConnect, "after") + `,` +
		customersSourceConnect + `,` + customersBlockConnect + `,` +
		`{"type":"string","optional":false,"field":"op"},` +
		`{"type":"int64","optional":true,"field":"ts_ms"}],` +
		`"optional":false,"name":"dbserver1.inventory.customers.Envelope","version":1}`
}

// The JsonSchemaConverter's schemas for inventory.customers: nullable
// fields as oneOf null and the type, Connect's types in connect.type.
const (
	customersKeyJSONSchema = `{"type":"object","title":"dbserver1.inventory.customers.Key","properties":{"id":{"type":"integer","connect.index":0,"connect.type":"int32"}}}`

	customersValueJSONSchema = `{"connect.index":%d,"oneOf":[{"type":"null"},{"type":"object","title":"dbserver1.inventory.customers.Value","properties":{
  "id":{"type":"integer","connect.index":0,"connect.type":"int32"},
  "first_name":{"type":"string","connect.index":1},
  "last_name":{"type":"string","connect.index":2},
  "email":{"type":"string","connect.index":3},
  "balance":{"connect.index":4,"oneOf":[{"type":"null"},{"type":"number","title":"org.apache.kafka.connect.data.Decimal","connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.type":"bytes"}]},
  "created_at":{"connect.index":5,"oneOf":[{"type":"null"},{"type":"integer","title":"io.debezium.time.MicroTimestamp","connect.version":1,"connect.type":"int64"}]},
  "active":{"connect.index":6,"oneOf":[{"type":"null"},{"type":"boolean"}]}}}]}`

	customersSourceJSONSchema = `{"type":"object","title":"io.debezium.connector.postgresql.Source","connect.index":2,"properties":{
  "version":{"type":"string","connect.index":0},
  "connector":{"type":"string","connect.index":1},
  "name":{"type":"string","connect.index":2},
  "ts_ms":{"type":"integer","connect.index":3,"connect.type":"int64"},
  "snapshot":{"connect.index":4,"oneOf":[{"type":"null"},{"type":"string","title":"io.debezium.data.Enum","connect.version":1,"connect.parameters":{"allowed":"true,last,false,incremental"},"default":"false"}]},
  "db":{"type":"string","connect.index":5},
  "sequence":{"connect.index":6,"oneOf":[{"type":"null"},{"type":"string"}]},
  "schema":{"type":"string","connect.index":7},
  "table":{"type":"string","connect.index":8},
  "txId":{"connect.index":9,"oneOf":[{"type":"null"},{"type":"integer","connect.type":"int64"}]},
  "lsn":{"connect.index":10,"oneOf":[{"type":"null"},{"type":"integer","connect.type":"int64"}]},
  "xmin":{"connect.index":11,"oneOf":[{"type":"null"},{"type":"integer","connect.type":"int64"}]}}}`

	customersBlockJSONSchema = `{"connect.index":3,"oneOf":[{"type":"null"},{"type":"object","title":"event.block","connect.version":1,"properties":{
  "id":{"type":"string","connect.index":0},
  "total_order":{"type":"integer","connect.index":1,"connect.type":"int64"},
  "data_collection_order":{"type":"integer","connect.index":2,"connect.type":"int64"}}}]}`
)

// customersEnvelopeJSONSchema returns the JsonSchemaConverter's value
// schema.
func customersEnvelopeJSONSchema() string {
	return `{"type":"object","title":"dbserver1.inventory.customers.Envelope","properties":{` +
		`"before":` + fmt.Sprintf(customersValueJSONSchema, 0) + `,` +
		`"after":` + fmt.Sprintf(customersValueJSONSchema, 1) + `,` +
		`"source":` + customersSourceJSONSchema + `,` +
		`"transaction":` + customersBlockJSONSchema + `,` +
		`"op":{"type":"string","connect.index":4},` +
		`"ts_ms":{"connect.index":5,"oneOf":[{"type":"null"},{"type":"integer","connect.type":"int64"}]}}}`
}

// The ProtobufConverter's schemas for inventory.customers
// (optional.for.nullables=true): the envelope is the .proto's first
// message, the row, source and transaction block nested in it.
const (
	customersKeyProto = `syntax = "proto3";
package dbserver1.inventory.customers;

message Key {
  int32 id = 1;
}
`
	customersEnvelopeProto = `syntax = "proto3";
package dbserver1.inventory.customers;

message Envelope {
  Value before = 1;
  Value after = 2;
  Source source = 3;
  block transaction = 4;
  string op = 5;
  optional int64 ts_ms = 6;

  message Value {
    int32 id = 1;
    string first_name = 2;
    string last_name = 3;
    string email = 4;
    optional bytes balance = 5;
    optional int64 created_at = 6;
    optional bool active = 7;
  }
  message Source {
    string version = 1;
    string connector = 2;
    string name = 3;
    int64 ts_ms = 4;
    optional string snapshot = 5;
    string db = 6;
    optional string sequence = 7;
    string schema = 8;
    string table = 9;
    optional int64 txId = 10;
    optional int64 lsn = 11;
    optional int64 xmin = 12;
  }
  message block {
    string id = 1;
    int64 total_order = 2;
    int64 data_collection_order = 3;
  }
}
`
)
