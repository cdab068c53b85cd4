package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/browser"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// runInBackground runs the CLI until the test cancels it (as SIGINT does)
// and waits for it in t.Cleanup; the returned func cancels and waits, and
// returns the command's error.
func runInBackground(t *testing.T, args ...string) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var (
		wg  sync.WaitGroup
		err error
	)
	wg.Go(func() { _, _, err = floeCtx(ctx, args...) })
	stop = func() error {
		cancel()
		wg.Wait()
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// eventsTo makes n demo events for one partition of topic.
func eventsTo(topic string, partition int32, n int) []*kgo.Record {
	recs := localstack.DemoEvents(topic, 1, n, time.Now().Add(-time.Minute), uint64(partition)+9)
	for _, r := range recs {
		r.Partition = partition
	}
	return recs
}

// waitHTTP waits until url answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	waitFor(t, time.Minute, url, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// cell is a JavaScript expression: the text of a field of a partition's
// row on the status page.
func cell(partition, field string) string {
	return fmt.Sprintf(`document.querySelector('tr[data-partition=%q] td[data-field=%q]')?.textContent`, partition, field)
}

// waitCell waits until the page shows want in the field of the partition's
// row, without reloading it: the page refreshes itself.
func waitCell(t *testing.T, ctx context.Context, partition, field, want string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf("%s === %q", cell(partition, field), want),
		chromedp.WithPollingTimeout(45*time.Second))); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('pipelines').innerText`))
		t.Fatalf("the status page never showed %s %s = %s: %v\npage:\n%s", partition, field, want, err, got)
	}
}

// openStatusPage loads the status page served on addr in headless
// Chromium, and returns its tab once it shows that the table has all of
// partition orders/0 (a next offset, no lag).
func openStatusPage(t *testing.T, addr string) context.Context {
	t.Helper()
	waitHTTP(t, "http://"+addr+"/status.json")
	ctx := browser.New(t, 2*time.Minute)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatal(err)
	}
	waitCell(t, ctx, "orders/0", "lag", "0")
	next, err := chromedp.Run(ctx, chromedp.Evaluate[string](cell("orders/0", "next")))
	if err != nil || next == "" || next == "-" || next == "0" {
		t.Fatalf("orders/0 next offset %q (%v)", next, err)
	}
	return ctx
}

// TestStatusServePage: floe status --serve serves the live page of a table
// without a running sink; loaded once in headless Chromium, it shows the
// lag grow as records are produced, refreshing itself.
func TestStatusServePage(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	runInBackground(t, append([]string{"status", "-b", brokers, "--table", "lake.orders", "--serve", addr}, loc...)...)
	ctx := openStatusPage(t, addr)
	if err := localstack.Produce(t.Context(), st.Brokers, eventsTo("orders", 0, 50)); err != nil {
		t.Fatal(err)
	}
	waitCell(t, ctx, "orders/0", "lag", "50")
	waitCell(t, ctx, "orders/1", "lag", "0")
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-field=state]').textContent + ' ' + !!document.querySelector('[data-field=commits]')`))
	if err != nil || state != "table view false" {
		t.Errorf("state and commits shown: %q (%v); want the table view (no sink in this process: a sink elsewhere may be running) and no commit count", state, err)
	}
	// The snapshot id is shown as status.json has it, all 64 bits (a
	// JavaScript number would round it to another id).
	var doc struct {
		Pipelines []struct {
			SnapshotID json.Number `json:"snapshot_id"`
		} `json:"pipelines"`
	}
	if err := getStatusJSON(addr, &doc); err != nil || len(doc.Pipelines) != 1 {
		t.Fatalf("status.json: %+v (%v)", doc, err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-field=snapshot]').textContent`))
	if err != nil || shown != doc.Pipelines[0].SnapshotID.String() {
		t.Errorf("the page shows snapshot %q (%v); status.json has %s", shown, err, doc.Pipelines[0].SnapshotID)
	}
	browser.Screenshot(t, ctx, "status-table.png")
}

