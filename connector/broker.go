package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/floe-dev/floe/mapping"
)

// Broker is an admin connection to a Kafka-protocol cluster.
type Broker struct {
	Seeds []string
	// ClusterID is the cluster's id as its metadata gave it when dialled
	// ("" when it gave none), which names the cluster in evidence.
	ClusterID string
	cl        *kgo.Client
	adm       *kadm.Client
	opts      []kgo.Opt
	// principal is whom the brokers authorise this connection as, for
	// authorization errors ("" when unknown).
	principal string
	// auth notices the brokers refusing the connections' authentication,
	// and hangs the brokers that do not answer, on every client made with
	// opts.
	auth  *authWatch
	hangs *hangWatch
}

// DefaultDialTimeout bounds the first request to the cluster: how long
// DialSecure waits for brokers that do not take connections yet (starting
// beside floe), and for an answer, so that an unreachable broker is an
// error rather than a hang.
const DefaultDialTimeout = 15 * time.Second

// DefaultRequestTimeout is how long a request to a broker may go
// unanswered (on top of the wait a request such as a fetch asks the
// broker for) before its connection is dropped and the request tried
// again: franz-go's RequestTimeoutOverhead, whose default it is. A
// broker that lets one pass counts as not answering (a running sink's
// /readyz says so). Give another with kgo.RequestTimeoutOverhead among
// Dial's options.
const DefaultRequestTimeout = 10 * time.Second

// Dial connects to the cluster in plaintext and checks that it answers
// within timeout, trying again while no broker takes a connection. Extra
// options are applied to this and every consumer client.
func Dial(ctx context.Context, seeds []string, timeout time.Duration, opts ...kgo.Opt) (*Broker, error) {
	return DialSecure(ctx, seeds, timeout, Security{}, opts...)
}

// DialSecure is Dial with sec's TLS and SASL, which every consumer client
// of the Broker uses too. A seed that cannot name a broker (empty, or a
// URL such as kafka://HOST:PORT, which the client would look up as a host
// name) is a *ConfigError before anything is dialled. A failure that sec
// explains (refused credentials, an untrusted certificate, TLS against a
// plaintext port) is a CheckError naming the settings to fix, returned as
// soon as the first broker answers so. While no broker takes a connection
// (brokers still starting), it tries again until timeout.
func DialSecure(ctx context.Context, seeds []string, timeout time.Duration, sec Security, opts ...kgo.Opt) (*Broker, error) {
	if len(seeds) == 0 || slices.Contains(seeds, "") {
		return nil, &ConfigError{Setting: SettingBrokers, Want: "HOST:PORT[,HOST:PORT]"}
	}
	for _, s := range seeds {
		if scheme, hostPort, ok := strings.Cut(s, "://"); ok {
			return nil, &ConfigError{Setting: SettingBrokers, Value: s,
				Want: fmt.Sprintf("HOST:PORT without a URL scheme: %s, not %s://%s (brokers are host and port; TLS and SASL have flags of their own)", hostPort, scheme, hostPort)}
		}
	}
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	sec.Mechanism = strings.ToUpper(sec.Mechanism) // for the messages
	secOpts, err := sec.Opts(ctx)
	if err != nil {
		return nil, err
	}
	auth, hangs := &authWatch{explain: sec.refusal}, &hangWatch{}
	opts = append(append(secOpts, kgo.WithHooks(auth, hangs)), opts...)
	all := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTimeout(min(timeout, 10*time.Second))}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("brokers %s: %w", strings.Join(seeds, ","), err)
	}
	b := &Broker{Seeds: seeds, cl: cl, adm: kadm.NewClient(cl), opts: opts, principal: sec.Principal(), auth: auth, hangs: hangs}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := ping(pctx, cl, seeds, timeout); err != nil {
		cl.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("stopped while waiting for brokers %s: %w", strings.Join(seeds, ","), context.Cause(ctx))
		}
		if serr := sec.explainDial(err); serr != nil {
			return nil, fmt.Errorf("brokers %s: %w", strings.Join(seeds, ","), serr)
		}
		tried := "is Kafka running there?"
		if unreachable(err) {
			tried = fmt.Sprintf("none took a connection within %s; is Kafka running there?", timeout)
		} else if pctx.Err() != nil {
			// A port that takes the connection and never answers the
			// Kafka protocol is most often another service's.
			tried = fmt.Sprintf("no answer within %s; is Kafka running there, and is it the broker's port, not another service's (an S3 endpoint, a schema registry)?", timeout)
			if addrs, _, _ := hangs.hungOn(err, timeout); len(addrs) > 0 {
				// Taken connections and timed-out requests: a broker
				// that hangs reads the same (found by review s68b).
				tried += " A broker whose process is stopped or overloaded takes connections and answers nothing too"
			}
		}
		return nil, &CheckError{Settings: []Setting{SettingBrokers}, Err: cannotReach(seeds, tried, err)}
	}
	if err := b.checkAdvertised(pctx, seeds); err != nil {
		cl.Close()
		return nil, err
	}
	return b, nil
}

