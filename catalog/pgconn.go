package catalog

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

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
