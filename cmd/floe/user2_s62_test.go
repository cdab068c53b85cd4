package main

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestLocalstackPortHeldByOutgoingConnection: a floe localstack up port that
// an outgoing connection's local port holds, with nothing listening, says so
// and names the range to stay out of, as --metrics-addr does; it asked only
// whether another local stack was running (a user's run on fixed ports in
// Linux's range for outgoing connections, twice).
func TestLocalstackPortHeldByOutgoingConnection(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := freeTCPPort(t)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}
	c, err := d.DialContext(t.Context(), "tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	free := func() string { return strconv.Itoa(freeTCPPort(t)) }
	code, _, errs := floe(t, "localstack", "up", "--dir", t.TempDir(), "--kafka-port", strconv.Itoa(port), "--s3-port", free(), "--schema-registry-port", free())
	if code != exitError || !strings.Contains(errs, "nothing listens on that port, so the local port of an outgoing connection holds it (not another local stack)") ||
		!strings.Contains(errs, "ip_local_port_range") || strings.Count(errs, "pick another port with --kafka-port") != 1 {
		t.Errorf("localstack up --kafka-port %d: exit %d, stderr %q", port, code, errs)
	}
}
