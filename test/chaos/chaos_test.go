package chaos

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
	"github.com/cozystack/address-controller/test/proc"
)

// The harness's knobs, from the environment (make chaos sets them); the
// test is skipped without CHAOS_DURATION.
const (
	envDuration = "CHAOS_DURATION" // e.g. 5m
	envSeed     = "CHAOS_SEED"     // default: the time
	envEvery    = "CHAOS_FAULT_EVERY"
	envFaults   = "CHAOS_FAULTS" // which to kill, e.g. manager,driver; default all
)

const (
	coreNS, coreSA     = "address-controller-system", "address-controller"
	driverNS, driverSA = "metallb-iad-system", "metallb-iad"
	tenantNS           = "chaos"
	provisioner        = "metallb.drivers.local.sdn.cozystack.io"
	// slots bounds the claims alive at once below the pools' size, so
	// every claim can be served at quiescence.
	slots = 12
)

// TestChaos runs the shipped binaries — two managers and two drivers, each
// as its ServiceAccount, leader election on — with MetalLB's controller,
// through a seeded churn of claims and Services while faults kill leaders
// and MetalLB, and counts every instant that breaks an invariant (Ledger).
// Then faults and churn stop, and everything must converge.
func TestChaos(t *testing.T) {
	duration, err := time.ParseDuration(os.Getenv(envDuration))
	if err != nil {
		t.Skipf("set %s (e.g. 5m) to run: make chaos", envDuration)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envSeed); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s: %v", envSeed, err)
		}
	}
	every := 10 * time.Second
	if s := os.Getenv(envEvery); s != "" {
		if every, err = time.ParseDuration(s); err != nil {
			t.Fatalf("%s: %v", envEvery, err)
		}
	}
	t.Logf("seed %d, %s, a fault every %s", seed, duration, every)
	bin := controlplane.RequireBinaries(t, metallb.Binary)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration+10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cp, err := controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd"), metallb.CRDDir(bin)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	c, err := client.NewWithWatch(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	h := &harness{t: t, ctx: ctx, cp: cp, bin: bin, dir: dir, c: c, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), faults: map[string]int{}, ops: map[string]int{}}
	h.startMetalLB()
	for _, name := range []string{"manager", "metallb-iad"} {
		h.build(root, name)
	}
	core := h.identity(root, coreNS, coreSA, filepath.Join("config", "rbac", "role.yaml"))
	driver := h.identity(root, driverNS, driverSA, filepath.Join("config", "rbac", "metallb-iad", "role.yaml"))
	for i := range 2 {
		h.run(fmt.Sprintf("manager-%d", i), "manager", core, "--leader-election-namespace="+coreNS, "--webhook-port=0")
		h.run(fmt.Sprintf("driver-%d", i), "metallb-iad", driver, "--leader-election-namespace="+driverNS, "--namespace="+driverNS)
	}
	h.setup()

	ledger := NewLedger(driverNS, func(class string) bool { return slices.Contains(h.classes, class) })
	stopWatch := h.watch(ledger)

	churnCtx, stopChurn := context.WithTimeout(ctx, duration)
	var wg sync.WaitGroup
	wg.Go(func() { h.churn(churnCtx) })
	wg.Go(func() { h.inject(churnCtx, every) })
	wg.Wait()
	stopChurn()

	converged := h.converge(2 * time.Minute)
	stopWatch()
	t.Logf("events judged: %d", ledger.Events)
	t.Logf("faults survived: %v", h.faults)
	t.Logf("workload operations: %v", h.ops)
	for _, inv := range Invariants {
		t.Logf("%-40s %d", inv, ledger.Violations[inv])
	}
	for _, n := range ledger.Notes {
		t.Error(n)
	}
	if t.Failed() {
		h.dumpWarnings()
	}
	if !converged {
		t.Errorf("did not converge: %s", h.unconverged())
	}
}

