//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
)

// answerDropper is a proxy in front of an S3 server that forwards every
// request and answers it, but for the first matching request, which it
// forwards (the server applies it) and then closes the client's
// connection without an answer: an answer lost on the way back (a load
// balancer's idle reset, a network blip), which no real server produces on
// demand.
type answerDropper struct {
	upstream *url.URL
	match    func(*http.Request) bool
	dropped  atomic.Int64
	seen     sync.Map // "METHOD path?query" of the requests seen, for the log
	once     atomic.Bool
}

func (d *answerDropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, d.upstream.Scheme+"://"+d.upstream.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host // signed by the client (SigV4)
	out.ContentLength = int64(len(body))
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	d.seen.Store(r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" -> "+resp.Status, true)
	if d.match(r) && resp.StatusCode == http.StatusOK && d.once.CompareAndSwap(false, true) {
		d.dropped.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

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
	up, err := url.Parse(e.s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	d := &answerDropper{upstream: up, match: func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Query().Has("uploadId") && strings.Contains(r.URL.Path, "/data/")
	}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://"+l.Addr().String())

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
			var seen []string
			d.seen.Range(func(k, _ any) bool {
				if s := k.(string); strings.Contains(s, "uploadId") || strings.Contains(s, "uploads") {
					seen = append(seen, s)
				}
				return true
			})
			t.Fatalf("the sink stopped after the answer of a CompleteMultipartUpload was lost (%d dropped), within --retry-for 2m: %v\nmultipart requests:\n%s\nlog:\n%s",
				d.dropped.Load(), r.err, strings.Join(seen, "\n"), lastLines(r.errs, 12))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the table does not hold the %d records 2 minutes on (%d answers dropped)", n, d.dropped.Load())
		}
	}
	if d.dropped.Load() == 0 {
		var seen []string
		d.seen.Range(func(k, _ any) bool {
			if s := k.(string); strings.Contains(s, "/data/") {
				seen = append(seen, s)
			}
			return true
		})
		t.Logf("data requests:\n%s", strings.Join(seen, "\n"))
		t.Fatalf("no CompleteMultipartUpload answer was dropped: the test did not exercise a multipart upload")
	}
	var seen []string
	d.seen.Range(func(k, _ any) bool {
		if s := k.(string); strings.Contains(s, "uploadId") {
			seen = append(seen, s)
		}
		return true
	})
	t.Logf("multipart requests (%d answers dropped):\n%s", d.dropped.Load(), strings.Join(seen, "\n"))
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
