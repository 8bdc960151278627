// Command bench is what `make bench` runs: it measures how fast the shipped
// binaries bind IPAddressClaims, and how many API writes each binding
// costs, on one local control plane (test/controlplane) with the
// controllers configured as the charts deploy them: each as its own
// ServiceAccount, leader election on, the admission webhooks and the
// service-pins policy installed, the binaries' default client-side limits
// (-unthrottled adds --kube-api-qps=-1, the old lab setting).
//
// In one run it
//
//  1. starts etcd, kube-apiserver (with an audit log of every write, which
//     names the client) and kube-controller-manager, builds bin/manager and
//     bin/metallb-iad, and starts the manager with the chart's flags;
//  2. creates N ConfigMaps with -workers concurrent clients: the raw create
//     rate of plain objects on this machine, the floor for the rest;
//  3. static phase: creates an IPAddressClass and N IPAddresses of it
//     (source fromClass), waits until they are Available, takes the floor
//     again (N more ConfigMaps: how far the host and the control plane
//     have drifted since, to set beside the phase's time), creates N IPv4
//     claims and waits (through a watch) until every claim is Bound, lets
//     the writes settle, and counts the writes from kube-apiserver's
//     apiserver_request_total and, by client, from its audit log;
//  4. the same with -large claims of a second class: the time per claim
//     at that size against N's;
//  5. (the driver path, unless -driver=false) starts MetalLB's controller,
//     measures the MetalLB floor — N Services pinned to addresses of an
//     autoAssign: false pool, from the first create until MetalLB wrote
//     every one's address into its status — then starts bin/metallb-iad,
//     creates a class of its provisioner and N claims of it, and waits
//     until every claim is Bound and every address is held by its
//     placeholder in MetalLB's books;
//  6. prints each phase's figures, then a summary of every figure beside
//     its target: the bind rate against the floor, the time per claim at
//     -large against N, the driver path's times against MetalLB's floor,
//     the controllers' writes per claim (events included, the tenant's
//     creates and MetalLB's writes excluded), kube-apiserver's CPU per bind,
//     and the controllers' resident set and Go heap after each phase.
//
// It never fails on the figures: it fails only when something does not work
// (a start fails, a create fails, or a wait outlasts -timeout). It
// stops every process and the control plane on the way out, also on Ctrl-C.
// Every process's output, the control plane's included, and the audit log
// go to a log directory, kept when the run fails (or with -keep-logs).
//
// Usage:
//
//	go run ./test/bench [-n 1000] [-large 10000] [-workers 32] [-timeout 10m] [-v] [-keep-logs]
//	    [-driver=false] [-unthrottled] [-manager-args '--claim-workers=16'] [-driver-args '--provision-workers=8']
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/core"
	"github.com/cozystack/address-controller/internal/driver"
	"github.com/cozystack/address-controller/test/controlplane"
	testmetallb "github.com/cozystack/address-controller/test/metallb"
)

// Targets, printed next to the figures for reference.
const (
	targetRatio          = 0.15
	targetWritesPerClaim = 3.0
	// targetGrowth bounds the time per claim of the large static phase
	// against the first.
	targetGrowth = 1.2
)

// What the benchmark creates.
const (
	configMapNamespace = "bench-configmaps"
	claimNamespace     = "bench-claims"
	className          = "bench"
	provisioner        = "bench.example.com/static"
	firstIP            = "100.64.0.0"
	largeFirstIP       = "100.65.0.0"
	maxObjects         = 1 << 16 // addresses in 100.64.0.0/16
)

const (
	// settlePoll and settleMax bound the wait for the controllers' writes
	// to stop before a metrics snapshot.
	settlePoll = time.Second
	settleMax  = 30 * time.Second
)

type options struct {
	n, workers  int
	large       int
	unthrottled bool
	pprof       bool
	scale       bool
	sizes       scaleSizes
	timeout     time.Duration
	verbose     bool
	keepLogs    bool
	driver      bool
	managerArgs []string
	driverArgs  []string
	// memoryLimit, when set, replaces the memory limit the charts give
	// the controllers (see memoryLimits).
	memoryLimit string
}

