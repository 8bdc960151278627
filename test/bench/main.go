// Command bench is what `make bench` runs: it measures how fast the shipped
// manager binary (bin/manager) binds IPAddressClaims, and how many API writes
// each binding costs, on one local control plane (test/controlplane); then
// the same for claims of a MetalLB class served by the driver
// (bin/metallb-iad), against what MetalLB alone takes for as many addresses.
//
// In one run it
//
//  1. starts etcd, kube-apiserver (with an audit log of every write, which
//     names the client) and kube-controller-manager, builds bin/manager and
//     bin/metallb-iad (`go build`, a no-op when they are up to date) and
//     starts the manager as a child process without leader election,
//     metrics or probes, and with client-side rate limiting off
//     (--kube-api-qps=-1);
//  2. creates N ConfigMaps with -workers concurrent clients: the raw create
//     rate of plain objects on this machine, the yardstick for the rest;
//  3. creates an IPAddressClass and N IPAddresses of it (100.64.0.0/16,
//     source fromClass) and waits until the manager has made them all
//     Available;
//  4. snapshots kube-apiserver's apiserver_request_total, creates N IPv4
//     claims of the class with -workers concurrent clients, waits (through a
//     watch) until every claim is Bound and every address is Bound, lets the
//     writes settle, and snapshots the counter again;
//  5. prints the bind rate (N over the time from the first create request to
//     the last claim seen Bound), p50 and p99 of each claim's time from its
//     create request to being seen Bound, the mutating API requests (POST,
//     PUT, PATCH, DELETE, of every resource, events included; requests
//     refused with 409 Conflict count too, and show as non-2xx) per bound claim
//     in total and without the N creates (the controller's share) with a
//     breakdown by resource and verb, the raw create rate and the ratio of
//     the two rates, next to the targets: ratio ≥ 0.15, ≤ 4 controller
//     writes per bind; and the CPU time kube-apiserver and the manager spent
//     per bound claim, to tell which of them limits the rate;
//  6. (the driver path, unless -driver=false) starts MetalLB's controller
//     (bin/metallb-controller) and creates two disjoint autoAssign: false
//     IPAddressPools sized 4×N; measures the MetalLB floor: N single-stack
//     LoadBalancer Services, each pinned with metallb.io/loadBalancerIPs to
//     its own address of the first pool, from the first create until MetalLB
//     has written every one's address into its status; deletes them and
//     waits until they are gone;
//  7. starts bin/metallb-iad (in its namespace metallb-iad-system, flags as
//     for the manager), creates a class of provisioner
//     metallb.drivers.local.sdn.cozystack.io naming the second pool and waits
//     until the driver reports it Ready; then creates N IPv4 claims of it as
//     in step 4 and waits until every claim is Bound and every address of
//     the class is held: its placeholder Service carries its IP in status;
//  8. prints both times against the floor (targets: all Bound within 0.5 ×
//     the floor, all held within 1.1 × the floor), p50 and p99 per claim,
//     the writes per claim in all and without the N claim creates (target
//     ≤ 8, MetalLB's and events included) by resource and verb, and by
//     client from the audit log, and each process's CPU per claim.
//
// It never fails on the figures: it fails only when something does not work
// (a start fails, a create fails, or a wait outlasts -timeout). It
// stops every process and the control plane on the way out, also on Ctrl-C.
// Every process's output, the control plane's included, and the audit log
// go to a log directory, kept when the run fails (or with -keep-logs).
// The API server counts every client's requests, so the breakdown also holds
// the control plane's own background writes (Lease renewals), a handful per
// run, and on the driver path kube-apiserver's own ClusterIP allocations
// (networking.k8s.io IPAddresses, one per Service).
//
// Usage:
//
//	go run ./test/bench [-n 1000] [-workers 32] [-timeout 10m] [-v] [-keep-logs] [-driver=false]
//	    [-manager-args '--claim-workers=16'] [-driver-args '--provision-workers=8']
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/test/controlplane"
	testmetallb "github.com/cozystack/address-controller/test/metallb"
)

