package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// TestConfigFilePipelinesAndMetrics runs floe sink from a config file with
// two topic -> table pipelines in one process and the metrics endpoint on,
// scrapes /metrics, /healthz and /readyz while it runs, stops it with the context
// (as SIGTERM does) and checks both tables.
func TestConfigFilePipelinesAndMetrics(t *testing.T) {
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	for _, topic := range []string{"orders", "payments"} {
		if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	orders, payments := map[int32]int64{}, map[int32]int64{}
	produceRound(t, st.Brokers, "orders", 2, 300, orders)
	produceRound(t, st.Brokers, "payments", 2, 100, payments)

	cat := st.Catalog()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	writeFile(t, conf, fmt.Sprintf(`
brokers: [%s]
catalog: %q
warehouse: %q
flush-records: 50
flush-interval: 200ms
metrics-addr: %s
lag-interval: 100ms
log-format: json
catalog-prop:
  write.parquet.compression-codec: zstd
pipelines:
  - topic: orders
    table: lake.orders
  - topic: payments
    table: lake.payments
`, st.Brokers[0], cat.Catalog, cat.Warehouse, metricsAddr))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		wg     sync.WaitGroup
		runErr error
		out    string
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		out, _, runErr = floeCtx(ctx, "sink", "--config", conf)
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + metricsAddr + path)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	want := []string{
		`floe_records_committed_total{table="lake.orders",topic="orders"} 300`,
		`floe_records_committed_total{table="lake.payments",topic="payments"} 100`,
		`floe_records_consumed_total{table="lake.orders",topic="orders"} 300`,
		`floe_partition_lag{partition="0",table="lake.orders",topic="orders"} 0`,
		`floe_partition_end_offset{partition="1",table="lake.payments",topic="payments"} 50`,
		`floe_sink_up{table="lake.orders",topic="orders"} 1`,
	}
	var metrics string
	waitFor(t, time.Minute, "metrics of both pipelines", func() bool {
		_, metrics = get("/metrics")
		for _, w := range want {
			if !strings.Contains(metrics, w) {
				return false
			}
		}
		return true
	})
	for _, w := range []string{"floe_commit_duration_seconds_bucket", "floe_flush_records_bucket", "floe_bytes_consumed_total",
		"floe_bytes_committed_total", "floe_commit_retries_total", "floe_fenced_total", "floe_last_commit_timestamp_seconds", "go_goroutines"} {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	code, health := get("/healthz")
	if code != http.StatusOK || !strings.Contains(health, `"status":"ok"`) || !strings.Contains(health, `"table":"lake.payments"`) {
		t.Errorf("/healthz: %d %s", code, health)
	}
	// Both pipelines run: ready.
	if code, ready := get("/readyz"); code != http.StatusOK || !strings.Contains(ready, `"status":"ok"`) {
		t.Errorf("/readyz: %d %s", code, ready)
	}
	cancel()
	wg.Wait()
	if runErr != nil {
		t.Fatalf("sink: %v", runErr)
	}
	if !strings.Contains(out, "sink lake.orders (new table): 300 rows") || !strings.Contains(out, "sink lake.payments (new table): 100 rows") {
		t.Errorf("output:\n%s", out)
	}
	checkTable(t, cat, "lake.orders", "orders", orders)
	checkTable(t, cat, "lake.payments", "payments", payments)
}

// TestConfigPrecedence: command-line flags override FLOE_* variables, which
// override the config file, which overrides the defaults; unknown keys and
// malformed values are errors that name the file and line.
func TestConfigPrecedence(t *testing.T) {
	st, loc := sinkStack(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "floe.yaml")
	writeFile(t, conf, fmt.Sprintf("brokers: [%s]\ncatalog: %q\nwarehouse: %q\ntopic: orders\ntable: lake.fromfile\nstop-at-end: true\n",
		st.Brokers[0], loc[1], loc[3]))

	mustFloe(t, "sink", "--config", conf)
	t.Setenv("FLOE_TABLE", "lake.fromenv")
	mustFloe(t, "sink", "--config", conf)
	mustFloe(t, "sink", "--config", conf, "--table", "lake.fromflag")
	t.Setenv("FLOE_CONFIG", conf)
	t.Setenv("FLOE_TABLE", "")
	os.Unsetenv("FLOE_TABLE")
	mustFloe(t, "sink", "--table", "lake.fromconfigenv")
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lake.fromfile", "lake.fromenv", "lake.fromflag", "lake.fromconfigenv"} {
		ident, _ := catalog.ParseIdent(name)
		if _, err := cat.LoadTable(t.Context(), ident); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	bad := filepath.Join(dir, "bad.yaml")
	for _, c := range []struct{ body, want string }{
		{"brokers: [a:1]\nbrokres: [b:2]\n", `bad.yaml line 2: unknown key "brokres"; did you mean brokers?`},
		{"kafka-sasl-pasword: x\n", "did you mean kafka-sasl-password?"},
		{"flush-records: lots\n", "flush-records"},
		// The line of the key, the one meant, and no Go type (from a
		// new-user run).
		{"pipelines:\n  - topic: a\n    tabel: x.y\n", `bad.yaml line 3: pipelines: unknown key "tabel"; did you mean table?`},
		{"brokers: [a:1]\npipelines:\n  - topic: a\n    table: x.y\n    value: jsn\n", `bad.yaml: pipelines[0] (line 3, a -> x.y): value: "jsn": want raw, json or registry`},
		{"catalog: [a, b]\n", "want one value"},
	} {
		writeFile(t, bad, c.body)
		code, _, errs := floe(t, "sink", "--config", bad)
		if code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("config %q: exit %d, stderr %s; want %q", c.body, code, errs, c.want)
		}
	}
}

