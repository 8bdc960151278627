// Command playground is what `make run` runs: a local control plane
// (test/controlplane) with this repository's CRDs, and the components listed
// in components.go (MetalLB's controller, bin/manager with its admission
// webhooks, bin/metallb-iad and its admission policy) running against it as child
// processes, their output prefixed with their names. The admin kubeconfig is
// written to .playground/kubeconfig and the control plane's logs to
// .playground/logs/.
//
// It runs in the foreground until SIGINT or SIGTERM, then stops the
// components (in reverse start order) and then the control plane, leaving no
// process behind. If a component exits on its own, the playground reports it
// and shuts everything down with a non-zero status rather than restarting it:
// a crash is something to look at, and its last output is right above.
//
// -wire (make run WIRE=1) adds test/wire's bed once everything is up: two
// node namespaces running MetalLB's speaker and a client namespace on one
// bridge, so that what an address does on the wire can be looked at (root
// only). -state and -bin move its kubeconfigs, logs and binaries elsewhere; this
// package's tests use them to run docs/playground.md and
// docs/walkthrough.md, each against a playground of its own.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
	"github.com/cozystack/address-controller/test/proc"
	"github.com/cozystack/address-controller/test/wire"
)

// componentGrace is how long a component gets to exit after SIGTERM.
const componentGrace = 10 * time.Second

func main() {
	skip := flag.String("skip", "", "comma-separated components not to start (e.g. manager, to run it from a debugger against the playground)")
	state := flag.String("state", "", "directory for the kubeconfigs and logs (default: .playground in the repository)")
	bin := flag.String("bin", "", "directory holding manager and metallb-iad (default: bin in the repository)")
	withWire := flag.Bool("wire", false, "also run MetalLB's speaker on two nodes in network namespaces, with a client namespace to probe from (root)")
	flag.Parse()
	if err := run(strings.Split(*skip, ","), *state, *bin, *withWire); err != nil {
		say("error: %v", err)
		os.Exit(1)
	}
}

