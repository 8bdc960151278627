// Package proc runs child processes that never outlive the process that
// started them: each child gets its own process group (so Stop reaches
// everything it spawned) and, on Linux, is killed by the kernel if its parent
// dies without calling Stop. The local control plane and the playground start
// their non-envtest processes through it. FreePort gives a child a port no
// other test is handed at the same time.
package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Process is a running child process.
type Process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result; read only after done is closed
}

// Start starts path with args. Its stdout and stderr both go to out (nil
// discards them).
func Start(name, path string, args []string, out io.Writer) (*Process, error) {
	return StartWithEnv(name, path, args, nil, out)
}

// StartWithEnv is Start with env (KEY=value) added to this process's
// environment.
func StartWithEnv(name, path string, args, env []string, out io.Writer) (*Process, error) {
	cmd := exec.Command(path, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	// A grandchild keeping the output pipe open must not block Wait forever.
	cmd.WaitDelay = 5 * time.Second

	p := &Process{name: name, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that forked the child
		// exits, not the process. Pin this goroutine to its thread and keep
		// it parked in Wait for the child's lifetime; the runtime then
		// never retires that thread under the child.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// Name is the name given to Start.
func (p *Process) Name() string { return p.name }

// Pid is the child's process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the child has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the child's exit status as returned by exec.Cmd.Wait. Only valid
// once Done is closed.
func (p *Process) Err() error { return p.err }

// Stop sends SIGTERM to the child's process group, waits up to grace for the
// child to exit, then sends SIGKILL to the group. It returns once the child
// has exited. The group is killed even after a clean exit so nothing the
// child spawned survives it. An exit caused by Stop's own signals is not an
// error.
func (p *Process) Stop(grace time.Duration) error {
	pgid := p.Pid()
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
	}
	// ESRCH here just means the group is already empty.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if p.err != nil && !killedBySignal(p.err) {
		return fmt.Errorf("%s: %w", p.name, p.err)
	}
	return nil
}

func killedBySignal(err error) bool {
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return false
	}
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGKILL)
}
