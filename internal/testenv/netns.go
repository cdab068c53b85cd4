package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Hosts are network namespaces made to stand for separate machines: each
// has its own address on a bridge of the test's, and reaches this host's
// address (Addr) on the bridge, where servers that they use listen or are
// forwarded (Forward). Cut takes one off the network without stopping its
// processes; Heal puts it back. Made with iproute2's ip as root; removed
// in t.Cleanup.
type Hosts struct {
	// Addr is this host's address on the bridge, which every namespace
	// routes to.
	Addr string
	// Names are the namespaces, one per host.
	Names []string
	// HostAddrs are the namespaces' own addresses.
	HostAddrs []string

	t      testing.TB
	bridge string
	ports  []string // each namespace's veth end on this host
	peers  []string // and its end in the namespace
}

// NetNS makes n network namespaces joined by a bridge to this host, with
// loopback and the bridge only. Where namespaces cannot be made (not root,
// no ip command, a kernel or container without the permission) the test
// is skipped with the reason, or fails under FLOE_REQUIRE_SERVERS=1.
func NetNS(t testing.TB, n int) *Hosts {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "network namespaces need root (ip netns, veth, a bridge)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		unavailable(t, "no ip command (Debian's iproute2) to make network namespaces")
	}
	// Random names and subnet: another test binary may make its own at the
	// same time. Interface names have at most 15 bytes.
	id := randomHex(3)
	subnet := fmt.Sprintf("10.%d.%d", 100+rand.IntN(100), rand.IntN(256))
	h := &Hosts{t: t, Addr: subnet + ".1", bridge: "flbr" + id}
	t.Cleanup(h.remove)
	steps := [][]string{
		{"link", "add", h.bridge, "type", "bridge"},
		{"addr", "add", h.Addr + "/24", "dev", h.bridge},
		{"link", "set", h.bridge, "up"},
	}
	for i := range n {
		ns := fmt.Sprintf("floe-%s-%d", id, i)
		port, peer := fmt.Sprintf("flv%s%dh", id, i), fmt.Sprintf("flv%s%dm", id, i)
		addr := fmt.Sprintf("%s.%d", subnet, 10+i)
		h.Names = append(h.Names, ns)
		h.HostAddrs = append(h.HostAddrs, addr)
		h.ports = append(h.ports, port)
		h.peers = append(h.peers, peer)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", port, "type", "veth", "peer", "name", peer, "netns", ns},
			[]string{"link", "set", port, "master", h.bridge},
			[]string{"link", "set", port, "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", ns, "addr", "add", addr + "/24", "dev", peer},
			[]string{"-n", ns, "link", "set", peer, "up"},
			[]string{"-n", ns, "route", "add", "default", "via", h.Addr},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			unavailable(t, "cannot make network namespaces: %v", err)
		}
	}
	return h
}

// ip runs ip with args.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// remove deletes the namespaces (their veth pairs go with them) and the
// bridge.
func (h *Hosts) remove() {
	for _, ns := range h.Names {
		_ = ip("netns", "del", ns)
	}
	_ = ip("link", "del", h.bridge)
}

// Command is argv run in host i's namespace.
func (h *Hosts) Command(i int, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", h.Names[i]}, argv...)
}

// Cut takes host i off the network: its link to the bridge goes down, so
// that what it sends is lost and its connections hang, as when a cable is
// pulled.
func (h *Hosts) Cut(i int) {
	h.t.Helper()
	if err := ip("link", "set", h.ports[i], "down"); err != nil {
		h.t.Fatalf("testenv: cut host %d: %v", i, err)
	}
}

// Heal puts host i back on the network. It returns once both ends of the
// host's link are operationally up: until the kernel's link watcher has
// seen the carrier come back (it runs at most once a second) each end
// drops what is sent, so a connection tried at once could time out.
func (h *Hosts) Heal(i int) {
	h.t.Helper()
	if err := ip("link", "set", h.ports[i], "up"); err != nil {
		h.t.Fatalf("testenv: heal host %d: %v", i, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !linkUp("", h.ports[i]) || !linkUp(h.Names[i], h.peers[i]) {
		if time.Now().After(deadline) {
			h.t.Fatalf("testenv: heal host %d: its link is not up after 10 s", i)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// linkUp reports whether the link dev (in namespace ns, or this host's
// where ns is empty) is operationally up.
func linkUp(ns, dev string) bool {
	args := []string{"-j", "link", "show", "dev", dev}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	out, err := exec.Command("ip", args...).Output()
	if err != nil {
		return false
	}
	var links []struct {
		OperState string `json:"operstate"`
	}
	return json.Unmarshal(out, &links) == nil && len(links) == 1 && links[0].OperState == "UP"
}

// Forward listens on Addr and forwards each connection to target (a server
// that listens on 127.0.0.1 only), so that the namespaces reach it; it
// returns the address it listens on. It stops in t.Cleanup.
func (h *Hosts) Forward(target string) string {
	h.t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(h.Addr, "0"))
	if err != nil {
		h.t.Fatalf("testenv: forward to %s: %v", target, err)
	}
	var wg sync.WaitGroup
	h.t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{})
				go func() {
					_, _ = io.Copy(out, in)
					out.(*net.TCPConn).CloseWrite()
					close(done)
				}()
				_, _ = io.Copy(in, out)
				in.(*net.TCPConn).CloseWrite()
				<-done
			}()
		}
	})
	return l.Addr().String()
}