func run(skip []string, stateDir, binDir string, withWire bool) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	cpBin, err := controlplane.BinDir()
	if err != nil {
		return err
	}
	stateDir = cmp.Or(stateDir, filepath.Join(root, ".playground"))
	binDir = cmp.Or(binDir, filepath.Join(root, "bin"))
	logDir := filepath.Join(stateDir, "logs")
	kubeconfig := filepath.Join(stateDir, "kubeconfig")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}

	// Signals are caught from the start, so an interrupt during startup
	// still tears down whatever has been started.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		sig := <-signals
		say("%v: stopping everything", sig)
		cancel()
		for sig := range signals {
			say("%v: already stopping, please wait", sig)
		}
	}()

	wh, err := controlplane.PrepareWebhooks(filepath.Join(root, "config", "webhook"))
	if err != nil {
		return fmt.Errorf("preparing the webhooks: %w", err)
	}
	defer func() { _ = wh.Cleanup() }()
	// As the chart: the validating webhooks spare the core's own writes,
	// and the address defaulter an address that needs nothing of it.
	wh.AsTheChart("system:serviceaccount:" + coreNamespace + ":" + coreAccount)

	var comps []component
	crds := []string{filepath.Join(root, "config", "crd")}
	for _, c := range components(root, binDir, cpBin, stateDir, kubeconfig, wh) {
		if slices.Contains(skip, c.name) {
			say("not starting %s (-skip)", c.name)
			continue
		}
		if _, err := os.Stat(c.path); err != nil {
			return fmt.Errorf("component %s: %w (build it first: make build, or use make run)", c.name, err)
		}
		crds = append(crds, c.crds...)
		comps = append(comps, c)
	}

	var logFiles []*os.File
	defer func() {
		for _, f := range logFiles {
			_ = f.Close()
		}
	}()
	openLog := func(name string) (*os.File, error) {
		f, err := os.Create(filepath.Join(logDir, name+".log"))
		if err == nil {
			logFiles = append(logFiles, f)
		}
		return f, err
	}

	say("starting etcd, kube-apiserver and kube-controller-manager (logs in %s)", rel(root, logDir))
	var logErr error
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		CRDDirectoryPaths: crds,
		Output: func(component string) io.Writer {
			f, err := openLog(component)
			if err != nil {
				logErr = err
				return nil
			}
			return f
		},
	})
	if err != nil {
		return errors.Join(err, logErr)
	}
	say("control plane ready in %s", time.Since(start).Round(100*time.Millisecond))

	var running []*proc.Process
	var prefixers []*proc.PrefixWriter
	var bed *wire.Bed
	shutdown := func() error {
		var errs []error
		if bed != nil {
			say("removing the wire bed")
			errs = append(errs, bed.Close(context.Background()))
		}
		for _, p := range slices.Backward(running) {
			select {
			case <-p.Done():
				// Already reported; Stop only reaps anything it left behind.
				_ = p.Stop(componentGrace)
			default:
				say("stopping %s", p.Name())
				errs = append(errs, p.Stop(componentGrace))
			}
		}
		for _, w := range prefixers {
			_ = w.Flush()
		}
		say("stopping the control plane")
		errs = append(errs, cp.Stop())
		errs = append(errs, os.Remove(kubeconfig)) // it would point at a dead API server
		if err := errors.Join(errs...); err != nil {
			return err
		}
		say("stopped")
		return nil
	}

	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return errors.Join(err, shutdown())
	}

	width := 0
	for _, c := range comps {
		width = max(width, len(c.name))
	}
	for _, c := range comps {
		if c.setup != nil {
			if err := c.setup(ctx, cp); err != nil {
				return errors.Join(fmt.Errorf("set up %s: %w", c.name, err), shutdown())
			}
		}
		f, err := openLog(c.name)
		if err != nil {
			return errors.Join(err, shutdown())
		}
		w := proc.NewPrefixWriter(os.Stdout, fmt.Sprintf("%-*s | ", width, c.name))
		prefixers = append(prefixers, w)
		p, err := proc.Start(c.name, c.path, c.args, io.MultiWriter(w, f))
		if err != nil {
			return errors.Join(err, shutdown())
		}
		running = append(running, p)
		say("started %s (pid %d)", c.name, p.Pid())
		if c.started != nil {
			if err := c.started(ctx, cp); err != nil {
				return errors.Join(fmt.Errorf("after starting %s: %w", c.name, err), shutdown())
			}
		}
	}

	if withWire {
		say("starting the wire bed: MetalLB's speaker on two node namespaces, and a client namespace")
		bed, err = wire.Start(ctx, cp, wire.Options{BinDir: cpBin, Namespace: metallb.Namespace, Output: func(node string) io.Writer {
			f, err := openLog("speaker-" + node)
			if err != nil {
				return nil
			}
			return f
		}})
		if err != nil {
			return errors.Join(fmt.Errorf("wire: %w", err), shutdown())
		}
	}
	printUsage(root, kubeconfig, comps)
	if bed != nil {
		printWire(bed)
	}

	// A component exiting on its own ends the playground (see the package
	// comment); so does a signal.
	exited := make(chan *proc.Process, len(running))
	for _, p := range running {
		go func() {
			<-p.Done()
			exited <- p
		}()
	}
	var failure error
	select {
	case <-ctx.Done():
	case p := <-exited:
		if ctx.Err() == nil {
			failure = fmt.Errorf("component %s exited unexpectedly (%v); see its output above and %s",
				p.Name(), exitStatus(p.Err()), rel(root, filepath.Join(logDir, p.Name()+".log")))
			say("!!!!!!!! %v", failure)
			say("!!!!!!!! stopping everything")
		}
	}
	return errors.Join(failure, shutdown())
}

func printUsage(root, kubeconfig string, comps []component) {
	names := make([]string, 0, len(comps))
	for _, c := range comps {
		names = append(names, c.name)
	}
	if len(names) == 0 {
		names = append(names, "none")
	}
	fmt.Printf(`
==============================================================================
 Playground running: a local control plane with this repository's CRDs.
 Components: %s

   export KUBECONFIG=%s
   kubectl get ipaddressclaims -A
   kubectl get ipaddressclasses,ipaddresses.local.sdn.cozystack.io
   (short names: ipclaim, ipclass, ipaddr; a bare "ipaddresses" is the
   built-in networking.k8s.io IPAddress of Service ClusterIPs)

 Control plane logs: %s
 Stop with Ctrl-C (or: kill -TERM %d); everything started here is stopped.
==============================================================================

`, strings.Join(names, ", "), kubeconfig, rel(root, filepath.Join(filepath.Dir(kubeconfig), "logs")), os.Getpid())
}

func printWire(bed *wire.Bed) {
	fmt.Printf(` The wire: nodes %s (MAC %s) and %s (MAC %s) announce every
 pool on their link to the bridge. A Service answers from a node once it has
 a ready endpoint there (an EndpointSlice with nodeName: the node; with
 externalTrafficPolicy: Local, from that node alone). Ask who answers for an
 address from the client namespace (%s):

   go run ./test/wire/whohas <address>...

==============================================================================

`, bed.Nodes[0].Name, bed.Nodes[0].MAC, bed.Nodes[1].Name, bed.Nodes[1].MAC, bed.Client)
}

func exitStatus(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && filepath.IsLocal(r) {
		return r
	}
	return path
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "playground | "+format+"\n", args...)
}
