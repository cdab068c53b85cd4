package connector_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// childMember is a group member running in a child process (sinkChild
// with FLOE_TEST_GROUP), so that it can be killed or paused like a real
// deployment; it counts what the child reports.
type childMember struct {
	cmd                             *exec.Cmd
	commits, fenced, assigned, lost atomic.Int64
	// owned is the partitions it owns now.
	owned atomic.Int64
	// committedAfterFence counts the commits since the last fence: one
	// shows that the member went on.
	committedAfterFence atomic.Int64
	stderr              strings.Builder
	done                chan error
}

// startChildMember starts a member; env is more of sinkChild's settings
// (FLOE_TEST_SPILL_BYTES=...).
func (e *env) startChildMember(topic, table, group string, flushInterval time.Duration, env ...string) *childMember {
	e.T.Helper()
	m := &childMember{done: make(chan error, 1)}
	m.cmd = e.childCmd(topic, table, 1_000_000, false)
	m.cmd.Env = append(m.cmd.Env, "FLOE_TEST_GROUP="+group, "FLOE_TEST_FLUSH_INTERVAL="+flushInterval.String())
	m.cmd.Env = append(m.cmd.Env, env...)
	m.cmd.Stderr = &m.stderr
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		e.T.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		e.T.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "fenced":
				m.fenced.Add(1)
				m.committedAfterFence.Store(0)
			case strings.HasPrefix(line, "committed "):
				m.commits.Add(1)
				m.committedAfterFence.Add(1)
			case strings.HasPrefix(line, "rebalance "):
				var a, r, l int64
				fmt.Sscanf(line, "rebalance assigned=%d revoked=%d lost=%d", &a, &r, &l)
				m.assigned.Add(a)
				m.lost.Add(l)
				m.owned.Add(a - r - l)
			}
		}
		m.done <- m.cmd.Wait()
	}()
	e.T.Cleanup(func() {
		if m.cmd.ProcessState == nil {
			_ = m.cmd.Process.Signal(syscall.SIGCONT)
			_ = m.cmd.Process.Kill()
		}
	})
	return m
}

// interrupt stops the member with SIGINT (it commits what it consumed) and
// waits for it to exit cleanly.
func (m *childMember) interrupt(t testing.TB) {
	t.Helper()
	if err := m.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-m.done:
		if err != nil {
			t.Fatalf("member exited with %v: %s", err, m.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("member did not stop within a minute of SIGINT: %s", m.stderr.String())
	}
}

// waitFor polls cond until it holds, failing after within.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// producer produces rounds of records to every partition of topic until
// stopped, and counts them.
type producer struct {
	stop     context.CancelFunc
	wg       sync.WaitGroup
	produced atomic.Int64
}

func (e *env) produceContinuously(topic string, partitions int32, perRound int, pause time.Duration) *producer {
	return e.produceRounds(partitions, pause, func(p int32, round int) []*kgo.Record {
		return records(topic, p, perRound, fmt.Sprintf("r%d", round))
	})
}

// produceRounds produces round's records of each partition, then pauses,
// until halted.
func (e *env) produceRounds(partitions int32, pause time.Duration, round func(p int32, round int) []*kgo.Record) *producer {
	ctx, stop := context.WithCancel(e.Ctx)
	pr := &producer{stop: stop}
	pr.wg.Go(func() {
		for r := 0; ctx.Err() == nil; r++ {
			for p := range partitions {
				recs := round(p, r)
				e.Produce(recs)
				pr.produced.Add(int64(len(recs)))
			}
			time.Sleep(pause)
		}
	})
	return pr
}

func (pr *producer) halt() int64 {
	pr.stop()
	pr.wg.Wait()
	return pr.produced.Load()
}

// TestGroupMemberKilled: three member processes share a 12-partition topic
// under continuous production; one is killed with SIGKILL while it holds
// uncommitted records. After the session timeout the group gives its
// partitions to the others, which start them from the ledger: the table
// ends with every offset exactly once and the audit is complete.
func TestGroupMemberKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs member processes for half a minute")
	}
	e := newEnv(t)
	const topic, table, group = "groupkill", "lake.groupkill", "floe-groupkill"
	e.Topic(topic, 12, nil)
	tbl := e.Table(table)
	pr := e.produceContinuously(topic, 12, 20, 20*time.Millisecond)
	var ms []*childMember
	for range 3 {
		ms = append(ms, e.startChildMember(topic, table, group, 500*time.Millisecond))
	}
	waitFor(t, 60*time.Second, "every member assigned partitions and committing", func() bool {
		for _, m := range ms {
			if m.assigned.Load() == 0 || m.commits.Load() < 2 {
				return false
			}
		}
		return true
	})
	if err := ms[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ms[0].done
	waitFor(t, 60*time.Second, "the killed member's partitions reassigned", func() bool {
		return ms[1].owned.Load()+ms[2].owned.Load() == 12
	})
	time.Sleep(2 * time.Second)
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 60*time.Second)
	for _, m := range ms[1:] {
		m.interrupt(t)
	}
	if rs := checkExactlyOnce(t, tbl, want); int64(len(rs)) != produced {
		t.Fatalf("%d rows, want %d", len(rs), produced)
	}
	auditComplete(t, e, tbl)
	for i, m := range ms {
		t.Logf("member %d: %d commits, %d partitions assigned, %d fenced", i, m.commits.Load(), m.assigned.Load(), m.fenced.Load())
	}
}

