package localstack

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// TestUpRaceKeepsWinnersFolder (from a review): two `floe localstack up`
// started together on a folder that does not exist yet. One takes the
// lock and runs; the other is refused and leaves the folder alone: it had
// seen no folder, and its failure removed "its" fresh folder, the running
// stack's lock file, S3 data and catalog included.
func TestUpRaceKeepsWinnersFolder(t *testing.T) {
	for i := range 40 {
		dir := filepath.Join(t.TempDir(), "floe-local")
		var (
			wg   sync.WaitGroup
			up   [2]*Local
			errs [2]error
		)
		opts := [2]UpOptions{
			{Dir: dir, KafkaPort: freePort(t), S3Port: freePort(t), RegistryPort: freePort(t)},
			{Dir: dir, KafkaPort: freePort(t), S3Port: freePort(t), RegistryPort: freePort(t)},
		}
		start := make(chan struct{})
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				up[j], errs[j] = Up(t.Context(), opts[j])
			}()
		}
		close(start)
		wg.Wait()
		var running *Local
		for j := range 2 {
			if errs[j] == nil {
				running = up[j]
			}
		}
		if running == nil && (errors.Is(errs[0], syscall.EADDRINUSE) || errors.Is(errs[1], syscall.EADDRINUSE)) {
			// A free port taken by another process before the stack bound
			// it (the suite's packages run at once): no verdict on the
			// folder, the round is run again (found by .ci/run).
			continue
		}
		if running == nil {
			t.Fatalf("round %d: neither started (the refused start removed the folder the other was starting in): %v | %v", i, errs[0], errs[1])
		}
		_, statErr := os.Stat(filepath.Join(dir, "catalog.db"))
		_, lockErr := os.Stat(filepath.Join(dir, ".lock"))
		running.Close()
		if up[0] != nil && up[1] != nil {
			t.Fatalf("round %d: both stacks started on one folder", i)
		}
		if statErr != nil || lockErr != nil {
			t.Fatalf("round %d: the running stack's folder lost its files to the refused start (%v): catalog %v, lock %v", i, errs, statErr, lockErr)
		}
	}
}
