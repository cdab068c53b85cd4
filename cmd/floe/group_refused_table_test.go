package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
)

// TestRefusedMemberCreatesNoTable: a member refused because its group has
// a member that sinks another table created its own table first, and left
// it behind, empty, without a word (a new user's report: floe status
// listed it). The group's members are checked before anything is created.
func TestRefusedMemberCreatesNoTable(t *testing.T) {
	st := ordersStack(t)
	cfg, catFlags := localCatalog(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a := liveFloe(ctx, slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.events", "--group", "g2",
		"--session-timeout", "6s", "--rebalance-timeout", "10s"}, catFlags)...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitFor(t, 30*time.Second, "member A in group g2", func() bool {
		d, err := adm.DescribeGroups(t.Context(), "g2")
		return err == nil && len(d["g2"].Members) > 0
	})

	code, out, errs := floe(t, slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.events_copy", "--group", "g2",
		"--session-timeout", "6s", "--rebalance-timeout", "10s", "--retry-for", "0s"}, catFlags)...)
	if code != exitError || !strings.Contains(errs, "consumer group g2 has a member that sinks table lake.events") || !strings.Contains(errs, "give each table a --group of its own") {
		t.Fatalf("member B: exit %d\n%s\n%s", code, out, errs)
	}
	cat, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := cat.CheckTableExists(t.Context(), []string{"lake", "events_copy"}); ok || err != nil || strings.Contains(errs, "created a new table") {
		t.Fatalf("the refused member created its table (%v):\n%s", err, errs)
	}
	cancel()
	if r := <-a; r.err != nil {
		t.Fatalf("member A: %v\n%s", r.err, r.errs)
	}
}

// TestRefusedMemberSaysItsEmptyTable: a member refused once its table is
// open (a member of the group sinks the table of its name in another
// catalog, which only the table's UUID tells) had created the table, and
// left it behind, empty, without a word. The refusal names it and how to
// remove it; it is not dropped, for another member may commit to it.
func TestRefusedMemberSaysItsEmptyTable(t *testing.T) {
	st := ordersStack(t)
	_, catA := localCatalog(t)
	cfgB, catB := localCatalog(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	args := func(cat []string) []string {
		return slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--group", "g3",
			"--session-timeout", "6s", "--rebalance-timeout", "10s", "--retry-for", "0s"}, cat)
	}
	a := liveFloe(ctx, args(catA)...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitFor(t, 30*time.Second, "member A in group g3", func() bool {
		d, err := adm.DescribeGroups(t.Context(), "g3")
		return err == nil && len(d["g3"].Members) > 0
	})

	code, out, errs := floe(t, args(catB)...)
	if code != exitError || !strings.Contains(errs, "consumer group g3 has a member that sinks a table lake.orders") ||
		!strings.Contains(errs, "this run created lake.orders, which is empty: floe drop --table lake.orders --yes, with this run's --catalog, removes it") {
		t.Fatalf("member B: exit %d\n%s\n%s", code, out, errs)
	}
	cat, err := catalog.Open(t.Context(), cfgB)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := cat.CheckTableExists(t.Context(), []string{"lake", "orders"}); !ok || err != nil {
		t.Fatalf("the refused member's table is gone (%v): it is named, not dropped", err)
	}
	cancel()
	if r := <-a; r.err != nil {
		t.Fatalf("member A: %v\n%s", r.err, r.errs)
	}
}