// Targets, printed next to the figures for reference.
const (
	targetRatio          = 0.15
	targetWritesPerClaim = 4.0
)

// What the benchmark creates.
const (
	configMapNamespace = "bench-configmaps"
	claimNamespace     = "bench-claims"
	className          = "bench"
	provisioner        = "bench.example.com/static"
	firstIP            = "100.64.0.0"
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
	timeout     time.Duration
	verbose     bool
	keepLogs    bool
	driver      bool
	managerArgs []string
	driverArgs  []string
}

func main() {
	var opts options
	var managerArgs, driverArgs string
	// An own flag set: the control plane's dependencies register flags
	// (such as -kubeconfig) on the default one that mean nothing here.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.IntVar(&opts.n, "n", 1000, "objects of each kind: ConfigMaps, IPAddresses, IPAddressClaims, MetalLB Services")
	fs.IntVar(&opts.workers, "workers", 32, "concurrent clients creating ConfigMaps, IPAddresses, claims and Services")
	fs.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "give up when a wait takes longer than this (a stuck run, not a slow one)")
	fs.BoolVar(&opts.verbose, "v", false, "copy the output of every process the bench starts to stderr")
	fs.BoolVar(&opts.keepLogs, "keep-logs", false, "keep the log directory after a successful run too (a failed run always keeps it)")
	fs.BoolVar(&opts.driver, "driver", true, "measure the driver path (MetalLB and metallb-iad) after the core")
	fs.StringVar(&managerArgs, "manager-args", "", "extra flags for bin/manager, space-separated")
	fs.StringVar(&driverArgs, "driver-args", "", "extra flags for bin/metallb-iad, space-separated")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: never returns an error
	opts.managerArgs = strings.Fields(managerArgs)
	opts.driverArgs = strings.Fields(driverArgs)
	if opts.n < 1 || opts.n > maxObjects || opts.workers < 1 {
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

	managerFlags := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--webhook-port=0",  // the bench measures binding, not admission
		"--kube-api-qps=-1", // negative: no client-side rate limit
	}, opts.managerArgs...)
	mgr, err := procs.start("manager", filepath.Join(root, "bin", "manager"), managerFlags)
	if err != nil {
		return err
	}

	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0 // negative QPS: no client-side rate limit
	cfg.UserAgent = "bench"    // the tenant, in the audit log's breakdown
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	b := &bench{
		opts: opts, c: c, cp: cp, managerPid: mgr.pid(),
		root: root, binDir: binDir, tmp: tmp, kubeconfig: kubeconfig, procs: procs,
		auditPath: filepath.Join(logDir, auditLog),
	}
	res, err := b.measure(ctx)
	if err != nil {
		return err
	}
	res.controlPlaneStart = cpReady
	res.print(os.Stdout, opts)
	if !opts.driver {
		return nil
	}
	dres, err := b.measureDriver(ctx)
	if err != nil {
		return err
	}
	dres.print(os.Stdout, opts)
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
	opts       options
	c          client.WithWatch
	cp         *controlplane.ControlPlane
	managerPid int

	// What the driver path starts its processes with.
	root, binDir, tmp, kubeconfig string
	procs                         *children
	// auditPath is kube-apiserver's audit log.
	auditPath string
}

// results are the figures printed.
type results struct {
	controlPlaneStart time.Duration
	rawElapsed        time.Duration
	provisionElapsed  time.Duration
	// bindElapsed runs from the first claim create request to the last
	// claim seen Bound.
	bindElapsed time.Duration
	createTime  time.Duration // creating the N claims
	timeToBound []time.Duration
	writes      requests
	// apiServerCPU and managerCPU are the CPU seconds kube-apiserver and
	// the manager used from just before the first claim create until the
	// writes settled, rawAPIServerCPU what kube-apiserver used creating the
	// ConfigMaps; negative when unknown.
	apiServerCPU, managerCPU, rawAPIServerCPU float64
}