func main() {
	var opts options
	var managerArgs, driverArgs string
	// An own flag set: the control plane's dependencies register flags
	// (such as -kubeconfig) on the default one that mean nothing here.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.IntVar(&opts.n, "n", 1000, "objects of each kind: ConfigMaps, IPAddresses, IPAddressClaims, MetalLB Services")
	fs.IntVar(&opts.large, "large", 10000, "claims of a second static class, measured after the first N (time per claim against N's); 0 skips")
	fs.BoolVar(&opts.unthrottled, "unthrottled", false, "run the controllers with client-side rate limiting off (--kube-api-qps=-1) instead of the shipped default")
	fs.BoolVar(&opts.scale, "scale", false, "make bench-scale: N static claims, then -scale-static more (a /16), -scale-services plain LoadBalancer Services, "+
		"-scale-driver claims of a MetalLB class and -scale-attached Services attached to them; the controllers' memory after each phase")
	fs.IntVar(&opts.sizes.static, "scale-static", 65536, "with -scale: static claims of the /16 class")
	fs.IntVar(&opts.sizes.services, "scale-services", 10000, "with -scale: plain LoadBalancer Services")
	fs.IntVar(&opts.sizes.driver, "scale-driver", 10000, "with -scale: claims of the MetalLB class")
	fs.IntVar(&opts.sizes.attached, "scale-attached", 5000, "with -scale: Services attached to those claims")
	fs.BoolVar(&opts.pprof, "pprof", false, "profile the controllers (--pprof-bind-address): CPU while claims bind, heap after each phase, saved in the log directory (kept)")
	fs.IntVar(&opts.workers, "workers", 32, "concurrent clients creating ConfigMaps, IPAddresses, claims and Services")
	fs.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "give up when a wait takes longer than this (a stuck run, not a slow one)")
	fs.BoolVar(&opts.verbose, "v", false, "copy the output of every process the bench starts to stderr")
	fs.BoolVar(&opts.keepLogs, "keep-logs", false, "keep the log directory after a successful run too (a failed run always keeps it)")
	fs.BoolVar(&opts.driver, "driver", true, "measure the driver path (MetalLB and metallb-iad) after the core")
	fs.StringVar(&managerArgs, "manager-args", "", "extra flags for bin/manager, space-separated")
	fs.StringVar(&driverArgs, "driver-args", "", "extra flags for bin/metallb-iad, space-separated")
	fs.StringVar(&opts.memoryLimit, "memory-limit", "", "run both controllers as in a pod with this memory limit (a quantity: 256Mi) instead of the one their chart sets")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: never returns an error
	opts.keepLogs = opts.keepLogs || opts.pprof
	opts.managerArgs = strings.Fields(managerArgs)
	opts.driverArgs = strings.Fields(driverArgs)
	if opts.n < 1 || opts.n > maxObjects || opts.large < 0 || opts.large > maxObjects || opts.workers < 1 {
		fmt.Fprintf(os.Stderr, "bench: -n must be in 1..%d and -workers at least 1\n", maxObjects)
		os.Exit(2)
	}
	// The client libraries log through controller-runtime's logger; keep
	// them quiet unless asked.
	logOut := io.Discard
	if opts.verbose {
		logOut = os.Stderr
	}
	logf.SetLogger(zap.New(zap.WriteTo(logOut)))

	start := time.Now()
	err := run(opts)
	say("whole run took %s", time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: error:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench | "+format+"\n", args...)
}

var scheme = kruntime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

