package connector_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readAll reads [from, to) of topic/0 with ReadLog and returns the offsets
// read and the last log start reported.
func readAll(ctx context.Context, e *env, topic string, from, to int64) ([]int64, int64, error) {
	var (
		offsets  []int64
		logStart int64 = -1
	)
	err := e.Dial().ReadLog(ctx, topic, 0, from, to, func(r *kgo.Record, ls int64) bool {
		offsets = append(offsets, r.Offset)
		logStart = ls
		return true
	})
	return offsets, logStart, err
}

func span(low, high int64) []int64 {
	var out []int64
	for o := low; o < high; o++ {
		out = append(out, o)
	}
	return out
}

// delayFetches makes the broker hold the next n fetch requests for d before
// answering them.
func delayFetches(e *env, n int, d time.Duration) {
	c := e.Stack.Cluster
	left := n
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.SleepControl(func() { time.Sleep(d) })
		if left--; left <= 0 {
			c.DropControl()
		}
		return nil, nil, false // then answer it as usual
	})
}

// A broker slower to answer than any idle wait does not end the read early:
// the read ends at the requested end, not after a quiet spell.
func TestReadLogWaitsForASlowBroker(t *testing.T) {
	e := newEnv(t)
	e.Topic("slow", 1, nil)
	e.Produce(records("slow", 0, 50, "a"))
	delayFetches(e, 1, 4*time.Second)
	got, _, err := readAll(e.Ctx, e, "slow", 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if want := span(0, 50); !slices.Equal(got, want) {
		t.Fatalf("read %d offsets %v, want [0, 50)", len(got), got)
	}
}

// Asked for more than the log holds, the read ends at the high watermark at
// once rather than after a wait.
func TestReadLogEndsAtTheHighWatermark(t *testing.T) {
	e := newEnv(t)
	e.Topic("short", 1, nil)
	e.Produce(records("short", 0, 50, "a"))
	start := time.Now()
	got, logStart, err := readAll(e.Ctx, e, "short", 10, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if want := span(10, 50); !slices.Equal(got, want) || logStart != 0 {
		t.Fatalf("read %v (log start %d), want [10, 50) and log start 0", got, logStart)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the read took %s after the last record: it waited instead of stopping at the high watermark", d)
	}
	// From the high watermark on there is nothing to read.
	got, _, err = readAll(e.Ctx, e, "short", 50, 60)
	if err != nil || len(got) != 0 {
		t.Fatalf("read past the end: %v, %v", got, err)
	}
}

// Offsets retention deleted are skipped; the log start is reported.
func TestReadLogSkipsDeletedOffsets(t *testing.T) {
	e := newEnv(t)
	e.Topic("trimmed", 1, nil)
	e.Produce(records("trimmed", 0, 50, "a"))
	if err := e.Stack.Cluster.DeleteRecords("trimmed", 0, 20); err != nil {
		t.Fatal(err)
	}
	got, logStart, err := readAll(e.Ctx, e, "trimmed", 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if want := span(20, 50); !slices.Equal(got, want) || logStart != 20 {
		t.Fatalf("read %v (log start %d), want [20, 50) and log start 20", got, logStart)
	}
}

// Offsets compaction removed are absent, and the read goes on past them to
// the end.
func TestReadLogCompactedGaps(t *testing.T) {
	e := newEnv(t)
	compact := "compact"
	e.Topic("compacted", 1, map[string]*string{"cleanup.policy": &compact})
	rec := func(key string) *kgo.Record {
		return &kgo.Record{Topic: "compacted", Key: []byte(key), Value: []byte("v")}
	}
	e.Produce([]*kgo.Record{rec("a"), rec("b"), rec("c")}) // [0, 3): one batch, superseded below
	e.Produce([]*kgo.Record{rec("a"), rec("b"), rec("c")}) // [3, 6)
	e.Produce([]*kgo.Record{rec("d")})                     // 6: the last batch, never compacted
	e.Stack.Cluster.Compact()
	start := time.Now()
	got, _, err := readAll(e.Ctx, e, "compacted", 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	if want := span(3, 7); !slices.Equal(got, want) {
		t.Fatalf("read %v, want [3, 7)", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the read took %s", d)
	}
}

// A read that cannot finish ends with an error when its deadline passes,
// never with a silent, partial success.
func TestReadLogDeadlineIsAnError(t *testing.T) {
	e := newEnv(t)
	e.Topic("stuck", 1, nil)
	e.Produce(records("stuck", 0, 10, "a"))
	b := e.Dial()
	delayFetches(e, 1, 3*time.Second)
	ctx, cancel := context.WithTimeout(e.Ctx, time.Second)
	defer cancel()
	var n int
	err := b.ReadLog(ctx, "stuck", 0, 0, 10, func(*kgo.Record, int64) bool { n++; return true })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadLog past its deadline: %v after %d records, want an error wrapping context.DeadlineExceeded", err, n)
	}
}
