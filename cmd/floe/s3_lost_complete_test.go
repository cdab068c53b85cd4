//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
)

// TestLostCompleteMultipartAnswer (from a review): a data file larger
// than the AWS transfer manager's multipart threshold (16 MiB) is written
// as a multipart upload. When the answer to its CompleteMultipartUpload is
// lost (the server completed the object), the AWS SDK sends it again;
// MinIO, whose upload is complete and gone, answers 404 NoSuchUpload,
// which catalog.IsTransient judged a permanent HTTP error: the sink
// stopped (exit 2) on one lost answer, where a transient storage failure
// is retried for --retry-for, losing and duplicating nothing. (versitygw
// answers the repeated request 200.)
func TestLostCompleteMultipartAnswer(t *testing.T) {
	for _, f := range testenv.S3Servers() {
		t.Run(f.Name, func(t *testing.T) { lostCompleteMultipartAnswer(t, f.Start) })
	}
}

func lostCompleteMultipartAnswer(t *testing.T, start func(testing.TB) *testenv.S3Server) {
	e := newS3EnvOn(t, start)
	// The first CompleteMultipartUpload of a data file the server answers
	// 200 loses its answer.
	var requests sync.Map // "METHOD path?query -> status", for the log
	var once atomic.Bool
	d := newDropProxy(t, e.s3.Endpoint, func(resp *http.Response) bool {
		r := resp.Request
		requests.Store(r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" -> "+resp.Status, true)
		return r.Method == http.MethodPost && r.URL.Query().Has("uploadId") && strings.Contains(r.URL.Path, "/data/") &&
			resp.StatusCode == http.StatusOK && once.CompareAndSwap(false, true)
	})
	t.Setenv("AWS_ENDPOINT_URL_S3", d.srv.URL)
	// requestsWith lists the requests seen whose line holds one of subs.
	requestsWith := func(subs ...string) string {
		var out []string
		requests.Range(func(k, _ any) bool {
			if s := k.(string); slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) }) {
				out = append(out, s)
			}
			return true
		})
		return strings.Join(out, "\n")
	}

	const topic = "blobs"
	if err := localstack.CreateTopic(t.Context(), e.brokers, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	// Incompressible values: a flush of 28 MB makes a data file larger than
	// the uploader's multipart threshold (16 MiB).
	var n int64
	produce := func(k int) {
		recs := make([]*kgo.Record, k)
		for i := range recs {
			v := make([]byte, 2048)
			_, _ = rand.Read(v)
			recs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: v}
		}
		if err := localstack.Produce(t.Context(), e.brokers, recs); err != nil {
			t.Fatal(err)
		}
		n += int64(k)
	}
	for range 14 {
		produce(1000)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	done := liveFloe(ctx, e.sinkArgs(topic, "lake.blobs", "--flush-records", "14000", "--flush-interval", "3s", "--retry-for", "2m")...)
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for sunkTo(t, e.catalogConfig(), "lake.blobs", topic, 0) != n {
		select {
		case r := <-done:
			stopped = true
			t.Fatalf("the sink stopped after the answer of a CompleteMultipartUpload was lost (%d dropped), within --retry-for 2m: %v\nmultipart requests:\n%s\nlog:\n%s",
				d.dropped.Load(), r.err, requestsWith("uploadId", "uploads"), lastLines(r.errs, 12))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the table does not hold the %d records 2 minutes on (%d answers dropped)", n, d.dropped.Load())
		}
	}
	if d.dropped.Load() == 0 {
		t.Logf("data requests:\n%s", requestsWith("/data/"))
		t.Fatalf("no CompleteMultipartUpload answer was dropped: the test did not exercise a multipart upload")
	}
	t.Logf("multipart requests (%d answers dropped):\n%s", d.dropped.Load(), requestsWith("uploadId"))
	cancel()
	r := <-done
	stopped = true
	t.Logf("sink log:\n%s", lastLines(r.errs, 8))
	checkTable(t, e.catalogConfig(), "lake.blobs", topic, map[int32]int64{0: n})
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
