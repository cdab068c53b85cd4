package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// TestLibraryErrorsNameFlags: the libraries name their own settings; the
// command shows the flag in their place, or adds which flag fixes it, also
// when the error is wrapped or joined with others.
func TestLibraryErrorsNameFlags(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("pipeline orders -> lake.orders: %w", err) }
	for _, c := range []struct {
		err  error
		want string
	}{
		{&connector.ConfigError{Setting: connector.SettingStart, Value: "middle", Want: "earliest or latest"}, `--start "middle": want earliest or latest`},
		{wrap(&connector.ConfigError{Setting: connector.SettingOnDataLoss, Value: "bogus", Want: "fail or record"}),
			`pipeline orders -> lake.orders: --on-data-loss "bogus": want fail or record`},
		{&connector.ConfigError{Setting: connector.SettingBrokers, Want: "HOST:PORT"}, "missing --brokers (or FLOE_BROKERS): want HOST:PORT"},
		{&connector.CheckError{Settings: []connector.Setting{connector.SettingTopic}, Err: connector.ErrUnknownTopic}, "unknown topic; check --topic"},
		{wrap(&connector.DataLossError{Partition: mapping.TopicPartition{Topic: "orders"}, Lost: mapping.Interval{Low: 5, High: 9}}),
			"nothing after offset 5 was committed, and the sink stopped (every partition: the others resume from the ledger too); rerun with --on-data-loss record"},
		{&catalog.ConfigError{Setting: catalog.SettingWarehouse, Want: "s3://BUCKET/PREFIX"}, "missing --warehouse (or FLOE_WAREHOUSE): want s3://BUCKET/PREFIX"},
		{&catalog.CheckError{Settings: []catalog.Setting{catalog.SettingToken, catalog.SettingCredential}, Err: catalog.ErrCatalogAuth},
			"check --catalog-token and --catalog-credential"},
		{&replay.BoundError{Setting: replay.SettingUntil, Value: "0=5", From: "0=10"}, "--until 0=5: is before --from 0=10"},
		{&replay.BoundError{Setting: replay.SettingFrom, Value: "yesterday", Reason: "want earliest"}, "--from yesterday: want earliest"},
		{&replay.OptionError{Setting: replay.SettingPublish, Needs: replay.SettingBranch, Want: "nothing to publish"}, "--publish needs --branch: nothing to publish"},
		{&replay.OptionError{Setting: replay.SettingFold, Value: "sum", Want: "latest"}, `--fold "sum": want latest`},
		{&replay.CheckError{Settings: []replay.Setting{replay.SettingTable, replay.SettingBranch}, Err: errors.New("not empty")},
			"not empty; replay into a new --table, or rebuild this one on a branch and publish it in its place: add --branch rebuild --publish"},
		{&replay.CheckError{Settings: []replay.Setting{replay.SettingTable, replay.SettingBranch}, Err: errors.New("another's"), OnBranch: true},
			"another's; replay into another --table, or onto another --branch"},
		{&replay.CheckError{Settings: []replay.Setting{replay.SettingPartitionBy, replay.SettingBranch}, Err: errors.New("shared spec")},
			"shared spec; omit --partition-by (a branch is written with its table's spec), or replay into a new --table"},
		{wrap(&mapping.PartitionByError{Spec: "day(x)", Part: "day(x)", Problem: "no column x", Table: "lake.orders"}),
			`pipeline orders -> lake.orders: --partition-by "day(x)" on table lake.orders: day(x): no column x`},
		{&lookup.QueryError{Setting: lookup.SettingOffset, Value: "-5", Want: "an offset, 0 or more"}, `--offset "-5": want an offset, 0 or more`},
		{&lookup.CheckError{Settings: []lookup.Setting{lookup.SettingBroker}, Err: errors.New("state table")}, "state table; pass --brokers"},
		{&localstack.CheckError{Settings: []localstack.Setting{localstack.SettingKafkaPort}, Err: errors.New("busy")}, "busy; pick another port with --kafka-port"},
		{&localstack.CheckError{Settings: []localstack.Setting{localstack.SettingRegistryPort}, Err: errors.New("busy")}, "busy; pick another port with --schema-registry-port"},
		{fmt.Errorf("open: %w", &snapshot.TruncatedLedgerError{Table: "lake.orders", SnapshotID: 3, Oldest: 2}), "run floe maintain --table lake.orders"},
		{fmt.Errorf("table lake.x does not exist: %w", snapshot.ErrTableNotFound), "; check --table and --catalog"},
		{errors.Join(
			wrap(&connector.ConfigError{Setting: connector.SettingStart, Value: "a", Want: "earliest or latest"}),
			wrap(&connector.CheckError{Settings: []connector.Setting{connector.SettingTopic}, Err: connector.ErrUnknownTopic})),
			`--start "a": want earliest or latest` + "\n" + "pipeline orders -> lake.orders: unknown topic; check --topic"},
	} {
		got := withFlags(c.err)
		if !strings.Contains(got, c.want) {
			t.Errorf("%v\n  rendered %q\n  want     %q", c.err, got, c.want)
		}
		for _, lib := range []string{"Config.", "Options.", "AsOfQuery.", "UpOptions.", "seed brokers"} {
			if strings.Contains(got, lib) {
				t.Errorf("%q shows the library's setting %s", got, lib)
			}
		}
	}
}