// TestGroupZombieFenced: a member is paused (SIGSTOP) past the session
// timeout while it holds uncommitted records; the group gives its
// partitions to the other member, which commits them from the ledger.
// Resumed (SIGCONT), the zombie flushes what it held: the ledger check
// fences that commit (its ranges no longer start at the ledger's next
// offsets), it deletes the commit's files, rejoins the group and goes on
// committing. No uncommitted file is left behind, the table holds every
// offset exactly once, and the audit is complete. In the spilled run the
// members move every row to the flush's spill lane as it is consumed: a
// zombie that learns of its loss before its flush drops the lane instead
// of being fenced (errSpillLost), and either way commits nothing it held.
func TestGroupZombieFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses a member process past the session timeout")
	}
	for _, c := range []struct {
		name  string
		spill int64
	}{{"own", 0}, {"spilled", 1}} {
		t.Run(c.name, func(t *testing.T) { zombieRun(t, c.spill) })
	}
}

func zombieRun(t *testing.T, spill int64) {
	e := newEnv(t)
	const topic, table, group = "zombie", "lake.zombie", "floe-zombie"
	e.Topic(topic, 6, nil)
	tbl := e.Table(table)
	pr := e.produceContinuously(topic, 6, 20, 20*time.Millisecond)
	spillEnv := "FLOE_TEST_SPILL_BYTES=" + strconv.FormatInt(spill, 10)
	// The zombie flushes rarely, so that it holds records when paused;
	// the other member often, so that it commits the zombie's partitions
	// soon after taking them.
	zombie := e.startChildMember(topic, table, group, 3*time.Second, spillEnv)
	waitFor(t, 30*time.Second, "the first member committing", func() bool { return zombie.commits.Load() >= 1 })
	other := e.startChildMember(topic, table, group, 300*time.Millisecond, spillEnv)
	waitFor(t, 60*time.Second, "both members assigned partitions and committing", func() bool {
		return other.assigned.Load() > 0 && other.commits.Load() >= 1 && zombie.commits.Load() >= 2
	})
	// A spilled zombie that learns of its loss first drops its lane.
	caught := func() bool { return zombie.fenced.Load() > 0 || (spill > 0 && zombie.lost.Load() > 0) }
	for attempt := 1; !caught(); attempt++ {
		if attempt > 3 {
			t.Fatalf("the zombie was never fenced in %d pauses", attempt-1)
		}
		// Right after a commit, the zombie holds up to 3s of records.
		commits := zombie.commits.Load()
		waitFor(t, 30*time.Second, "a zombie commit", func() bool { return zombie.commits.Load() > commits })
		time.Sleep(time.Second)
		assigned := other.assigned.Load()
		if err := zombie.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "the paused member's partitions given to the other", func() bool { return other.assigned.Load() > assigned })
		otherCommits := other.commits.Load()
		waitFor(t, 30*time.Second, "the other member committing the zombie's partitions", func() bool { return other.commits.Load() >= otherCommits+2 })
		if err := zombie.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "the zombie rejoining and committing again", func() bool {
			return zombie.lost.Load() > 0 && zombie.committedAfterFence.Load() > 0 && zombie.commits.Load() > commits+1
		})
	}
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 60*time.Second)
	zombie.interrupt(t)
	other.interrupt(t)
	if rs := checkExactlyOnce(t, tbl, want); int64(len(rs)) != produced {
		t.Fatalf("%d rows, want %d", len(rs), produced)
	}
	auditComplete(t, e, tbl)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if onDisk := len(dataFiles(t, e.Stack.Catalog().Warehouse)); onDisk != len(files) {
		t.Errorf("%d data files on disk, %d in the table: the fenced commit left files behind", onDisk, len(files))
	}
	t.Logf("zombie: %d commits, fenced %d times, lost partitions %d times; other: %d commits", zombie.commits.Load(), zombie.fenced.Load(), zombie.lost.Load(), other.commits.Load())
}
