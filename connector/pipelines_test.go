package connector_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

func (e *env) catalog() icecat.Catalog {
	e.T.Helper()
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		e.T.Fatal(err)
	}
	return cat
}

func (e *env) tableExists(cat icecat.Catalog, name string) bool {
	e.T.Helper()
	ident, _ := catalog.ParseIdent(name)
	_, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil && !errors.Is(err, snapshot.ErrTableNotFound) {
		e.T.Fatal(err)
	}
	return err == nil
}

func pipeline(table, topic string, cfg connector.Config) connector.Pipeline {
	ident, _ := catalog.ParseIdent(table)
	cfg.Topic = topic
	cfg.Logger = quietLogger()
	return connector.Pipeline{Table: ident, Config: cfg}
}

// TestPipelinesCheckBeforeCreating: a mistake in any pipeline (a topic the
// brokers do not have, a partition the topic does not have, a bad setting,
// an existing table that cannot hold floe rows) fails the run before any
// table or namespace is created.
func TestPipelinesCheckBeforeCreating(t *testing.T) {
	e := newEnv(t)
	e.Topic("a", 2, nil)
	cat := e.catalog()
	if err := cat.CreateNamespace(e.Ctx, []string{"other"}, nil); err != nil {
		t.Fatal(err)
	}
	foreign := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "kafka_offset", Type: iceberg.PrimitiveTypes.String, Required: true})
	if _, err := cat.CreateTable(e.Ctx, []string{"other", "foreign"}, foreign); err != nil {
		t.Fatal(err)
	}
	good := pipeline("lake.good", "a", connector.Config{StopAtEnd: true})
	for _, c := range []struct {
		name  string
		bad   connector.Pipeline
		check func(error) bool
	}{
		{"unknown partition", pipeline("lake.bad", "a", connector.Config{StopAtEnd: true, Partitions: []int32{0, 9}}), func(err error) bool {
			var ce *connector.ConfigError
			return errors.As(err, &ce) && ce.Setting == connector.SettingPartitions && ce.Value == "9"
		}},
		{"unknown topic", pipeline("lake.bad", "nope", connector.Config{StopAtEnd: true}), func(err error) bool {
			var ce *connector.CheckError
			return errors.Is(err, connector.ErrUnknownTopic) && errors.As(err, &ce) && ce.Settings[0] == connector.SettingTopic
		}},
		{"bad start", pipeline("lake.bad", "a", connector.Config{Start: "middle"}), func(err error) bool {
			var ce *connector.ConfigError
			return errors.As(err, &ce) && ce.Setting == connector.SettingStart
		}},
		{"foreign table", pipeline("other.foreign", "a", connector.Config{StopAtEnd: true}), func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "cannot hold floe rows")
		}},
		// Refused by the sink only after the table was created (from a
		// new-user run).
		{"truncates into a new table of format version 3", v3Truncating("lake.bad", "a"), func(err error) bool {
			var ce *connector.ConfigError
			return errors.As(err, &ce) && ce.Setting == connector.SettingTruncate && strings.Contains(err.Error(), "format version 3 cannot take a truncate")
		}},
	} {
		err := connector.Pipelines{good, c.bad}.Run(e.Ctx, e.Broker(), cat)
		if !c.check(err) {
			t.Errorf("%s: %v", c.name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "pipeline "+c.bad.String()) {
			t.Errorf("%s: the error does not name the pipeline: %v", c.name, err)
		}
		if e.tableExists(cat, "lake.good") || e.tableExists(cat, "lake.bad") {
			t.Fatalf("%s: a table was created", c.name)
		}
		if _, err := cat.LoadNamespaceProperties(e.Ctx, []string{"lake"}); !errors.Is(err, icecat.ErrNoSuchNamespace) {
			t.Fatalf("%s: namespace lake: %v, want it not created", c.name, err)
		}
	}
}

// v3Truncating is a pipeline of Debezium events into a new upsert table
// of format version 3 that applies truncates (--on-truncate delete-all).
func v3Truncating(table, topic string) connector.Pipeline {
	p := pipeline(table, topic, connector.Config{StopAtEnd: true, OnTruncate: connector.TruncateDeleteAll})
	p.Layout = mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON, Envelope: mapping.EnvelopeDebezium}
	p.Mode, p.Key = mapping.ModeUpsert, &mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	p.Properties = map[string]string{"format-version": "3"}
	return p
}

