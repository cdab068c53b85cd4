package main

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

// TestLocalstackPortHeldByOutgoingConnection: a floe localstack up port that
// an outgoing connection's local port holds, with nothing listening, says so
// and names the range to stay out of, as --metrics-addr does; it asked only
// whether another local stack was running (a user's run on fixed ports in
// Linux's range for outgoing connections, twice).
func TestLocalstackPortHeldByOutgoingConnection(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := freeTCPPort(t)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}
	c, err := d.DialContext(t.Context(), "tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	free := func() string { return strconv.Itoa(freeTCPPort(t)) }
	code, _, errs := floe(t, "localstack", "up", "--dir", t.TempDir(), "--kafka-port", strconv.Itoa(port), "--s3-port", free(), "--schema-registry-port", free())
	if code != exitError || !strings.Contains(errs, "nothing listens on that port, so the local port of an outgoing connection holds it (not another local stack)") ||
		!strings.Contains(errs, "ip_local_port_range") || strings.Count(errs, "pick another port with --kafka-port") != 1 {
		t.Errorf("localstack up --kafka-port %d: exit %d, stderr %q", port, code, errs)
	}
}

// TestFilesWideGroupPartitionsColumn: a file group of a flush of a wide
// topic, whose partitions skip some, is shown in floe files' text as how
// many partitions and their range, not as the list of every run: on a
// 500-partition topic that list padded every row of the table to 535
// columns (a user's run). A short list is still shown whole.
func TestFilesWideGroupPartitionsColumn(t *testing.T) {
	snap := int64(7)
	now := time.Now()
	var wide, short []lookup.Span
	for p := int32(0); p < 500; p++ {
		if p%9 != 4 {
			wide = append(wide, lookup.Span{Topic: "wide", Partition: p, Low: 0, High: 10})
		}
	}
	for _, p := range []int32{0, 1, 2, 3, 7} {
		short = append(short, lookup.Span{Topic: "wide", Partition: p, Low: 0, High: 10})
	}
	r := lookup.FilesResult{Table: "lake.wide", SnapshotID: &snap, CommittedAt: &now, Records: 5000, SizeBytes: 9000,
		Files: []lookup.File{
			{Path: "s3://warehouse/lake.db/wide/data/a.parquet", Topic: "wide", Records: 4440, SizeBytes: 8000, Group: &lookup.FileGroup{Files: 1, Spans: wide}},
			{Path: "s3://warehouse/lake.db/wide/data/b.parquet", Topic: "wide", Records: 50, SizeBytes: 1000, Group: &lookup.FileGroup{Files: 1, Spans: short}},
		}}
	var buf bytes.Buffer
	printFiles(&buf, r)
	out := buf.String()
	if !strings.Contains(out, "444 partitions in 0-498") || !strings.Contains(out, "0-3,7 ") {
		t.Errorf("floe files text:\n%s\nwant the wide group as 444 partitions in 0-498 and the short one as 0-3,7", out)
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "(group of") && len(line) > 200 {
			t.Errorf("a row of %d columns: %q", len(line), line)
		}
	}
}

// TestStatusTableFlagNotRequired: floe status --help does not call --table
// required (without it the catalog's tables are listed), and --serve
// without --table says that the page is one table's; the help said
// "(required)" and --serve said only "missing --table" (a user's run).
func TestStatusTableFlagNotRequired(t *testing.T) {
	help := mustFloe(t, "status", "--help")
	for line := range strings.Lines(help) {
		if strings.Contains(line, "--table NAMESPACE.TABLE") && strings.Contains(line, "(required)") {
			t.Errorf("status --help: %q", line)
		}
	}
	if !strings.Contains(help, "without it, the catalog's tables are listed") {
		t.Errorf("status --help does not say what floe status does without --table:\n%s", help)
	}
	code, _, errs := floe(t, "status", "--serve", "127.0.0.1:0", "--catalog", t.TempDir()+"/catalog.db")
	if code != exitError || !strings.Contains(errs, "missing --table NAMESPACE.TABLE: --serve serves the page of one table") {
		t.Errorf("status --serve without --table: exit %d, stderr %q", code, errs)
	}
}

// TestAsOfWideTopicPositionsSummarised: floe as-of --time now of a
// 500-partition topic printed a line per partition (500 of them) before its
// answer (a user's run). The cuts floe found itself are summarised per
// topic, as a run's next offsets are; given cuts and an upsert table's cuts
// that do not stand on a commit boundary are still listed one by one.
func TestAsOfWideTopicPositionsSummarised(t *testing.T) {
	r := asOfResult{Now: true}
	r.Table, r.SnapshotID, r.CommittedAt, r.Mode = "lake.wide_up", 7, time.Now(), mapping.ModeUpsert
	for p := int32(0); p < 500; p++ {
		r.Positions = append(r.Positions, lookup.Position{Topic: "wide", Partition: p, Offset: 100 + int64(p), Source: sourceNow})
		b := 100 + int64(p)
		if p == 7 {
			b = 90
		}
		r.Boundary = append(r.Boundary, lookup.Position{Topic: "wide", Partition: p, Offset: b, Source: lookup.SourceCommit})
	}
	var buf bytes.Buffer
	if err := printAsOf(&buf, false, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, "\n"); n > 5 ||
		!strings.Contains(out, "wide/7 below offset 107 (now): the commit boundary at or below it is offset 90") ||
		!strings.Contains(out, "wide/0-6,8-499 (499 partitions) below offsets 100 to 599 (now), each a commit boundary; --json lists each partition") {
		t.Errorf("as-of text of 500 partitions, %d lines:\n%s", n, out)
	}
	// Given cuts are the question's: each is answered.
	r.Now, r.Mode, r.Boundary = false, mapping.ModeAppend, nil
	for i := range r.Positions {
		r.Positions[i].Source = lookup.SourceGiven
	}
	buf.Reset()
	if err := printAsOf(&buf, false, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "wide/499 below offset 599 (given)\n") {
		t.Errorf("as-of text of 500 given cuts:\n%s", buf.String())
	}
}
