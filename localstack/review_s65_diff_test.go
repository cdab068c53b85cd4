package localstack

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/floe-dev/floe/internal/testenv"
)

// TestReviewS65DiffPlaintextPortTelemetry: the plaintext port relays the
// secured broker's ApiVersions answer as it is, so it advertises
// GetTelemetrySubscriptions and PushTelemetry (KIP-714), which kfake has,
// but closes the connection on them as on any request it does not relay.
// A KIP-714 client sends them unasked once the broker says it takes them
// (franz-go by default, the Java producer 3.7+ with enable.metrics.push,
// librdkafka 2.5+): the port cuts the producer's connection (in the Java
// client and librdkafka its only one to the broker, in-flight Produce
// requests included) and logs a warning, again at every retry.
func TestReviewS65DiffPlaintextPortTelemetry(t *testing.T) {
	var l *Local
	for attempt := 1; ; attempt++ {
		o := UpOptions{Dir: t.TempDir(), Secure: true}
		ports := make([]int, 4)
		for i := range ports {
			p, err := testenv.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			ports[i] = p
		}
		o.KafkaPort, o.S3Port, o.RegistryPort, o.PlaintextPort = ports[0], ports[1], ports[2], ports[3]
		var err error
		if l, err = Up(t.Context(), o); err == nil {
			break
		}
		if attempt == 3 || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
	t.Cleanup(l.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.Plaintext), kgo.DisableClientMetrics(), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	telemetry := []int16{(*kmsg.GetTelemetrySubscriptionsRequest)(nil).Key(), (*kmsg.PushTelemetryRequest)(nil).Key()}
	advertised := slices.ContainsFunc(versions.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return slices.Contains(telemetry, k.ApiKey) })
	if !advertised {
		t.Skip("the broker does not advertise KIP-714 telemetry")
	}
	if _, err := kmsg.NewPtrGetTelemetrySubscriptionsRequest().RequestWith(ctx, cl); err != nil {
		t.Errorf("the plaintext port advertises GetTelemetrySubscriptions, which a KIP-714 producer then sends unasked, and fails it: %v", err)
	}
}
