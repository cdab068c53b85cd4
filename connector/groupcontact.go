package connector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupContact is a franz-go hook on a group member's client that tells
// how long the group coordinator has not confirmed the membership. A
// member the coordinator hears nothing from for longer than the session
// timeout is dropped and its partitions given to others, but franz-go
// tells the member (its lost callback, which changes what it reports as
// its own) only once it reaches the coordinator again: while its
// connections are refused, it would report them as its own for as long
// as the refusal lasts, beside the member that sinks them now (s55's
// review).
//
// A coordinator's answer to a membership request (a heartbeat, a join)
// is confirmed when franz-go writes the next one: it goes on with the
// same membership only when the answer kept it, and after an answer that
// ended it (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH) it calls the lost
// callback before it joins again. Taken at the answer itself, the figures
// would say "owned" again in the moment between a refusal's end and the
// loss it reveals.
type groupContact struct {
	// overdue is the longest a membership request's answer can take:
	// the longest read deadline franz-go gives one (a join's, which the
	// coordinator may hold for the rebalance timeout, plus the client's
	// RequestTimeoutOverhead). A request awaited longer no longer counts
	// as awaited, so that a request whose end franz-go never reports the
	// way it reported its write cannot keep silence at zero for the rest
	// of the session.
	overdue time.Duration

	mu sync.Mutex
	// answered is when the last answer was read; zero once a request
	// followed it (confirmed).
	answered time.Time
	// confirmed is when the last confirmed answer was read; zero before
	// the member's first.
	confirmed time.Time
	// awaited are the membership requests written whose end franz-go has
	// not reported yet: the coordinator keeps a member whose join it
	// holds (for up to the rebalance timeout). An awaited answer is not
	// bounded by the request's own timeout: franz-go reads a
	// connection's answers in turn, and a read's deadline (the request's
	// timeout plus RequestTimeoutOverhead) runs only from when the
	// answers ahead of it were read. When a read fails (the connection
	// refused, reset, or silent past that deadline), franz-go kills the
	// connection and ends the requests queued behind it at once, with
	// errChosenBrokerDead.
	awaited []written
}

// written is a membership request franz-go reported written
// (OnBrokerWrite without an error). franz-go reports its end
// (OnBrokerE2E) with the same figures of its write, whichever way it
// ends: its answer read (or the read failing, ReadErr), or, for one
// queued behind a read that failed (the connection died), with
// WriteErr set though it was written (errChosenBrokerDead). A request
// whose write failed has its end reported with a WriteErr too, and was
// never counted: the figures, not the error, tell which end is a
// counted request's (their nanosecond timings tell two writes of the
// same size apart).
type written struct {
	node          int32
	key           int16
	bytes         int
	wait, toWrite time.Duration
	// at is when the write was reported.
	at time.Time
}

// same reports whether w is the request whose end franz-go reports with
// e to broker node, under key.
func (w written) same(node int32, key int16, e kgo.BrokerE2E) bool {
	return w.node == node && w.key == key && w.bytes == e.BytesWritten && w.wait == e.WriteWait && w.toWrite == e.TimeToWrite
}

// membership reports whether key is a request that keeps a member in its
// group.
func membership(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Heartbeat, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.ConsumerGroupHeartbeat:
		return true
	}
	return false
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (c *groupContact) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, bytes int, wait, toWrite time.Duration, err error) {
	if !membership(key) || err != nil {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.answered.IsZero() {
		c.confirmed, c.answered = c.answered, time.Time{}
	}
	// Overdue requests are dropped: silence no longer counts them, and
	// requests franz-go never reports the end of would pile up. An answer
	// to one read after all is not taken: the next request's is.
	c.awaited = slices.DeleteFunc(c.awaited, func(w written) bool { return now.Sub(w.at) > c.overdue })
	c.awaited = append(c.awaited, written{node: meta.NodeID, key: key, bytes: bytes, wait: wait, toWrite: toWrite, at: now})
}

// OnBrokerE2E implements kgo.HookBrokerE2E: called once per request
// written, or whose write failed or never began (not counted by
// OnBrokerWrite).
func (c *groupContact) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if !membership(key) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.awaited, func(w written) bool { return w.same(meta.NodeID, key, e) })
	if i < 0 {
		return
	}
	c.awaited = slices.Delete(c.awaited, i, i+1)
	if e.WriteErr == nil && e.ReadErr == nil {
		c.answered = time.Now()
	}
}

// silence is how long the coordinator has not confirmed the membership
// at now: zero while an answer is awaited (for no longer than overdue),
// and before the first one.
func (c *groupContact) silence(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.confirmed.IsZero() {
		return 0
	}
	for _, w := range c.awaited {
		if now.Sub(w.at) <= c.overdue {
			return 0
		}
	}
	return now.Sub(c.confirmed)
}

