package localstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/floe-dev/floe/catalog"
)

// Options configure Start.
type Options struct {
	// Dir holds the catalog, the warehouse and (with Persist) the broker's
	// log. Empty means a new temporary folder, removed by Close.
	Dir string
	// Ports fixes the broker's loopback ports, one per broker; empty means
	// one broker on a free port.
	Ports []int
	// Persist keeps the broker's log under Dir/kafka and the schema
	// registry's changes in Dir/schema-registry.jsonl across restarts.
	Persist bool
	// RegistryPort fixes the schema registry's loopback port; zero means a
	// free port.
	RegistryPort int
	// Kfake are extra options for the broker (topics, configs).
	Kfake []kfake.Opt
}

// Stack is a running local stack.
type Stack struct {
	Dir     string
	Brokers []string
	Cluster *kfake.Cluster
	// Registry is the schema registry's URL, http://127.0.0.1:PORT.
	Registry string
	registry *RegistryServer
	temp     bool
}

// Start starts the broker (kfake listens on 127.0.0.1 only) and the schema
// registry (srfake, served on 127.0.0.1) in its folder; the catalog and
// a file warehouse are made when first opened. ctx bounds the start only: a cancelled ctx
// starts nothing; once started, the stack runs until Close.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local stack: %w", err)
	}
	s := &Stack{Dir: opts.Dir}
	if s.Dir == "" {
		d, err := os.MkdirTemp("", "floe-local-")
		if err != nil {
			return nil, fmt.Errorf("local stack: create folder: %w", err)
		}
		s.Dir, s.temp = d, true
	}
	// The warehouse folder is made by the first table: 'floe localstack
	// up' keeps its warehouse on S3 and would show an empty one.
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("local stack: %w", err)
	}
	kopts := []kfake.Opt{
		kfake.NumBrokers(max(1, len(opts.Ports))),
	}
	if len(opts.Ports) > 0 {
		kopts = append(kopts, kfake.Ports(opts.Ports...))
	}
	if opts.Persist {
		kopts = append(kopts, kfake.DataDir(filepath.Join(s.Dir, "kafka")))
	}
	if err := ctx.Err(); err != nil {
		s.Close()
		return nil, fmt.Errorf("local stack: %w", err)
	}
	c, err := kfake.NewCluster(append(kopts, opts.Kfake...)...)
	if err != nil {
		s.Close()
		if len(opts.Ports) > 0 {
			return nil, &CheckError{Settings: []Setting{SettingKafkaPort},
				Err: fmt.Errorf("local stack: start broker on ports %v (is another local stack running?): %w", opts.Ports, err)}
		}
		return nil, fmt.Errorf("local stack: start broker: %w", err)
	}
	s.Cluster = c
	s.Brokers = c.ListenAddrs()
	journal := ""
	if opts.Persist {
		journal = filepath.Join(s.Dir, "schema-registry.jsonl")
	}
	if s.registry, err = StartRegistry(ctx, opts.RegistryPort, journal); err != nil {
		s.Close()
		return nil, &CheckError{Settings: []Setting{SettingRegistryPort}, Err: fmt.Errorf("local stack: %w", err)}
	}
	s.Registry = s.registry.URL
	return s, nil
}

// Catalog is the stack's catalog configuration.
func (s *Stack) Catalog() catalog.Config {
	return catalog.Config{
		Catalog:   filepath.Join(s.Dir, "catalog.db"),
		Warehouse: filepath.Join(s.Dir, "warehouse"),
	}
}

// Close stops the broker and the schema registry and removes a temporary
// folder.
func (s *Stack) Close() {
	if s.registry != nil {
		s.registry.Close()
	}
	if s.Cluster != nil {
		s.Cluster.Close()
	}
	if s.temp {
		os.RemoveAll(s.Dir)
	}
}
