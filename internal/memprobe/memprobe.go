// Package memprobe measures the live Go heap of the running process, for
// benchmarks that bound what an operation holds at its peak.
package memprobe

import (
	"runtime/metrics"
	"time"
)

// Live is the live Go heap as of the last garbage collection.
func Live() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// Peak runs f and returns the largest live heap seen every 5 ms while it
// ran (collections run as f allocates, so what it holds at once shows)
// and the live heap before it.
func Peak(f func()) (peak, before uint64) {
	before = Live()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, Live())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	<-finished
	return max(peak, Live()), before
}
