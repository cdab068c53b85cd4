package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/browser"
	"github.com/floe-dev/floe/localstack"
)

// topicStack starts a local stack with an empty topic of one partition.
func topicStack(t *testing.T, topic string) *localstack.Stack {
	t.Helper()
	st, _, _ := partitionedStack(t, topic, 1)
	return st
}

// shopStack starts a local stack whose topic shop holds 10 JSON objects
// and one record that is not JSON, sinks it into lake.shop with --value
// json (so lake.shop_dlq exists, with one dead letter), and returns the
// stack and the sink arguments every run shares (brokers, catalog).
func shopStack(t *testing.T) (*localstack.Stack, []string) {
	t.Helper()
	ctx := t.Context()
	st := topicStack(t, "shop")
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "shop", Value: fmt.Appendf(nil, `{"sku":"s%d","qty":%d}`, i, i)})
	}
	recs = append(recs, &kgo.Record{Topic: "shop", Value: []byte("not json")})
	if err := localstack.Produce(ctx, st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	common := []string{"-b", strings.Join(st.Brokers, ","), "--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	code, out, errs := floe(t, append([]string{"sink", "-t", "shop", "--table", "lake.shop", "--value", "json", "--stop-at-end"}, common...)...)
	if code != 0 || !strings.Contains(out, "10 rows and 1 dead letter (into lake.shop_dlq)") {
		t.Fatalf("sink lake.shop: exit %d\n%s\n%s", code, out, errs)
	}
	return st, common
}

// catalogState is every table of namespace lake with its number of
// snapshots and its schema, to show that a refused run changed nothing.
func catalogState(t *testing.T, st *localstack.Stack) []string {
	t.Helper()
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for ident, err := range cat.ListTables(t.Context(), []string{"lake"}) {
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := cat.LoadTable(t.Context(), ident)
		if err != nil {
			t.Fatal(err)
		}
		var refs []string
		for name := range tbl.Metadata().Refs() {
			refs = append(refs, name)
		}
		slices.Sort(refs)
		out = append(out, fmt.Sprintf("%s: %d snapshots, refs %v, schema %s", strings.Join(ident, "."),
			len(tbl.Metadata().Snapshots()), refs, tbl.Schema()))
	}
	slices.Sort(out)
	return out
}

// refused runs floe with args and checks that it exits 2 with one line
// naming want, and that the catalog's tables are as they were.
func refused(t *testing.T, st *localstack.Stack, want string, args ...string) {
	t.Helper()
	before := catalogState(t, st)
	code, out, errs := floe(t, args...)
	if code != exitError || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %q", args, code, errs, want)
	}
	if strings.Contains(out, "rows") {
		t.Errorf("%v: a refused run printed a summary:\n%s", args, out)
	}
	if after := catalogState(t, st); !slices.Equal(before, after) {
		t.Errorf("%v: the refused run changed the catalog:\nbefore %q\nafter  %q", args, before, after)
	}
}