// TestSinkStatusPage: floe sink --metrics-addr serves the live page of its
// pipeline; loaded once in headless Chromium, it shows the commit, then the
// lag of records produced and consumed but not yet committed.
func TestSinkStatusPage(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	// The first flush holds the 300 events; the ones produced later stay
	// below --flush-records and --flush-interval, so they lag until the
	// sink stops.
	stop := runInBackground(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders",
		"--metrics-addr", addr, "--lag-interval", "200ms", "--flush-records", "300", "--flush-interval", "1h"}, loc...)...)
	ctx := openStatusPage(t, addr)
	if err := localstack.Produce(t.Context(), st.Brokers, eventsTo("orders", 1, 30)); err != nil {
		t.Fatal(err)
	}
	waitCell(t, ctx, "orders/1", "lag", "30")
	waitCell(t, ctx, "orders/0", "lag", "0")
	facts, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll('section.pipeline .facts [data-field]')].map(e => [e.dataset.field, e.textContent]))`))
	if err != nil {
		t.Fatal(err)
	}
	// A commit of the partitions' starts, then the flush of the 300 events.
	if facts["commits"] != "2" || facts["fenced"] != "0" || facts["dead-letters"] != "0" || !strings.HasSuffix(facts["last-commit-age"], " s ago") {
		t.Errorf("pipeline facts %v", facts)
	}
	// The sink's own last commit, not the table's (from a new-user run).
	label, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-field=last-commit-age]').previousSibling.textContent`))
	if err != nil || strings.TrimSpace(label) != "last commit by this sink" {
		t.Errorf("the last commit's label is %q (%v)", label, err)
	}
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-field=state]').textContent`))
	if err != nil || state != "running" {
		t.Errorf("state %q (%v)", state, err)
	}
	browser.Screenshot(t, ctx, "status-sink.png")
	if err := stop(); err != nil {
		t.Fatalf("sink: %v", err)
	}
}

