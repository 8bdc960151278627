// Command bench is what `make bench` runs: it measures how fast the shipped
// manager binary (bin/manager) binds IPAddressClaims, and how many API writes
// each binding costs, on one local control plane (test/controlplane).
//
// In one run it
//
//  1. starts etcd, kube-apiserver and kube-controller-manager, builds
//     bin/manager (`go build`, a no-op when it is up to date) and starts it
//     as a child process without leader election, metrics or probes, and
//     with client-side rate limiting off (--kube-api-qps=-1);
//  2. creates N ConfigMaps with -workers concurrent clients: the raw create
//     rate of plain objects on this machine, the yardstick for the rest;
//  3. creates an IPAddressClass and N IPAddresses of it (10.128.0.0/16,
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
//     per bound claim, to tell which of them limits the rate.
//
// It never fails on the figures: it fails only when something does not work
// (a start fails, a create fails, or a wait outlasts -timeout). It
// stops the manager and the control plane on the way out, also on Ctrl-C.
// The API server counts every client's requests, so the breakdown also holds
// the control plane's own background writes (Lease renewals), a handful per
// run.
//
// Usage:
//
//	go run ./test/bench [-n 1000] [-workers 32] [-timeout 10m] [-v] [-manager-args '--claim-workers=16']
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/netip"
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
	"github.com/cozystack/address-controller/test/proc"
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
	firstIP            = "10.128.0.0"
	maxObjects         = 1 << 16 // addresses in 10.128.0.0/16
)

const (
	managerGrace = 10 * time.Second
	// settlePoll and settleMax bound the wait for the manager's writes to
	// stop before a metrics snapshot.
	settlePoll = time.Second
	settleMax  = 30 * time.Second
)

type options struct {
	n, workers  int
	timeout     time.Duration
	verbose     bool
	managerArgs []string
}

func main() {
	var opts options
	var managerArgs string
	// An own flag set: the control plane's dependencies register flags
	// (such as -kubeconfig) on the default one that mean nothing here.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.IntVar(&opts.n, "n", 1000, "objects of each kind: ConfigMaps, IPAddresses and IPAddressClaims")
	fs.IntVar(&opts.workers, "workers", 32, "concurrent clients creating ConfigMaps, IPAddresses and claims")
	fs.DurationVar(&opts.timeout, "timeout", 10*time.Minute, "give up when a wait takes longer than this (a stuck run, not a slow one)")
	fs.BoolVar(&opts.verbose, "v", false, "copy the manager's output to stderr")
	fs.StringVar(&managerArgs, "manager-args", "", "extra flags for bin/manager, space-separated")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: never returns an error
	opts.managerArgs = strings.Fields(managerArgs)
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
	managerPath := filepath.Join(root, "bin", "manager")
	say("building %s", rel(root, managerPath))
	build := exec.CommandContext(ctx, "go", "build", "-o", managerPath, "./cmd/manager")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/manager: %w", err)
	}

	say("starting the control plane")
	t0 := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the control plane")
		err = errors.Join(err, cp.Stop())
	}()
	cpReady := time.Since(t0)
	say("control plane ready in %s", cpReady.Round(100*time.Millisecond))

	tmp, err := os.MkdirTemp("", "bench-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}

	managerFlags := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--kube-api-qps=-1", // negative: no client-side rate limit
	}, opts.managerArgs...)
	tail := proc.NewTail(40)
	var out io.Writer = tail
	var prefixer *proc.PrefixWriter
	if opts.verbose {
		prefixer = proc.NewPrefixWriter(os.Stderr, "manager | ")
		out = io.MultiWriter(tail, prefixer)
	}
	mgr, err := proc.Start("manager", managerPath, managerFlags, out)
	if err != nil {
		return err
	}
	say("started %s (pid %d) %s", rel(root, managerPath), mgr.Pid(), strings.Join(managerFlags[1:], " "))
	var stopping atomic.Bool
	defer func() {
		stopping.Store(true)
		say("stopping the manager")
		if stopErr := mgr.Stop(managerGrace); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("%w%s", stopErr, tail.Describe("the manager's output")))
		}
		if prefixer != nil {
			_ = prefixer.Flush()
		}
	}()
	go func() {
		<-mgr.Done()
		if !stopping.Load() {
			exitErr := mgr.Err()
			if exitErr == nil {
				exitErr = errors.New("exit status 0")
			}
			cancel(fmt.Errorf("the manager exited unexpectedly: %w%s", exitErr, tail.Describe("the manager's output")))
		}
	}()

	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0 // negative QPS: no client-side rate limit
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	b := &bench{opts: opts, c: c, cp: cp, managerPid: mgr.Pid()}
	res, err := b.measure(ctx)
	if err != nil {
		return err
	}
	res.controlPlaneStart = cpReady
	res.print(os.Stdout, opts)
	return nil
}

