package main

import (
	"strings"
	"testing"
)

// TestPublishWithReadOnlyACL (from a review):
// docs/secured-kafka.md's least-privilege table gives `replay` Read on the
// topic and nothing else. A replay onto a branch of an append table with
// --publish, run as such a user (the documented repair of a table in
// place), checked main against the branch from the watermarks alone
// before bfd1ede; checkMainRowsKept now describes the topic's
// configuration (DescribeConfigs) for every append table, compacted or
// not, so the publish stops on an authorization error the documented ACLs
// do not grant, after the whole replay was read.
func TestPublishWithReadOnlyACL(t *testing.T) {
	const topic = "orders"
	c := readerDescriberCluster(t, topic)
	count := c.topic(t, topic, 2, 20)
	cat, catFlags := localCatalog(t)
	as := func(user string, args ...string) (int, string, string) {
		t.Helper()
		return floe(t, append(append(args, c.userFlags("SCRAM-SHA-512", user, floePass)...), catFlags...)...)
	}
	if code, out, errs := as("reader", "sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end"); code != 0 {
		t.Fatalf("sink as reader: exit %d\n%s%s", code, out, errs)
	}
	checkTable(t, cat, "lake.orders", topic, count)
	code, out, errs := as("reader", "replay", "--topic", topic, "--table", "lake.orders", "--branch", "fix", "--publish")
	if code != 0 || !strings.Contains(out, "published") {
		t.Fatalf("replay --branch fix --publish of an append table as a user holding the ACLs docs/secured-kafka.md lists for replay (Read): exit %d\n%s%s\nwant it published (exit 0): the publish check of a topic that is not compacted needs no DescribeConfigs",
			code, out, errs)
	}
}