// dialBackoff bounds the wait between two tries at brokers that do not
// take connections yet.
const dialBackoff = time.Second

// ping asks the brokers for metadata until one answers, or until ctx ends
// while none takes a connection (refused, no route, a host name not in
// the DNS yet): brokers started with floe (Kubernetes, Docker Compose)
// are down for their first seconds, and a sink that gave up at once would
// crash-loop. A broker that takes the connection and then fails it (TLS,
// SASL) answers: its error is returned at once. The first wait is logged,
// naming the brokers.
func ping(ctx context.Context, cl *kgo.Client, seeds []string, timeout time.Duration) error {
	wait := 100 * time.Millisecond
	for logged := false; ; logged = true {
		err := cl.Ping(ctx)
		// A request that timed out is tried again as well: a broker that
		// takes the connection and does not answer within the request
		// timeout (its process paused at a pod's start, a long GC) may
		// answer within timeout; with a --request-timeout under half of
		// it, the first run of the client's retries gave up before the
		// dial timeout (found by review s68b).
		if err == nil || !(unreachable(err) || timedOut(err)) || ctx.Err() != nil {
			return err
		}
		if !logged {
			what := "waiting for the brokers to take connections"
			if !unreachable(err) {
				what = "waiting for the brokers to answer"
			}
			slog.Info(what, "brokers", strings.Join(seeds, ","), "dial_timeout", timeout, "err", err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, dialBackoff)
	}
}

// unreachable reports an error of dialling a broker: no connection was
// made, so no broker has answered.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// checkAdvertised dials the brokers the cluster's metadata lists: a seed
// that answers while every broker it advertises is out of reach (the
// brokers' advertised.listeners name an address of their own network: a
// container's, a private host name) would fail every request later with
// the advertised address, or, in a consumer group, wait for an assignment
// without a word. Some brokers out of reach is a cluster's own trouble,
// which the client retries.
func (b *Broker) checkAdvertised(ctx context.Context, seeds []string) error {
	md, err := b.adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) == 0 {
		return nil // the requests that need them say why
	}
	b.ClusterID = md.Cluster
	var d net.Dialer
	var addrs []string
	for _, br := range md.Brokers {
		addr := brokerAddr(br)
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		addrs = append(addrs, addr)
	}
	return &CheckError{Settings: []Setting{SettingBrokers},
		Err: fmt.Errorf("brokers %s answer, but advertise %s, which this host cannot reach: the brokers' advertised.listeners must name an address their clients can reach (with Docker, the host's address and a port published to it)", strings.Join(seeds, ","), strings.Join(addrs, ","))}
}

// requestTimeout is the clients' RequestTimeoutOverhead.
func (b *Broker) requestTimeout() time.Duration {
	if d, ok := b.cl.OptValue(kgo.RequestTimeoutOverhead).(time.Duration); ok && d > 0 {
		return d
	}
	return DefaultRequestTimeout
}

// hangWindow is how long after its last timeout a broker that has not
// answered since still counts as not answering: while it hangs, a sink's
// requests time out again at least once a request timeout after each
// pause between its sessions (at most maxRetryWait), or the next lag
// poll's do.
func (b *Broker) hangWindow() time.Duration {
	return 2*b.requestTimeout() + maxRetryWait
}

// hungBrokers names the brokers that do not answer now and hold a sink
// up (hangWatch.hungBrokers with read), nil when none does: the error a
// running sink reports while they hang.
func (b *Broker) hungBrokers() error {
	addrs, since, waited, cause := b.hangs.hungBrokers(b.hangWindow(), true)
	if len(addrs) == 0 {
		return nil
	}
	return cannotReach(addrs, notAnswering(since, waited), cause)
}

// NameHung names the brokers that do not answer in err, an error of a
// request to them, as a running sink names them: franz-go says only "i/o
// timeout" or "unable to dial: context deadline exceeded". Any other
// error is returned as it is.
func (b *Broker) NameHung(err error) error {
	addrs, since, waited := b.hangs.hungOn(err, b.hangWindow())
	if len(addrs) == 0 {
		return err
	}
	return cannotReach(addrs, notAnswering(since, waited), err)
}

// Close closes the admin connection.
func (b *Broker) Close() { b.cl.Close() }

// Client is the underlying franz-go client, for producing in tests and demos.
func (b *Broker) Client() *kgo.Client { return b.cl }

// Admin is the underlying kadm client.
func (b *Broker) Admin() *kadm.Client { return b.adm }