// run sets up, measures, reports and tears down.
func run(opts options) (err error) {
	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stopSignals()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	binDir, err := controlplane.BinDir()
	if err != nil {
		return err
	}
	if err := build(ctx, root); err != nil {
		return err
	}

	// Every log outlives the run when it fails: a stall is read there.
	logDir, err := os.MkdirTemp("", "bench-logs-")
	if err != nil {
		return err
	}
	say("logs in %s", logDir)
	defer func() {
		if err != nil || opts.keepLogs {
			say("logs kept in %s", logDir)
			return
		}
		err = os.RemoveAll(logDir)
	}()
	procs := &children{dir: logDir, verbose: opts.verbose, cancel: cancel}
	defer func() { err = errors.Join(err, procs.closeFiles()) }()

	cp, cpReady, err := startControlPlane(ctx, procs, binDir, opts.driver)
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the control plane")
		err = errors.Join(err, cp.Stop())
	}()

	tmp, err := os.MkdirTemp("", "bench-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, procs.stop()) }()

	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0 // negative QPS: no client-side rate limit
	cfg.UserAgent = "bench"    // the tenant, in the audit log's breakdown
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	b := &bench{
		opts: opts, c: c, cp: cp,
		root: root, binDir: binDir, tmp: tmp, kubeconfig: kubeconfig, procs: procs,
		auditPath: filepath.Join(logDir, auditLog),
	}
	if b.shipped, err = b.prepareShipped(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.shipped.webhooks.Cleanup()) }()
	if b.limits, err = memoryLimits(root, b.opts.memoryLimit); err != nil {
		return err
	}
	if b.manager, err = procs.start("manager", filepath.Join(root, "bin", "manager"), b.managerArgs(b.shipped), b.limits.env("manager")); err != nil {
		return err
	}
	if err := b.startWebhooks(ctx, b.shipped); err != nil {
		return fmt.Errorf("%w%s", err, b.manager.describe())
	}

	if opts.scale {
		res, err := b.measureScale(ctx, opts.sizes)
		if err != nil {
			return err
		}
		res.print(os.Stdout, opts, b.limits)
		return nil
	}
	sum := &summary{opts: opts, limits: b.limits, controlPlaneStart: cpReady}
	if err := b.measureRaw(ctx, &sum.raw); err != nil {
		return err
	}
	if sum.static, err = b.measureStatic(ctx, staticPhase{n: opts.n, class: className, namespace: claimNamespace, first: firstIP}); err != nil {
		return err
	}
	sum.static.print(os.Stdout, opts, "core: static class")
	if opts.large > 0 {
		ph := staticPhase{n: opts.large, class: className + "-large", namespace: claimNamespace + "-large", first: largeFirstIP}
		if sum.large, err = b.measureStatic(ctx, ph); err != nil {
			return err
		}
		sum.large.print(os.Stdout, opts, "core: static class, large")
	}
	if opts.driver {
		if sum.driver, err = b.measureDriver(ctx, opts.n, true); err != nil {
			return err
		}
		sum.driver.print(os.Stdout, opts)
	}
	sum.print(os.Stdout)
	return nil
}

// build rebuilds the binaries the bench runs (a no-op when they are up to
// date), so that it never measures a stale one.
func build(ctx context.Context, root string) error {
	for _, pkg := range []string{"manager", "metallb-iad"} {
		say("building bin/%s", pkg)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(root, "bin", pkg), "./cmd/"+pkg)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/%s: %w", pkg, err)
		}
	}
	return nil
}

// auditLog is kube-apiserver's audit log, in the log directory.
const auditLog = "kube-apiserver-audit.log"

// startControlPlane starts etcd, kube-apiserver (auditing writes) and
// kube-controller-manager with their logs in procs' directory, and our
// CRDs plus, for the driver path, MetalLB's.
func startControlPlane(ctx context.Context, procs *children, binDir string, driver bool) (*controlplane.ControlPlane, time.Duration, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, 0, err
	}
	crds := []string{filepath.Join(root, "config", "crd")}
	if driver {
		crds = append(crds, testmetallb.CRDDir(binDir))
	}
	policy := filepath.Join(procs.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, 0, err
	}
	var logErr error
	say("starting the control plane")
	t0 := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		CRDDirectoryPaths: crds,
		APIServerFlags:    auditFlags(policy, filepath.Join(procs.dir, auditLog)),
		Output: func(component string) io.Writer {
			f, err := procs.logFile(component)
			if err != nil {
				logErr = err
				return nil
			}
			return f
		},
	})
	if err != nil {
		return nil, 0, errors.Join(err, logErr)
	}
	ready := time.Since(t0)
	say("control plane ready in %s", ready.Round(100*time.Millisecond))
	return cp, ready, nil
}

// bench holds what the measurements share.
type bench struct {
	opts    options
	c       client.WithWatch
	cp      *controlplane.ControlPlane
	manager *child
	// driver is metallb-iad once the driver path started it.
	driver  *child
	shipped *shipped
	// limits are the controllers' memory limits, as their charts set them.
	limits memoryLimit

	// What the driver path starts its processes with.
	root, binDir, tmp, kubeconfig string
	procs                         *children
	// auditPath is kube-apiserver's audit log.
	auditPath string
}

