package lookup_test

import (
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

// lookupEnv is topic w (one partition) sunk into lake.w in two commits:
// offsets [0, 10) (every tenth value null from offset 3, a null key at 5),
// then a committed transaction (10-12, marker 13), an aborted one (14-15,
// marker 16) and five records (17-21). Three more (22-24) are not sunk.
func lookupEnv(t *testing.T) (*floetest.Env, *snapshot.Table) {
	t.Helper()
	e := floetest.New(t)
	e.Topic("w", 1, nil)
	tbl := e.Table("lake.w")
	sink := func() {
		t.Helper()
		if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "w", StopAtEnd: true}); err != nil {
			t.Fatal(err)
		}
	}
	e.Produce(floetest.Records("w", 0, 10, "a"))
	sink()
	e.Txn("wc", floetest.Records("w", 0, 3, "c"), true)
	e.Txn("wa", floetest.Records("w", 0, 2, "x"), false)
	e.Produce(floetest.Records("w", 0, 5, "d"))
	sink()
	e.Produce(floetest.Records("w", 0, 3, "e"))
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	return e, tbl
}
