package localstack

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CreateTopic creates a topic with the given partitions and configs
// (retention.ms, cleanup.policy, ...); an existing topic is left alone.
// opts are extra client options (TLS, SASL of a secured broker).
func CreateTopic(ctx context.Context, brokers []string, topic string, partitions int32, configs map[string]*string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// Produce writes records synchronously. Records with Partition set keep it.
// opts are extra client options (TLS, SASL of a secured broker).
func Produce(ctx context.Context, brokers []string, records []*kgo.Record, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return fmt.Errorf("produce %d records: %w", len(records), err)
	}
	return nil
}

// ProduceTxn writes records in one transaction and commits or aborts it.
// The transaction's records and its marker occupy offsets either way.
func ProduceTxn(ctx context.Context, brokers []string, txnID string, records []*kgo.Record, commit bool) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction %s: %w", txnID, err)
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return fmt.Errorf("produce in transaction %s: %w", txnID, err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		return fmt.Errorf("end transaction %s: %w", txnID, err)
	}
	return nil
}

// DemoEvents returns n realistic order events spread over partitions:
// keyed by customer, JSON values, headers with a repeated key, and about one
// tombstone (null value) in fifty. Timestamps increase from start by about a
// second each.
func DemoEvents(topic string, partitions int32, n int, start time.Time, seed uint64) []*kgo.Record {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	statuses := []string{"created", "paid", "shipped", "delivered", "refunded"}
	sources := []string{"web", "ios", "android", "pos"}
	out := make([]*kgo.Record, 0, n)
	for i := range n {
		customer := rng.IntN(500)
		r := &kgo.Record{
			Topic:     topic,
			Partition: int32(customer) % partitions,
			Key:       fmt.Appendf(nil, "customer-%04d", customer),
			Timestamp: start.Add(time.Duration(i) * time.Second).Add(time.Duration(rng.IntN(800)) * time.Millisecond),
			Headers: []kgo.RecordHeader{
				{Key: "source", Value: []byte(sources[rng.IntN(len(sources))])},
				{Key: "trace-id", Value: fmt.Appendf(nil, "%016x", rng.Uint64())},
				{Key: "tag", Value: []byte("priority")},
				{Key: "tag", Value: []byte("eu")},
			},
		}
		if rng.IntN(50) != 0 {
			r.Value = fmt.Appendf(nil, `{"order_id":%d,"customer":%d,"amount_cents":%d,"currency":"EUR","status":%q}`,
				100000+i, customer, 100+rng.IntN(50000), statuses[rng.IntN(len(statuses))])
		}
		out = append(out, r)
	}
	return out
}