// rawResults are the yardstick's figures.
type rawResults struct {
	rawElapsed time.Duration
	// rawAPIServerCPU is what kube-apiserver used creating the ConfigMaps.
	rawAPIServerCPU float64
}

// staticResults are one static phase's figures.
type staticResults struct {
	n                int
	provisionElapsed time.Duration
	// bindElapsed runs from the first claim create request to the last
	// claim seen Bound.
	bindElapsed time.Duration
	createTime  time.Duration // creating the N claims
	// floorElapsed is the time -n ConfigMap creates took just before the
	// claims, with the phase's addresses in place.
	floorElapsed time.Duration
	timeToBound  []time.Duration
	writes       requests
	agents       auditCounts
	// apiServerCPU and managerCPU are the CPU seconds kube-apiserver and
	// the manager used from just before the first claim create until the
	// writes settled; negative when unknown.
	apiServerCPU, managerCPU float64
	// memory is the manager's after the phase.
	memory memory
}

// perClaim is the time per claim.
func (r *staticResults) perClaim() time.Duration { return r.bindElapsed / time.Duration(r.n) }

// floorRow is the summary row that sets a larger phase's growth in time per
// claim beside the floor's own growth between the two phases (ConfigMap
// creates taken just before each): how much of it the control plane would
// show for objects of its own. It is context, not a target.
func floorRow(base, large *staticResults) (name, value string) {
	if base.floorElapsed <= 0 || large.floorElapsed <= 0 {
		return "", ""
	}
	grow := large.perClaim().Seconds() / base.perClaim().Seconds()
	drift := large.floorElapsed.Seconds() / base.floorElapsed.Seconds()
	return fmt.Sprintf("  the floor beside N = %d, against N = %d's", large.n, base.n),
		fmt.Sprintf("%.2f × (%s, then %s for the same creates); time per claim ÷ floor %.2f ×",
			drift, base.floorElapsed.Round(time.Millisecond), large.floorElapsed.Round(time.Millisecond), grow/drift)
}

// controllerWritesOf are the writes the core and the driver made for the
// claims, from the audit log: events included; the tenant's and MetalLB's
// excluded, and so are the class status writes (at most one per class per
// interval however many claims bind; classWritesOf counts them).
func controllerWritesOf(a auditCounts) float64 {
	var n float64
	for k, c := range a {
		if (k.agent == core.EventSource || k.agent == driver.EventSource) && k.resource != classStatus && k.resource != leases {
			n += c.total()
		}
	}
	return n
}

// classStatus is the class status subresource, as the audit log names
// it; leases the leader-election Leases, renewed by the clock, not per claim.
const (
	classStatus = "ipaddressclasses.local.sdn.cozystack.io/status"
	leases      = "leases.coordination.k8s.io"
)

// classWritesOf are the controllers' class status writes.
func classWritesOf(a auditCounts) float64 {
	var n float64
	for k, c := range a {
		if (k.agent == core.EventSource || k.agent == driver.EventSource) && k.resource == classStatus {
			n += c.total()
		}
	}
	return n
}

// staticPhase is one measurement of the core alone: n claims of a class
// whose addresses exist up front (source fromClass), from first.
type staticPhase struct {
	n                int
	class, namespace string
	first            string
}

// measureRaw measures the raw create rate of ConfigMaps: the yardstick.
func (b *bench) measureRaw(ctx context.Context, res *rawResults) error {
	n := b.opts.n
	if err := b.ensureNamespace(ctx, configMapNamespace); err != nil {
		return err
	}
	// A fresh API server is slower for its first requests (caches, TLS
	// sessions, etcd warm-up); warm it up so the raw rate is its steady one.
	if _, err := b.createAll(ctx, n/4, func(ctx context.Context, i int) error {
		return b.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: configMapNamespace, Name: fmt.Sprintf("warm-%05d", i)}})
	}); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	// N creates take well under a second here, so one pause of the host
	// moves a single run by half: the floor is the median of three, and
	// the CPU per create their mean.
	say("creating %d ConfigMaps with %d workers, %d times", n, b.opts.workers, floorRuns)
	rawBefore, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	runs := make([]time.Duration, floorRuns)
	for i := range runs {
		if runs[i], err = b.createConfigMaps(ctx, fmt.Sprintf("cm%d", i)); err != nil {
			return err
		}
	}
	rawAfter, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	slices.Sort(runs)
	res.rawElapsed = runs[floorRuns/2]
	say("floor runs: %s", runs)
	res.rawAPIServerCPU = cpuDelta(rawBefore.cpu, rawAfter.cpu) / floorRuns
	return nil
}

