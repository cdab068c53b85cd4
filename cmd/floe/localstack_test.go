package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
)

// TestLocalstackUpSurvivesRestart runs the stack 'floe localstack up'
// starts (persistent broker, schema registry, in-process S3, SQLite catalog
// with an s3:// warehouse), sinks through its generated config file, stops
// it, starts it again on the same folder and ports, and proves that the
// topic, its records, the registered schemas, the table and its files are
// all still there: the second sink resumes from the ledger and the table
// holds every offset exactly once.
func TestLocalstackUpSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	l, opts := upOnFreePorts(t, localstack.UpOptions{Dir: dir})
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	registry := fmt.Sprintf("http://127.0.0.1:%d", opts.RegistryPort)
	if l.Registry != registry {
		t.Errorf("registry URL %q, want %q", l.Registry, registry)
	}
	// The config file and the environment point floe at the registry.
	yml, _ := os.ReadFile(filepath.Join(dir, "floe.yaml"))
	env, _ := os.ReadFile(filepath.Join(dir, "env.sh"))
	if !strings.Contains(string(yml), "\nschema-registry: "+registry+"\n") || !strings.Contains(string(env), `export FLOE_SCHEMA_REGISTRY="`+registry+`"`) {
		t.Errorf("floe.yaml or env.sh lacks the registry:\n%s\n%s", yml, env)
	}
	// A shell that sourced a secured stack's env.sh before forgets its
	// TLS and SASL settings (a new-user run waited 15 s for TLS).
	unset, err := exec.Command("bash", "-c", `export FLOE_KAFKA_SASL_PASSWORD=x FLOE_KAFKA_TLS_CA=ca; . "$1"; echo "${FLOE_KAFKA_SASL_PASSWORD-unset} ${FLOE_KAFKA_TLS_CA-unset}"`, "bash", filepath.Join(dir, "env.sh")).Output()
	if err != nil || strings.TrimSpace(string(unset)) != "unset unset" {
		t.Errorf("env.sh of a plaintext stack leaves the secured stack's settings: %q, %v\n%s", unset, err, env)
	}
	schemaID, err := localstack.RegisterSchema(t.Context(), l.Registry, "orders-value",
		sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	if err := localstack.CreateTopic(t.Context(), l.Brokers, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, l.Brokers, "orders", 2, 120, count)
	conf := filepath.Join(dir, "floe.yaml")
	// The stack's catalog exists from the start: the first sink does not
	// announce a new one, and the stack's folder has no warehouse/ folder
	// (its warehouse is s3://warehouse/).
	code, _, errs := floe(t, "sink", "--config", conf, "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	if code != exitOK || strings.Contains(errs, "creating a new SQLite catalog") {
		t.Errorf("first sink on the local stack: exit %d, log:\n%s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "warehouse")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the local stack's folder has a warehouse/ folder (%v); its warehouse is %s", err, l.Warehouse())
	}
	checkTable(t, l.Catalog(), "lake.orders", "orders", count)
	l.Close()

	l, err = localstack.Up(t.Context(), opts)
	if err != nil {
		t.Fatalf("restart on the same folder: %v", err)
	}
	defer l.Close()
	produceRound(t, l.Brokers, "orders", 2, 60, count)
	out := mustFloe(t, "sink", "--config", conf, "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	if !strings.Contains(out, "60 rows") {
		t.Errorf("second sink should add exactly the 60 new records, got:\n%s", out)
	}
	checkTable(t, l.Catalog(), "lake.orders", "orders", count)

	// The schema registered before the restart has its ID still.
	reg, err := connector.NewRegistry(connector.RegistryConfig{URL: l.Registry})
	if err != nil {
		t.Fatal(err)
	}
	v, err := reg.Resolve(t.Context(), localstack.WireFormat(schemaID, nil, []byte{2}))
	if err != nil || v.Schema.Type != connector.SchemaAvro || !strings.Contains(v.Schema.Text, `"Order"`) {
		t.Errorf("schema %d after the restart: %+v, %v", schemaID, v.Schema, err)
	}

	// The data files are plain files of the local S3 bucket.
	var parquet int
	filepath.WalkDir(filepath.Join(dir, "s3"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			parquet++
		}
		return nil
	})
	if parquet == 0 {
		t.Error("no Parquet file under the local S3 folder")
	}

	// floe status through the same config file: no lag.
	js := mustFloe(t, "status", "--config", conf, "--table", "lake.orders", "--format", "json")
	var st lookup.TableStatus
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatalf("status json: %v\n%s", err, js)
	}
	if len(st.Partitions) != 2 || !strings.HasPrefix(st.MetadataLocation, "s3://warehouse/lake.db/orders/metadata/") {
		t.Fatalf("status: %+v", st)
	}
	for _, p := range st.Partitions {
		if p.Lag == nil || *p.Lag != 0 || p.TableNext == nil || *p.TableNext != count[p.Partition] || p.LastCommit == nil {
			t.Errorf("status of partition %d: %+v", p.Partition, p)
		}
	}
}

