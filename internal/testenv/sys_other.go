//go:build !linux

package testenv

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// lockFile is a no-op off Linux: builds are then serialised only within one
// test process (see versitygwBinary).
func lockFile(path string) (func(), error) { return func() {}, nil }

// dieWithParent is a no-op off Linux.
func dieWithParent(cmd *exec.Cmd, sig syscall.Signal) {}

// runAs is not supported off Linux.
func runAs(cmd *exec.Cmd, uid, gid uint32) error {
	return errors.New("running a server as another user is supported on Linux only")
}

// processCPU is not supported off Linux.
func processCPU(pid int) (time.Duration, error) {
	return 0, errors.New("reading another process's CPU time is supported on Linux only")
}