// floorRuns is how many times measureRaw takes the floor.
const floorRuns = 3

// ensureNamespace creates namespace name unless it exists.
func (b *bench) ensureNamespace(ctx context.Context, name string) error {
	err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// createConfigMaps creates -n ConfigMaps named prefix-i with the bench's
// workers and returns how long they took: the floor at that moment.
func (b *bench) createConfigMaps(ctx context.Context, prefix string) (time.Duration, error) {
	if err := b.ensureNamespace(ctx, configMapNamespace); err != nil {
		return 0, err
	}
	took, err := b.createAll(ctx, b.opts.n, func(ctx context.Context, i int) error {
		return b.c.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: configMapNamespace, Name: fmt.Sprintf("%s-%05d", prefix, i)},
			Data:       map[string]string{"index": fmt.Sprint(i)},
		})
	})
	if err != nil {
		return 0, fmt.Errorf("creating ConfigMaps: %w", err)
	}
	return took, nil
}

// measureStatic provisions the phase's addresses, measures the floor again
// with them in place, then creates its claims and waits until every one is
// Bound.
func (b *bench) measureStatic(ctx context.Context, ph staticPhase) (*staticResults, error) {
	res := &staticResults{n: ph.n}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ph.namespace}}); err != nil {
		return nil, err
	}
	var err error
	if res.provisionElapsed, err = b.provision(ctx, ph); err != nil {
		return nil, err
	}
	// The host's speed drifts, and the API server and etcd slow as objects
	// accumulate: the floor taken beside each phase tells how much of a
	// phase's time per claim is theirs.
	if res.floorElapsed, err = b.createConfigMaps(ctx, ph.class); err != nil {
		return nil, err
	}
	say("floor beside this phase: %d ConfigMaps in %s", b.opts.n, res.floorElapsed.Round(time.Millisecond))

	before, err := b.settledSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	managerCPUBefore := processCPU(b.manager.pid())

	claimsBound, err := track(ctx, b.c, "claims Bound",
		func() client.ObjectList { return &v1alpha1.IPAddressClaimList{} },
		[]client.ListOption{client.InNamespace(ph.namespace)}, ph.n,
		func(o client.Object) bool { return o.(*v1alpha1.IPAddressClaim).Status.Phase == v1alpha1.ClaimBound })
	if err != nil {
		return nil, err
	}
	defer claimsBound.Close()

	say("creating %d claims of class %s with %d workers", ph.n, ph.class, b.opts.workers)
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		b.profile(ctx, b.manager, "profile?seconds=20", ph.class+"-cpu")
	}()
	apiProfiled := make(chan struct{})
	go func() {
		defer close(apiProfiled)
		// The same first seconds of every phase, so the phases compare.
		b.profileAPIServer(ctx, 5, ph.class+"-cpu")
	}()
	defer func() { <-apiProfiled }()
	defer func() { <-profiled }()
	var created []time.Time
	created, res.createTime, err = b.createClaims(ctx, ph.n, ph.namespace, ph.class)
	if err != nil {
		return nil, fmt.Errorf("creating claims: %w", err)
	}
	say("created %d claims in %s; waiting for them to be Bound", ph.n, res.createTime.Round(time.Millisecond))
	if err := claimsBound.wait(ctx, b.opts.timeout); err != nil {
		return nil, err
	}
	// The addresses' own Bound phase follows; settledSnapshot waits for
	// those writes. Watching them too would load the API server the
	// figures measure.

	if res.bindElapsed, res.timeToBound, err = spans(created, claimsBound.times(), claimName); err != nil {
		return nil, err
	}

	after, err := b.settledSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	res.writes = after.writes.since(before.writes)
	if res.agents, err = readAudit(b.auditPath, before.audit, after.audit); err != nil {
		return nil, err
	}
	res.apiServerCPU = cpuDelta(before.cpu, after.cpu)
	res.managerCPU = cpuDelta(managerCPUBefore, processCPU(b.manager.pid()))
	res.memory = b.memory(ctx, b.manager)
	b.profile(ctx, b.manager, "heap?gc=1", ph.class+"-heap")
	say("%d claims Bound in %s; manager %s", ph.n, res.bindElapsed.Round(time.Millisecond), res.memory)
	return res, nil
}