// TestStatusPageUpsertTable: for an upsert table, the live page of floe
// sink --mode upsert --metrics-addr, and then the page of floe status
// --serve for the same table, loaded in headless Chromium, name the
// table's mode and key columns and show per partition the upserts,
// deletes and skipped records its ledger counts.
func TestStatusPageUpsertTable(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "customers"
	produceKeyed(t, st, topic) // 2 partitions: updates, tombstones, records without a key
	brokers := strings.Join(st.Brokers, ",")
	check := func(ctx context.Context, page string) {
		t.Helper()
		waitCell(t, ctx, topic+"/0", "lag", "0")
		waitCell(t, ctx, topic+"/1", "lag", "0")
		tbl := openFloeTable(t, st, "lake.customers")
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range l.Partitions() {
			c := mapping.Cover(l.Ranges(tp))
			if c.Deletes == 0 {
				t.Fatalf("%s: no delete in the ledger %+v", tp, c)
			}
			name := fmt.Sprintf("%s/%d", tp.Topic, tp.Partition)
			waitCell(t, ctx, name, "upserts", fmt.Sprint(c.Records))
			waitCell(t, ctx, name, "deletes", fmt.Sprint(c.Deletes))
			waitCell(t, ctx, name, "skipped", fmt.Sprint(c.Skipped))
		}
		mode, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('section.pipeline .facts [data-field=mode]').textContent`))
		if err != nil || mode != "upsert keyed by kafka_key" {
			t.Errorf("%s: mode %q (%v)", page, mode, err)
		}
		browser.Screenshot(t, ctx, page)
	}

	addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	stop := runInBackground(t, append([]string{"sink", "-b", brokers, "-t", topic, "--table", "lake.customers", "--mode", "upsert", "--key", "string",
		"--metrics-addr", addr, "--lag-interval", "200ms", "--flush-records", "100", "--flush-interval", "200ms"}, loc...)...)
	waitHTTP(t, "http://"+addr+"/status.json")
	ctx := browser.New(t, 2*time.Minute)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatal(err)
	}
	check(ctx, "status-sink-upsert.png")
	if err := stop(); err != nil {
		t.Fatalf("sink: %v", err)
	}

	addr = fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	runInBackground(t, append([]string{"status", "-b", brokers, "--table", "lake.customers", "--serve", addr}, loc...)...)
	waitHTTP(t, "http://"+addr+"/status.json")
	ctx = browser.New(t, 2*time.Minute)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatal(err)
	}
	check(ctx, "status-table-upsert.png")
}

// TestStatusServePageShowsRefs: the page of floe status --serve lists the
// table's branches and tags as floe status --table does (it showed main's
// head only): the branch of a published replay and the tag --tag-main gave
// main's history, with its snapshot id whole.
func TestStatusServePageShowsRefs(t *testing.T) {
	st, loc, before := publishedReplay(t)
	brokers := strings.Join(st.Brokers, ",")
	addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	runInBackground(t, append([]string{"status", "-b", brokers, "--table", "lake.orders", "--serve", addr}, loc...)...)
	ctx := openStatusPage(t, addr)
	checkRefs(t, ctx, before)
}

// TestSinkStatusPageShowsRefs: the page of a running floe sink
// --metrics-addr lists its table's branches and tags as floe status
// --serve's does (it showed none), and a branch made while it runs.
func TestSinkStatusPageShowsRefs(t *testing.T) {
	st, loc, before := publishedReplay(t)
	brokers := strings.Join(st.Brokers, ",")
	addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	runInBackground(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders",
		"--metrics-addr", addr, "--lag-interval", "200ms"}, loc...)...)
	ctx := openStatusPage(t, addr)
	checkRefs(t, ctx, before)
	mustFloe(t, append([]string{"replay", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--branch", "later"}, loc...)...)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(document.querySelector('[data-field=refs] [data-ref="later"]')?.textContent ?? '').startsWith('later (branch, snapshot ')`,
		chromedp.WithPollingTimeout(45*time.Second))); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('pipelines').innerText`))
		t.Fatalf("the page never showed the branch made while the sink runs: %v\npage:\n%s", err, got)
	}
	// status.json has them as floe status --json does.
	var doc struct {
		Pipelines []struct {
			Refs []struct {
				Name       string      `json:"name"`
				Type       string      `json:"type"`
				SnapshotID json.Number `json:"snapshot_id"`
			} `json:"refs"`
		} `json:"pipelines"`
	}
	if err := getStatusJSON(addr, &doc); err != nil || len(doc.Pipelines) != 1 {
		t.Fatalf("status.json: %+v (%v)", doc, err)
	}
	var refs []string
	for _, r := range doc.Pipelines[0].Refs {
		refs = append(refs, r.Name+" "+r.Type)
	}
	if got, want := strings.Join(refs, ", "), "later branch, rebuild branch, before-rebuild tag"; got != want {
		t.Errorf("status.json's refs: %s; want %s", got, want)
	}
	if r := doc.Pipelines[0].Refs; len(r) == 3 && r[2].SnapshotID.String() != fmt.Sprint(before) {
		t.Errorf("status.json's tag names snapshot %s; want %d", r[2].SnapshotID, before)
	}
}

// publishedReplay sinks orders into lake.orders, then publishes a replay of
// it on branch rebuild, tagging main's history before-rebuild: a table
// with a branch and a tag. It returns main's head before the replay.
func publishedReplay(t *testing.T) (*localstack.Stack, []string, int64) {
	t.Helper()
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	before := foreignTable(t, st.Catalog(), "lake.orders").CurrentSnapshot().SnapshotID
	mustFloe(t, append([]string{"replay", "-b", brokers, "-t", "orders", "--table", "lake.orders",
		"--branch", "rebuild", "--publish", "--publish-different", "--tag-main", "before-rebuild"}, loc...)...)
	return st, loc, before
}

// checkRefs checks that the status page in ctx lists the branch and tag
// of publishedReplay, the tag at snapshot before.
func checkRefs(t *testing.T, ctx context.Context, before int64) {
	t.Helper()
	ref := func(name string) string {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('[data-field=refs] [data-ref=%q]')?.textContent ?? ''`, name)))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got, want := ref("before-rebuild"), fmt.Sprintf("before-rebuild (tag, snapshot %d, committed ", before); !strings.HasPrefix(got, want) {
		t.Errorf("the page shows the tag as %q; want %q...", got, want)
	}
	if got := ref("rebuild"); !strings.HasPrefix(got, "rebuild (branch, snapshot ") {
		t.Errorf("the page shows the branch as %q", got)
	}
}