func (b *bench) measure(ctx context.Context) (*results, error) {
	n, res := b.opts.n, &results{}
	for _, ns := range []string{configMapNamespace, claimNamespace} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}

	// A fresh API server is slower for its first requests (caches, TLS
	// sessions, etcd warm-up); warm it up so the raw rate is its steady one.
	if _, err := b.createAll(ctx, func(ctx context.Context, i int) error {
		if i >= n/4 {
			return nil
		}
		return b.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: configMapNamespace, Name: fmt.Sprintf("warm-%05d", i)}})
	}); err != nil {
		return nil, fmt.Errorf("warming up: %w", err)
	}
	say("creating %d ConfigMaps with %d workers", n, b.opts.workers)
	rawBefore, err := b.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	res.rawElapsed, err = b.createAll(ctx, func(ctx context.Context, i int) error {
		return b.c.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: configMapNamespace, Name: fmt.Sprintf("cm-%05d", i)},
			Data:       map[string]string{"index": fmt.Sprint(i)},
		})
	})
	if err != nil {
		return nil, fmt.Errorf("creating ConfigMaps: %w", err)
	}
	rawAfter, err := b.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	res.rawAPIServerCPU = cpuDelta(rawBefore.cpu, rawAfter.cpu)

	if res.provisionElapsed, err = b.provision(ctx); err != nil {
		return nil, err
	}

	before, err := b.settledSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	managerCPUBefore := processCPU(b.managerPid)

	claimsBound, err := track(ctx, b.c, "claims Bound",
		func() client.ObjectList { return &v1alpha1.IPAddressClaimList{} },
		[]client.ListOption{client.InNamespace(claimNamespace)}, n,
		func(o client.Object) bool { return o.(*v1alpha1.IPAddressClaim).Status.Phase == v1alpha1.ClaimBound })
	if err != nil {
		return nil, err
	}
	defer claimsBound.Close()

	say("creating %d claims with %d workers", n, b.opts.workers)
	var created []time.Time
	created, res.createTime, err = b.createClaims(ctx, claimNamespace, className)
	if err != nil {
		return nil, fmt.Errorf("creating claims: %w", err)
	}
	say("created %d claims in %s; waiting for them to be Bound", n, res.createTime.Round(time.Millisecond))
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
	res.apiServerCPU = cpuDelta(before.cpu, after.cpu)
	res.managerCPU = cpuDelta(managerCPUBefore, processCPU(b.managerPid))
	return res, nil
}

// createClaims creates N IPv4 claims of class in namespace with the
// bench's workers; it returns when each create was sent and how long all
// took.
func (b *bench) createClaims(ctx context.Context, namespace, class string) (created []time.Time, took time.Duration, err error) {
	created = make([]time.Time, b.opts.n)
	took, err = b.createAll(ctx, func(ctx context.Context, i int) error {
		created[i] = time.Now()
		return b.c.Create(ctx, &v1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: claimName(i)},
			Spec:       v1alpha1.IPAddressClaimSpec{ClassName: class, Family: v1alpha1.IPv4},
		})
	})
	return created, took, err
}

func claimName(i int) string { return fmt.Sprintf("claim-%05d", i) }