// TestEnvironmentMistakes: a newcomer's mistakes in FLOE_* variables and
// --brokers are named at once. An empty FLOE_BROKERS is unset (it was one
// broker with no name, dialled for the 15 s dial timeout); a misspelt
// FLOE_* variable is warned about with the one meant (it was ignored
// silently), and the harness's own FLOE_* variables are not; a broker
// written as a URL is refused naming its HOST:PORT (it said "no such
// host" after the dial timeout).
func TestEnvironmentMistakes(t *testing.T) {
	t.Setenv("FLOE_BROKERS", "")
	start := time.Now()
	code, _, errs := floe(t, "sink", "--topic", "orders", "--table", "lake.orders", "--catalog", filepath.Join(t.TempDir(), "c.db"))
	if code != exitError || !strings.Contains(errs, "missing --brokers") || time.Since(start) > 5*time.Second {
		t.Errorf("empty FLOE_BROKERS: exit %d after %s, %q; want exit 2 at once, missing --brokers", code, time.Since(start).Round(time.Millisecond), errs)
	}

	t.Setenv("FLOE_BROKER", "127.0.0.1:9")
	code, _, errs = floe(t, "version")
	if code != exitOK || !strings.Contains(errs, "FLOE_BROKER is not a floe variable and is ignored; did you mean FLOE_BROKERS?") {
		t.Errorf("misspelt FLOE_BROKER: exit %d, stderr %q", code, errs)
	}
	os.Unsetenv("FLOE_BROKER")
	known := allFlagNames(newRoot(io.Discard, io.Discard))
	harness := []string{"FLOE_REQUIRE_SERVERS=1", "FLOE_TEST_FULL=1", "FLOE_SCREENSHOTS=d", "FLOE_MINIO=m", "FLOE_PG_BIN=p", "FLOE_MOTO_SERVER=m", "FLOE_VERSITYGW=v",
		"FLOE_CAMPAIGN_LOGS=l", "FLOE_BENCH_RECORDS=1", "FLOE_BENCH_LOG=1", "FLOE_TEST_BROKERS=b", "FLOE_TEST_TABLE=t", "FLOE_TEST_TOPIC=t",
		"FLOE_TEST_GROUP=g", "FLOE_TEST_CATALOG=c", "FLOE_TEST_START=s", "FLOE_TEST_VALUE=v", "FLOE_TEST_REGISTRY=r", "FLOE_CONFIG=c", "FLOE_TABLE=t"}
	if w := misspeltEnv(harness, known); len(w) != 0 {
		t.Errorf("warnings for variables that are not misspellings: %q", w)
	}

	st, _ := sinkStack(t)
	start = time.Now()
	code, _, errs = floe(t, "sink", "--topic", "orders", "--table", "lake.orders", "--catalog", st.Catalog().Catalog, "--brokers", "kafka://"+st.Brokers[0])
	want := fmt.Sprintf(`--brokers "kafka://%s": want HOST:PORT without a URL scheme: %s, not kafka://%s`, st.Brokers[0], st.Brokers[0], st.Brokers[0])
	if code != exitError || !strings.Contains(errs, want) || time.Since(start) > 5*time.Second {
		t.Errorf("--brokers kafka://: exit %d after %s, %q; want %q at once", code, time.Since(start).Round(time.Millisecond), errs, want)
	}

	// A value a command refuses after parsing names the variable or the
	// config file line that set it, not only the flag (from a new-user
	// run); a flag it does not name is not noted.
	t.Setenv("FLOE_DLQ", "maybe")
	code, _, errs = floe(t, "sink", "--topic", "orders", "--table", "lake.orders", "--catalog", st.Catalog().Catalog, "--brokers", st.Brokers[0])
	if code != exitError || !strings.Contains(errs, `--dlq "maybe": want on or off (--dlq was set by FLOE_DLQ)`) || strings.Contains(errs, "--dlq-table was set") {
		t.Errorf("FLOE_DLQ=maybe: exit %d, %q", code, errs)
	}
	os.Unsetenv("FLOE_DLQ")
	// A value the flag's parser refuses says what it wants, as on the
	// command line (from a new-user run).
	t.Setenv("FLOE_KAFKA_TLS", "yes")
	code, _, errs = floe(t, "sink", "--topic", "orders", "--table", "lake.orders", "--catalog", st.Catalog().Catalog, "--brokers", st.Brokers[0])
	if code != exitError || !strings.Contains(errs, "FLOE_KAFKA_TLS: ") || !strings.Contains(errs, "; want true or false") {
		t.Errorf("FLOE_KAFKA_TLS=yes: exit %d, %q", code, errs)
	}
	os.Unsetenv("FLOE_KAFKA_TLS")
	config := filepath.Join(t.TempDir(), "floe.yaml")
	writeFile(t, config, "dlq-table: lake.x\ndlq: maybe\n")
	code, _, errs = floe(t, "sink", "--config", config, "--topic", "orders", "--table", "lake.orders", "--catalog", st.Catalog().Catalog, "--brokers", st.Brokers[0])
	if code != exitError || !strings.Contains(errs, "(--dlq was set by config file "+config+" line 2)") || strings.Contains(errs, "--dlq-table was set") {
		t.Errorf("dlq: maybe in a config file: exit %d, %q", code, errs)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExampleConfig keeps floe.example.yaml, the documented complete
// example, valid: every key is a flag, every value parses into its flag.
func TestExampleConfig(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	file, err := loadConfigFile(filepath.Join("..", "..", "floe.example.yaml"), allFlagNames(root))
	if err != nil {
		t.Fatal(err)
	}
	if len(file.pipelines) != 3 || file.pipelines[1].Partitions[2] != 2 || file.pipelines[1].PartitionBy == "" || file.pipelines[2].Value != "registry" {
		t.Errorf("pipelines: %+v", file.pipelines)
	}
	sink, _, err := root.Find([]string{"sink"})
	if err != nil {
		t.Fatal(err)
	}
	fs := sink.Flags()
	fs.AddFlagSet(root.PersistentFlags())
	for _, p := range file.pipelines {
		if p.PartitionBy != "" {
			if _, err := pipelinePartitionBy(p); err != nil {
				t.Errorf("pipeline %s: %v", p.Table, err)
			}
		}
	}
	for key, vals := range file.values {
		f := fs.Lookup(key)
		if f == nil {
			t.Errorf("example key %q is no flag of floe sink", key)
			continue
		}
		if err := setFlag(fs, f, vals); err != nil {
			t.Errorf("example key %q: %v", key, err)
		}
	}
}

// TestFlagSourcesNote: an error about a flag's value names where the
// value came from; advice that names the flag does not (a new-user run
// got "(--schema-registry was set by FLOE_SCHEMA_REGISTRY)" after "check
// that --value, --key and --schema-registry match").
func TestFlagSourcesNote(t *testing.T) {
	src := flagSources{"dlq": "FLOE_DLQ", "retry-for": "FLOE_RETRY_FOR", "schema-registry": "FLOE_SCHEMA_REGISTRY", "dlq-table": "FLOE_DLQ_TABLE", "brokers": "FLOE_BROKERS"}
	for msg, want := range map[string]string{
		`--dlq "maybe": want on or off`:        " (--dlq was set by FLOE_DLQ)",
		`--retry-for -5s: want a positive one`: " (--retry-for was set by FLOE_RETRY_FOR)",
		"no record became a row; check that --value, --key and --schema-registry match how the topic's records are written": "",
		"pass --dlq-table to name another": "",
		// The check a fixable error ends with (from a new-user run whose
		// FLOE_BROKERS came from the local stack's env.sh).
		"cannot reach brokers 127.0.0.1:1 (is Kafka running there?): connection refused; check --brokers": " (--brokers was set by FLOE_BROKERS)",
		"bucket does not exist: ...; check --retry-for and --dlq-table":                                   " (--dlq-table was set by FLOE_DLQ_TABLE; --retry-for was set by FLOE_RETRY_FOR)",
	} {
		if got := src.note(msg); got != want {
			t.Errorf("note(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestConfigPipelinesReplacedByFlags (from an operator's run): --topic and
// --table on the command line run instead of the config file's
// pipelines, which were left out without a word.
func TestConfigPipelinesReplacedByFlags(t *testing.T) {
	st, loc := sinkStack(t)
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	writeFile(t, conf, fmt.Sprintf("brokers: [%s]\npipelines:\n  - topic: orders\n    table: lake.fromfile\n", st.Brokers[0]))
	code, _, errs := floe(t, append([]string{"sink", "--config", conf, "--topic", "orders", "--table", "lake.fromflags", "--stop-at-end"}, loc...)...)
	if code != exitOK || !strings.Contains(errs, "replace the config file's pipelines") {
		t.Errorf("exit %d, stderr %q; want a warning that the file's pipelines do not run", code, errs)
	}
}

// TestConfigPipelinesWithPartitionsFlag (from an operator's run):
// --partitions beside a config file's pipelines was left out without a
// word, and the run sank every partition (in a group, the ones assigned);
// it is refused, naming the pipeline's partitions: key.
func TestConfigPipelinesWithPartitionsFlag(t *testing.T) {
	st, loc := sinkStack(t)
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	writeFile(t, conf, fmt.Sprintf("brokers: [%s]\npipelines:\n  - topic: orders\n    table: lake.fromfile\n", st.Brokers[0]))
	code, _, errs := floe(t, append([]string{"sink", "--config", conf, "--partitions", "0", "--stop-at-end"}, loc...)...)
	if code != exitError || !strings.Contains(errorLine(errs), "give a partitions: key to a pipeline of the file instead") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// TestConfigPipelinePartitionsNamed: a config file's pipeline whose
// partitions: key names a partition the topic lacks is refused naming the
// file and the key; it was reported as the --partitions flag, which no one
// had given (from a new-user run).
func TestConfigPipelinePartitionsNamed(t *testing.T) {
	st, loc := sinkStack(t)
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	writeFile(t, conf, fmt.Sprintf("brokers: [%s]\npipelines:\n  - {topic: orders, table: lake.fromfile, partitions: [5]}\n", st.Brokers[0]))
	code, _, errs := floe(t, append([]string{"sink", "--config", conf, "--stop-at-end"}, loc...)...)
	if line := errorLine(errs); code != exitError || strings.Contains(line, "--partitions") || !strings.Contains(line, "config file "+conf+`: pipelines[0] (line 3, orders -> lake.fromfile): partitions: "5": want partitions of topic orders`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// TestConfigOverriddenByEnvironmentWarns: a FLOE_* variable that
// overrides another value of the config file's is said (a local stack's
// env.sh, sourced before a run with a production --config, sent its
// tables to the local catalog without a word: from a new-user run); the
// values are not shown, as they may be secrets.
func TestConfigOverriddenByEnvironmentWarns(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "floe.yaml")
	writeFile(t, conf, "catalog: "+filepath.Join(dir, "prod.db")+"\nwarehouse: "+filepath.Join(dir, "wh")+"\n")
	t.Setenv("FLOE_CATALOG", filepath.Join(dir, "local.db"))
	t.Setenv("FLOE_WAREHOUSE", filepath.Join(dir, "wh"))
	_, _, errs := floe(t, "status", "--config", conf)
	var warning string
	for line := range strings.SplitSeq(errs, "\n") {
		if strings.Contains(line, "overrides") {
			warning += line
		}
	}
	if !strings.Contains(warning, "FLOE_CATALOG overrides the config file's catalog ("+conf+" line 1)") || strings.Contains(warning, "local.db") || strings.Contains(warning, "FLOE_WAREHOUSE overrides") {
		t.Errorf("stderr:\n%s\nwant a warning naming FLOE_CATALOG and the file's line only", errs)
	}
}

// TestConfigPasswordInEnvironmentNotWarned (from a new-user run): the
// documented pattern, the catalog URI without its password in the file and
// with it in FLOE_CATALOG, made every command warn that FLOE_CATALOG
// overrides the file's catalog, also on an audit whose exit 1 leaves
// stderr empty. Another URI with a password (another host) still warns.
func TestConfigPasswordInEnvironmentNotWarned(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "floe.yaml")
	writeFile(t, conf, "catalog: postgres://floe@127.0.0.1:1/iceberg?sslmode=disable   # password in FLOE_CATALOG\nwarehouse: "+filepath.Join(dir, "wh")+"\n")
	for _, c := range []struct {
		env  string
		warn bool
	}{
		{"postgres://floe:s3cret@127.0.0.1:1/iceberg?sslmode=disable", false},
		{"postgres://floe:s3cret@127.0.0.2:1/iceberg?sslmode=disable", true},
		{"postgres://admin:s3cret@127.0.0.1:1/iceberg?sslmode=disable", true},
	} {
		t.Setenv("FLOE_CATALOG", c.env)
		_, _, errs := floe(t, "status", "--config", conf)
		if warned := strings.Contains(errs, "FLOE_CATALOG overrides"); warned != c.warn || strings.Contains(errs, "s3cret") {
			t.Errorf("FLOE_CATALOG %s: stderr\n%s\nwant a warning: %v, and never the password", c.env, errs, c.warn)
		}
	}
}

// TestConfigPipelineEnvelope (from a new-user run): a Debezium topic and a
// plain keyed topic sunk by one process from a config file. A pipeline had
// no envelope key ("pipelines: unknown key"), and the file's top-level
// envelope applied to every pipeline, so the plain one failed: a pipeline's
// envelope overrides the file's, none included.
func TestConfigPipelineEnvelope(t *testing.T) {
	st, loc := sinkStack(t)
	const topic = "dbserver1.inventory.customers"
	if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	c := floetest.NewCustomers(topic, 1)
	c.Story(10, 30, 3)
	if err := localstack.Produce(t.Context(), st.Brokers, c.Records(t, floetest.CDCConnectJSON, "")); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	for _, file := range []string{
		"pipelines:\n  - {topic: %s, table: lake.cdc, envelope: debezium, value: json, key: json}\n  - {topic: orders, table: lake.orders_state, mode: upsert, key: string}\n",
		"envelope: debezium\nvalue: json\nkey: json\npipelines:\n  - {topic: %s, table: lake.cdc2}\n  - {topic: orders, table: lake.orders_state2, envelope: none, mode: upsert, key: string, value: raw}\n",
	} {
		writeFile(t, conf, fmt.Sprintf("brokers: [%s]\n", st.Brokers[0])+fmt.Sprintf(file, topic))
		if code, out, errs := floe(t, append([]string{"sink", "--config", conf, "--stop-at-end"}, loc...)...); code != exitOK {
			t.Fatalf("config file\n%s\nexit %d\n%s%s", file, code, out, errs)
		}
	}
	cfg := st.Catalog()
	for _, name := range []string{"lake.cdc", "lake.cdc2"} {
		c.CheckTable(t, floetest.Rows(t, openTable(t, cfg, name)), floetest.CDCConnectJSON, false)
	}
	for _, name := range []string{"lake.orders_state", "lake.orders_state2"} {
		if tbl := openTable(t, cfg, name); tbl.Mode() != mapping.ModeUpsert || tbl.Layout().Envelope != mapping.EnvelopeNone {
			t.Errorf("%s: mode %s, envelope %q; want an upsert table without envelope", name, tbl.Mode(), tbl.Layout().Envelope)
		}
	}
}
