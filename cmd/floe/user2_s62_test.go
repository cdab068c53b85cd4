package main

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/lookup"
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