// TestLocalstackWithoutS3Settings: a command given only the local stack's
// catalog (a new terminal without its env.sh) reads tables whose files are
// on S3 with no S3 setting; it says so and names the flags, instead of the
// AWS SDK's "Invalid region: region was not a valid DNS name" alone.
func TestLocalstackWithoutS3Settings(t *testing.T) {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	dir := t.TempDir()
	l := upLocal(t, dir)
	if err := localstack.CreateTopic(t.Context(), l.Brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, l.Brokers, "orders", 1, 10, map[int32]int64{})
	mustFloe(t, "sink", "--config", filepath.Join(dir, "floe.yaml"), "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	code, _, errs := floe(t, "status", "--catalog", l.CatalogPath(), "--table", "lake.orders")
	if line := errorLine(errs); code != 2 || !strings.Contains(line, "no S3 access is configured for the table's s3:// files") || !strings.HasSuffix(line, "check --s3-endpoint and --s3-region") {
		t.Errorf("status without S3 settings: exit %d, %s", code, line)
	}
}

// TestLocalstackCreatesTopicsOnFirstUse: the broker of 'floe localstack up'
// creates a topic a client names for the first time, as a default Kafka
// broker does, so the documented first step (kcat -P on a new topic) works.
func TestLocalstackCreatesTopicsOnFirstUse(t *testing.T) {
	kcat := testenv.Tool(t, "kcat", "apt-get install kcat")
	dir := t.TempDir()
	l := upLocal(t, dir)
	cmd := exec.CommandContext(t.Context(), kcat, "-b", l.Brokers[0], "-t", "fresh", "-P", "-K:")
	cmd.Stdin = strings.NewReader("k1:{\"amount\":3}\nk2:{\"amount\":4}\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P on a topic that does not exist: %v\n%s", err, out)
	}
	out := mustFloe(t, "sink", "--config", filepath.Join(dir, "floe.yaml"), "--topic", "fresh", "--table", "lake.fresh", "--stop-at-end")
	if !strings.Contains(out, "2 rows") {
		t.Fatalf("sink of the topic kcat created:\n%s", out)
	}
	checkTable(t, l.Catalog(), "lake.fresh", "fresh", map[int32]int64{0: 2})
}

// TestLocalstackUpPrintsRegistry: 'floe localstack up' prints the schema
// registry's URL, and its curl example, run as printed, registers a schema.
func TestLocalstackUpPrintsRegistry(t *testing.T) {
	curl := testenv.Tool(t, "curl", "apt-get install curl")
	l, _ := upOnFreePorts(t, localstack.UpOptions{Dir: t.TempDir()})
	defer l.Close()
	var out bytes.Buffer
	printLocalUsage(&out, l)
	text := out.String()
	if !strings.Contains(text, "schema registry   "+l.Registry) || !strings.Contains(text, `export FLOE_SCHEMA_REGISTRY="`+l.Registry+`"`) {
		t.Fatalf("usage does not show the registry %s:\n%s", l.Registry, text)
	}
	// The example runs from "curl -s -X POST" to the end of the line
	// naming the subject, its lines joined by backslash-newlines.
	start := strings.Index(text, "curl -s -X POST")
	end := strings.Index(text, "/subjects/orders-value/versions")
	if start < 0 || end < start {
		t.Fatalf("no curl example to register a schema:\n%s", text)
	}
	example := text[start : end+len("/subjects/orders-value/versions")]
	cmd := exec.CommandContext(t.Context(), "sh", "-c", strings.Replace(example, "curl", curl, 1))
	got, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != `{"id":1}` {
		t.Fatalf("the printed example %s\nanswered %s (%v), want {\"id\":1}", example, got, err)
	}
	cl, err := sr.NewClient(sr.URLs(l.Registry))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := cl.SchemaByID(t.Context(), 1); err != nil || !strings.Contains(s.Schema, `"Order"`) {
		t.Errorf("schema 1 after the example: %+v, %v", s, err)
	}
}

