package connector_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

// cutDialer dials the brokers until cut, then refuses: its open
// connections are closed and each new dial goes to a port nothing listens
// on, so the client meets a real "connection refused", as when the brokers
// go away under a member.
type cutDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
	// refused is an address nothing listens on.
	refused string
}

func newCutDialer(t *testing.T) *cutDialer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return &cutDialer{refused: addr}
}

// runBehindCut runs a sink of tbl with cfg whose connections to the brokers
// go through a cutDialer (opts: more client options), and returns the
// dialer, where the sink's end arrives, and what stops it.
func runBehindCut(t *testing.T, e *env, tbl *snapshot.Table, cfg connector.Config, opts ...kgo.Opt) (*cutDialer, <-chan error, context.CancelFunc) {
	t.Helper()
	d := newCutDialer(t)
	b, err := connector.Dial(e.Ctx, e.Stack.Brokers, floetest.DialTimeout, append([]kgo.Opt{kgo.Dialer(d.dial)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	s, err := connector.NewSink(b, tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx)
		done <- err
	}()
	return d, done, stop
}

func (d *cutDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		host = d.refused
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cutDialer) setCut(cut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = cut
	if cut {
		for _, c := range d.conns {
			c.Close()
		}
		d.conns = nil
	}
}

// TestGroupMemberBrokersUnreachable: the brokers stop answering a group
// member (its connections drop, new ones are refused). franz-go ends the
// member's group session with the dial error, which floe used to log as
// "the consumer group dropped this member": the group dropped nothing. The
// notice must say the brokers cannot be reached and what happens next,
// and the member must sink again once they answer.
func TestGroupMemberBrokersUnreachable(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "unreachable", "lake.unreachable", "floe-unreachable"
	e.Topic(topic, 2, nil)
	tbl := e.Table(table)
	var (
		mu      sync.Mutex
		dropped []string
	)
	cfg := groupConfig(topic, group)
	cfg.OnGroupDropped = func(err error) {
		mu.Lock()
		defer mu.Unlock()
		dropped = append(dropped, err.Error())
	}
	d, done, stop := runBehindCut(t, e, tbl, cfg, kgo.RetryTimeout(3*time.Second))
	for p := range int32(2) {
		e.Produce(records(topic, p, 10, "before"))
	}
	waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)

	d.setCut(true)
	waitFor(t, 60*time.Second, "the member told of its unreachable brokers", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(dropped) > 0
	})
	mu.Lock()
	got := dropped[0]
	mu.Unlock()
	if !strings.Contains(got, "the brokers cannot be reached") || !strings.Contains(got, "session timeout (6s)") ||
		strings.Contains(got, "the consumer group dropped this member") {
		t.Errorf("notice %q: want the brokers named unreachable and the session timeout, not a drop by the group", got)
	}

	d.setCut(false)
	for p := range int32(2) {
		e.Produce(records(topic, p, 10, "after"))
	}
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 60*time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("member: %v", err)
	}
	checkExactlyOnce(t, tbl, want)
}