// harness is the running system and the workload's memory.
type harness struct {
	t       *testing.T
	ctx     context.Context
	cp      *controlplane.ControlPlane
	bin     string // control plane and MetalLB binaries
	dir     string
	c       client.WithWatch
	rng     *rand.Rand
	classes []string

	mu     sync.Mutex
	procs  map[string]*running
	faults map[string]int
	ops    map[string]int
	next   int
}

type running struct {
	binary string
	args   []string
	p      *proc.Process
	out    *bytes.Buffer
}

func (h *harness) build(root, name string) {
	cmd := exec.Command("go", "build", "-o", filepath.Join(h.dir, name), "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("building %s: %v\n%s", name, err, out)
	}
}

// identity is a kubeconfig of the ServiceAccount bound to roleFile's roles.
func (h *harness) identity(root, ns, sa, roleFile string) string {
	kc, err := h.cp.ServiceAccount(h.ctx, ns, sa, filepath.Join(root, roleFile), 24*3600)
	if err != nil {
		h.t.Fatal(err)
	}
	path := filepath.Join(h.dir, sa+".kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		h.t.Fatal(err)
	}
	return path
}

func (h *harness) run(name, binary, kubeconfig string, args ...string) {
	r := &running{binary: binary, out: &bytes.Buffer{},
		args: append([]string{"--kubeconfig=" + kubeconfig, "--leader-elect=true", "--metrics-bind-address=0", "--health-probe-bind-address=0"}, args...)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.procs == nil {
		h.procs = map[string]*running{}
	}
	h.procs[name] = r
	h.start(name, r)
	h.t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		_ = r.p.Stop(5 * time.Second)
		if h.t.Failed() {
			h.t.Logf("%s output (last 20 KiB):\n%s", name, tail(r.out.Bytes(), 20<<10))
		}
	})
}

func (h *harness) start(name string, r *running) {
	path := filepath.Join(h.dir, r.binary)
	if r.binary == metallb.Binary {
		path = filepath.Join(h.bin, r.binary)
	}
	p, err := proc.Start(name, path, r.args, r.out)
	if err != nil {
		h.t.Fatal(err)
	}
	r.p = p
}

func (h *harness) startMetalLB() {
	out := &bytes.Buffer{}
	p, err := metallb.Run(h.ctx, h.cp, h.bin, h.dir, out)
	if err != nil {
		h.t.Fatal(err)
	}
	r := &running{binary: metallb.Binary, p: p, out: out, args: metallb.Args(filepath.Join(h.dir, "metallb.kubeconfig"))}
	h.mu.Lock()
	if h.procs == nil {
		h.procs = map[string]*running{}
	}
	h.procs["metallb"] = r
	h.mu.Unlock()
	h.t.Cleanup(func() { _ = r.p.Stop(5 * time.Second) })
}

// kill sends SIGKILL to the process and starts it again after a pause.
func (h *harness) kill(name string, pause time.Duration) {
	h.mu.Lock()
	r := h.procs[name]
	_ = syscall.Kill(-r.p.Pid(), syscall.SIGKILL)
	_ = r.p.Stop(0)
	h.faults["kill -9 "+strings.TrimRight(name, "-0123456789")]++
	h.mu.Unlock()
	time.Sleep(pause)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.start(name, r)
}

// setup creates the tenant namespace, two pools and a class of each
// reclaim policy.
func (h *harness) setup() {
	must := func(err error) {
		if err != nil {
			h.t.Fatal(err)
		}
	}
	must(h.c.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}))
	for i, policy := range []v1alpha1.ReclaimPolicy{v1alpha1.ReclaimRetain, v1alpha1.ReclaimDelete} {
		pool := fmt.Sprintf("chaos-%d", i)
		must(h.c.Create(h.ctx, metallb.Pool(pool, false, fmt.Sprintf("100.64.%d.0/27", i), fmt.Sprintf("2001:db8:c%d::/123", i))))
		class := "chaos-" + strings.ToLower(string(policy))
		must(h.c.Create(h.ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class},
			Spec: v1alpha1.IPAddressClassSpec{Provisioner: provisioner, ReclaimPolicy: policy,
				Parameters: &apiruntime.RawExtension{Raw: fmt.Appendf(nil, `{"pool":%q}`, pool)}}}))
		h.classes = append(h.classes, class)
	}
}

