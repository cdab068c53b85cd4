package localstack

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/gofrs/flock"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/floe-dev/floe/catalog"
)

// Defaults of Up: fixed loopback ports, so that clients configured once keep
// working across restarts, and the local S3's fixed credentials.
const (
	DefaultKafkaPort = 19092
	DefaultS3Port    = 19000
	// Bucket is the local S3 bucket that holds the warehouse.
	Bucket = "warehouse"
	// AccessKeyID, SecretAccessKey and Region are what clients of the local
	// S3 use; it checks no credentials, but S3 clients insist on some.
	AccessKeyID     = "floe"
	SecretAccessKey = "floe-local-secret"
	Region          = "us-east-1"
)

// Setting names a field of UpOptions that an error is about; the floe
// command maps each to its flag.
type Setting string

// Settings that errors name.
const (
	SettingKafkaPort     Setting = "UpOptions.KafkaPort"
	SettingS3Port        Setting = "UpOptions.S3Port"
	SettingRegistryPort  Setting = "UpOptions.RegistryPort"
	SettingPlaintextPort Setting = "UpOptions.PlaintextPort"
)

// CheckError is an error that a different value of one of Settings may
// fix: a port another process listens on. Its message is Err's.
type CheckError struct {
	Settings []Setting
	Err      error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// UpOptions configure Up.
type UpOptions struct {
	// Dir holds everything: the broker's log (Dir/kafka), the S3 buckets
	// (Dir/s3), the SQLite catalog (Dir/catalog.db), the schema registry's
	// journal (Dir/schema-registry.jsonl). Required.
	Dir string
	// KafkaPort, S3Port and RegistryPort are the loopback ports; zero means
	// the port the stack last used in Dir (recorded in Dir/ports.json,
	// since env.sh and floe.yaml point at it), else the default.
	KafkaPort, S3Port, RegistryPort int
	// NumPartitions is the number of partitions of a topic the broker
	// creates on first use (a producer or a consumer naming a topic that
	// does not exist, as a default Kafka broker does); zero means the
	// number the stack last used in Dir, else 1, Kafka's num.partitions
	// default.
	NumPartitions int
	// Secure serves the broker over TLS only, with SCRAM-SHA-512
	// authentication (user SecureUser); the CA, the broker's certificate
	// and the password are kept in Dir/tls.
	Secure bool
	// PlaintextPort is the loopback port on which a secured stack also
	// takes producers without TLS and SASL, for local tools (kcat cannot
	// log in to kfake); zero means the port the stack last used in Dir,
	// else DefaultPlaintextPort. Unused without Secure.
	PlaintextPort int
	// Logger takes what the plaintext port has to say (a request it does
	// not relay); nil discards it.
	Logger *slog.Logger
}

// Local is a running local stack as 'floe localstack up' starts it: a
// persistent broker, a schema registry, an S3 endpoint and a SQLite
// catalog whose warehouse is on that S3. Everything lives in Dir, so a
// restart on the same Dir finds the topics, the records, the schemas (with
// their IDs), the tables and their data again.
type Local struct {
	Dir     string
	Brokers []string
	// Registry is the schema registry's URL, http://127.0.0.1:PORT.
	Registry string
	S3       *S3Server
	// Certs and Password are the secured broker's certificates and
	// SecureUser's password; zero unless UpOptions.Secure.
	Certs    Certs
	Password string
	// Plaintext is the secured broker's plaintext port for producing,
	// 127.0.0.1:PORT; empty unless UpOptions.Secure.
	Plaintext string
	plaintext *plaintextPort
	// NumPartitions is the number of partitions of a topic the broker
	// creates on first use.
	NumPartitions int
	stack         *Stack
	// lock holds Dir for this stack until Close.
	lock *flock.Flock
}

// ports are the loopback ports a stack used, as Dir/ports.json records
// them, and its broker's partitions of a topic created on first use,
// which a restart keeps as it keeps the topics.
type ports struct {
	Kafka         int `json:"kafka"`
	S3            int `json:"s3"`
	Registry      int `json:"schema_registry"`
	NumPartitions int `json:"num_partitions,omitempty"`
	Plaintext     int `json:"plaintext,omitempty"`
}

// portsFile is where a stack records its ports in its folder.
const portsFile = "ports.json"

// readPorts returns the ports the stack in dir last used; zero ones when
// it has no record (a new folder, or one of an older floe).
func readPorts(dir string) ports {
	var p ports
	if b, err := os.ReadFile(filepath.Join(dir, portsFile)); err == nil {
		_ = json.Unmarshal(b, &p) // a damaged record is no record
	}
	return p
}

// writePorts records the ports of the stack in dir.
func writePorts(dir string, p ports) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, portsFile), append(b, '\n'), 0o644)
}

