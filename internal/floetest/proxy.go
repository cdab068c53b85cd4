package floetest

import (
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/floe-dev/floe/localstack"
)

// HungProxy is a TCP proxy in front of one kfake broker that a test can
// pause, to make the broker look hung (its process stopped, SIGSTOP):
// while paused, connections are still accepted, as the kernel of a stopped
// process accepts them, and held open, but no byte goes either way. A real
// broker cannot be paused on demand in a test; this is fault injection at
// the socket, not a mock of the broker.
//
// Start the broker with kfake.ListenFn(p.ListenBehind): the broker then
// advertises the proxy's address in its metadata, so that a client seeded
// with Addr talks to the broker only through the proxy. One proxy serves
// one broker.
type HungProxy struct {
	t  testing.TB
	ln net.Listener

	mu     sync.Mutex
	target string
	// resumed is closed while the proxy forwards; a pause replaces it
	// with an open channel, which Resume closes.
	resumed chan struct{}
	closed  chan struct{}
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// NewBehindProxy starts a stack for t (New) whose broker every client
// reaches through the returned proxy only: Env.Stack.Brokers is the
// proxy's address, which the broker advertises.
func NewBehindProxy(t testing.TB) (*Env, *HungProxy) {
	t.Helper()
	p := NewHungProxy(t)
	stack, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(), Kfake: []kfake.Opt{kfake.ListenFn(p.ListenBehind)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	return &Env{T: t, Ctx: t.Context(), Stack: stack}, p
}

// NewHungProxy listens on a free loopback port; it is closed in t.Cleanup.
func NewHungProxy(t testing.TB) *HungProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{})
	close(running)
	p := &HungProxy{t: t, ln: ln, resumed: running, closed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address: the broker's, as its clients see it.
func (p *HungProxy) Addr() string { return p.ln.Addr().String() }

// ListenBehind is a kfake.ListenFn: it listens where kfake asks, forwards
// the proxy's connections there, and reports the proxy's address, which
// kfake advertises.
func (p *HungProxy) ListenBehind(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.target = ln.Addr().String()
	p.mu.Unlock()
	return advertising{Listener: ln, adv: p.ln.Addr()}, nil
}

// advertising is a listener that reports another address than its own.
type advertising struct {
	net.Listener
	adv net.Addr
}

func (l advertising) Addr() net.Addr { return l.adv }

// Pause stops forwarding: bytes already read wait in the proxy, and
// connections, old and new, stay open.
func (p *HungProxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
		p.resumed = make(chan struct{})
	default: // paused already
	}
}

// Resume forwards again, starting with what waited.
func (p *HungProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
	default:
		close(p.resumed)
	}
}

// wait blocks while the proxy is paused; false when it was closed.
func (p *HungProxy) wait() bool {
	p.mu.Lock()
	resumed := p.resumed
	p.mu.Unlock()
	select {
	case <-resumed:
		return true
	case <-p.closed:
		return false
	}
}

func (p *HungProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.t.Errorf("hung proxy: accept: %v", err)
			}
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

// track records c to be closed with the proxy; false (c closed) when the
// proxy is closed already.
func (p *HungProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		c.Close()
		return false
	default:
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *HungProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// serve forwards c to the broker. A connection taken while paused is
// dialled through only once resumed: a stopped broker's kernel holds it
// in the listen queue until then.
func (p *HungProxy) serve(c net.Conn) {
	defer p.untrack(c)
	if !p.wait() {
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return // the broker is down: the client sees its connection closed
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, c); done <- struct{}{} }()
	go func() { p.pipe(c, up); done <- struct{}{} }()
	<-done
	// One side ended: end the other, whose pipe may wait in a read.
	c.Close()
	up.Close()
	<-done
}

// pipe copies src to dst, holding each chunk while the proxy is paused.
func (p *HungProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops the proxy and closes its connections.
func (p *HungProxy) close() {
	p.mu.Lock()
	select {
	case <-p.closed:
		p.mu.Unlock()
		return
	default:
	}
	close(p.closed)
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
