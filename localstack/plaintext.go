package localstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// DefaultPlaintextPort is the loopback port of a secured stack's
// plaintext port for producing.
const DefaultPlaintextPort = 19093

// plaintextAPIs are the requests the plaintext port relays: what a
// producer sends (kcat -P, kafka-console-producer, franz-go, kafkajs, a
// transactional producer). Any other (a consumer's Fetch, an admin's
// request) closes the connection: the port lets local tools produce into
// a secured stack, it is no way round its TLS and SASL for the rest, which
// is what a secured stack is for.
var plaintextAPIs = []int16{
	(*kmsg.ProduceRequest)(nil).Key(),
	(*kmsg.MetadataRequest)(nil).Key(),
	(*kmsg.ApiVersionsRequest)(nil).Key(),
	(*kmsg.InitProducerIDRequest)(nil).Key(),
	(*kmsg.FindCoordinatorRequest)(nil).Key(),
	(*kmsg.AddPartitionsToTxnRequest)(nil).Key(),
	(*kmsg.EndTxnRequest)(nil).Key(),
	// A KIP-714 client (franz-go by default, the Java producer 3.7+,
	// librdkafka 2.5+) sends these unasked once ApiVersions, relayed as
	// the broker answers it, lists them: closing the connection on them
	// cut the producer's connection, in-flight Produce requests included.
	(*kmsg.GetTelemetrySubscriptionsRequest)(nil).Key(),
	(*kmsg.PushTelemetryRequest)(nil).Key(),
}

// maxFrame bounds a request or response the plaintext port reads, as a
// broker's socket.request.max.bytes does (100 MiB).
const maxFrame = 100 << 20

// plaintextPort serves a secured stack's broker without TLS and SASL on a
// second loopback port, for producing only. kfake cannot do it itself: its
// TLS and SASL are the whole cluster's, each broker has one listener, and
// its metadata gives every client that listener's address. So the port
// relays each connection to the secured listener, logged in there as
// SecureUser, and gives its own address in the metadata and coordinator
// answers, so that a client that bootstraps on it stays on it.
type plaintextPort struct {
	ln       net.Listener
	port     int32
	upstream string
	tls      *tls.Config
	password string
	log      *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startPlaintextPort listens on 127.0.0.1:port and relays producers to the
// secured broker at upstream, trusting caFile and logging in with password.
func startPlaintextPort(port int, upstream, caFile, password string, log *slog.Logger) (*plaintextPort, error) {
	pemCA, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("plaintext port: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemCA) {
		return nil, fmt.Errorf("plaintext port: no certificate in %s", caFile)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("plaintext port: %w", err)
	}
	p := &plaintextPort{ln: ln, port: int32(ln.Addr().(*net.TCPAddr).Port), upstream: upstream,
		tls: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, password: password, log: log,
		conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

// Addr is the port's address, 127.0.0.1:PORT.
func (p *plaintextPort) Addr() string { return p.ln.Addr().String() }

// Close stops listening and ends every relayed connection.
func (p *plaintextPort) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil // a connection made from now on is closed at once
	p.mu.Unlock()
	p.wg.Wait()
}

// track records c to close with the port; false when the port is closed.
func (p *plaintextPort) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *plaintextPort) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *plaintextPort) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Go(func() { p.relay(c) })
	}
}

