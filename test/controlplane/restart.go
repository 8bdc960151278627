package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cozystack/address-controller/test/proc"
)

// RestartAPIServer kills kube-apiserver (SIGKILL: a crash, not a
// shutdown), leaves it down for down, starts it again with the same flags,
// certificates and etcd, and returns once it is ready. Every client sees
// its connections and watches broken, as after a crash in a cluster;
// identities and data survive, as they live in etcd and the certificate
// directory.
func (c *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	pid, args, err := c.apiServerProcess()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	if c.apiserver != nil {
		<-c.apiserver.Done()
	} else if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return !alive(pid), nil
	}); err != nil {
		return fmt.Errorf("waiting for kube-apiserver to exit: %w", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	p, err := proc.Start(KubeAPIServer, c.apiPath, args, c.apiOut)
	if err != nil {
		return err
	}
	c.apiserver = p
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Done():
			return false, fmt.Errorf("kube-apiserver exited: %w", p.Err())
		default:
		}
		body, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// apiServerProcess is kube-apiserver's process id and arguments: the
// process RestartAPIServer started, else envtest's, found as the child
// whose command line names its certificate directory.
func (c *ControlPlane) apiServerProcess() (int, []string, error) {
	pid := 0
	if c.apiserver != nil {
		pid = c.apiserver.Pid()
	} else {
		for _, p := range proc.Children(filepath.Join(c.tmpDir, KubeAPIServer)) {
			if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "exe")); err == nil && filepath.Base(exe) == filepath.Base(c.apiPath) {
				pid = p
			}
		}
	}
	if pid == 0 {
		return 0, nil, fmt.Errorf("kube-apiserver's process not found")
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return 0, nil, err
	}
	fields := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	args := make([]string, 0, len(fields)-1)
	for _, f := range fields[1:] {
		args = append(args, string(f))
	}
	return pid, args, nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
