package localstack

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// Shipment schemas of the typed demo: version 2 adds an optional carrier,
// which a sink turns into a new column.
const (
	ShipmentSchemaV1 = `{"type":"record","name":"Shipment","namespace":"shop","fields":[
  {"name":"shipment_id","type":"long"},
  {"name":"order_id","type":"long"},
  {"name":"weight_kg","type":"float"},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["PACKED","SHIPPED","DELIVERED"]}},
  {"name":"shipped_at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	ShipmentSchemaV2 = `{"type":"record","name":"Shipment","namespace":"shop","fields":[
  {"name":"shipment_id","type":"long"},
  {"name":"order_id","type":"long"},
  {"name":"weight_kg","type":"float"},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["PACKED","SHIPPED","DELIVERED"]}},
  {"name":"shipped_at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"carrier","type":["null","string"],"default":null}]}`
)

type shipment struct {
	ShipmentID int64     `avro:"shipment_id"`
	OrderID    int64     `avro:"order_id"`
	WeightKg   float32   `avro:"weight_kg"`
	Status     string    `avro:"status"`
	ShippedAt  time.Time `avro:"shipped_at"`
	Carrier    *string   `avro:"carrier"`
}

// DemoShipments registers the shipment schemas under subject TOPIC-value
// in the registry at url and returns n shipment events for topic, keyed by
// order id, in the registry's wire format: the first half written with
// version 1, the rest with version 2 (a carrier added). Three more
// records follow that cannot become rows: JSON without the wire header, a
// schema id the registry does not have, and a truncated Avro payload.
func DemoShipments(ctx context.Context, url, topic string, partitions int32, n int, start time.Time, seed uint64) ([]*kgo.Record, error) {
	ids := make([]int, 2)
	schemas := make([]avro.Schema, 2)
	for i, text := range []string{ShipmentSchemaV1, ShipmentSchemaV2} {
		id, err := RegisterSchema(ctx, url, topic+"-value", sr.Schema{Schema: text})
		if err != nil {
			return nil, err
		}
		s, err := avro.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("parse shipment schema v%d: %w", i+1, err)
		}
		ids[i], schemas[i] = id, s
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	statuses := []string{"PACKED", "SHIPPED", "DELIVERED"}
	carriers := []string{"DHL", "UPS", "PostNL", "GLS"}
	out := make([]*kgo.Record, 0, n+3)
	for i := range n {
		order := int64(100000 + rng.IntN(5000))
		at := start.Add(time.Duration(i) * time.Second)
		s := shipment{ShipmentID: int64(i + 1), OrderID: order, WeightKg: float32(rng.IntN(3000)) / 100,
			Status: statuses[rng.IntN(len(statuses))], ShippedAt: at.Truncate(time.Millisecond).UTC()}
		v := 0
		if i >= n/2 {
			v = 1
			if rng.IntN(4) != 0 {
				s.Carrier = &carriers[rng.IntN(len(carriers))]
			}
		}
		body, err := avro.Marshal(schemas[v], s)
		if err != nil {
			return nil, fmt.Errorf("encode shipment %d: %w", i, err)
		}
		out = append(out, &kgo.Record{Topic: topic, Partition: int32(order) % partitions, Key: fmt.Appendf(nil, "order-%d", order),
			Timestamp: at, Value: WireFormat(ids[v], nil, body)})
	}
	bad := [][]byte{
		[]byte(`{"shipment_id":0,"note":"written without the schema registry"}`),
		WireFormat(9999, nil, []byte{2, 4}),
		WireFormat(ids[1], nil, []byte{2}),
	}
	for i, v := range bad {
		out = append(out, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Key: []byte("bad"), Timestamp: start.Add(time.Duration(n+i) * time.Second), Value: v})
	}
	return out, nil
}
