//go:build linux

package controlplane

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// watchdogScript waits for EOF on stdin, then kills the process groups given
// as arguments and removes the data directory. No grace period: the data is
// being thrown away anyway. (dash's kill rejects "--", so none is passed; the
// arguments are negative process group ids.)
const watchdogScript = `dir=$1; shift
read -r _
kill -KILL "$@" 2>/dev/null
rm -rf "$dir"
`

// startWatchdog makes sure etcd and kube-apiserver die with this process even
// when it exits without Stop (SIGKILL, a test binary's timeout panic): envtest
// starts them without a parent-death signal. A small shell waits on a pipe
// whose only writer is this process, and the kernel closes that however we
// exit. It runs in its own process group so a terminal's Ctrl-C does not end
// it before it acts. The returned func disarms it; Stop calls it once etcd
// and kube-apiserver have stopped.
//
// envtest keeps its processes' ids to itself; they are found as our children
// whose command line mentions dir, where their data lives.
func startWatchdog(dir string) (disarm func(), err error) {
	pids := childrenMentioning(dir)
	if len(pids) == 0 {
		return func() {}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := []string{"-c", watchdogScript, "controlplane-watchdog", dir}
	for _, pid := range pids {
		args = append(args, "-"+strconv.Itoa(pid)) // envtest gives each its own process group
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return func() {
		_ = cmd.Process.Kill()
		<-done
		_ = w.Close() // only now: closing it first would set the watchdog off
	}, nil
}

// childrenMentioning returns the ids of this process's children whose
// command line contains s.
func childrenMentioning(s string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ..."; comm may contain spaces and parentheses.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
