package main

import (
	"bytes"
	"encoding/json"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
)

// TestAnswersThatCannotBeTrue: a record time still to come and a negative
// offset have no answer; the commands say which value is wrong, exit 2 and
// print nothing on stdout.
func TestAnswersThatCannotBeTrue(t *testing.T) {
	_, loc := whereStack(t)
	future := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"as-of", "--table", "lake.w", "--time", future}, `--time "` + future + `": want a time that has passed`},
		{[]string{"where", "--table", "lake.w", "-t", "w", "--partition", "0", "--offset", "-5"}, `--offset "-5": want an offset, 0 or more`},
		{[]string{"where", "--table", "lake.w", "-t", "w", "--partition", "-1", "--offset", "3"}, `--partition "-1"`},
		{[]string{"where", "--table", "lake.w", "-t", "w", "--partition", "0"}, "missing --offset"},
	} {
		code, out, errs := floe(t, append(c.args, loc...)...)
		if code != exitError || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || out != "" {
			t.Errorf("floe %v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", c.args, code, out, errs, c.want)
		}
	}
	// Offset 0 is an offset, not a missing one.
	out := mustFloe(t, append([]string{"where", "--table", "lake.w", "-t", "w", "--partition", "0", "--offset", "0"}, loc...)...)
	if !strings.Contains(out, "offset 0") {
		t.Fatalf("where offset 0:\n%s", out)
	}
	// A row's answer is its lines, not the same again as a sentence (a
	// new user's report).
	if strings.Contains(out, "is a row, committed by") {
		t.Errorf("where of a row repeats its lines in a sentence:\n%s", out)
	}
}

// TestInvalidTableNameIsInvalid: a table name no catalog can hold is
// reported as invalid, not as a table that does not exist, by every
// command that takes one.
func TestInvalidTableNameIsInvalid(t *testing.T) {
	_, loc := replayStack(t)
	for _, cmd := range [][]string{{"status"}, {"audit"}, {"maintain"}, {"where", "-t", "x", "--partition", "0", "--offset", "0"}, {"as-of", "--offsets", "x/0=1"}} {
		args := append(append(cmd, "--table", "lake.a/b"), loc...)
		code, _, errs := floe(t, args...)
		if code != exitError || !strings.Contains(errs, `invalid name part "a/b"`) || strings.Contains(errs, "does not exist") {
			t.Errorf("floe %s: exit %d, stderr %q; want the name reported invalid", cmd[0], code, errs)
		}
	}
}

// TestStatusJSONAndShortFlags: --json is the status report's JSON, as on
// every other command; the old --format json still prints the same, with
// a warning naming --json; -b
// and -t work where kcat users expect them.
func TestStatusJSONAndShortFlags(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	status := append([]string{"status", "-b", brokers, "--table", "lake.orders"}, loc...)
	js := mustFloe(t, append(status, "--json")...)
	var doc lookup.TableStatus
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Partitions) != 3 || doc.Partitions[0].Lag == nil || *doc.Partitions[0].Lag != 0 {
		t.Fatalf("status --json: %v\n%s", err, js)
	}
	if code, old, errs := floe(t, append(status, "--format", "json")...); code != 0 || old != js {
		t.Fatalf("status --format json: exit %d, differs from --json:\n%s\n%s\n%s", code, old, js, errs)
	} else if !strings.Contains(errs, "--format is deprecated and will be removed: use --json") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		// From a new-user run: the deprecation was in --help only.
		t.Errorf("status --format json's stderr %q, want one line saying it is deprecated for --json", errs)
	}
	if help := mustFloe(t, "status", "--help"); !strings.Contains(help, "deprecated, use --json") {
		t.Fatalf("status --help does not say --format is deprecated:\n%s", help)
	}
}

// TestVersion: the module version, the commit (or that there is none: the
// tests build with -buildvcs=false here), Go, iceberg-go and franz-go.
func TestVersion(t *testing.T) {
	text := mustFloe(t, "version")
	for _, want := range []string{"floe ", "commit ", "go          go1.", "iceberg-go  v", "franz-go    v"} {
		if !strings.Contains(text, want) {
			t.Errorf("floe version lacks %q:\n%s", want, text)
		}
	}
	var v versionInfo
	doc := mustFloe(t, "version", "--json")
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	// Every field is there in every build, the commit's too (from a
	// new-user run: a script reading .commit found no such key).
	var fields map[string]any
	if err := json.Unmarshal([]byte(doc), &fields); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"version", "commit", "modified", "commit_time", "go", "iceberg_go", "franz_go"} {
		if _, ok := fields[key]; !ok {
			t.Errorf("version --json lacks %q:\n%s", key, doc)
		}
	}
	if v.Version == "" || !strings.HasPrefix(v.Go, "go1.") || !strings.HasPrefix(v.IcebergGo, "v0.") || !strings.HasPrefix(v.FranzGo, "v1.") {
		t.Fatalf("version --json: %+v", v)
	}
	if v.Commit == "" && !strings.Contains(text, "unknown (built without VCS information)") {
		t.Fatalf("no commit, and the text does not say so:\n%s", text)
	}
	var none bytes.Buffer
	printVersion(&none, versionInfo{Version: "v1.2.3", Go: "go1.26"})
	if !strings.Contains(none.String(), "commit      unknown") || !strings.Contains(none.String(), "iceberg-go  (unknown)") {
		t.Fatalf("version without build information:\n%s", none.String())
	}
}