// createClaims creates n IPv4 claims of class in namespace with the
// bench's workers; it returns when each create was sent and how long all
// took.
func (b *bench) createClaims(ctx context.Context, n int, namespace, class string) (created []time.Time, took time.Duration, err error) {
	created = make([]time.Time, n)
	took, err = b.createAll(ctx, n, func(ctx context.Context, i int) error {
		created[i] = time.Now()
		return b.c.Create(ctx, &v1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: claimName(i)},
			Spec:       v1alpha1.IPAddressClaimSpec{ClassName: class, Family: v1alpha1.IPv4},
		})
	})
	return created, took, err
}

func claimName(i int) string { return fmt.Sprintf("claim-%05d", i) }

// provision creates the phase's class and its addresses, and waits until
// the manager has made every one Available.
func (b *bench) provision(ctx context.Context, ph staticPhase) (time.Duration, error) {
	n := ph.n
	say("provisioning %d IPAddresses of class %s", n, ph.class)
	start := time.Now()
	class := &v1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: ph.class},
		Spec:       v1alpha1.IPAddressClassSpec{Provisioner: provisioner, ReclaimPolicy: v1alpha1.ReclaimRetain},
	}
	if err := b.c.Create(ctx, class); err != nil {
		return 0, err
	}
	available, err := track(ctx, b.c, "addresses Available",
		func() client.ObjectList { return &v1alpha1.IPAddressList{} }, nil, n,
		func(o client.Object) bool {
			a := o.(*v1alpha1.IPAddress)
			return a.Spec.ClassName == ph.class && a.Status.Phase == v1alpha1.AddressAvailable
		})
	if err != nil {
		return 0, err
	}
	defer available.Close()

	ips := addressesFrom(ph.first, n)
	_, err = b.createAll(ctx, n, func(ctx context.Context, i int) error {
		name, err := v1alpha1.IPAddressName(ips[i].String())
		if err != nil {
			return err
		}
		return b.c.Create(ctx, &v1alpha1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.IPAddressSpec{
				Address:       ips[i].String(),
				ClassName:     ph.class,
				ReclaimPolicy: v1alpha1.ReclaimRetain,
				Source:        v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}},
			},
		})
	})
	if err != nil {
		return 0, fmt.Errorf("creating IPAddresses: %w", err)
	}
	if err := available.wait(ctx, b.opts.timeout); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	say("%d addresses Available in %s", n, elapsed.Round(time.Millisecond))
	return elapsed, nil
}