// Up starts a local stack in opts.Dir. ctx bounds the start only: a
// cancelled ctx creates no folder and opens no port; once started, the stack
// runs until Close.
func Up(ctx context.Context, opts UpOptions) (_ *Local, err error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("local stack: no folder given")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local stack: %w", err)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("local stack: %w", err)
	}
	_, serr := os.Stat(dir)
	fresh := errors.Is(serr, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("local stack: %w", err)
	}
	// Two stacks on one folder would both write its broker log and its
	// env.sh and floe.yaml, each pointing at itself.
	lock := flock.New(filepath.Join(dir, ".lock"))
	if ok, lerr := lock.TryLock(); lerr != nil || !ok {
		if lerr == nil {
			lerr = fmt.Errorf("another floe localstack up runs on folder %s: stop it first, or give --dir another folder", dir)
		}
		// The folder is the other stack's, even one this call saw made.
		return nil, fmt.Errorf("local stack: %w", lerr)
	}
	defer func() {
		if err == nil {
			return
		}
		lock.Unlock()
		if fresh {
			// A stack that does not start (its ports taken) leaves no
			// folder behind that a later start would take for its data.
			os.RemoveAll(dir)
		}
	}()
	last := readPorts(dir)
	opts.KafkaPort = cmp.Or(opts.KafkaPort, last.Kafka, DefaultKafkaPort)
	opts.S3Port = cmp.Or(opts.S3Port, last.S3, DefaultS3Port)
	opts.RegistryPort = cmp.Or(opts.RegistryPort, last.Registry, DefaultRegistryPort)
	opts.NumPartitions = max(1, cmp.Or(opts.NumPartitions, last.NumPartitions, 1))
	s3, err := StartS3(ctx, filepath.Join(dir, "s3"), opts.S3Port, Bucket)
	if err != nil {
		return nil, &CheckError{Settings: []Setting{SettingS3Port}, Err: err}
	}
	// Topics are created on first use, like a default Kafka broker: the
	// usual first steps (kcat -P on a new topic) work as documented.
	auto := []kfake.Opt{kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(opts.NumPartitions)}
	var (
		certs    Certs
		password string
	)
	if opts.Secure {
		var sec []kfake.Opt
		if sec, certs, password, err = secureKfake(filepath.Join(dir, "tls")); err == nil {
			err = forgetStaleUsers(filepath.Join(dir, "kafka"), password)
		}
		if err != nil {
			s3.Close()
			return nil, fmt.Errorf("local stack: %w", err)
		}
		auto = append(auto, sec...)
	}
	stack, err := Start(ctx, Options{Dir: dir, Ports: []int{opts.KafkaPort}, Persist: true, RegistryPort: opts.RegistryPort, Kfake: auto})
	if err != nil {
		s3.Close()
		return nil, err // a *CheckError naming the port, when one is busy
	}
	l := &Local{Dir: dir, Brokers: stack.Brokers, Registry: stack.Registry, S3: s3, Certs: certs, Password: password,
		NumPartitions: opts.NumPartitions, stack: stack, lock: lock}
	if opts.Secure {
		opts.PlaintextPort = cmp.Or(opts.PlaintextPort, last.Plaintext, DefaultPlaintextPort)
		log := opts.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		if l.plaintext, err = startPlaintextPort(opts.PlaintextPort, stack.Brokers[0], certs.CAFile, password, log); err != nil {
			l.Close()
			return nil, &CheckError{Settings: []Setting{SettingPlaintextPort}, Err: fmt.Errorf("local stack: %w", err)}
		}
		l.Plaintext = l.plaintext.Addr()
	}
	// The stack announces its catalog, so it exists from now on: the first
	// sink finds it rather than logging that it creates a new one.
	cfg := l.Catalog()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cat, err := catalog.Open(ctx, cfg)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("local stack: create the catalog: %w", err)
	}
	if c, ok := cat.(io.Closer); ok {
		c.Close()
	}
	p := ports{Kafka: opts.KafkaPort, S3: opts.S3Port, Registry: opts.RegistryPort, NumPartitions: opts.NumPartitions, Plaintext: last.Plaintext}
	if opts.Secure {
		p.Plaintext = opts.PlaintextPort
	}
	if err := writePorts(dir, p); err != nil {
		l.Close()
		return nil, fmt.Errorf("local stack: record its ports: %w", err)
	}
	return l, nil
}

// Close stops the broker, the schema registry and the S3 endpoint; the
// data stays in Dir.
func (l *Local) Close() {
	if l.plaintext != nil {
		l.plaintext.Close()
	}
	l.stack.Close()
	l.S3.Close()
	l.lock.Unlock()
}

// Warehouse is the warehouse URI of the local stack's catalog.
func (l *Local) Warehouse() string { return "s3://" + Bucket + "/" }

// PasswordFile is the file that holds SecureUser's password of a secured
// stack.
func (l *Local) PasswordFile() string { return filepath.Join(l.Dir, "tls", "password") }

// CatalogPath is the SQLite catalog file.
func (l *Local) CatalogPath() string { return filepath.Join(l.Dir, "catalog.db") }

// Catalog is the catalog configuration that reaches the local stack.
func (l *Local) Catalog() catalog.Config {
	return catalog.Config{
		Catalog:   l.CatalogPath(),
		Warehouse: l.Warehouse(),
		S3: catalog.S3Config{
			Endpoint:        l.S3.Endpoint,
			Region:          Region,
			AccessKeyID:     AccessKeyID,
			SecretAccessKey: SecretAccessKey,
		},
	}
}

// Env is the environment that points AWS SDK clients (aws CLI, DuckDB,
// Spark, floe's own S3 access) at the local S3, in order.
func (l *Local) Env() [][2]string {
	return [][2]string{
		{"AWS_ENDPOINT_URL_S3", l.S3.Endpoint},
		{"AWS_ACCESS_KEY_ID", AccessKeyID},
		{"AWS_SECRET_ACCESS_KEY", SecretAccessKey},
		{"AWS_REGION", Region},
	}
}