// churn creates and deletes claims (IPv4, IPv6, Dual; both classes) and
// Services naming them — attached, moved to another claim, detached,
// deleted — until ctx ends.
func (h *harness) churn(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(time.Duration(100+h.rng.IntN(300)) * time.Millisecond)
		var claims v1alpha1.IPAddressClaimList
		var svcs corev1.ServiceList
		if h.c.List(ctx, &claims, client.InNamespace(tenantNS)) != nil || h.c.List(ctx, &svcs, client.InNamespace(tenantNS)) != nil {
			continue
		}
		op := h.rng.IntN(6)
		switch {
		case op == 0 && len(claims.Items) < slots:
			h.next++
			families := []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6, v1alpha1.Dual}
			h.do("create claim", h.c.Create(ctx, &v1alpha1.IPAddressClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: fmt.Sprintf("c%d", h.next)},
				Spec:       v1alpha1.IPAddressClaimSpec{ClassName: h.classes[h.rng.IntN(len(h.classes))], Family: families[h.rng.IntN(3)]}}))
		case op == 1 && len(claims.Items) > slots/2:
			cl := claims.Items[h.rng.IntN(len(claims.Items))]
			h.do("delete claim", h.c.Delete(ctx, &cl))
		case op == 2 && len(claims.Items) > 0 && len(svcs.Items) < slots:
			h.next++
			cl := claims.Items[h.rng.IntN(len(claims.Items))]
			h.do("create Service", h.c.Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: fmt.Sprintf("s%d", h.next), Annotations: map[string]string{v1alpha1.AnnotationIPAddressClaim: cl.Name}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilyPolicy: ptrTo(corev1.IPFamilyPolicyPreferDualStack),
					Ports: []corev1.ServicePort{{Port: int32(80 + h.rng.IntN(3))}}}}))
		case op == 3 && len(svcs.Items) > 0 && len(claims.Items) > 0:
			s, cl := svcs.Items[h.rng.IntN(len(svcs.Items))], claims.Items[h.rng.IntN(len(claims.Items))]
			metav1.SetMetaDataAnnotation(&s.ObjectMeta, v1alpha1.AnnotationIPAddressClaim, cl.Name)
			h.do("move Service", h.c.Update(ctx, &s))
		case op == 4 && len(svcs.Items) > 0:
			s := svcs.Items[h.rng.IntN(len(svcs.Items))]
			delete(s.Annotations, v1alpha1.AnnotationIPAddressClaim)
			h.do("detach Service", h.c.Update(ctx, &s))
		case op == 5 && len(svcs.Items) > slots/3:
			s := svcs.Items[h.rng.IntN(len(svcs.Items))]
			h.do("delete Service", h.c.Delete(ctx, &s))
		}
	}
}

func (h *harness) do(op string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.ops[op]++
	} else {
		h.ops[op+" (refused)"]++
	}
}

