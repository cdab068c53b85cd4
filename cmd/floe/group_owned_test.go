package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/chromedp/chromedp"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/browser"
	"github.com/floe-dev/floe/internal/statuspage"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

// TestGroupMembersSayWhatTheyOwn (F3, from an operator's run): every
// member's /metrics, /status.json and status page showed all the table's
// partitions and nothing said which were its own (only a log line), and
// its exit summary listed every partition's next offset as if its own,
// the others' as it had last read them (stale). Now each member's
// floe_partition_assigned is 1 for its partitions and 0 for the others',
// /status.json names its group and assigned partitions, and the summary
// lists its own partitions apart from the others', which it says are as
// last read.
func TestGroupMembersSayWhatTheyOwn(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	members := startGroupMembers(t, brokers, loc, 2)
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	produced := int64(300) // sinkStack's
	produceAll := func(n int) map[int32]int64 {
		t.Helper()
		for p := range int32(3) {
			if err := localstack.Produce(t.Context(), st.Brokers, eventsTo("orders", p, n)); err != nil {
				t.Fatal(err)
			}
		}
		produced += int64(3 * n)
		var next map[int32]int64
		waitFor(t, time.Minute, "the table to take every record", func() bool {
			next = tableNextOffsets(t, cat)
			sum := int64(0)
			for _, v := range next {
				sum += v
			}
			return sum == produced
		})
		return next
	}
	want := produceAll(30)

	// Each partition is assigned to one member, and each member's
	// metrics and status document agree.
	var owned [2][]int32
	ok := waitForOK(time.Minute, func() bool {
		count := map[int32]int{}
		for i, m := range members {
			gauge := memberAssignedGauge(m.addr)
			doc := memberStatus(m.addr)
			if len(gauge) != 3 || doc == nil || doc.Group != "g" {
				return false
			}
			var ones []int32
			for p, v := range gauge {
				if v == 1 {
					ones = append(ones, p)
					count[p]++
				}
			}
			slices.Sort(ones)
			if !slices.Equal(ones, doc.Assigned) || len(ones) == 0 {
				return false
			}
			owned[i] = ones
		}
		return len(count) == 3 && count[0] == 1 && count[1] == 1 && count[2] == 1
	})
	if !ok {
		t.Fatalf("each partition assigned to one member in floe_partition_assigned and /status.json: member 0 %v %+v, member 1 %v %+v",
			memberAssignedGauge(members[0].addr), memberStatus(members[0].addr), memberAssignedGauge(members[1].addr), memberStatus(members[1].addr))
	}

	// The status page marks them too (skipped without Chromium).
	t.Run("page", func(t *testing.T) {
		ctx := browser.New(t, 2*time.Minute)
		if err := chromedp.Do(ctx, chromedp.Navigate("http://"+members[0].addr+"/")); err != nil {
			t.Fatal(err)
		}
		var mine []string
		for p := range int32(3) {
			want := "another member"
			if slices.Contains(owned[0], p) {
				want = "this member"
				mine = append(mine, fmt.Sprintf("orders/%d", p))
			}
			waitCell(t, ctx, fmt.Sprintf("orders/%d", p), "owner", want)
		}
		fact, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.facts [data-field=assigned]')?.textContent`))
		if err != nil || fact != strings.Join(mine, ", ") {
			t.Errorf("the page says this member sinks %q (%v); want %q", fact, err, strings.Join(mine, ", "))
		}
	})

	// Member 0 stops; member 1 takes every partition and sinks more.
	members[0].stop()
	if !waitForOK(time.Minute, func() bool {
		doc := memberStatus(members[1].addr)
		return doc != nil && slices.Equal(doc.Assigned, []int32{0, 1, 2})
	}) {
		t.Fatalf("member 1 after member 0 left: %+v; want every partition assigned", memberStatus(members[1].addr))
	}
	final := produceAll(20)
	members[1].stop()

	for i, m := range members {
		if m.err != nil {
			t.Fatalf("member %d: %v\n%s", i, m.err, m.out)
		}
	}
	// Member 0's own partitions, and the others' as it last read them.
	own, others := memberSummaryNext(members[0].out)
	if !slices.Equal(slices.Sorted(maps.Keys(own)), owned[0]) {
		t.Errorf("member 0's summary gives %v as its own; it owned %v:\n%s", own, owned[0], members[0].out)
	}
	for p, n := range own {
		if n != want[p] {
			t.Errorf("member 0's summary: orders/%d=%d; the table had %d when it stopped", p, n, want[p])
		}
	}
	if len(own)+len(others) != 3 || !strings.Contains(members[0].out, "other members' partitions, as this member last read the table") {
		t.Errorf("member 0's summary does not give the other members' partitions apart:\n%s", members[0].out)
	}
	own, others = memberSummaryNext(members[1].out)
	if fmt.Sprint(own) != fmt.Sprint(final) || len(others) != 0 {
		t.Errorf("member 1's summary: own %v, others %v; want every partition its own at the table's %v:\n%s", own, others, final, members[1].out)
	}
}

// tableNextOffsets reads lake.orders' next offsets; none before a member
// made the table.
func tableNextOffsets(t *testing.T, cat icecat.Catalog) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "orders"}, snapshot.OpenOptions{})
	if err != nil {
		return out
	}
	l, err := tbl.Summary(t.Context(), 0)
	if err != nil {
		return out
	}
	for tp, n := range l.Next() {
		out[tp.Partition] = n
	}
	return out
}

// memberAssignedGauge reads floe_partition_assigned from a sink's /metrics.
func memberAssignedGauge(addr string) map[int32]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	line := regexp.MustCompile(`^floe_partition_assigned\{partition="(\d+)",table="lake\.orders",topic="orders"\} (\S+)$`)
	out := map[int32]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			p, _ := strconv.Atoi(m[1])
			v, _ := strconv.ParseFloat(m[2], 64)
			out[int32(p)] = v
		}
	}
	return out
}

// memberSummaryNext reads a group member's exit summary: the next offsets
// of its own partitions and those of the others'.
func memberSummaryNext(out string) (own, others map[int32]int64) {
	own, others = map[int32]int64{}, map[int32]int64{}
	pos := regexp.MustCompile(`orders/(\d+)=(\d+)`)
	for line := range strings.Lines(out) {
		into := own
		switch {
		case strings.HasPrefix(line, "next offsets: "):
		case strings.HasPrefix(line, "other members' partitions"):
			into = others
		default:
			continue
		}
		for _, m := range pos.FindAllStringSubmatch(line, -1) {
			p, _ := strconv.Atoi(m[1])
			n, _ := strconv.ParseInt(m[2], 10, 64)
			into[int32(p)] = n
		}
	}
	return own, others
}

// memberStatus reads the one pipeline of a sink's /status.json.
func memberStatus(addr string) *statuspage.Pipeline {
	resp, err := http.Get("http://" + addr + "/status.json")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var doc statuspage.Page
	if json.NewDecoder(resp.Body).Decode(&doc) != nil || len(doc.Pipelines) != 1 {
		return nil
	}
	return &doc.Pipelines[0]
}