// TestPipelinesFailTogether: two live pipelines share one broker connection
// and catalog; when one fails (retention deleted offsets it had not sunk),
// the other stops too, having committed what it consumed, and the failure
// is returned naming its pipeline.
func TestPipelinesFailTogether(t *testing.T) {
	e := newEnv(t)
	e.Topic("live", 1, nil)
	e.Topic("lossy", 1, nil)
	e.Produce(records("live", 0, 30, "a"))
	e.Produce(records("lossy", 0, 10, "a"))
	lossy := e.Table("lake.lossy")
	if _, err := e.sink(lossy, connector.Config{Topic: "lossy", StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	e.Produce(records("lossy", 0, 10, "b"))
	if err := e.Stack.Cluster.DeleteRecords("lossy", 0, 15); err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		started []string
		stopped = map[string]error{}
		stats   = map[string]connector.Stats{}
	)
	hook := func(p connector.Pipeline) connector.Pipeline {
		p.Config.FlushInterval = 50 * time.Millisecond
		p.OnStart = func(tbl *snapshot.Table) {
			mu.Lock()
			defer mu.Unlock()
			started = append(started, tbl.Name())
		}
		p.OnStop = func(tbl *snapshot.Table, s connector.Stats, err error) {
			stopped[tbl.Name()], stats[tbl.Name()] = err, s
		}
		return p
	}
	ctx, cancel := context.WithTimeout(e.Ctx, time.Minute)
	defer cancel()
	err := connector.Pipelines{
		hook(pipeline("lake.live", "live", connector.Config{})),
		hook(pipeline("lake.lossy", "lossy", connector.Config{})),
	}.Run(ctx, e.Broker(), e.catalog())
	var loss *connector.DataLossError
	if !errors.As(err, &loss) || !strings.Contains(err.Error(), "pipeline lossy -> lake.lossy") {
		t.Fatalf("run: %v, want the data loss of lossy", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the live pipeline was not stopped by the other's failure")
	}
	if len(started) != 2 || stopped["lake.live"] != nil || !errors.As(stopped["lake.lossy"], &loss) {
		t.Fatalf("started %v, stopped %v", started, stopped)
	}
	// Whatever the live pipeline consumed is committed; a restart resumes
	// from its ledger.
	live := e.Table("lake.live")
	l, err := live.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if next := l.Next()[mapping.TopicPartition{Topic: "live", Partition: 0}]; next != stats["lake.live"].Next[mapping.TopicPartition{Topic: "live", Partition: 0}] {
		t.Fatalf("live: ledger next %d, stats %v", next, stats["lake.live"].Next)
	}
	checkExactlyOnce(t, live, map[mapping.TopicPartition]int64{{Topic: "live", Partition: 0}: l.Next()[mapping.TopicPartition{Topic: "live", Partition: 0}]})
}

// TestDeadLetterTableRecorded (from a new-user run): a sink naming its
// dead-letter table records it on the table, and a later run naming none
// writes there too, not into the default TABLE_dlq; naming another one
// moves the record.
func TestDeadLetterTableRecorded(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	cat := e.catalog()
	run := func(dlq string, bad string) connector.Stats {
		t.Helper()
		e.Produce(jsonRecords("orders", 0, `{"id":1}`, bad))
		p := pipeline("lake.orders", "orders", connector.Config{StopAtEnd: true})
		p.Layout = mapping.Layout{Value: mapping.ValueJSON}
		if dlq != "" {
			p.DeadLetters, _ = catalog.ParseIdent(dlq)
		}
		var stats connector.Stats
		p.OnStop = func(_ *snapshot.Table, s connector.Stats, _ error) { stats = s }
		if err := (connector.Pipelines{p}).Run(e.Ctx, e.Broker(), cat); err != nil {
			t.Fatal(err)
		}
		return stats
	}
	run("lake.bad", "oops")
	if s := run("", "oops again"); s.DeadLetterTable != "lake.bad" {
		t.Errorf("a run without a dead-letter table wrote into %q, want lake.bad, which the first run named", s.DeadLetterTable)
	}
	if e.tableExists(cat, "lake.orders_dlq") {
		t.Error("lake.orders_dlq was created: the dead letters are split over two tables")
	}
	run("lake.worse", "oops 3")
	if s := run("", "oops 4"); s.DeadLetterTable != "lake.worse" {
		t.Errorf("after naming lake.worse, a run without one wrote into %q", s.DeadLetterTable)
	}
}
