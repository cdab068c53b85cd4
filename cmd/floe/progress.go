package main

import (
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress reports a long job's advance: a bar on a terminal, periodic log
// lines otherwise (CI logs, pipes), so both stay readable.
type progress struct {
	bar   *progressbar.ProgressBar
	desc  string
	total int64
	done  atomic.Int64
	stop  chan struct{}
}

// newProgress starts reporting a job of total units (-1 when unknown) on w.
func newProgress(w io.Writer, desc string, total int64) *progress {
	p := &progress{desc: desc, total: total, stop: make(chan struct{})}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("rec"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		return p
	}
	go p.logLoop()
	return p
}

func (p *progress) logLoop() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			done := p.done.Load()
			rate := float64(done) / time.Since(start).Seconds()
			slog.Info(p.desc, "done", done, "total", p.total, "per_second", int64(rate))
		}
	}
}

// Add records n more units done.
func (p *progress) Add(n int64) {
	p.done.Add(n)
	if p.bar != nil {
		_ = p.bar.Add64(n)
	}
}

// Finish stops reporting.
func (p *progress) Finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		return
	}
	close(p.stop)
}