// createAll calls create for 0..n-1 from opts.workers goroutines and returns
// the wall time; the first error stops it.
func (b *bench) createAll(ctx context.Context, n int, create func(ctx context.Context, i int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(b.opts.workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := create(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	return elapsed, nil
}

// snapshot scrapes kube-apiserver's figures and notes where its audit log
// stands.
func (b *bench) snapshot(ctx context.Context) (snapshot, error) {
	text, err := b.cp.APIServerMetrics(ctx)
	if err != nil {
		return snapshot{}, err
	}
	snap, err := parseMetrics(text)
	snap.audit = auditSize(b.auditPath)
	return snap, err
}

// settledSnapshot waits until the controller's writes (this API group and
// events) stop moving, then returns kube-apiserver's figures.
func (b *bench) settledSnapshot(ctx context.Context) (snapshot, error) {
	snap, _, err := b.settledSnapshotOf(ctx, controllerWrites, settleMax)
	return snap, err
}

// settledSnapshotOf waits until the writes moving counts stop moving, or
// for at most limit, then returns kube-apiserver's figures and whether they
// had stopped.
func (b *bench) settledSnapshotOf(ctx context.Context, moving func(requests) float64, limit time.Duration) (snapshot, bool, error) {
	deadline := time.Now().Add(limit)
	var last float64 = -1
	for {
		snap, err := b.snapshot(ctx)
		if err != nil {
			return snapshot{}, false, err
		}
		ours := moving(snap.writes)
		if ours == last {
			return snap, true, nil
		}
		if time.Now().After(deadline) {
			return snap, false, nil
		}
		last = ours
		select {
		case <-ctx.Done():
			return snapshot{}, false, context.Cause(ctx)
		case <-time.After(settlePoll):
		}
	}
}

// controllerWrites sums the rows the manager can write: its API group and
// events.
func controllerWrites(r requests) float64 {
	var t float64
	for k, c := range r {
		if k.group == v1alpha1.GroupVersion.Group || k.resource == "events" {
			t += c.total()
		}
	}
	return t
}

func (r *staticResults) print(w io.Writer, opts options, title string) {
	n := float64(r.n)
	bindRate := n / r.bindElapsed.Seconds()
	total := r.writes.total()
	fmt.Fprintf(w, "\n%s: N=%d, %d workers; %d addresses provisioned and Available in %s\n\n",
		title, r.n, opts.workers, r.n, r.provisionElapsed.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value, note string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, value, note) }
	row("claims bound per second", fmt.Sprintf("%.1f claims/s", bindRate),
		fmt.Sprintf("%d from first create to last Bound in %s (creates took %s)", r.n, r.bindElapsed.Round(time.Millisecond), r.createTime.Round(time.Millisecond)))
	row("time per claim", r.perClaim().Round(time.Microsecond).String(), "")
	row("time to Bound p50", percentile(r.timeToBound, 0.50).Round(time.Millisecond).String(), "from the create request to the watch seeing Bound")
	row("time to Bound p99", percentile(r.timeToBound, 0.99).Round(time.Millisecond).String(), "max "+r.timeToBound[len(r.timeToBound)-1].Round(time.Millisecond).String())
	row("API writes per bound claim, total", fmt.Sprintf("%.3f", total/n), fmt.Sprintf("%.0f mutating requests, the %d claim creates included", total, r.n))
	row("API writes per bound claim, controllers", fmt.Sprintf("%.3f", controllerWritesOf(r.agents)/n), "from the audit log, events included")
	row("CPU per bound claim, kube-apiserver", cpuPer(r.apiServerCPU, n), "its process_cpu_seconds_total over the claim phase")
	row("CPU per bound claim, manager", cpuPer(r.managerCPU, n), "from /proc over the claim phase")
	row("manager memory after the phase", r.memory.String(), "")
	_ = tw.Flush()

	fmt.Fprintf(w, "\nmutating requests while binding (kube-apiserver apiserver_request_total; every client):\n")
	printRequests(w, r.writes, n, "ipaddressclaims")
	printAgents(w, r.agents, n, total)
	fmt.Fprintln(w)
}

// cpuDelta is after - before, or -1 when either is unknown.
func cpuDelta(before, after float64) float64 {
	if before < 0 || after < 0 {
		return -1
	}
	return after - before
}

func cpuPer(seconds, n float64) string {
	if seconds < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f ms", seconds*1000/n)
}

// processCPU is the user+system CPU time of a process in seconds, from
// /proc/<pid>/stat; negative where that is unavailable.
func processCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces; fields count from after it.
	_, rest, ok := strings.Cut(string(data), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return -1
	}
	utime, errU := strconv.ParseFloat(fields[11], 64) // field 14
	stime, errS := strconv.ParseFloat(fields[12], 64) // field 15
	if errU != nil || errS != nil {
		return -1
	}
	// Clock ticks: USER_HZ, 100 on every Linux architecture Go supports.
	return (utime + stime) / 100
}

func target(met bool, text string) string {
	if met {
		return text + ": met"
	}
	return text + ": NOT met"
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// cpuModel is ", <model name>" from /proc/cpuinfo, or "".
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return ", " + strings.TrimSpace(v)
		}
	}
	return ""
}

// summary is every figure of the run beside its target, printed last.
type summary struct {
	opts              options
	limits            memoryLimit
	controlPlaneStart time.Duration
	raw               rawResults
	static, large     *staticResults
	driver            *driverResults
}

