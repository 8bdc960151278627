//go:build unix && !linux

package proc

import "syscall"

// Without a parent-death signal, a child survives only an unclean exit of
// ours; Stop still reaches its whole group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