// TestLocalstackUpSinkLineRuns: the floe sink line 'floe localstack up'
// prints runs as printed in a shell without the stack's variables (from a
// new-user run: it lacked the S3 credentials).
func TestLocalstackUpSinkLineRuns(t *testing.T) {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "FLOE_S3_ACCESS_KEY_ID", "FLOE_S3_SECRET_ACCESS_KEY"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	l := upLocal(t, t.TempDir())
	if err := localstack.CreateTopic(t.Context(), l.Brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), l.Brokers, []*kgo.Record{{Topic: "orders", Value: []byte(`{"id":1}`)}}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printLocalUsage(&out, l)
	var line string
	for l := range strings.Lines(out.String()) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "floe sink "); ok {
			line = rest
		}
	}
	if line == "" {
		t.Fatalf("no floe sink line:\n%s", out.String())
	}
	args := append([]string{"sink"}, strings.Fields(line)...)
	if code, stdout, errs := floe(t, append(args, "--stop-at-end")...); code != 0 || !strings.Contains(stdout, "1 row") {
		t.Fatalf("floe sink %s --stop-at-end: exit %d\n%s\n%s", line, code, stdout, errs)
	}
}

// TestLocalstackUpProduceLineRuns: the floe produce line 'floe localstack
// up' prints runs as printed, on a plain stack and on a secured one (a
// new user ran it: it carried the catalog's and S3's flags, which floe
// produce does not take, and failed with "unknown flag: --catalog").
func TestLocalstackUpProduceLineRuns(t *testing.T) {
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprintf("secure=%v", secure), func(t *testing.T) {
			for _, v := range []string{"FLOE_BROKERS", "FLOE_KAFKA_TLS_CA", "FLOE_KAFKA_SASL_MECHANISM", "FLOE_KAFKA_SASL_USER", "FLOE_KAFKA_SASL_PASSWORD"} {
				t.Setenv(v, "")
			}
			dir := t.TempDir()
			l, _ := upOnFreePorts(t, localstack.UpOptions{Dir: dir, Secure: secure})
			t.Cleanup(l.Close)
			if err := writeLocalFiles(l); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			printLocalUsage(&out, l)
			var line string
			for l := range strings.Lines(out.String()) {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "floe produce "); ok {
					line, _, _ = strings.Cut(rest, "(then")
				}
			}
			if line == "" {
				t.Fatalf("no floe produce line:\n%s", out.String())
			}
			args := append([]string{"produce"}, strings.Fields(line)...)
			if code, stdout, errs := floeInput(t, "k1:{\"amount\":3}\n", args...); code != 0 || !strings.HasPrefix(stdout, "produced 1 record to orders: ") {
				t.Fatalf("floe produce %s: exit %d\n%s\n%s", line, code, stdout, errs)
			}
		})
	}
}

// upOnFreePorts starts a local stack with opts on free ports, picking new
// ones when a port picked as free was taken before the stack bound it
// (they lie in Linux's range for outgoing connections: another
// connection took one in between, and a test failed). It returns the
// options it started with, ports included.
func upOnFreePorts(t *testing.T, opts localstack.UpOptions) (*localstack.Local, localstack.UpOptions) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		o := opts
		o.KafkaPort, o.S3Port, o.RegistryPort = freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
		if o.Secure {
			o.PlaintextPort = freeTCPPort(t)
		}
		l, err := localstack.Up(t.Context(), o)
		if err == nil {
			return l, o
		}
		if attempt == 3 || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
}