// getStatusJSON decodes the status.json a status page at addr serves into
// doc, numbers as json.Number (a snapshot id is 64 bits).
func getStatusJSON(addr string, doc any) error {
	resp, err := http.Get("http://" + addr + "/status.json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	return dec.Decode(doc)
}

// TestStatusPageBrokersSideUnknown (from a new user's run of floe status):
// the status page showed "-" in log start, end offset, lag and lost where
// the brokers' side is not known, as floe status did before it said "?",
// and "-" in lost means none; status.json left lost out alike for none and
// for unknown. The page says "?" there and status.json brokers_unknown;
// with the brokers, numbers, "-" in lost, and no brokers_unknown.
func TestStatusPageBrokersSideUnknown(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	type doc struct {
		Pipelines []struct {
			Partitions []map[string]any `json:"partitions"`
		} `json:"pipelines"`
	}
	serve := func(brokers string) string {
		addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
		runInBackground(t, append([]string{"status", "--brokers", brokers, "--table", "lake.orders", "--serve", addr}, loc...)...)
		waitHTTP(t, "http://"+addr+"/status.json")
		return addr
	}
	shown := func(ctx context.Context) string {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("[%s, %s, %s, %s].join(' ')",
			cell("orders/0", "log-start"), cell("orders/0", "end-offset"), cell("orders/0", "lag"), cell("orders/0", "lost"))))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	unknown := serve("")
	var d doc
	if err := getStatusJSON(unknown, &d); err != nil || len(d.Pipelines) != 1 || len(d.Pipelines[0].Partitions) != 3 {
		t.Fatalf("status.json without brokers: %+v (%v)", d, err)
	}
	for _, p := range d.Pipelines[0].Partitions {
		if p["brokers_unknown"] != true {
			t.Errorf("status.json without brokers: partition %v, want brokers_unknown true", p)
		}
	}
	ctx := browser.New(t, 2*time.Minute)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+unknown+"/")); err != nil {
		t.Fatal(err)
	}
	waitCell(t, ctx, "orders/0", "lost", "?")
	if got := shown(ctx); got != "? ? ? ?" {
		t.Errorf("without brokers the page shows log start, end offset, lag and lost %q, want \"? ? ? ?\"", got)
	}

	known := serve(brokers)
	d = doc{}
	if err := getStatusJSON(known, &d); err != nil || len(d.Pipelines) != 1 || len(d.Pipelines[0].Partitions) != 3 {
		t.Fatalf("status.json with brokers: %+v (%v)", d, err)
	}
	for _, p := range d.Pipelines[0].Partitions {
		if _, ok := p["brokers_unknown"]; ok {
			t.Errorf("status.json with brokers: partition %v, want no brokers_unknown", p)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+known+"/")); err != nil {
		t.Fatal(err)
	}
	waitCell(t, ctx, "orders/0", "lag", "0")
	if got := shown(ctx); !regexp.MustCompile(`^0 [1-9][0-9]* 0 -$`).MatchString(got) {
		t.Errorf("with brokers the page shows log start, end offset, lag and lost %q, want 0, the end offset, 0 and -", got)
	}
}
