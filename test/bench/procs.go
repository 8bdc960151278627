package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cozystack/address-controller/test/proc"
)

// processGrace is how long a stopped process may take to exit.
const processGrace = 10 * time.Second

// children are the processes the bench starts and the log files everything
// writes, all in dir: a stalled run is explained by reading them in full.
// An unexpected exit of any process cancels the run.
type children struct {
	dir     string
	verbose bool
	cancel  context.CancelCauseFunc
	list    []*child
	files   []*os.File
}

// child is one started process and where its output goes.
type child struct {
	name     string
	logPath  string
	tail     *proc.Tail
	prefixer *proc.PrefixWriter
	p        *proc.Process
	stopping atomic.Bool
}

// logFile creates dir/name.log; closeFiles closes it.
func (cs *children) logFile(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(cs.dir, name+".log"))
	if err == nil {
		cs.files = append(cs.files, f)
	}
	return f, err
}

// output prepares a process's output: its log file, the last lines kept
// for an error message and, with -v, a copy on stderr.
func (cs *children) output(name string) (*child, io.Writer, error) {
	f, err := cs.logFile(name)
	if err != nil {
		return nil, nil, err
	}
	c := &child{name: name, logPath: f.Name(), tail: proc.NewTail(40)}
	out := io.MultiWriter(c.tail, f)
	if cs.verbose {
		c.prefixer = proc.NewPrefixWriter(os.Stderr, name+" | ")
		out = io.MultiWriter(c.tail, f, c.prefixer)
	}
	return c, out, nil
}

// start starts path with args (and env added to the bench's) and its
// output in dir/name.log.
func (cs *children) start(name, path string, args, env []string) (*child, error) {
	c, out, err := cs.output(name)
	if err != nil {
		return nil, err
	}
	p, err := proc.StartWithEnv(name, path, args, env, out)
	if err != nil {
		return nil, err
	}
	cs.started(c, p)
	return c, nil
}

// started adopts a process started with c's output (some helpers start
// their process themselves): from now on its exit cancels the run, unless
// stop asked for it.
func (cs *children) started(c *child, p *proc.Process) {
	c.p = p
	cs.list = append(cs.list, c)
	say("started %s (pid %d), output in %s", c.name, p.Pid(), c.logPath)
	go func() {
		<-p.Done()
		if c.stopping.Load() {
			return
		}
		exitErr := p.Err()
		if exitErr == nil {
			exitErr = errors.New("exit status 0")
		}
		cs.cancel(fmt.Errorf("%s exited unexpectedly: %w%s", c.name, exitErr, c.describe()))
	}()
}

// stop stops every process, the last started first.
func (cs *children) stop() error {
	var err error
	for _, c := range slices.Backward(cs.list) {
		err = errors.Join(err, c.stop())
	}
	cs.list = nil
	return err
}

// closeFiles closes the log files, once nothing writes them any more.
func (cs *children) closeFiles() error {
	var err error
	for _, f := range cs.files {
		err = errors.Join(err, f.Close())
	}
	cs.files = nil
	return err
}

func (c *child) stop() error {
	c.stopping.Store(true)
	say("stopping %s", c.name)
	var err error
	if stopErr := c.p.Stop(processGrace); stopErr != nil {
		err = fmt.Errorf("%w%s", stopErr, c.describe())
	}
	if c.prefixer != nil {
		_ = c.prefixer.Flush()
	}
	return err
}

// describe is an error message suffix: the last lines of the output and
// where the rest is.
func (c *child) describe() string {
	return c.tail.Describe(c.name+"'s output") + c.where()
}

// where is an error message suffix naming the log only.
func (c *child) where() string {
	return "\n" + c.name + "'s full output: " + c.logPath
}

// pid is the process id, for its CPU time.
func (c *child) pid() int { return c.p.Pid() }