// inject kills, every so often, one of the managers, one of the drivers
// or MetalLB's controller, and restarts it after a pause.
func (h *harness) inject(ctx context.Context, every time.Duration) {
	var names []string
	for _, n := range []string{"manager-0", "manager-1", "driver-0", "driver-1", "metallb"} {
		if f := os.Getenv(envFaults); f == "" || slices.Contains(strings.Split(f, ","), strings.TrimRight(n, "-0123456789")) {
			names = append(names, n)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		if len(names) == 0 {
			continue
		}
		h.kill(names[h.rng.IntN(len(names))], time.Duration(500+h.rng.IntN(2500))*time.Millisecond)
	}
}

// watch feeds the ledger every event of claims, addresses and Services,
// in resource-version order: events wait a second in a buffer so that
// the three streams' events can be merged.
func (h *harness) watch(l *Ledger) (stop func()) {
	ctx, cancel := context.WithCancel(h.ctx)
	type ev struct {
		rv   uint64
		gone bool
		obj  client.Object
		at   time.Time
	}
	events := make(chan ev, 10000)
	for _, list := range []client.ObjectList{&v1alpha1.IPAddressClaimList{}, &v1alpha1.IPAddressList{}, &corev1.ServiceList{}} {
		w, err := h.c.Watch(ctx, list)
		if err != nil {
			h.t.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for e := range w.ResultChan() {
				obj, ok := e.Object.(client.Object)
				if !ok || e.Type == watch.Bookmark || e.Type == watch.Error {
					continue
				}
				rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
				events <- ev{rv: rv, gone: e.Type == watch.Deleted, obj: obj, at: time.Now()}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf []ev
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		flush := func(all bool) {
			slices.SortStableFunc(buf, func(a, b ev) int { return cmp.Compare(a.rv, b.rv) })
			i := 0
			for ; i < len(buf) && (all || time.Since(buf[i].at) > time.Second); i++ {
				switch o := buf[i].obj.(type) {
				case *v1alpha1.IPAddressClaim:
					l.Claim(o, buf[i].gone)
				case *v1alpha1.IPAddress:
					l.Address(o, buf[i].gone)
				case *corev1.Service:
					l.Service(o, buf[i].gone)
				}
			}
			buf = buf[i:]
		}
		for {
			select {
			case e := <-events:
				buf = append(buf, e)
			case <-tick.C:
				flush(false)
			case <-ctx.Done():
				flush(true)
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// converge waits until every claim is Bound, nothing is Terminating, and
// every driver address has its placeholder or a Service holding it.
func (h *harness) converge(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	start := time.Now()
	for time.Now().Before(deadline) {
		if h.unconverged() == "" {
			h.t.Logf("converged in %s", time.Since(start).Round(time.Second))
			return true
		}
		time.Sleep(time.Second)
	}
	return false
}

// unconverged says what is not yet as it should be, "" when all is.
func (h *harness) unconverged() string {
	var claims v1alpha1.IPAddressClaimList
	var addrs v1alpha1.IPAddressList
	var svcs corev1.ServiceList
	if err := h.c.List(h.ctx, &claims); err != nil {
		return err.Error()
	}
	if err := h.c.List(h.ctx, &addrs); err != nil {
		return err.Error()
	}
	if err := h.c.List(h.ctx, &svcs); err != nil {
		return err.Error()
	}
	for _, c := range claims.Items {
		if c.DeletionTimestamp != nil {
			return "claim " + c.Name + " is stuck Terminating"
		}
		if c.Status.Phase != v1alpha1.ClaimBound {
			return "claim " + c.Name + " is " + string(c.Status.Phase)
		}
	}
	held := map[string]bool{}
	for _, s := range svcs.Items {
		if s.DeletionTimestamp != nil {
			return "Service " + s.Namespace + "/" + s.Name + " is stuck Terminating"
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			held[in.IP] = true
		}
	}
	for _, a := range addrs.Items {
		if a.DeletionTimestamp != nil {
			return "address " + a.Name + " is stuck Terminating"
		}
		if !held[a.Spec.Address] {
			return "address " + a.Name + " is held by no Service"
		}
	}
	return ""
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func ptrTo[T any](v T) *T { return &v }

// dumpWarnings logs the warning events the controllers recorded.
func (h *harness) dumpWarnings() {
	var evs eventsv1.EventList
	if err := h.c.List(h.ctx, &evs); err != nil {
		return
	}
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning {
			h.t.Logf("event %s %s/%s %s: %s", e.Reason, e.Regarding.Namespace, e.Regarding.Name, e.Series.String(), e.Note)
		}
	}
}
