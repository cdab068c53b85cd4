//go:build unix

package catalog

import (
	"context"
	"crypto/tls"
	"database/sql/driver"
	"errors"
	"syscall"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"
)

// checkOpen reports driver.ErrBadConn for a pooled connection that has
// something to read: the server closed it (an idle connection is sent
// nothing unasked but the error that says why it is closing, then the
// end of the stream). It reads the socket without waiting (Go's sockets
// do not block), as go-sql-driver/mysql checks its pooled connections.
func checkOpen(_ context.Context, cn *pgdriver.Conn) error {
	nc := cn.Conn()
	// pgdriver leaves its last read deadline (now + its read timeout, or
	// a query's context deadline) on the connection; once it passed, Go's
	// poller fails the read below without looking at the socket.
	if err := nc.SetReadDeadline(time.Time{}); err != nil {
		return driver.ErrBadConn
	}
	if tc, ok := nc.(*tls.Conn); ok {
		// Any TLS record the server sent unasked is its goodbye too.
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return driver.ErrBadConn
	}
	var (
		n       int
		readErr error
		b       [1]byte
	)
	if err := rc.Read(func(fd uintptr) bool {
		n, readErr = syscall.Read(int(fd), b[:])
		return true // look once, do not wait for the socket to be readable
	}); err != nil {
		return driver.ErrBadConn
	}
	switch {
	case n > 0: // data nobody asked for: the server's goodbye
		return driver.ErrBadConn
	case n == 0 && readErr == nil: // the end of the stream
		return driver.ErrBadConn
	case errors.Is(readErr, syscall.EAGAIN) || errors.Is(readErr, syscall.EWOULDBLOCK):
		// Nothing to read (syscall.Read returns n == -1 then): open.
		return nil
	}
	return driver.ErrBadConn
}
