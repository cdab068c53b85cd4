//go:build linux

package testenv

import (
	"os"
	"os/exec"
	"syscall"
)

// lockFile takes an exclusive advisory lock on path, creating it, and
// returns the function that releases it. It serialises builds between test
// processes (go test runs one process per package, in parallel).
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// dieWithParent makes the kernel send sig to the child when the test binary
// dies without running its cleanups (a panic, a timeout, a kill), so that no
// server outlives its test.
func dieWithParent(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = sig
}

// runAs makes cmd run with the given user and group ids.
func runAs(cmd *exec.Cmd, uid, gid uint32) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid, NoSetGroups: true}
	return nil
}
