//go:build linux

package controlplane

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/cozystack/address-controller/test/proc"
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
	pids := proc.Children(dir)
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