func (s *summary) print(w io.Writer) {
	opts := s.opts
	mode := "shipped defaults (chart flags, webhooks and policy, ServiceAccounts)"
	if opts.unthrottled {
		mode = "unthrottled (--kube-api-qps=-1)"
	}
	fmt.Fprintf(w, "\nsummary: N=%d, %d workers, %d CPUs (%s/%s%s), %s; %s; control plane start %s\n\n",
		opts.n, opts.workers, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.Version(), mode,
		s.controlPlaneStart.Round(100*time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value, goal string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, value, goal) }
	row("figure", "measured", "target")
	n := float64(opts.n)
	rawRate := n / s.raw.rawElapsed.Seconds()
	row("raw create floor (ConfigMaps)", fmt.Sprintf("%.0f/s", rawRate), "—")
	st := s.static
	ratio := n / st.bindElapsed.Seconds() / rawRate
	row("static binds", fmt.Sprintf("%.0f/s = %.3f × floor, p50 %s", n/st.bindElapsed.Seconds(), ratio,
		percentile(st.timeToBound, 0.5).Round(time.Millisecond)), target(ratio >= targetRatio, fmt.Sprintf("≥ %.2f × floor", targetRatio)))
	if s.large != nil {
		l := s.large
		grow := l.perClaim().Seconds() / st.perClaim().Seconds()
		row(fmt.Sprintf("static binds at N = %d", l.n), fmt.Sprintf("%.0f/s, time per claim %.2f × N = %d's, p50 %s",
			float64(l.n)/l.bindElapsed.Seconds(), grow, st.n, percentile(l.timeToBound, 0.5).Round(time.Millisecond)),
			target(grow <= targetGrowth, fmt.Sprintf("time per claim ≤ %.1f ×", targetGrowth)))
		if name, value := floorRow(st, l); name != "" {
			row(name, value, "— (context)")
		}
	}
	staticWrites := controllerWritesOf(st.agents) / n
	row("writes per static claim (core)", fmt.Sprintf("%.2f, and %.0f class status writes in all", staticWrites, classWritesOf(st.agents)),
		target(staticWrites <= targetWritesPerClaim, fmt.Sprintf("≤ %.0f", targetWritesPerClaim)))
	if s.raw.rawAPIServerCPU > 0 && st.apiServerCPU > 0 {
		row("kube-apiserver CPU per static bind", fmt.Sprintf("%s = %.1f ConfigMap creates", cpuPer(st.apiServerCPU, n), st.apiServerCPU/s.raw.rawAPIServerCPU), "—")
	}
	if d := s.driver; d != nil {
		floor := d.floorElapsed.Seconds()
		bound, held := d.boundElapsed.Seconds()/floor, d.heldElapsed.Seconds()/floor
		row(fmt.Sprintf("MetalLB floor (%d pinned Services)", opts.n), d.floorElapsed.Round(100*time.Millisecond).String(), "—")
		row("driver path: all Bound", fmt.Sprintf("%s = %.2f × floor", d.boundElapsed.Round(100*time.Millisecond), bound),
			target(bound <= targetBoundOfFloor, fmt.Sprintf("≤ %.1f × floor", targetBoundOfFloor)))
		row("driver path: all held in MetalLB's books", fmt.Sprintf("%s = %.2f × floor", d.heldElapsed.Round(100*time.Millisecond), held),
			target(held <= targetHeldOfFloor, fmt.Sprintf("≤ %.1f × floor", targetHeldOfFloor)))
		if d.floorAPIServerCPU > 0 && d.apiServerCPU > 0 {
			// Both paths wait on the API server: the held phase's CPU
			// beside the floor's says how much of its time is the
			// binding's work added to MetalLB's.
			row("  kube-apiserver CPU beside it, against the floor's", fmt.Sprintf("%s per claim, %s per floor Service: %.2f ×",
				cpuPer(d.apiServerCPU, n), cpuPer(d.floorAPIServerCPU, n), d.apiServerCPU/d.floorAPIServerCPU), "— (context)")
		}
		dw := controllerWritesOf(d.agents) / n
		row("writes per driver claim (core + driver)", fmt.Sprintf("%.2f, and %.0f class status writes in all", dw, classWritesOf(d.agents)),
			target(dw <= targetDriverWritesPerClaim, fmt.Sprintf("≤ %.0f", targetDriverWritesPerClaim)))
		row("metallb-iad memory after the driver path", d.driverMemory.String(), s.limits.target("metallb-iad", d.driverMemory))
		row("manager memory after the driver path", d.managerMemory.String(), s.limits.target("manager", d.managerMemory))
	} else {
		last := st
		if s.large != nil {
			last = s.large
		}
		row("manager memory at the end", last.memory.String(), s.limits.target("manager", last.memory))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}
