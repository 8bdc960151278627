//go:build linux

package wire

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary the process that dies holding a
// namespace (TestNothingOutlivesAKilledRun).
const helperEnv = "WIRE_DYING_HELPER"

// A run killed with SIGKILL — no cleanup of its own runs — leaves no
// namespace behind: its watchdog removes what it made, and the next run
// sweeps what a dead run's watchdog could not.
func TestNothingOutlivesAKilledRun(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		dying()
		return
	}
	Require(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestNothingOutlivesAKilledRun$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	ns, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if !ok {
		_ = cmd.Process.Kill()
		t.Fatalf("helper said %q", line)
	}
	if _, err := os.Stat(filepath.Join(netnsDir, ns)); err != nil {
		t.Fatalf("the helper's namespace %s: %v", ns, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(netnsDir, ns)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			removeNetns(ns)
			t.Fatalf("%s outlived its killed process by 10s", ns)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A namespace of that dead process made after its watchdog acted (as if
	// the watchdog had been killed too): the sweep removes it.
	stale := fmt.Sprintf("%s-%d-stale", namePrefix, cmd.Process.Pid)
	if err := ip("netns", "add", stale); err != nil {
		t.Fatal(err)
	}
	sweep()
	if _, err := os.Stat(filepath.Join(netnsDir, stale)); !os.IsNotExist(err) {
		removeNetns(stale)
		t.Fatalf("the sweep left %s", stale)
	}
}

// dying makes a namespace under the bed's watchdog, says so, and waits to
// be killed.
func dying() {
	ns := fmt.Sprintf("%s-%d-dying", namePrefix, os.Getpid())
	if err := ip("netns", "add", ns); err != nil {
		fmt.Println("error", err)
		return
	}
	if _, err := startWatchdog([]string{ns}); err != nil {
		fmt.Println("error", err)
		return
	}
	fmt.Println("ready", ns)
	time.Sleep(time.Minute)
}
