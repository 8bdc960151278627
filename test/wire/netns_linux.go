//go:build linux

package wire

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// netnsDir is where ip netns keeps its named namespaces.
const netnsDir = "/run/netns"

// namePrefix starts the name of every namespace and host interface the bed
// makes; the creating process's id follows it.
const namePrefix = "iadw"

// Unavailable says why this machine cannot run the bed, or "" when it can:
// it needs root, the ip command and network namespaces.
func Unavailable() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip command (Debian's iproute2)"
	}
	probe := fmt.Sprintf("%s-%d-probe", namePrefix, os.Getpid())
	if err := ip("netns", "add", probe); err != nil {
		return fmt.Sprintf("cannot make a network namespace: %v", err)
	}
	_ = ip("netns", "del", probe)
	return ""
}

// ip runs the ip command and returns its error with what it printed.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// inNetns runs f on a thread in the named network namespace. Sockets f
// opens stay in that namespace after it returns.
func inNetns(name string, f func() error) error {
	runtime.LockOSThread()
	own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer func() { _ = unix.Close(own) }()
	target, err := unix.Open(filepath.Join(netnsDir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer func() { _ = unix.Close(target) }()
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering %s: %w", name, err)
	}
	ferr := f()
	if err := unix.Setns(own, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked and dies with this goroutine: it must
		// never run other goroutines in the wrong namespace.
		return fmt.Errorf("leaving %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// sweep removes the namespaces and host interfaces of runs whose process
// is gone (killed before its watchdog could act, or a machine restart
// left the mounts behind).
func sweep() {
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if pid, ok := ownerOf(e.Name()); ok && !alive(pid) {
			removeNetns(e.Name())
		}
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(links), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(fields[1], ":"), "@")
		if pid, ok := ownerOf(name); ok && !alive(pid) {
			_ = ip("link", "del", name)
		}
	}
}

// Clients are the client namespaces of the beds whose process is alive.
func Clients() []string {
	var clients []string
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if pid, ok := ownerOf(e.Name()); ok && alive(pid) && strings.HasSuffix(e.Name(), "-client") {
			clients = append(clients, e.Name())
		}
	}
	return clients
}

// ownerOf is the process id a bed's name carries.
func ownerOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0, false
	}
	rest = strings.TrimPrefix(rest, "-")
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	pid, err := strconv.Atoi(rest[:end])
	return pid, err == nil && pid > 0
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// removeNetns kills whatever runs in the namespace, then removes it; its
// interfaces, and the peers of its veths, go with it.
func removeNetns(name string) {
	if out, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = ip("netns", "del", name)
}

// watchdogScript waits for EOF on stdin — its only writer is the bed's
// process, and the kernel closes it however that process exits — then
// kills what runs in each namespace and removes it.
const watchdogScript = `read -r _
for ns in "$@"; do
	for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
	ip netns del "$ns" 2>/dev/null
done
`

// startWatchdog arms a watchdog over namespaces; disarm stops it without
// letting it act (Close removes them itself).
func startWatchdog(namespaces []string) (disarm func(), err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", watchdogScript, "wire-watchdog"}, namespaces...)...)
	cmd.Stdin = r
	// Its own process group: a terminal's Ctrl-C must not end it before it acts.
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
		_ = w.Close()
	}, nil
}