// provision creates the class and N addresses of it, and waits until the
// manager has made every one Available.
func (b *bench) provision(ctx context.Context) (time.Duration, error) {
	n := b.opts.n
	say("provisioning %d IPAddresses of class %s", n, className)
	start := time.Now()
	class := &v1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: className},
		Spec:       v1alpha1.IPAddressClassSpec{Provisioner: provisioner, ReclaimPolicy: v1alpha1.ReclaimRetain},
	}
	if err := b.c.Create(ctx, class); err != nil {
		return 0, err
	}
	available, err := track(ctx, b.c, "addresses Available",
		func() client.ObjectList { return &v1alpha1.IPAddressList{} }, nil, n,
		func(o client.Object) bool { return o.(*v1alpha1.IPAddress).Status.Phase == v1alpha1.AddressAvailable })
	if err != nil {
		return 0, err
	}
	defer available.Close()

	ips := addressesFrom(firstIP, n)
	_, err = b.createAll(ctx, func(ctx context.Context, i int) error {
		name, err := v1alpha1.IPAddressName(ips[i].String())
		if err != nil {
			return err
		}
		return b.c.Create(ctx, &v1alpha1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.IPAddressSpec{
				Address:       ips[i].String(),
				ClassName:     className,
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
func (b *bench) createAll(ctx context.Context, create func(ctx context.Context, i int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(b.opts.workers, b.opts.n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.opts.n || ctx.Err() != nil {
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

func (r *results) print(w io.Writer, opts options) {
	n := float64(opts.n)
	rawRate := n / r.rawElapsed.Seconds()
	bindRate := n / r.bindElapsed.Seconds()
	ratio := bindRate / rawRate
	total := r.writes.total()
	controller := controllerWrites(r.writes) - n

	fmt.Fprintf(w, "\naddress-controller bench: N=%d, %d workers, %d CPUs (%s/%s%s), %s\n",
		opts.n, opts.workers, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.Version())
	fmt.Fprintf(w, "control plane start %s; %d addresses provisioned and Available in %s\n\n",
		r.controlPlaneStart.Round(100*time.Millisecond), opts.n, r.provisionElapsed.Round(time.Millisecond))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value, note string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, value, note) }
	row("raw create rate (ConfigMaps)", fmt.Sprintf("%.1f objects/s", rawRate), fmt.Sprintf("%d in %s", opts.n, r.rawElapsed.Round(time.Millisecond)))
	row("claims bound per second", fmt.Sprintf("%.1f claims/s", bindRate),
		fmt.Sprintf("%d from first create to last Bound in %s (creates took %s)", opts.n, r.bindElapsed.Round(time.Millisecond), r.createTime.Round(time.Millisecond)))
	row("bind rate / raw create rate", fmt.Sprintf("%.3f", ratio), target(ratio >= targetRatio, fmt.Sprintf("target ≥ %.2f", targetRatio)))
	row("time to Bound p50", percentile(r.timeToBound, 0.50).Round(time.Millisecond).String(), "from the create request to the watch seeing Bound")
	row("time to Bound p99", percentile(r.timeToBound, 0.99).Round(time.Millisecond).String(), "max "+r.timeToBound[len(r.timeToBound)-1].Round(time.Millisecond).String())
	row("API writes per bound claim, total", fmt.Sprintf("%.3f", total/n), fmt.Sprintf("%.0f mutating requests, the %d claim creates included", total, opts.n))
	row("API writes per bound claim, controller", fmt.Sprintf("%.3f", controller/n), target(controller/n <= targetWritesPerClaim, fmt.Sprintf("target ≤ %.0f", targetWritesPerClaim)))
	row("CPU per bound claim, kube-apiserver", cpuPer(r.apiServerCPU, n), "its process_cpu_seconds_total over the claim phase")
	row("CPU per bound claim, manager", cpuPer(r.managerCPU, n), "from /proc over the claim phase")
	row("CPU per ConfigMap create, kube-apiserver", cpuPer(r.rawAPIServerCPU, n), "for comparison")
	if r.rawAPIServerCPU > 0 {
		row("kube-apiserver CPU of a bind", fmt.Sprintf("%.1f ConfigMap creates", r.apiServerCPU/r.rawAPIServerCPU),
			"what one bound claim costs the API server, in raw creates")
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nmutating requests while binding (kube-apiserver apiserver_request_total; every client):\n")
	printRequests(w, r.writes, n, "ipaddressclaims")
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