// relay passes c's requests to a connection of its own to the secured
// broker and the answers back, until either side closes.
func (p *plaintextPort) relay(c net.Conn) {
	defer p.untrack(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	up, err := p.login(ctx)
	cancel()
	if err != nil {
		p.log.Warn("plaintext port: cannot reach the secured broker", "client", c.RemoteAddr().String(), "err", err)
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	// The Metadata and FindCoordinator requests, whose answers name the
	// broker, by correlation id.
	type request struct{ key, version int16 }
	var (
		mu      sync.Mutex
		pending = map[int32]request{}
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.Close()
		for {
			frame, err := readFrame(up)
			if err != nil {
				return
			}
			corr := int32(binary.BigEndian.Uint32(frame))
			mu.Lock()
			req, ok := pending[corr]
			delete(pending, corr)
			mu.Unlock()
			if ok {
				if frame, err = p.advertiseSelf(req.key, req.version, frame); err != nil {
					p.log.Warn("plaintext port: cannot read the broker's answer", "request", kmsg.NameForKey(req.key), "err", err)
					return
				}
			}
			if writeFrame(c, frame) != nil {
				return
			}
		}
	}()
	defer func() {
		up.Close()
		<-done
	}()
	for {
		frame, err := readFrame(c)
		if err != nil || len(frame) < 8 {
			return
		}
		key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
		if !slices.Contains(plaintextAPIs, key) {
			p.log.Warn("plaintext port: closed a connection that sent a request it does not relay: the port is for producing only; everything else goes to the secured port",
				"request", kmsg.NameForKey(key), "client", c.RemoteAddr().String(), "secured", p.upstream)
			return
		}
		if key == (*kmsg.MetadataRequest)(nil).Key() || key == (*kmsg.FindCoordinatorRequest)(nil).Key() {
			corr := int32(binary.BigEndian.Uint32(frame[4:]))
			mu.Lock()
			pending[corr] = request{key, version}
			mu.Unlock()
		}
		if writeFrame(up, frame) != nil {
			return
		}
	}
}

// advertiseSelf rewrites a Metadata or FindCoordinator answer (frame:
// correlation id, header, body) to name this port as the broker: kfake
// names its own, secured, listener, where a plaintext client cannot
// connect.
func (p *plaintextPort) advertiseSelf(key, version int16, frame []byte) ([]byte, error) {
	var resp kmsg.Response
	switch key {
	case (*kmsg.MetadataRequest)(nil).Key():
		resp = kmsg.NewPtrMetadataResponse()
	default:
		resp = kmsg.NewPtrFindCoordinatorResponse()
	}
	resp.SetVersion(version)
	header := 4 // the correlation id
	if resp.IsFlexible() {
		// An empty tagged-fields section, as kfake writes it.
		if len(frame) < 5 || frame[4] != 0 {
			return nil, errors.New("response header with tagged fields")
		}
		header = 5
	}
	if err := resp.ReadFrom(frame[header:]); err != nil {
		return nil, err
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = "127.0.0.1", p.port
		}
	case *kmsg.FindCoordinatorResponse:
		r.Host, r.Port = "127.0.0.1", p.port
		for i := range r.Coordinators {
			r.Coordinators[i].Host, r.Coordinators[i].Port = "127.0.0.1", p.port
		}
	}
	return resp.AppendTo(slices.Clone(frame[:header])), nil
}

// login connects to the secured broker over TLS and logs in as
// SecureUser with SCRAM-SHA-512 (SASL handshake v1, then authenticate).
func (p *plaintextPort) login(ctx context.Context) (net.Conn, error) {
	d := tls.Dialer{Config: p.tls}
	c, err := d.DialContext(ctx, "tcp", p.upstream)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(deadline)
	}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("floe-localstack-plaintext-port"))
	var corr int32
	// Both requests are at version 1, whose answers have no tagged fields
	// in their header: the correlation id, then the body.
	roundTrip := func(req kmsg.Request, resp kmsg.Response) error {
		corr++
		if _, err := c.Write(f.AppendRequest(nil, req, corr)); err != nil {
			return err
		}
		frame, err := readFrame(c)
		if err != nil {
			return err
		}
		resp.SetVersion(req.GetVersion())
		return resp.ReadFrom(frame[4:])
	}
	fail := func(err error) (net.Conn, error) {
		c.Close()
		return nil, fmt.Errorf("log in as %s: %w", SecureUser, err)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-512"
	hr := kmsg.NewPtrSASLHandshakeResponse()
	if err := roundTrip(hs, hr); err != nil {
		return fail(err)
	}
	if err := kerr.ErrorForCode(hr.ErrorCode); err != nil {
		return fail(err)
	}
	session, msg, err := scram.Auth{User: SecureUser, Pass: p.password}.AsSha512Mechanism().Authenticate(ctx, p.upstream)
	if err != nil {
		return fail(err)
	}
	for {
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.Version, ar.SASLAuthBytes = 1, msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := roundTrip(ar, resp); err != nil {
			return fail(err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil {
				err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return fail(err)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return fail(err)
		}
		if done {
			break
		}
		msg = next
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// readFrame reads one size-prefixed Kafka request or response, without
// its size.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	frame := make([]byte, n)
	_, err := io.ReadFull(r, frame)
	return frame, err
}

// writeFrame writes frame with its size before it.
func writeFrame(w io.Writer, frame []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(frame)), uint32(len(frame))), frame...))
	return err
}