// upLocal starts 'floe localstack up' in dir on free ports, with its
// floe.yaml and env.sh written, until the test ends.
func upLocal(t *testing.T, dir string) *localstack.Local {
	t.Helper()
	l, _ := upOnFreePorts(t, localstack.UpOptions{Dir: dir})
	t.Cleanup(l.Close)
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSinkInterruptedWhileStorageDown: a live sink has consumed records
// when its storage goes away (the local stack stops), and is interrupted
// while its flush fails to write them: it has not committed what it
// consumed, and exits 2 naming the failure, where it took the interrupt
// for a clean stop and exited 0 with "0 rows in 0 commits". Nothing is
// lost: the next run reads the records again. From a new-user run.
func TestSinkInterruptedWhileStorageDown(t *testing.T) {
	dir := t.TempDir()
	l, _ := upOnFreePorts(t, localstack.UpOptions{Dir: dir})
	defer l.Close()
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	if err := localstack.CreateTopic(t.Context(), l.Brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "sink", "--config", filepath.Join(dir, "floe.yaml"), "--topic", "orders", "--table", "lake.orders",
		"--flush-interval", "500ms", "--log-format", "json")
	cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("no %s in 30 s; log:\n%s", what, stderr.String())
			}
		}
	}
	waitFor("session", func() bool { return strings.Contains(stderr.String(), "sink session started") })
	produceRound(t, l.Brokers, "orders", 1, 5, map[int32]int64{})
	time.Sleep(100 * time.Millisecond)
	l.Close()
	// The interrupt lands while the flush's files fail to be written.
	time.Sleep(2 * time.Second)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitError || strings.Contains(stdout.String(), "0 rows in 0 commits") {
		t.Fatalf("interrupted sink: %v, want exit 2 naming what was not committed\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
}

// TestLocalstackHangupKeepsTopics (from a new-user run): closing the
// terminal that runs a local stack sends it SIGHUP, which ended the process
// at once, without writing its topics down: started again on the same
// folder, the stack had lost them. SIGHUP stops it as Ctrl-C does.
func TestLocalstackHangupKeepsTopics(t *testing.T) {
	dir := t.TempDir()
	cmd, out, broker := localstackProcess(t, dir)
	if err := localstack.CreateTopic(t.Context(), []string{broker}, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, []string{broker}, "orders", 1, 7, map[int32]int64{})
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "stopping") {
		t.Fatalf("local stack on SIGHUP: %v, want a clean stop\n%s", err, out.String())
	}
	_, _, broker = localstackProcess(t, dir)
	code, stdout, errs := floe(t, "sink", "--config", filepath.Join(dir, "floe.yaml"), "--brokers", broker, "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	if code != 0 || !strings.Contains(stdout, "7 rows") {
		t.Fatalf("sink after the restart: exit %d, want the 7 records kept\n%s\n%s", code, stdout, errs)
	}
}

// TestLocalstackNohupKeepsRunning: a floe started with SIGHUP ignored (nohup
// floe sink ... &, or a shell's trap "" HUP) is asked to outlive its
// terminal. Go keeps an ignored signal ignored unless the program asks to
// be notified of it (os/signal: "If the program was started with SIGHUP or
// SIGINT ignored, and Notify is called for either signal, a signal handler
// will be installed for that signal and it will no longer be ignored"):
// floe notified SIGHUP, so the terminal closing stopped a nohup'd stack
// or sink (from a review). It asks for SIGHUP only where it is not ignored.
func TestLocalstackNohupKeepsRunning(t *testing.T) {
	cmd, out, _ := localstackProcess(t, t.TempDir(), "bash", "-c", `trap "" HUP; exec "$@"`, "bash")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("a local stack started with SIGHUP ignored (nohup) stopped on SIGHUP: %v\n%s", err, out.String())
	case <-time.After(3 * time.Second):
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-done
}

// localstackProcess runs floe localstack up on dir as a child process, its
// command line after the argv of wrap (a shell that sets the child up),
// until it says it is up; it returns the command, its output and its
// broker's address. It is killed in t.Cleanup.
func localstackProcess(t *testing.T, dir string, wrap ...string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	kafka := freeTCPPort(t)
	argv := append(wrap, os.Args[0], "localstack", "up", "--dir", dir, "--kafka-port", fmt.Sprint(kafka),
		"--s3-port", fmt.Sprint(freeTCPPort(t)), "--schema-registry-port", fmt.Sprint(freeTCPPort(t)))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitFor(t, 30*time.Second, "the local stack to be up", func() bool { return strings.Contains(out.String(), "floe local stack is up") })
	return cmd, &out, fmt.Sprintf("127.0.0.1:%d", kafka)
}
