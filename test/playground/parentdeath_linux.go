//go:build linux

package main

import (
	"os"
	"syscall"
)

// When our parent dies, get SIGTERM and shut down as if asked to: make does
// not pass a SIGTERM of its own on to `make run`'s recipe, so killing make
// would otherwise leave the playground running unattended.
//
// init runs on the main thread, which lives as long as the process; the
// setting belongs to the thread that makes the call.
func init() {
	ppid := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		return
	}
	if os.Getppid() != ppid { // the parent died before the call
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
