package catalog

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"
)

// pgDriverName is the database/sql driver of floe's PostgreSQL catalogs
// (pgDriver).
const pgDriverName = "floe-pg"

func init() { sql.Register(pgDriverName, pgDriver{}) }

// pgDriver is bun's pgdriver whose pooled connections are checked before
// each reuse (checkOpen). Without the check, a connection the server
// closed while it sat in the pool (a restart or failover,
// idle_session_timeout, a pooler, pg_terminate_backend) failed the next
// catalog operation with "terminating connection due to administrator
// command" (57P01); behind a server that closed them every few hundred
// milliseconds, every reload after a pause failed.
type pgDriver struct{}

func (d pgDriver) Open(dsn string) (driver.Conn, error) {
	c, err := d.OpenConnector(dsn)
	if err != nil {
		return nil, err
	}
	return c.Connect(context.Background())
}

func (pgDriver) OpenConnector(dsn string) (driver.Connector, error) {
	c, err := pgdriver.NewDriver().OpenConnector(dsn)
	if err != nil {
		return nil, err
	}
	pc, ok := c.(*pgdriver.Connector)
	if !ok {
		return nil, fmt.Errorf("pgdriver gave a connector of type %T", c)
	}
	// database/sql drops a connection whose reset says driver.ErrBadConn
	// and takes another.
	pc.Config().ResetSessionFunc = checkOpen
	return pc, nil
}

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
