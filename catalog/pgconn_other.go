//go:build !unix

package catalog

import (
	"context"
	"database/sql/driver"
	"errors"
	"os"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"
)

// checkOpen reports driver.ErrBadConn for a pooled connection that has
// something to read: the server closed it (an idle connection is sent
// nothing unasked but the error that says why it is closing, then the
// end of the stream). It waits a millisecond at most: a deadline already
// passed would fail the read before it looks at the socket.
func checkOpen(_ context.Context, cn *pgdriver.Conn) error {
	nc := cn.Conn()
	if err := nc.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		return driver.ErrBadConn
	}
	var b [1]byte
	n, err := nc.Read(b[:])
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		return driver.ErrBadConn
	}
	// pgdriver sets a deadline of its own before each read; none is left
	// behind for a read that does not.
	if nc.SetReadDeadline(time.Time{}) != nil {
		return driver.ErrBadConn
	}
	return nil
}