// TestJSONLogDurationsHaveUnits: slog's JSON handler writes durations as
// nanoseconds; floe's writes them with their unit.
func TestJSONLogDurationsHaveUnits(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	var buf bytes.Buffer
	if err := setupLogging(&buf, globalFlags{logLevel: "info", logFormat: "json"}); err != nil {
		t.Fatal(err)
	}
	slog.Info("committed", "write", 12*time.Millisecond, slog.Group("retry", "in", 1500*time.Millisecond))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["write"] != "12ms" || line["retry"].(map[string]any)["in"] != "1.5s" {
		t.Fatalf("durations in the JSON log: %s", buf.String())
	}
}

// TestLibraryLogAtWarn (from a review): what libraries print with the log
// package (iceberg-go's "Warning: Failed to delete old metadata file")
// came out at INFO.
func TestLibraryLogAtWarn(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	var buf bytes.Buffer
	if err := setupLogging(&buf, globalFlags{logLevel: "info", logFormat: "text"}); err != nil {
		t.Fatal(err)
	}
	log.Printf("Warning: Failed to delete old metadata file %s", "m.json")
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "m.json") {
		t.Fatalf("a library's log line: %q", buf.String())
	}
	// One for a file another writer deleted first is no warning (a new
	// user's report): at debug level.
	buf.Reset()
	log.Printf("Warning: Failed to delete old metadata file: %s error: %v", "s3://w/t/metadata/00001.metadata.json", "blob (key \"t/metadata/00001.metadata.json\") (code=NotFound): NoSuchKey")
	log.Printf("Warning: Failed to delete old metadata file: %s error: %v", "/w/t/metadata/00001.metadata.json", "remove /w/t/metadata/00001.metadata.json: no such file or directory")
	if buf.Len() != 0 {
		t.Fatalf("an already deleted metadata file warned: %q", buf.String())
	}
	if err := setupLogging(&buf, globalFlags{logLevel: "debug", logFormat: "json"}); err != nil {
		t.Fatal(err)
	}
	log.Printf("Warning: Failed to delete old metadata file: %s error: %v", "/w/t/m.json", "no such file or directory")
	if !strings.Contains(buf.String(), `"level":"DEBUG"`) {
		t.Fatalf("at --log-level debug: %q", buf.String())
	}
}

// TestJSONLogKeysOnce: a line whose logger already names the table does
// not name it again when a package given that logger does (a sink's lines
// carried table= twice); another table's name is kept. From a new-user
// run.
func TestJSONLogKeysOnce(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	var buf bytes.Buffer
	if err := setupLogging(&buf, globalFlags{logLevel: "info", logFormat: "json"}); err != nil {
		t.Fatal(err)
	}
	log := slog.Default().With("topic", "orders", "table", "lake.orders")
	log.Info("commit attempt failed", "table", "lake.orders", "attempt", 2)
	log.Info("dead letters", "table", "lake.orders_dlq")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || strings.Count(lines[0], `"table"`) != 1 || !strings.Contains(lines[0], `"attempt":2`) {
		t.Fatalf("the table named twice, or an attribute lost:\n%s", buf.String())
	}
	if !strings.Contains(lines[1], `"table":"lake.orders_dlq"`) {
		t.Fatalf("another table's name dropped:\n%s", buf.String())
	}
}

// TestExportedFileMode: as-of --output writes a file anyone may read, like
// any file a user asks for; --output alone writes the rows (it was refused
// without --rows).
func TestExportedFileMode(t *testing.T) {
	_, loc := whereStack(t)
	out := filepath.Join(t.TempDir(), "rows.csv")
	mustFloe(t, append([]string{"as-of", "--table", "lake.w", "--offsets", "w/0=5", "-o", out}, loc...)...)
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("%s: mode %v, want -rw-r--r--", out, fi.Mode())
	}
}

// TestMaintainJSON: floe maintain's report as JSON.
func TestMaintainJSON(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	js := mustFloe(t, append([]string{"maintain", "--table", "lake.orders", "--remove-orphans", "--dry-run", "--json"}, loc...)...)
	var doc map[string]any
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["table"] != "lake.orders" || doc["dry_run"] != true || doc["orphan_bytes"] != 0.0 || doc["archived"] != 0.0 || doc["orphans"] != nil {
		t.Fatalf("maintain --json:\n%s", js)
	}
}

