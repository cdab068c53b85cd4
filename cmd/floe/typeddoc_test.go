package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
)

// TestTypedTablesRecipeOneRecordPerID (from a new-user run): the recipe of
// docs/typed-tables.md that frames a JSON value in the registry's wire
// format piped printf's bytes into kcat -P, which cuts its input at every
// newline: when the registry answered schema id 10, the newline byte, the
// record went out as two (4 bytes, "too short for the 5-byte header", and
// the JSON), both dead letters. The recipe's produce lines, run with the
// ids 1, 10 and 255 (floe produce on PATH, as a user runs them), make one
// record each: the magic byte, the id in four bytes, the JSON.
func TestTypedTablesRecipeOneRecordPerID(t *testing.T) {
	var recipe string
	for _, b := range docBlocks(t, "docs/typed-tables.md", "") {
		if strings.Contains(b, "printf %o") {
			recipe = b
		}
	}
	if recipe == "" {
		t.Fatalf("docs/typed-tables.md has no block framing a value with printf %%o")
	}
	// The lines after the registration (whose answer is the id given
	// here) and before the sink.
	var produce []string
	for _, l := range strings.Split(recipe, "\n") {
		if strings.HasPrefix(l, "floe sink") {
			break
		}
		if strings.HasPrefix(l, "id=") || strings.HasPrefix(l, " ") || produce == nil && !strings.HasPrefix(l, "printf") {
			continue
		}
		produce = append(produce, l)
	}
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(), Kfake: []kfake.Opt{kfake.AllowAutoTopicCreation()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	bin := buildFloe(t)
	want := map[string]bool{}
	for _, id := range []int{1, 10, 255} {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", fmt.Sprintf("id=%d\n%s", id, strings.Join(produce, "\n")))
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "FLOE_BROKERS="+strings.Join(st.Brokers, ","))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("id %d: the recipe's produce lines %q: %v\n%s", id, produce, err, b)
		}
		want[string(append([]byte{0, 0, 0, 0, byte(id)}, `{"id":1,"amount":2.5}`...))] = true
	}
	recs := consumeAll(t, st.Brokers, "payments", 3)
	if len(recs) != 3 {
		t.Fatalf("the recipe run with 3 ids produced %d records, want 3", len(recs))
	}
	for _, r := range recs {
		if !want[string(r.Value)] {
			t.Errorf("record %q is none of the three framed values", r.Value)
		}
		delete(want, string(r.Value))
	}
}

// TestTypedTablesFirstExampleRuns (from a new-user run): the first
// command of docs/typed-tables.md sank a topic nothing had produced to
// (topic "shipments" does not exist). Its first block, run as written on a
// local stack (bash with floe on PATH and FLOE_BROKERS, floe sink in-process with the stack's
// catalog; topics created on first use, as floe localstack up's are),
// produces the topic and sinks it.
func TestTypedTablesFirstExampleRuns(t *testing.T) {
	blocks := docBlocks(t, "docs/typed-tables.md", "")
	bin := buildFloe(t)
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(), Kfake: []kfake.Opt{kfake.AllowAutoTopicCreation()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	// As the stack's env.sh sets them.
	t.Setenv("FLOE_BROKERS", strings.Join(st.Brokers, ","))
	t.Setenv("FLOE_SCHEMA_REGISTRY", st.Registry)
	cfg := st.Catalog()
	for _, line := range strings.Split(strings.TrimSpace(blocks[0]), "\n") {
		if args, ok := strings.CutPrefix(line, "floe "); ok {
			if code, out, errs := floe(t, append(strings.Fields(args), "--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse)...); code != 0 {
				t.Fatalf("%s: exit %d\n%s\n%s", line, code, out, errs)
			}
			continue
		}
		sh := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", line)
		sh.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
}

// TestTypedTablesAvroRecipeRuns (from a new-user run): docs/typed-tables.md
// said Avro needed a client library to produce on the local stack, which
// left a user without one no way to try --value registry with Avro. Its
// recipe of an Avro record written by hand, run as written on a local
// stack (bash with curl and floe produce, floe sink in-process with the stack's
// catalog), registers the schema, produces one record and sinks it into a
// row whose columns hold the record's fields, with no dead letter.
func TestTypedTablesAvroRecipeRuns(t *testing.T) {
	testenv.Tool(t, "curl", "apt-get install curl")
	var recipe string
	for _, b := range docBlocks(t, "docs/typed-tables.md", "") {
		if strings.Contains(b, "clicks-value") {
			recipe = b
		}
	}
	if recipe == "" {
		t.Fatal("docs/typed-tables.md has no block producing an Avro record by hand (clicks-value)")
	}
	script, sink, ok := strings.Cut(recipe, "\nfloe sink ")
	if !ok {
		t.Fatalf("the Avro recipe has no floe line:\n%s", recipe)
	}
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(), Kfake: []kfake.Opt{kfake.AllowAutoTopicCreation()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	// As the stack's env.sh sets them.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(buildFloe(t))+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FLOE_BROKERS="+strings.Join(st.Brokers, ","), "FLOE_SCHEMA_REGISTRY="+st.Registry)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the recipe's lines before floe sink: %v\n%s", err, out)
	}
	cfg := st.Catalog()
	loc := []string{"--brokers", strings.Join(st.Brokers, ","), "--schema-registry", st.Registry, "--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	code, out, errs := floe(t, append(append([]string{"sink"}, strings.Fields(strings.TrimSpace(sink))...), loc...)...)
	if code != 0 || !strings.Contains(out, "1 row in") || strings.Contains(out, "dead letter") {
		t.Fatalf("floe sink %s: exit %d, want one row and no dead letter\n%s\n%s", strings.TrimSpace(sink), code, out, errs)
	}
	rows := mustFloe(t, "as-of", "--table", "lake.clicks", "--time", "now", "--rows", "--catalog", cfg.Catalog)
	if !strings.Contains(rows, `"id":1,`) || !strings.Contains(rows, `"page":"home"`) {
		t.Errorf("the row of the recipe's record:\n%s", rows)
	}
}