// TestSinkRefusesDeadLetterTable: floe sink and floe replay (into the
// table, or onto a branch of it) refuse a dead-letter table as the table
// they write rows into, exit 2 with one line, and change nothing.
func TestSinkRefusesDeadLetterTable(t *testing.T) {
	st, common := shopStack(t)
	want := "table lake.shop_dlq is the dead-letter table of lake.shop"
	refused(t, st, want, append([]string{"sink", "-t", "shop", "--table", "lake.shop_dlq", "--stop-at-end"}, common...)...)
	refused(t, st, want, append([]string{"sink", "-t", "shop", "--table", "lake.shop_dlq", "--stop-at-end", "--value", "json"}, common...)...)
	refused(t, st, want, append([]string{"replay", "-t", "shop", "--table", "lake.shop_dlq"}, common...)...)
	refused(t, st, want, append([]string{"replay", "-t", "shop", "--table", "lake.shop_dlq", "--branch", "rebuild"}, common...)...)
	// The audit of lake.shop still finds it complete.
	code, out, errs := floe(t, append([]string{"audit", "--table", "lake.shop"}, common...)...)
	if code != 0 {
		t.Fatalf("audit lake.shop: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestSinkChecksDeadLettersAndRegistryFirst: a run whose dead-letter table
// cannot be its table's, or whose schema registry does not answer as one,
// is refused before anything is created: exit 2, one line, and the
// catalog's tables as they were.
func TestSinkChecksDeadLettersAndRegistryFirst(t *testing.T) {
	st, common := shopStack(t)
	host := strings.TrimPrefix(st.Registry, "http://")
	for i, c := range []struct {
		name string
		args []string
		want string
	}{
		{"dlq is the table itself", []string{"--value", "json", "--dlq-table", "{T}"}, "--dlq-table {T} names the table itself"},
		{"dlq is another data table", []string{"--value", "json", "--dlq-table", "lake.shop"}, "table lake.shop exists and is not a dead-letter table"},
		{"dlq of another table", []string{"--value", "json", "--dlq-table", "lake.shop_dlq"}, "table lake.shop_dlq holds the dead letters of lake.shop, not of {T}"},
		{"unreachable registry", []string{"--value", "registry", "--schema-registry", "http://127.0.0.1:1"}, "schema registry http://127.0.0.1:1 unavailable"},
		{"not a registry", []string{"--value", "registry", "--schema-registry", st.Registry + "/nope"}, "HTTP 404 without a registry error code"},
		// It said HTTP 405 and nothing else (from a docs check).
		{"a registry path", []string{"--value", "registry", "--schema-registry", st.Registry + "/subjects"}, "HTTP 405 without a registry error code (is --schema-registry the registry's base URL?)"},
		{"https against http", []string{"--value", "registry", "--schema-registry", "https://" + host}, "the server does not speak TLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.want, "is not a dead-letter table") {
				// Not how to write records into it (from a new user).
				c.want += " (its columns are a data table's); name another one (--dlq-table)"
			}
			// Each case its own table: a table one refused run left
			// behind would refuse the next for another reason.
			for _, cmd := range [][]string{{"sink", "--stop-at-end"}, {"replay"}} {
				name := fmt.Sprintf("lake.%s%d", cmd[0], i)
				args := strings.Split(strings.ReplaceAll(strings.Join(c.args, "\x00"), "{T}", name), "\x00")
				want := strings.ReplaceAll(c.want, "{T}", name)
				refused(t, st, want, slices.Concat(cmd, []string{"-t", "shop", "--table", name, "--retry-for", "1s"}, common, args)...)
			}
		})
	}
	// Two topics under lake.{topic}, one's table the other's dead-letter table.
	for _, topic := range []string{"orders", "orders_dlq"} {
		if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	refused(t, st, "the dead-letter table of lake.orders, lake.orders_dlq, is the table of pipeline orders_dlq -> lake.orders_dlq",
		slices.Concat([]string{"sink", "-t", "orders", "-t", "orders_dlq", "--table", "lake.{topic}", "--value", "json", "--stop-at-end"}, common)...)
}

// TestSinkProtobufWithoutIndexes: Protobuf records framed as
// @kafkajs/confluent-schema-registry frames them (magic byte, schema ID,
// then the message, without Confluent's message-index array) are dead
// letters whose reason says what is wrong with the framing and the common
// cause; a record framed as Confluent's serializers frame it becomes a row.
func TestSinkProtobufWithoutIndexes(t *testing.T) {
	ctx := t.Context()
	st := topicStack(t, "pb")
	id, err := localstack.RegisterSchema(ctx, st.Registry, "pb-value", sr.Schema{Type: sr.TypeProtobuf,
		Schema: `syntax = "proto3"; package shop; message Order { int64 id = 1; string name = 2; }`})
	if err != nil {
		t.Fatal(err)
	}
	// Order{id: 7, name: "abc"}: field 1 varint 7, field 2 bytes "abc".
	msg := []byte{0x08, 0x07, 0x12, 0x03, 'a', 'b', 'c'}
	noIndexes := localstack.WireFormat(id, nil, msg) // what kafkajs writes: no array
	recs := []*kgo.Record{
		{Topic: "pb", Value: noIndexes},
		{Topic: "pb", Value: localstack.WireFormat(id, nil, nil)}, // an empty message, kafkajs-framed
		{Topic: "pb", Value: localstack.WireFormat(id, []int{0}, msg)},
		// Order{name: "bbbbbbbb"} read as indexes: 9 of them, [4 49 ...],
		// all positive, naming no message of the schema.
		{Topic: "pb", Value: localstack.WireFormat(id, nil, append([]byte{0x12, 0x08}, "bbbbbbbb"...))},
	}
	if err := localstack.Produce(ctx, st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	code, out, errs := floe(t, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "pb", "--table", "lake.pb", "--stop-at-end",
		"--value", "registry", "--schema-registry", st.Registry}, loc...)...)
	if code != 0 || !strings.Contains(out, "1 row and 3 dead letters") {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	// The text answer's range line counts the range's dead letters beside
	// its rows: "0 records" alone hid them.
	if out := mustFloe(t, append([]string{"where", "--table", "lake.pb", "-t", "pb", "--partition", "0", "--offset", "1"}, loc...)...); !strings.Contains(out, "range      [0, 4), 1 row, 3 dead letters\n") {
		t.Errorf("where offset 1: the range line does not count its row and its dead letters:\n%s", out)
	}
	for _, c := range []struct{ offset, want string }{
		{"0", "negative Protobuf message index -4"},
		{"1", "indexes are missing"},
		{"3", "message index 4 at depth 0"},
	} {
		code, out, errs := floe(t, append([]string{"where", "--table", "lake.pb", "-t", "pb", "--partition", "0", "--offset", c.offset, "--json"}, loc...)...)
		var w struct{ Kind, Reason string }
		if code != 0 || json.Unmarshal([]byte(out), &w) != nil || w.Kind != "dead_letter" {
			t.Fatalf("where offset %s: exit %d\n%s\n%s", c.offset, code, out, errs)
		}
		for _, want := range []string{c.want, "message-index array between the schema ID and the message", "@kafkajs/confluent-schema-registry", "insert 0x00"} {
			if !strings.Contains(w.Reason, want) {
				t.Errorf("offset %s: reason %q lacks %q", c.offset, w.Reason, want)
			}
		}
	}
}

// TestSinkOnlyDeadLettersFails: a --stop-at-end sink or a replay whose
// records all became dead letters (a layout that does not match the
// topic: --value registry on plain JSON, --key json on plain keys) exits 3
// with one line giving their number and the first reason; a run with rows
// beside its dead letters exits 0 (shopStack's). A live sink says so at
// WARN and on its status page, until a commit has rows again.
func TestSinkOnlyDeadLettersFails(t *testing.T) {
	st, common := shopStack(t)
	keyed := make([]*kgo.Record, 5)
	for i := range keyed {
		keyed[i] = &kgo.Record{Topic: "shop", Key: fmt.Appendf(nil, "k%d", i), Value: []byte(`{"sku":"x"}`)}
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"registry on plain JSON", []string{"sink", "--table", "lake.reg", "--stop-at-end", "--value", "registry", "--schema-registry", st.Registry},
			"lake.reg: 0 rows and 11 dead letters (into lake.reg_dlq): no record became a row; check that --value, --key and --schema-registry match how the topic's records are written (a table keeps the layout it was created with: sink into a new table, or remove this one with floe drop --table lake.reg, which lists what it drops); first: shop/0 offset 0: not in the schema registry wire format: the first byte is 0x7b"},
		{"replay, registry on plain JSON", []string{"replay", "--table", "lake.rereg", "--value", "registry", "--schema-registry", st.Registry},
			"lake.rereg: 0 rows and 11 dead letters (into lake.rereg_dlq): no record became a row"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := floe(t, slices.Concat(c.args, []string{"-t", "shop"}, common)...)
			// The log lines come before; the error is the one line floe: ...
			last := errs[strings.LastIndex(strings.TrimSpace(errs), "\n")+1:]
			if code != exitOnlyDeadLetters || !strings.HasPrefix(last, "floe: ") || !strings.Contains(last, c.want) {
				t.Errorf("exit %d, stderr %q; want exit 3 and a last line naming %q", code, errs, c.want)
			}
			if !strings.Contains(out, "0 rows and 11 dead letters") {
				t.Errorf("summary %q", out)
			}
			// floe status says so of the table whose last records were
			// all dead letters, and not of lake.shop, which has rows
			// beside its one.
			loc := common[2:] // without -b: the table's side only
			for table, want := range map[string]bool{c.args[2]: true, "lake.shop": false} {
				code, out, errs := floe(t, slices.Concat([]string{"status", "--table", table}, loc)...)
				got := strings.Contains(out, "warning: the last records committed of shop/0 were all dead letters, none became a row")
				if code != 0 || got != want {
					t.Errorf("status %s: exit %d, warning %v, want %v\n%s\n%s", table, code, got, want, out, errs)
				}
			}
		})
	}
	// A broker given as a URL is a usage error: floe status prints no
	// table side first, as it does for brokers that fail (from a new-user
	// run).
	code, out, errs := floe(t, slices.Concat([]string{"status", "--table", "lake.shop", "-b", "kafka://" + st.Brokers[0]}, common[2:])...)
	if code != exitError || out != "" || !strings.Contains(errs, "without a URL scheme") {
		t.Errorf("status with a kafka:// broker: exit %d, stdout %q, stderr %q; want exit 2 and the usage error alone", code, out, errs)
	}
	t.Run("json keys on plain keys", func(t *testing.T) {
		if err := localstack.CreateTopic(t.Context(), st.Brokers, "keyed", 1, nil); err != nil {
			t.Fatal(err)
		}
		for _, r := range keyed {
			r.Topic = "keyed"
		}
		if err := localstack.Produce(t.Context(), st.Brokers, keyed); err != nil {
			t.Fatal(err)
		}
		code, _, errs := floe(t, slices.Concat([]string{"sink", "-t", "keyed", "--table", "lake.keyed", "--stop-at-end", "--value", "json", "--key", "json"}, common)...)
		if want := "lake.keyed: 0 rows and 5 dead letters (into lake.keyed_dlq)"; code != exitOnlyDeadLetters || !strings.Contains(errs, want) || !strings.Contains(errs, "first: keyed/0 offset 0: ") {
			t.Errorf("exit %d, stderr %q; want exit 3 naming %q", code, errs, want)
		}
		// Run again with the right --key: the table keeps its layout, and
		// as it holds no rows the refusal says it can be dropped (from a
		// new-user run); dropped, the next run creates it anew.
		right := slices.Concat([]string{"sink", "-t", "keyed", "--table", "lake.keyed", "--stop-at-end", "--value", "json", "--key", "string"}, common)
		code, _, errs = floe(t, right...)
		if code != 2 || !strings.Contains(errs, "keeps its keys as json, not string") || !strings.Contains(errs, "it holds no rows: floe drop --table lake.keyed --yes") {
			t.Errorf("the run with the right --key: exit %d, stderr %q; want the refusal naming floe drop", code, errs)
		}
		if code, out, errs := floe(t, slices.Concat([]string{"drop", "--table", "lake.keyed", "--yes"}, common[2:])...); code != 0 {
			t.Fatalf("drop: exit %d\n%s\n%s", code, out, errs)
		}
		if code, out, errs := floe(t, right...); code != 0 || !strings.Contains(out, "5 rows") {
			t.Errorf("the run with the right --key after the drop: exit %d\n%s\n%s", code, out, errs)
		}
		// --json prints the summary as JSON and exits 3 all the same.
		code, out, errs := floe(t, slices.Concat([]string{"sink", "-t", "keyed", "--table", "lake.keyed_json", "--stop-at-end", "--value", "json", "--key", "json", "--json"}, common)...)
		if code != exitOnlyDeadLetters || !strings.Contains(out, `"dead_letters":5`) {
			t.Errorf("--json: exit %d, stdout %q, stderr %q; want exit 3 and the summary", code, out, errs)
		}
	})

	// A batch whose only record conflicts with the table's column type
	// decoded fine: the advice is not about --value (from a new-user run).
	// The table holds rows of earlier runs, so its layout fits the topic:
	// the run exits 0 with the warning, and no advice to drop the table
	// (from a new-user run, whose cron job failed on one bad record).
	t.Run("schema conflict", func(t *testing.T) {
		if err := localstack.CreateTopic(t.Context(), st.Brokers, "conf", 1, nil); err != nil {
			t.Fatal(err)
		}
		sink := slices.Concat([]string{"sink", "-t", "conf", "--table", "lake.conf", "--stop-at-end", "--value", "json"}, common)
		for i, v := range []string{`{"n":1}`, `{"n":"one"}`} {
			if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "conf", Value: []byte(v)}}); err != nil {
				t.Fatal(err)
			}
			code, _, errs := floe(t, sink...)
			if i == 0 {
				if code != 0 {
					t.Fatalf("first sink: exit %d\n%s", code, errs)
				}
				continue
			}
			if code != 0 || !strings.Contains(errs, "conflicts with the table's column") || strings.Contains(errs, "check that --value") || strings.Contains(errs, "floe drop") {
				t.Errorf("exit %d, stderr %q; want exit 0 with the schema conflict's advice, and no floe drop", code, errs)
			}
		}
	})

	t.Run("live", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan string, 1)
		go func() {
			_, errs, _ := floeCtx(ctx, slices.Concat([]string{"sink", "-t", "shop", "--table", "lake.live", "--value", "registry", "--schema-registry", st.Registry,
				"--flush-interval", "100ms", "--metrics-addr", addr}, common)...)
			done <- errs
		}()
		warning := func() string {
			resp, err := http.Get("http://" + addr + "/status.json")
			if err != nil {
				return ""
			}
			defer resp.Body.Close()
			var page struct{ Pipelines []struct{ Warning string } }
			if json.NewDecoder(resp.Body).Decode(&page) != nil || len(page.Pipelines) != 1 {
				return ""
			}
			return page.Pipelines[0].Warning
		}
		waitFor(t, time.Minute, "the status page's warning", func() bool { return warning() != "" })
		if w := warning(); !strings.Contains(w, "every record of the last commit is a dead letter (11); first: shop/0 offset 0: not in the schema registry wire format") {
			t.Errorf("status page warning %q", w)
		}
		// The page shows it as a person sees it.
		page := browser.New(t, time.Minute)
		if err := chromedp.Do(page, chromedp.Navigate("http://"+addr+"/")); err != nil {
			t.Fatal(err)
		}
		shown, err := chromedp.Run(page, chromedp.Poll[string](`document.querySelector('[data-field=warning]')?.textContent`, chromedp.WithPollingTimeout(30*time.Second)))
		if err != nil || !strings.Contains(shown, "every record of the last commit is a dead letter (11)") {
			t.Errorf("the page shows warning %q (%v)", shown, err)
		}
		// A commit with a row clears it.
		id, err := localstack.RegisterSchema(t.Context(), st.Registry, "shop-value", sr.Schema{Schema: `{"type":"record","name":"r","fields":[{"name":"sku","type":"string"}]}`})
		if err != nil {
			t.Fatal(err)
		}
		if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "shop", Value: localstack.WireFormat(id, nil, []byte{0x02, 'a'})}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "a commit with a row to clear the warning", func() bool { return warning() == "" })
		cancel()
		errs := <-done
		if !regexp.MustCompile(`level=WARN msg="every record of this commit is a dead letter: [^"]*" [^\n]*dead_letters=11 [^\n]*first="shop/0 offset 0: not in the schema registry wire format`).MatchString(errs) {
			t.Errorf("no WARN with the first dead letter:\n%s", errs)
		}
	})
}