// Topic is a topic as the broker describes it.
type Topic struct {
	Name string
	// ID is the topic's ID in Kafka's text form (mapping.FormatTopicID), or
	// "" when the broker does not support topic IDs. Deleting a topic and
	// creating one of the same name gives a new ID.
	ID string
	// Partitions are the topic's partitions, sorted.
	Partitions []int32
}

// Topic describes topic as the brokers see it now. It asks them directly:
// franz-go's cached metadata (which kadm uses) can name a topic that was
// deleted and recreated seconds ago by its old ID.
func (b *Broker) Topic(ctx context.Context, topic string) (Topic, error) {
	resp, err := b.topicMetadata(ctx, topic, false)
	if err != nil {
		return Topic{}, fmt.Errorf("describe topic %s: %w", topic, b.authorization(err, "Describe", topic, ""))
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != topic {
			continue
		}
		switch err := kerr.ErrorForCode(rt.ErrorCode); {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
		case err != nil:
			return Topic{}, fmt.Errorf("describe topic %s: %w", topic, b.authorization(err, "Describe", topic, ""))
		default:
			t := Topic{Name: topic, ID: mapping.FormatTopicID(rt.TopicID), Partitions: make([]int32, 0, len(rt.Partitions))}
			for _, p := range rt.Partitions {
				t.Partitions = append(t.Partitions, p.Partition)
			}
			slices.Sort(t.Partitions)
			return t, nil
		}
	}
	// What the brokers have, for a misspelt name.
	have := ""
	if topics, err := b.Topics(ctx); err == nil {
		have = "; the brokers have " + listSome(topics, 10)
	}
	return Topic{}, unknownTopic(topic, b.Seeds, have)
}

// topicMetadata asks the brokers for topic's metadata, and, when create is
// set, to create it if they create topics on first use.
func (b *Broker) topicMetadata(ctx context.Context, topic string, create bool) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = create
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	return req.RequestWith(ctx, b.cl)
}

// Topics lists the topics on the brokers, sorted, without Kafka's internal
// ones (__consumer_offsets, __transaction_state).
func (b *Broker) Topics(ctx context.Context) ([]string, error) {
	td, err := b.adm.ListTopics(ctx)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	return td.Names(), nil
}

// Partitions lists the partitions of topic, sorted.
func (b *Broker) Partitions(ctx context.Context, topic string) ([]int32, error) {
	t, err := b.Topic(ctx, topic)
	return t.Partitions, err
}

// Watermarks are a partition's offsets as the broker reports them. The
// retained log is [LogStart, HighWatermark); under read_committed a consumer
// reads up to LastStable.
type Watermarks struct {
	LogStart, LastStable, HighWatermark int64
}

// Watermarks returns the watermarks of every partition of topic.
func (b *Broker) Watermarks(ctx context.Context, topic string) (map[int32]Watermarks, error) {
	if _, err := b.Partitions(ctx, topic); err != nil {
		return nil, err
	}
	starts, err := b.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, b.authorization(err, "Describe", topic, ""))
	}
	ends, err := b.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, b.authorization(err, "Describe", topic, ""))
	}
	// ListCommittedOffsets asks with read_committed isolation: the answer
	// is the last stable offset.
	stable, err := b.adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list last stable offsets of %s: %w", topic, b.authorization(err, "Describe", topic, ""))
	}
	out := map[int32]Watermarks{}
	starts.Each(func(o kadm.ListedOffset) {
		w := out[o.Partition]
		w.LogStart = o.Offset
		out[o.Partition] = w
	})
	ends.Each(func(o kadm.ListedOffset) {
		w := out[o.Partition]
		w.HighWatermark = o.Offset
		out[o.Partition] = w
	})
	stable.Each(func(o kadm.ListedOffset) {
		w := out[o.Partition]
		w.LastStable = o.Offset
		out[o.Partition] = w
	})
	return out, nil
}

// OffsetsForTime returns, per partition, the first offset whose record
// timestamp is at or after t, or the end offset where no record is (Kafka's
// ListOffsets by timestamp, offsets_for_times). Record timestamps are whole
// milliseconds: t is rounded up to one, and a time before 1970 asks for
// the first record (Kafka reads negative times as "latest" and "earliest").
func (b *Broker) OffsetsForTime(ctx context.Context, topic string, t time.Time) (map[int32]int64, error) {
	if _, err := b.Partitions(ctx, topic); err != nil {
		return nil, err
	}
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	los, err := b.adm.ListOffsetsAfterMilli(ctx, max(ms, 0), topic)
	if err == nil {
		err = los.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s at %s: %w", topic, t.Format(time.RFC3339Nano), b.authorization(err, "Describe", topic, ""))
	}
	out := map[int32]int64{}
	los.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}
