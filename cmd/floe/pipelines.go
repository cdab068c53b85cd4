package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/metrics"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// opsFlags are floe sink's operations flags: partitions, metrics and health.
type opsFlags struct {
	partitions  []int32
	metricsAddr string
	lagInterval time.Duration
}

func (f *opsFlags) register(fs *pflag.FlagSet) {
	fs.Int32SliceVar(&f.partitions, "partitions", nil,
		"sink only these partitions of the topic, e.g. 0,1,2 (default: all); processes with disjoint partitions share a table without fencing each other")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "",
		"serve Prometheus metrics on http://ADDR/metrics and health on http://ADDR/healthz, e.g. :9464 (default: off)")
	fs.DurationVar(&f.lagInterval, "lag-interval", 15*time.Second, "how often the partition lag gauges poll the broker's offsets")
}

// sinkPipelines returns what floe sink runs: the --topic/--table of the
// command line (or of the flat config keys), else the config file's
// pipelines.
func sinkPipelines(ctx context.Context, f *sinkFlags) ([]pipeline, error) {
	file := configFrom(ctx)
	if f.topic == "" && f.table == "" && file != nil && len(file.pipelines) > 0 {
		return file.pipelines, nil
	}
	if f.topic == "" {
		return nil, errors.New("missing --topic NAME (or pipelines in the --config file)")
	}
	if f.table == "" {
		return nil, errors.New("missing --table NAMESPACE.TABLE")
	}
	return []pipeline{{Topic: f.topic, Table: f.table, Partitions: f.partitions}}, nil
}

// runSinks runs floe sink: one sink per pipeline in this process, sharing
// the broker connection, the catalog and the metrics endpoint. When one
// pipeline fails, the others are stopped (each commits what it consumed)
// and the failure is returned.
func runSinks(cmd *cobra.Command, f *sinkFlags) error {
	ctx := cmd.Context()
	if len(f.brokers) == 0 {
		return errors.New("missing --brokers HOST:PORT[,HOST:PORT]")
	}
	pipes, err := sinkPipelines(ctx, f)
	if err != nil {
		return err
	}
	// Registry flags are checked before anything starts, so that a
	// malformed URL, conflicting credentials or an unreadable CA file stop
	// the sink at once. The sink decodes no wire-format values yet.
	if _, err := f.registry(); err != nil {
		return err
	}
	cfgs := make([]connector.Config, len(pipes))
	idents := make([][]string, len(pipes))
	for i, p := range pipes {
		cfgs[i] = connector.Config{
			Topic:         p.Topic,
			Partitions:    p.Partitions,
			Start:         connector.Start(f.start),
			StopAtEnd:     f.stopAtEnd,
			FlushRecords:  f.flushRecords,
			FlushBytes:    f.flushBytes,
			FlushInterval: f.flushInterval,
			OnDataLoss:    connector.OnDataLoss(f.onDataLoss),
			RetryFor:      retryFor(f.retryFor),
			Group:         f.group,
		}
		if err := cfgs[i].Validate(); err != nil {
			return err
		}
		if idents[i], err = catalog.ParseIdent(p.Table); err != nil {
			return err
		}
	}
	broker, err := connector.Dial(ctx, f.brokers, f.dialTimeout)
	if err != nil {
		return err
	}
	defer broker.Close()
	// Check the topics before creating tables for them.
	for _, p := range pipes {
		if _, err := broker.Partitions(ctx, p.Topic); err != nil {
			return err
		}
	}
	cat, err := f.openCatalog(ctx)
	if err != nil {
		return err
	}
	tables := make([]*snapshot.Table, len(pipes))
	for i := range pipes {
		if tables[i], err = snapshot.Open(ctx, cat, idents[i], snapshot.OpenOptions{Create: true}); err != nil {
			return err
		}
	}

	slog.Info("sinking", "pipelines", pipelineNames(pipes))
	reg := metrics.New()
	// The metrics and health endpoint outlives the signal: it serves
	// while the sinks commit what they consumed.
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	if f.metricsAddr != "" {
		addr, err := reg.Serve(srvCtx, f.metricsAddr)
		if err != nil {
			return err
		}
		slog.Info("serving metrics and health", "metrics", "http://"+addr+"/metrics", "health", "http://"+addr+"/healthz")
	}

	// A failing pipeline stops the others.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i, p := range pipes {
		mp := reg.Pipeline(p.Topic, tables[i].Name(), p.Partitions)
		cfg := cfgs[i]
		mp.Hook(&cfg)
		sink, err := connector.NewSink(broker, tables[i], cfg)
		if err != nil {
			return err
		}
		if l, err := tables[i].Ledger(); err == nil {
			mp.Started(partitionNext(l, p.Topic))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lagCtx, stopLag := context.WithCancel(srvCtx)
			go mp.WatchLag(lagCtx, broker, f.lagInterval)
			stats, err := sink.Run(runCtx)
			stopLag()
			mp.Stopped(err)
			mu.Lock()
			defer mu.Unlock()
			printSinkStats(cmd, tables[i].Name(), stats)
			if err != nil {
				if len(pipes) > 1 {
					err = fmt.Errorf("pipeline %s -> %s: %w", p.Topic, tables[i].Name(), err)
				}
				errs = append(errs, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// retryFor turns --retry-for into connector.Config.RetryFor, where zero
// means the default: 0s on the command line means no retries.
func retryFor(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// partitionNext is the ledger's next offset per partition of topic.
func partitionNext(l mapping.Ledger, topic string) map[int32]int64 {
	out := map[int32]int64{}
	for tp, n := range l.Next() {
		if tp.Topic == topic {
			out[tp.Partition] = n
		}
	}
	return out
}

// pipelineNames lists pipelines for messages.
func pipelineNames(pipes []pipeline) string {
	var s []string
	for _, p := range pipes {
		s = append(s, p.Topic+"->"+p.Table)
	}
	return strings.Join(s, ", ")
}