// bench holds what the measurements share.
type bench struct {
	opts       options
	c          client.WithWatch
	cp         *controlplane.ControlPlane
	managerPid int
}

// results are the figures printed.
type results struct {
	controlPlaneStart time.Duration
	rawElapsed        time.Duration
	provisionElapsed  time.Duration
	// bindElapsed runs from the first claim create request to the last
	// claim seen Bound.
	bindElapsed  time.Duration
	createTime   time.Duration // creating the N claims
	timeToBound  []time.Duration
	claimCreates int
	writes       requests
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
	created := make([]time.Time, n)
	var creates atomic.Int64
	res.createTime, err = b.createAll(ctx, func(ctx context.Context, i int) error {
		created[i] = time.Now()
		creates.Add(1)
		return b.c.Create(ctx, &v1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: claimNamespace, Name: claimName(i)},
			Spec:       v1alpha1.IPAddressClaimSpec{ClassName: className, Family: v1alpha1.IPv4},
		})
	})
	if err != nil {
		return nil, fmt.Errorf("creating claims: %w", err)
	}
	res.claimCreates = int(creates.Load())
	say("created %d claims in %s; waiting for them to be Bound", n, res.createTime.Round(time.Millisecond))
	if err := claimsBound.wait(ctx, b.opts.timeout); err != nil {
		return nil, err
	}
	// The addresses' own Bound phase follows; settledSnapshot waits for
	// those writes. Watching them too would load the API server the
	// figures measure.

	bound := claimsBound.times()
	first := slices.MinFunc(created, time.Time.Compare)
	var last time.Time
	for i := range n {
		at := bound[claimName(i)]
		if at.After(last) {
			last = at
		}
		res.timeToBound = append(res.timeToBound, at.Sub(created[i]))
	}
	res.bindElapsed = last.Sub(first)
	slices.Sort(res.timeToBound)

	after, err := b.settledSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	res.writes = after.writes.since(before.writes)
	res.apiServerCPU = cpuDelta(before.cpu, after.cpu)
	res.managerCPU = cpuDelta(managerCPUBefore, processCPU(b.managerPid))
	return res, nil
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

	ips := make([]string, n)
	ip := netip.MustParseAddr(firstIP)
	for i := range ips {
		ips[i] = ip.String()
		ip = ip.Next()
	}
	_, err = b.createAll(ctx, func(ctx context.Context, i int) error {
		name, err := v1alpha1.IPAddressName(ips[i])
		if err != nil {
			return err
		}
		return b.c.Create(ctx, &v1alpha1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.IPAddressSpec{
				Address:       ips[i],
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

// snapshot scrapes kube-apiserver's figures.
func (b *bench) snapshot(ctx context.Context) (snapshot, error) {
	text, err := b.cp.APIServerMetrics(ctx)
	if err != nil {
		return snapshot{}, err
	}
	return parseMetrics(text)
}

// settledSnapshot waits until the controller's writes (this API group and
// events) stop moving, then returns kube-apiserver's figures.
func (b *bench) settledSnapshot(ctx context.Context) (snapshot, error) {
	deadline := time.Now().Add(settleMax)
	var last float64 = -1
	for {
		snap, err := b.snapshot(ctx)
		if err != nil {
			return snapshot{}, err
		}
		ours := controllerWrites(snap.writes)
		if ours == last || time.Now().After(deadline) {
			return snap, nil
		}
		last = ours
		select {
		case <-ctx.Done():
			return snapshot{}, context.Cause(ctx)
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
	controller := controllerWrites(r.writes) - float64(r.claimCreates)

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
	row("API writes per bound claim, total", fmt.Sprintf("%.3f", total/n), fmt.Sprintf("%.0f mutating requests, the %d claim creates included", total, r.claimCreates))
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
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  resource\tverb\trequests\tper claim\tnon-2xx\t\n")
	for _, k := range r.writes.sorted() {
		c := r.writes[k]
		note := ""
		if k.resource == "ipaddressclaims" && k.subresource == "" && k.verb == "POST" {
			note = "(the benchmark's creates)"
		}
		fmt.Fprintf(tw, "  %s\t%-5s\t%8.0f\t%9.2f\t%7.0f\t%s\n", k, k.verb, c.total(), c.total()/n, c.failed, note)
	}
	_ = tw.Flush()
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

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}