// TestLocalstackPortHint: a port another process holds names the flag
// that picks another.
func TestLocalstackPortHint(t *testing.T) {
	// Every port is given: a stack on the default ports (a developer's)
	// must not decide which one is busy.
	free := func() string { return strconv.Itoa(freeTCPPort(t)) }
	l, _ := upOnFreePorts(t, localstack.UpOptions{Dir: t.TempDir()})
	defer l.Close()
	s3Port := strings.TrimPrefix(l.S3.Endpoint, "http://127.0.0.1:")
	code, _, errs := floe(t, "localstack", "up", "--dir", t.TempDir(), "--s3-port", s3Port, "--kafka-port", free(), "--schema-registry-port", free())
	if code != exitError || !strings.Contains(errs, "pick another port with --s3-port") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	// The broker's port and the registry's are named once each (from a
	// new-user run: the broker's was named twice).
	kafkaPort := strings.TrimPrefix(l.Brokers[0], "127.0.0.1:")
	registryPort := strings.TrimPrefix(l.Registry, "http://127.0.0.1:")
	for flag, args := range map[string][]string{
		"--kafka-port":           {"--kafka-port", kafkaPort, "--s3-port", free(), "--schema-registry-port", free()},
		"--schema-registry-port": {"--kafka-port", free(), "--s3-port", free(), "--schema-registry-port", registryPort},
	} {
		code, _, errs := floe(t, append([]string{"localstack", "up", "--dir", t.TempDir()}, args...)...)
		if code != exitError || strings.Count(errs, "pick another") != 1 || !strings.Contains(errs, "pick another port with "+flag) {
			t.Errorf("%s busy: exit %d, stderr %q", flag, code, errs)
		}
	}
}

// TestOnceHandlerUncomparable (from a review): a logger whose With set an
// attribute holding a slice (or a map, such as a mapping.Cut) and a record
// naming the same key with such a value: the line is written with both,
// where slog.Value.Equal's == on them panicked.
func TestOnceHandlerUncomparable(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(onceHandler{Handler: slog.NewJSONHandler(&buf, nil)})
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("logging panicked: %v", r)
		}
	}()
	l.With("partitions", []int32{0, 1}).Info("assigned", "partitions", []int32{2})
	if !strings.Contains(buf.String(), `"partitions":[2]`) {
		t.Fatalf("the record's partitions are lost: %s", buf.String())
	}
}

// counter is a LogValuer whose value changes between calls.
type counter struct{ n int }

func (c *counter) LogValue() slog.Value { c.n++; return slog.IntValue(c.n) }

// TestOnceHandlerLogValuer (from a review): a LogValuer given to With is
// resolved when With is called; the same LogValuer in a record is resolved
// when the line is written, to another value, which the line keeps (the
// handler compared the unresolved values and dropped it).
func TestOnceHandlerLogValuer(t *testing.T) {
	var buf bytes.Buffer
	c := &counter{}
	l := slog.New(onceHandler{Handler: slog.NewTextHandler(&buf, nil)}).With("n", c)
	l.Info("tick", "n", c)
	if !strings.Contains(buf.String(), "n=2") {
		t.Fatalf("the record's value of n (2) is dropped: %s", buf.String())
	}
}

// TestJSONLogError: with --log-format json (or FLOE_LOG_FORMAT) the line
// saying why a command failed is a JSON log record too, with the exit
// code; it was the one text line among JSON ones, which a log shipper
// drops (asked by operators).
func TestJSONLogError(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	code := run([]string{"audit", "--table", "lake.nope", "--log-format", "json"}, &stdout, &stderr)
	var rec struct {
		Level    string `json:"level"`
		Msg      string `json:"msg"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal(stderr.Bytes(), &rec); err != nil || code != exitError || rec.Level != "ERROR" ||
		rec.ExitCode != exitError || !strings.Contains(rec.Msg, "catalog not found") {
		t.Fatalf("exit %d, stderr %q (%v)", code, stderr.String(), err)
	}
	stderr.Reset()
	if code := run([]string{"audit", "--table", "lake.nope"}, &stdout, &stderr); code != exitError || !strings.HasPrefix(stderr.String(), "floe: catalog not found") {
		t.Fatalf("text: exit %d, stderr %q", code, stderr.String())
	}
}

// TestDidYouMeanOnce: floe's own flag suggestion ends in one question
// mark ("--table? (see --help)?" had two).
func TestDidYouMeanOnce(t *testing.T) {
	var stdout, stderr bytes.Buffer
	run([]string{"audit", "--tabel", "x"}, &stdout, &stderr)
	if got := strings.TrimSpace(stderr.String()); !strings.HasSuffix(got, "did you mean --table? (see --help)") {
		t.Fatalf("stderr %q", got)
	}
	// A config file's key too ("did you mean catalog??", from a new user).
	conf := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(conf, []byte("catalg: /x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	run([]string{"status", "--config", conf, "--table", "lake.t"}, &stdout, &stderr)
	if got := strings.TrimSpace(stderr.String()); !strings.HasSuffix(got, `unknown key "catalg"; did you mean catalog?`) {
		t.Fatalf("stderr %q", got)
	}
}