// TestEveryHintFlagExists: every flag that a library setting is rendered as
// is a flag of some command, so a renamed flag cannot leave hints naming a
// flag that no longer exists.
func TestEveryHintFlagExists(t *testing.T) {
	exists := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { exists["--"+f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
	for setting, f := range flagOf {
		if !exists[f] {
			t.Errorf("setting %v is rendered as %s, which no command has", setting, f)
		}
	}
}

// TestChangedWhileRead (from a review): a lookup reading a snapshot that
// floe maintain expires meanwhile (its files deleted) said a data file was
// "deleted outside floe" and to rebuild the table by replay; a run again
// works. The read of a table that changed says so and to run again; a file
// gone from a table that did not change is reported as before.
func TestChangedWhileRead(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "50", "--maintain=false"}, loc...)...)
	old := openTable(t, st.Catalog(), "lake.orders")
	head := old.Head().SnapshotID
	mustFloe(t, append([]string{"maintain", "--table", "lake.orders", "--compact"}, loc[:2]...)...)
	mustFloe(t, append([]string{"maintain", "--table", "lake.orders", "--expire-older-than", "0s", "--retain-last", "1"}, loc[:2]...)...)
	err := lookup.Rows(t.Context(), old, head, nil, func(lookup.Row) error { return nil })
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reading the expired snapshot: %v; the test needs its files gone", err)
	}
	if msg := withFlags(changedWhileRead(t.Context(), old, err)); !strings.Contains(msg, "lake.orders changed while floe read it") || strings.Contains(msg, "floe replay rebuilds") {
		t.Errorf("a read that maintenance raced: %s", msg)
	}
	now := openTable(t, st.Catalog(), "lake.orders")
	gone := &snapshot.DataFileGoneError{Table: "lake.orders", Path: "f.parquet", Err: fs.ErrNotExist}
	if got := changedWhileRead(t.Context(), now, gone); got != error(gone) {
		t.Errorf("a file gone from a table that did not change: %v", got)
	}
}

// TestBrokerRestartNotCalledTLS (from a new-user run): a broker that is
// restarting closes connections at once, which franz-go words as a TLS
// client against a plaintext broker. Once the dial had worked, the sink
// exited saying TLS was misconfigured; the same settings had worked, so
// the hint says a broker was most likely restarting. At the dial itself
// floe cannot tell, and names both.
func TestBrokerRestartNotCalledTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// A broker going down or coming up: it closes the
			// connection, after reading the client's hello (closing
			// with it unread would reset the connection instead).
			c.Read(make([]byte, 4096))
			c.Close()
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.DialTLSConfig(&tls.Config{}), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	eof := cl.Ping(ctx)
	if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](eof); !ok || !strings.Contains(eof.Error(), "after a dial") {
		t.Fatalf("ping of a listener that closes every connection: %v, want franz-go's ErrFirstReadEOF after a dial", eof)
	}

	later := withFlags(fmt.Errorf("pipeline orders -> lake.orders: read the broker's offsets: %w", eof))
	if !strings.Contains(later, "a broker was most likely restarting (not a TLS misconfiguration)") || strings.Contains(later, "check --kafka-tls") {
		t.Errorf("after the dial had worked: %s", later)
	}
	dial := withFlags(&connector.CheckError{Settings: []connector.Setting{connector.SettingTLS},
		Err: fmt.Errorf("the brokers do not speak TLS on this port (a plaintext listener?): %w", eof)})
	if !strings.HasSuffix(dial, "; check --kafka-tls; or a broker restarting closed it: when these TLS settings worked before, run the command again once the broker is up") {
		t.Errorf("at the dial: %s", dial)
	}
}
