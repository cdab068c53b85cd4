package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/localstack"
)

func newLocalstackCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "localstack",
		Short: "Run a whole local stack (Kafka-protocol broker, schema registry, S3, catalog) in this process",
		// Without these, cobra prints the help of a parent command for any
		// word after it and exits 0: floe localstack down looked done.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for \"floe localstack\": its one command is up, and a stack runs until interrupted (Ctrl-C, SIGTERM to its process, or its terminal closing)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newLocalstackUpCmd())
	return cmd
}

func newLocalstackUpCmd() *cobra.Command {
	var (
		dir               string
		kafkaPort, s3Port int
		registryPort      int
		plaintextPort     int
		numPartitions     int
		secure            bool
	)
	cmd := &cobra.Command{
		Use:   "up [--dir DIR]",
		Short: "Start a broker, a schema registry, an S3 endpoint and a SQLite catalog on loopback ports; run until interrupted",
		Long: `Start, in this process and with nothing to install:
  - a Kafka-protocol broker (franz-go's kfake) on 127.0.0.1:--kafka-port, which creates a topic on
    first use like a default Kafka broker (--num-partitions partitions),
  - a Confluent-compatible schema registry (franz-go's srfake; no credentials) on
    http://127.0.0.1:--schema-registry-port, for Avro, Protobuf and JSON Schema producers,
  - an S3 endpoint (gofakes3; it accepts any credentials) on 127.0.0.1:--s3-port with bucket
    "warehouse",
  - a SQLite catalog whose warehouse is s3://warehouse/.
Everything is kept in --dir: stopping (Ctrl-C) and starting again on the same folder finds the
topics, their records, the registered schemas (same IDs), the tables and their files again. A
crash (kill -9) can lose the topics created on first use and their records (the broker writes
them down when it stops, and does not sync its writes): it is a development stack.
With --secure the broker takes TLS and SCRAM-SHA-512 only, and a second loopback port
(--plaintext-port) takes producers without either, for local tools that cannot log in (kcat);
it relays producing only, and logs in to the broker for them.
Any Kafka client (kcat, kafkajs, franz-go, the Java client), any schema registry client
(Confluent's serializers, curl) and any S3 client (aws CLI, DuckDB, Spark) can use it.

The command writes DIR/floe.yaml (a floe config file) and DIR/env.sh (the environment for
floe and the AWS clients), prints how to use them, and runs until interrupted.`,
		Example: `  floe localstack up --dir ./floe-local
  # in another shell:
  . ./floe-local/env.sh
  kcat -b "$FLOE_BROKERS" -t orders -P -K: <<< 'k1:{"amount":3}'
  curl -s $FLOE_SCHEMA_REGISTRY/subjects
  floe sink --config ./floe-local/floe.yaml --topic orders --table lake.orders --stop-at-end`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("num-partitions") && numPartitions < 1 {
				return fmt.Errorf("--num-partitions %d: want 1 or more", numPartitions)
			}
			if cmd.Flags().Changed("plaintext-port") && !secure {
				// Else a port the user asked for silently never opened.
				return fmt.Errorf("--plaintext-port is the secured stack's port for producing: without --secure the broker on --kafka-port takes producers in plaintext already")
			}
			l, err := localstack.Up(cmd.Context(), localstack.UpOptions{Dir: dir, KafkaPort: kafkaPort, S3Port: s3Port,
				RegistryPort: registryPort, NumPartitions: numPartitions, Secure: secure, PlaintextPort: plaintextPort, Logger: slog.Default()})
			if err != nil {
				return err
			}
			defer l.Close()
			if err := writeLocalFiles(l); err != nil {
				return err
			}
			printLocalUsage(cmd.OutOrStdout(), l)
			<-cmd.Context().Done()
			fmt.Fprintf(cmd.OutOrStdout(), "\nstopping; the data stays in %s\n", l.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "floe-local", "folder that holds the broker's log, the schemas, the S3 buckets and the catalog")
	// Zero: the port the folder's stack last used, else the default.
	cmd.Flags().IntVar(&kafkaPort, "kafka-port", 0, fmt.Sprintf("loopback port of the Kafka-protocol broker (default: the one the stack of --dir last used, else %d)", localstack.DefaultKafkaPort))
	cmd.Flags().IntVar(&s3Port, "s3-port", 0, fmt.Sprintf("loopback port of the S3 endpoint (default: the one the stack of --dir last used, else %d)", localstack.DefaultS3Port))
	cmd.Flags().IntVar(&registryPort, "schema-registry-port", 0, fmt.Sprintf("loopback port of the schema registry (default: the one the stack of --dir last used, else %d)", localstack.DefaultRegistryPort))
	cmd.Flags().BoolVar(&secure, "secure", false, "serve the broker over TLS only with SCRAM-SHA-512 (user "+localstack.SecureUser+"); the CA and the password are kept in DIR/tls, and the flags to use are printed; a plaintext port (--plaintext-port) takes producers for local tools")
	cmd.Flags().IntVar(&plaintextPort, "plaintext-port", 0, fmt.Sprintf("with --secure: loopback port that takes producers without TLS or SASL (kcat -P, scripts), for local producing only; everything else goes to --kafka-port (default: the one the stack of --dir last used, else %d)", localstack.DefaultPlaintextPort))
	// Zero: the number the folder's stack last used, else 1.
	cmd.Flags().IntVar(&numPartitions, "num-partitions", 0, "partitions of a topic the broker creates on first use, like Kafka's num.partitions (default: the number the stack of --dir last used, else 1); topics that exist keep theirs")
	return cmd
}

// writeLocalFiles writes DIR/floe.yaml and DIR/env.sh.
func writeLocalFiles(l *localstack.Local) error {
	var env strings.Builder
	env.WriteString("# Environment for the floe local stack; use: . " + filepath.Join(l.Dir, "env.sh") + "\n")
	for _, kv := range localEnv(l) {
		if kv[0] == envName(flagPassword) {
			// Read from its file, as the banner shows (an operator found
			// the password itself here).
			fmt.Fprintf(&env, "export %s=\"$(cat %q)\"\n", kv[0], l.PasswordFile())
			continue
		}
		fmt.Fprintf(&env, "export %s=%q\n", kv[0], kv[1])
	}
	if l.Password == "" {
		// A shell that sourced a secured stack's env.sh would still try
		// TLS and SASL against this plaintext one.
		var names []string
		for _, f := range []string{flagTLSCA, flagMechanism, flagUser, flagPassword} {
			names = append(names, envName(f))
		}
		fmt.Fprintf(&env, "unset %s\n", strings.Join(names, " "))
	}
	if err := os.WriteFile(filepath.Join(l.Dir, "env.sh"), []byte(env.String()), 0o600); err != nil {
		return fmt.Errorf("write env.sh: %w", err)
	}
	if err := os.WriteFile(filepath.Join(l.Dir, "floe.yaml"), []byte(localConfig(l)), 0o600); err != nil {
		return fmt.Errorf("write floe.yaml: %w", err)
	}
	if l.Password != "" {
		if err := os.WriteFile(filepath.Join(l.Dir, "tls", "client.properties"), []byte(localProperties(l)), 0o600); err != nil {
			return fmt.Errorf("write client.properties: %w", err)
		}
	}
	return nil
}

// localEnv is the environment that points floe (its FLOE_* variables) and
// the AWS clients at the local stack, in order.
func localEnv(l *localstack.Local) [][2]string {
	env := append(l.Env(),
		[2]string{envPrefix + "BROKERS", l.Brokers[0]},
		[2]string{envPrefix + "CATALOG", l.CatalogPath()},
		[2]string{envPrefix + "WAREHOUSE", l.Warehouse()},
		[2]string{envPrefix + "SCHEMA_REGISTRY", l.Registry})
	for _, kv := range localSecurity(l) {
		env = append(env, [2]string{envName(kv[0]), kv[1]})
	}
	return env
}

// localSecurity is the Kafka security flags and values of a secured
// local stack, in order; none for a plaintext one.
func localSecurity(l *localstack.Local) [][2]string {
	if l.Password == "" {
		return nil
	}
	return [][2]string{
		{flagTLSCA, l.Certs.CAFile},
		{flagMechanism, "SCRAM-SHA-512"},
		{flagUser, localstack.SecureUser},
		{flagPassword, l.Password},
	}
}

// localConfig is a floe config file for the local stack.
func localConfig(l *localstack.Local) string {
	return fmt.Sprintf(`# floe config for the local stack in %s (written by 'floe localstack up').
# Use: floe sink --config %s --topic TOPIC --table NAMESPACE.TABLE
# It points at this stack only: the s3-* settings below count as flags and beat the AWS_*
# variables, so a copy meant for other storage must drop them.
brokers: [%s]
catalog: %s
warehouse: %s
s3-endpoint: %s
s3-region: %s
s3-access-key-id: %s
s3-secret-access-key: %s
schema-registry: %s
%s`, l.Dir, filepath.Join(l.Dir, "floe.yaml"), l.Brokers[0], strconv.Quote(l.CatalogPath()), l.Warehouse(),
		l.S3.Endpoint, localstack.Region, localstack.AccessKeyID, localstack.SecretAccessKey, l.Registry, localSecurityYAML(l))
}

func localSecurityYAML(l *localstack.Local) string {
	var b strings.Builder
	if l.Password != "" {
		// An operator asked why the banner keeps the password out of ps
		// while this file holds it.
		b.WriteString("# The stack's own generated password, here so that --config alone reaches it; keep a real\n# cluster's out of config files (FLOE_KAFKA_SASL_PASSWORD, or a --kafka-config file).\n")
	}
	for _, kv := range localSecurity(l) {
		fmt.Fprintf(&b, "%s: %s\n", kv[0], strconv.Quote(kv[1]))
	}
	return b.String()
}

// localProperties is a Kafka client properties file for the secured local
// stack, for floe's --kafka-config and other Kafka clients.
func localProperties(l *localstack.Local) string {
	return fmt.Sprintf(`# Kafka client properties of the secured floe local stack (written by 'floe localstack up --secure').
bootstrap.servers=%s
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";
ssl.ca.location=%s
`, l.Brokers[0], localstack.SecureUser, l.Password, l.Certs.CAFile)
}

func printLocalUsage(w io.Writer, l *localstack.Local) {
	broker := l.Brokers[0]
	fmt.Fprintf(w, `floe local stack is up (Ctrl-C stops it; data stays in %[1]s)

  Kafka broker      %[2]s   (a topic created on first use gets %[10]s: up --num-partitions N)
%[11]s  schema registry   %[9]s   (Confluent REST API, no credentials)
  S3 endpoint       %[3]s   bucket %[4]s, any credentials (use %[5]s / %[6]s)
  catalog           %[7]s   (SQLite), warehouse %[8]s

Environment (also in %[1]s/env.sh):
`, l.Dir, broker, l.S3.Endpoint, localstack.Bucket, localstack.AccessKeyID, localstack.SecretAccessKey,
		l.CatalogPath(), l.Warehouse(), l.Registry, plural(l.NumPartitions, "partition"), localPlaintextLine(l))
	// The password stays off the terminal (and the scrollback or CI log
	// that keeps it): the lines read it from its file.
	password := `"$(cat ` + strconv.Quote(l.PasswordFile()) + `)"`
	for _, kv := range localEnv(l) {
		v := strconv.Quote(kv[1])
		if kv[0] == envName(flagPassword) {
			v = password
		}
		fmt.Fprintf(w, "  export %s=%s\n", kv[0], v)
	}
	if sec := localSecurity(l); len(sec) > 0 {
		fmt.Fprintf(w, "\nThe broker takes TLS only, with SCRAM-SHA-512 (user %s, password in %s). Kafka flags to add to every floe command\n(the variables above and floe.yaml carry them; other clients: %s):\n ",
			localstack.SecureUser, l.PasswordFile(), filepath.Join(l.Dir, "tls", "client.properties"))
		for _, kv := range sec {
			if kv[0] == flagPassword {
				// A flag's value is in the process list: the password
				// goes by the variable above.
				continue
			}
			fmt.Fprintf(w, " --%s %s", kv[0], kv[1])
		}
		fmt.Fprintf(w, "\n  and the password in %s (export %s=%s), not as a flag, which ps shows\n", envName(flagPassword), envName(flagPassword), password)
	}
	// A secured stack's commands need the Kafka flags above too: its lines
	// take them all from the config file instead.
	conn := fmt.Sprintf("--brokers %s --catalog %s --warehouse %s --s3-endpoint %s --s3-access-key-id %s --s3-secret-access-key %s",
		broker, l.CatalogPath(), l.Warehouse(), l.S3.Endpoint, localstack.AccessKeyID, localstack.SecretAccessKey)
	// floe produce takes the Kafka flags only: the catalog's and S3's
	// are unknown flags to it (a new user ran the line as printed).
	produceConn := "--brokers " + broker
	if l.Password != "" {
		conn = "--config " + filepath.Join(l.Dir, "floe.yaml")
		produceConn = conn
	}
	fmt.Fprintf(w, `
floe (flags; or --config %[1]s/floe.yaml, or the variables above):
  floe produce %[14]s --topic orders -K:      (then type key:value lines; Ctrl-D ends)
  floe sink    %[13]s --topic orders --table lake.orders
  floe status  %[13]s --table lake.orders

Other clients:
%[12]s  registry  curl -s -X POST -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
              --data '{"schema": "{\"type\":\"record\",\"name\":\"Order\",\"fields\":[{\"name\":\"id\",\"type\":\"long\"}]}"}' \
              %[11]s/subjects/orders-value/versions
            curl -s %[11]s/subjects          (Confluent serializers: schema.registry.url=%[11]s)
  aws CLI   aws --endpoint-url %[5]s s3 ls s3://%[6]s/ --recursive
  DuckDB    CREATE SECRET (TYPE s3, KEY_ID '%[7]s', SECRET '%[8]s', REGION '%[9]s',
                           ENDPOINT '%[10]s', URL_STYLE 'path', USE_SSL false);
            SELECT * FROM iceberg_scan('METADATA');   -- METADATA: the "metadata" line of floe status
`, l.Dir, broker, l.CatalogPath(), l.Warehouse(), l.S3.Endpoint, localstack.Bucket,
		localstack.AccessKeyID, localstack.SecretAccessKey, localstack.Region, strings.TrimPrefix(l.S3.Endpoint, "http://"),
		l.Registry, localKafkaClients(l), conn, produceConn)
}

// localPlaintextLine is the usage's line of a secured stack's plaintext
// port; none for a plaintext stack.
func localPlaintextLine(l *localstack.Local) string {
	if l.Plaintext == "" {
		return ""
	}
	return fmt.Sprintf("  plaintext port    %s   for local producing only: no TLS, no SASL (kcat -P, scripts); the rest takes the broker above\n", l.Plaintext)
}

// localKafkaClients is the usage's lines for kcat and kafkajs. kcat's
// librdkafka logs in with SASL handshake v0, which kfake does not serve,
// so a secured stack's kcat and kafkajs lines produce on its plaintext
// port, where a user had to restart the stack without --secure.
func localKafkaClients(l *localstack.Local) string {
	if l.Password != "" {
		return fmt.Sprintf(`  kcat      kcat -b %[1]s -t orders -P -K:            (then type key:value lines)
            on the plaintext port, which takes producers only: kcat cannot log in to the secured
            broker (librdkafka needs SASL handshake v0, which kfake does not serve)
  kafkajs   new Kafka({ clientId: 'app', brokers: ['%[1]s'] })   (producing only)
`, l.Plaintext)
	}
	return fmt.Sprintf(`  kcat      kcat -b %[1]s -t orders -P -K:            (then type key:value lines)
            kcat -b %[1]s -t orders -C -e
  kafkajs   new Kafka({ clientId: 'app', brokers: ['%[1]s'] })
`, l.Brokers[0])
}