// watchContact reports, through Config.OnUnconfirmed, when the coordinator has
// not confirmed the membership for longer than the group's session
// timeout, and when it does again, until stop is called (which reports
// the end of an unconfirmed spell too: the next session is a new
// membership).
func (s *Sink) watchContact(c *groupContact, timeout time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	tick := time.NewTicker(min(max(timeout/10, 100*time.Millisecond), time.Second))
	go func() {
		defer close(done)
		defer tick.Stop()
		unconfirmed := false
		report := func(err error) {
			unconfirmed = err != nil
			if s.cfg.OnUnconfirmed != nil {
				s.cfg.OnUnconfirmed(err)
			}
		}
		for {
			select {
			case <-quit:
				if unconfirmed {
					report(nil)
				}
				return
			case now := <-tick.C:
				silent := c.silence(now)
				switch {
				case !unconfirmed && silent > timeout:
					err := fmt.Errorf("consumer group %s: the group coordinator has not answered this member for %s, longer than the group's session timeout (%s): the group has dropped it, or is about to, and may have given its partitions to another member; it goes on sinking the records it has, and a commit of partitions another member committed meanwhile is refused (fenced)",
						s.cfg.Group, silent.Round(time.Second), timeout)
					s.log.Warn("no partition is reported as this member's until the group coordinator answers it again", "err", err)
					report(err)
				case unconfirmed && silent <= timeout:
					s.log.Info("the group coordinator answers this member again", "group", s.cfg.Group)
					report(nil)
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// defaultSessionTimeout is Kafka's default session timeout, of both
// protocols.
const defaultSessionTimeout = 45 * time.Second

// sessionLookupTimeout bounds the reading of a KIP-848 group's session
// timeout: the join waits for it, and brokers that do not answer would
// hold every join (two DescribeConfigs and a FindCoordinator).
const sessionLookupTimeout = 5 * time.Second

// groupSessionTimeout is how long the coordinator keeps a silent member.
// The classic protocol's is the member's own (Config.SessionTimeout, sent
// with its join); KIP-848's is the group's consumer.session.timeout.ms, or
// the brokers' group.consumer.session.timeout.ms, which a member cannot
// set. It is read once for the Sink's lifetime, and again at a later
// join only while it could not be: a join must not wait on brokers that
// do not answer every time.
func (s *Sink) groupSessionTimeout(ctx context.Context) time.Duration {
	if s.cfg.GroupProtocol != GroupConsumer {
		if s.cfg.SessionTimeout > 0 {
			return s.cfg.SessionTimeout
		}
		return defaultSessionTimeout
	}
	if s.groupSession > 0 {
		return s.groupSession
	}
	ctx, cancel := context.WithTimeout(ctx, sessionLookupTimeout)
	defer cancel()
	d, err := s.readGroupSessionTimeout(ctx)
	if err != nil {
		// Too short a timeout reports a member the group still keeps as
		// unconfirmed (it drops its partitions from its figures and says
		// retrying); too long a one reports a dropped member late.
		// Kafka's default and the member's own setting (often set like
		// the group's) are the likely values: the larger errs towards the
		// late report.
		assumed := max(defaultSessionTimeout, s.cfg.SessionTimeout)
		s.log.Debug("cannot read the group's session timeout: assuming the larger of Kafka's default and this member's --session-timeout; read again at the next join",
			"group", s.cfg.Group, "assumed", assumed, "err", err)
		return assumed
	}
	s.groupSession = d
	return d
}

// readGroupSessionTimeout reads a KIP-848 group's session timeout: the
// group's own setting (Kafka 4 gives the brokers' when the group has
// none), else the group coordinator's. A broker is described by its node
// id: the cluster-wide resource (no name) holds only the dynamic defaults
// set for all brokers, not the static setting in a broker's
// server.properties.
func (s *Sink) readGroupSessionTimeout(ctx context.Context) (time.Duration, error) {
	group := s.cfg.Group
	d, groupErr := describeSessionTimeout(ctx, s.broker.cl, kmsg.ConfigResourceTypeGroupConfig, group, "consumer.session.timeout.ms")
	if groupErr == nil {
		return d, nil
	}
	co, ok := s.broker.adm.FindGroupCoordinators(ctx, group)[group]
	if !ok || co.Err != nil {
		return 0, errors.Join(groupErr, fmt.Errorf("find the coordinator of group %s: %w", group, cmp.Or(co.Err, errors.New("no answer"))))
	}
	d, err := describeSessionTimeout(ctx, s.broker.cl.Broker(int(co.NodeID)), kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(co.NodeID)), "group.consumer.session.timeout.ms")
	if err != nil {
		return 0, errors.Join(groupErr, err)
	}
	return d, nil
}

// describeSessionTimeout reads config conf of a resource with
// DescribeConfigs, sent through r, as a duration in milliseconds.
func describeSessionTimeout(ctx context.Context, r kmsg.Requestor, kind kmsg.ConfigResourceType, name, conf string) (time.Duration, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kind, name, []string{conf}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return 0, fmt.Errorf("describe %s: %w", conf, err)
	}
	for _, got := range resp.Resources {
		if err := kerr.ErrorForCode(got.ErrorCode); err != nil {
			return 0, fmt.Errorf("describe %s: %w", conf, err)
		}
		for _, c := range got.Configs {
			if c.Name != conf || c.Value == nil {
				continue
			}
			ms, err := strconv.Atoi(*c.Value)
			if err != nil || ms <= 0 {
				return 0, fmt.Errorf("%s is %q, not a number of milliseconds", conf, *c.Value)
			}
			return time.Duration(ms) * time.Millisecond, nil
		}
	}
	return 0, fmt.Errorf("%s not given", conf)
}
