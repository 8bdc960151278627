//go:build linux

package proc

import "syscall"

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid: true,
		// Killed by the kernel if we die without stopping it (SIGKILL, a
		// test binary's timeout panic).
		Pdeathsig: syscall.SIGKILL,
	}
}
