package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/core"
	metallbiad "github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
)

// Timeouts. Every wait in this package is bounded by one of these.
const (
	eventually = 10 * time.Second
	// eventuallyMany is the wait for a hundred claims to settle.
	eventuallyMany = 45 * time.Second
	poll           = 50 * time.Millisecond
	startTimeout   = 3 * time.Minute
	mgrSyncWait    = 30 * time.Second
	// mgrGrace bounds how long a stopping manager waits for its reconciles:
	// a wedged reconciler fails its test instead of hanging the package.
	mgrGrace       = 5 * time.Second
	mgrStopWait    = 30 * time.Second
	logEnv         = "INTEGRATION_LOG" // set to see the managers' logs
	ciEnv          = "CI"
	apiClientQPS   = 1000
	apiClientBurst = 2000
)

var (
	scheme = apiruntime.NewScheme()
	// adminCfg and k8s are the control plane's admin identity; tests act as
	// tenant, admin and driver through it.
	adminCfg *rest.Config
	k8s      client.Client
	// skipReason is set when the control plane cannot run here.
	skipReason string
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Getenv(logEnv) != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	if _, err := controlplane.Binaries(metallb.Binary); err != nil {
		if os.Getenv(ciEnv) != "" {
			fmt.Fprintf(os.Stderr, "integration: %v\n$%s is set: missing binaries are a failure there\n", err, ciEnv)
			return 1
		}
		skipReason = fmt.Sprintf("no control plane: %v", err)
		fmt.Fprintf(os.Stderr, "integration: skipping every test: %s\n", skipReason)
		return m.Run()
	}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	cp, err := controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: crdDirs()})
	if err != nil {
		cancel()
		fmt.Fprintf(os.Stderr, "integration: starting the control plane: %v\n", err)
		return 1
	}
	cancel()
	controlPlane = cp
	fmt.Fprintf(os.Stderr, "integration: control plane ready in %s\n", time.Since(start).Round(time.Millisecond))

	adminCfg = rest.CopyConfig(cp.Config)
	adminCfg.QPS, adminCfg.Burst = apiClientQPS, apiClientBurst
	if k8s, err = client.New(adminCfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintf(os.Stderr, "integration: admin client: %v\n", err)
		_ = cp.Stop()
		return 1
	}

	code := m.Run()
	// MetalLB's watches would hold the API server's shutdown up.
	stopMetalLB()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: stopping the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// metricsTaken: the core's metrics register once per process; every later
// manager skips them.
var metricsTaken atomic.Bool

// startManager runs the core in-process in a fresh manager, as cmd/manager
// does but without leader election, and returns a func that stops it and
// waits for it to return (also run at the test's cleanup). mods adjust the
// manager's client configuration.
func startManager(t *testing.T, mods ...func(*rest.Config)) (stop func()) {
	t.Helper()
	return runManager(t, core.CacheOptions(core.Options{SourceAnnotations: metallbiad.BackendAnnotations}), client.Options{}, func(ctx context.Context, mgr manager.Manager) error {
		return core.Setup(ctx, mgr, core.Options{
			ClaimWorkers: 8, AddressWorkers: 8, ClassWorkers: 2, SourceAnnotations: metallbiad.BackendAnnotations,
			SkipMetrics: !metricsTaken.CompareAndSwap(false, true),
		})
	}, mods...)
}

// runManager runs a fresh manager with the given cache and client options
// and what setup registers, until the returned stop (or the test's
// cleanup) stops it and waits for it to return.
func runManager(t *testing.T, cacheOpts cache.Options, clientOpts client.Options, setup func(context.Context, manager.Manager) error, mods ...func(*rest.Config)) (stop func()) {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	for _, mod := range mods {
		mod(cfg)
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Client:                  clientOpts,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          false,
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		GracefulShutdownTimeout: ptr.To(mgrGrace),
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := setup(ctx, mgr); err != nil {
		cancel()
		t.Fatalf("setup: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager returned: %v%s", err, stuckReconciles())
			}
		case <-time.After(mgrStopWait):
			t.Errorf("manager did not stop within %s%s", mgrStopWait, stuckReconciles())
		}
	})
	t.Cleanup(stop)

	syncCtx, syncCancel := context.WithTimeout(ctx, mgrSyncWait)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		select {
		case err := <-done:
			t.Fatalf("manager exited before its cache synced: %v", err)
		default:
			t.Fatalf("manager cache did not sync within %s", mgrSyncWait)
		}
	}
	return stop
}

// stuckReconciles describes the goroutines of this process that are inside
// the core's code: when a manager cannot stop, they are the reconciles that
// never returned, and their stacks say where they hang.
func stuckReconciles() string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var stuck []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "address-controller/internal/") {
			stuck = append(stuck, g)
		}
	}
	if len(stuck) == 0 {
		return ""
	}
	const show = 2
	total := len(stuck)
	if total > show {
		stuck = stuck[:show]
	}
	return fmt.Sprintf("\n%d goroutine(s) of this process are in the core's code (a wedged manager's included); the first %d:\n%s",
		total, len(stuck), strings.Join(stuck, "\n\n"))
}

// testSeq numbers the tests: test n works in namespace itn, on classes
// named itn-*, and on 100.64.n.0/24 and 2001:db8:n::/64 (n in hex there):
// shared address space and documentation ranges, data only.
var testSeq atomic.Int32

// env is one test's slice of the shared control plane.
type env struct {
	t   *testing.T
	g   Gomega
	ctx context.Context
	id  int
	ns  string
}

// newEnv skips the test without a control plane, creates the test's
// namespace, and at cleanup (after any manager of the test has stopped)
// removes everything the test created, finalizers and all.
func newEnv(t *testing.T) *env {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	id := int(testSeq.Add(1))
	e := &env{t: t, g: NewWithT(t), ctx: t.Context(), id: id, ns: fmt.Sprintf("it%d", id)}
	e.g.Expect(k8s.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})).To(Succeed())
	t.Cleanup(e.cleanup)
	t.Cleanup(e.dumpIfFailed)
	return e
}

// class returns the cluster-wide name of the test's class suffix.
func (e *env) class(suffix string) string { return fmt.Sprintf("it%d-%s", e.id, suffix) }

func (e *env) ownsClass(name string) bool { return strings.HasPrefix(name, fmt.Sprintf("it%d-", e.id)) }

// v4 is host n of the test's IPv4 range.
func (e *env) v4(n int) string { return fmt.Sprintf("100.%d.%d.%d", 64+e.id/256, e.id%256, n) }

// v6 is host n of the test's IPv6 range.
func (e *env) v6(n int) string { return fmt.Sprintf("2001:db8:%x::%x", e.id, n) }

// nameOf is the object name of an IP.
func nameOf(ip string) string {
	name, err := v1alpha1.IPAddressName(ip)
	if err != nil {
		panic(err)
	}
	return name
}

// --- builders ---

func newClass(name string, mods ...func(*v1alpha1.IPAddressClass)) *v1alpha1.IPAddressClass {
	c := &v1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.IPAddressClassSpec{Provisioner: "driver.example.com/" + name, ReclaimPolicy: v1alpha1.ReclaimRetain},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func asDefault(c *v1alpha1.IPAddressClass) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[v1alpha1.AnnotationDefaultClass] = "true"
}

func releaseDelay(d time.Duration) func(*v1alpha1.IPAddressClass) {
	return func(c *v1alpha1.IPAddressClass) { c.Spec.ReleaseDelay = &metav1.Duration{Duration: d} }
}

func newAddress(ip, class string, mods ...func(*v1alpha1.IPAddress)) *v1alpha1.IPAddress {
	a := &v1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: nameOf(ip)},
		Spec: v1alpha1.IPAddressSpec{
			Address: ip, ClassName: class, ReclaimPolicy: v1alpha1.ReclaimRetain,
			Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}},
		},
	}
	for _, m := range mods {
		m(a)
	}
	return a
}

func reclaimDelete(a *v1alpha1.IPAddress) { a.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete }

func held(a *v1alpha1.IPAddress) {
	a.Annotations = map[string]string{v1alpha1.AnnotationHeld: "true"}
}

// preBound sets a claimRef without a UID, as a driver provisioning for the claim.
func preBound(ns, claim string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) { a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: ns, Name: claim} }
}

func (e *env) newClaim(name, class string, mods ...func(*v1alpha1.IPAddressClaim)) *v1alpha1.IPAddressClaim {
	c := &v1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec:       v1alpha1.IPAddressClaimSpec{ClassName: class, Family: v1alpha1.IPv4},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func family(f v1alpha1.IPFamily) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Spec.Family = f }
}

func addressName(name string) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Spec.AddressName = name }
}

// --- create, read, write ---

func (e *env) create(obj client.Object) {
	e.t.Helper()
	e.g.Expect(k8s.Create(e.ctx, obj)).To(Succeed(), "creating %T %s", obj, obj.GetName())
}

func (e *env) createClass(name string, mods ...func(*v1alpha1.IPAddressClass)) *v1alpha1.IPAddressClass {
	e.t.Helper()
	c := newClass(name, mods...)
	e.create(c)
	return c
}

func (e *env) createAddress(ip, class string, mods ...func(*v1alpha1.IPAddress)) *v1alpha1.IPAddress {
	e.t.Helper()
	a := newAddress(ip, class, mods...)
	e.create(a)
	return a
}

func (e *env) createClaim(name, class string, mods ...func(*v1alpha1.IPAddressClaim)) *v1alpha1.IPAddressClaim {
	e.t.Helper()
	c := e.newClaim(name, class, mods...)
	e.create(c)
	return c
}

func (e *env) getClaim(g Gomega, name string) *v1alpha1.IPAddressClaim {
	var c v1alpha1.IPAddressClaim
	g.Expect(k8s.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &c)).To(Succeed())
	return &c
}

func (e *env) getAddress(g Gomega, name string) *v1alpha1.IPAddress {
	var a v1alpha1.IPAddress
	g.Expect(k8s.Get(e.ctx, client.ObjectKey{Name: name}, &a)).To(Succeed())
	return &a
}

func (e *env) getClass(g Gomega, name string) *v1alpha1.IPAddressClass {
	var c v1alpha1.IPAddressClass
	g.Expect(k8s.Get(e.ctx, client.ObjectKey{Name: name}, &c)).To(Succeed())
	return &c
}

// gone asserts obj no longer exists.
func (e *env) gone(g Gomega, obj client.Object) {
	err := k8s.Get(e.ctx, client.ObjectKeyFromObject(obj), obj)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s should be gone, got err=%v", obj, obj.GetName(), err)
}

// update re-reads obj, applies mutate and writes it back, retrying conflicts.
func (e *env) update(obj client.Object, mutate func()) {
	e.t.Helper()
	e.eventually(func(g Gomega) {
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		mutate()
		g.Expect(k8s.Update(e.ctx, obj)).To(Succeed())
	})
}

// setAddressPhase writes an address's status.phase as a driver does for
// the phases it owns (Conflict, Lost) and when it clears them.
func (e *env) setAddressPhase(name string, phase v1alpha1.AddressPhase) {
	e.t.Helper()
	a := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}}
	e.eventually(func(g Gomega) {
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		a.Status.Phase = phase
		g.Expect(k8s.Status().Update(e.ctx, a)).To(Succeed())
	})
}

func (e *env) delete(obj client.Object) {
	e.t.Helper()
	e.g.Expect(client.IgnoreNotFound(k8s.Delete(e.ctx, obj))).To(Succeed(), "deleting %T %s", obj, obj.GetName())
}

// forceDelete deletes obj and strips its finalizers, as an admin forcing it.
func (e *env) forceDelete(obj client.Object) {
	e.t.Helper()
	e.g.Expect(forceDelete(e.ctx, obj)).To(Succeed(), "force-deleting %T %s", obj, obj.GetName())
}

func forceDelete(ctx context.Context, obj client.Object) error {
	if err := k8s.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return err
	}
	stripFinalizers := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	deadline := time.Now().Add(eventually)
	for {
		// A deleted object whose last finalizer goes is gone at once.
		err := k8s.Patch(ctx, obj, stripFinalizers)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still exists after %s", obj.GetName(), eventually)
		}
		time.Sleep(poll)
	}
}

// --- waiting ---

func (e *env) eventually(f func(g Gomega), msg ...any) {
	e.t.Helper()
	e.eventuallyWithin(eventually, f, msg...)
}

// eventuallyWithin is eventually for the waits on many objects.
func (e *env) eventuallyWithin(d time.Duration, f func(g Gomega), msg ...any) {
	e.t.Helper()
	e.g.Eventually(f).WithTimeout(d).WithPolling(poll).Should(Succeed(), msg...)
}

func (e *env) consistently(d time.Duration, f func(g Gomega), msg ...any) {
	e.t.Helper()
	e.g.Consistently(f).WithTimeout(d).WithPolling(poll).Should(Succeed(), msg...)
}

// claimBoundTo waits until the claim is Bound to exactly the named
// addresses (status.addresses, in that order), each of which names it in
// its claimRef with its UID and is Bound, and returns the claim.
func (e *env) claimBoundTo(claim string, addresses ...string) *v1alpha1.IPAddressClaim {
	e.t.Helper()
	var c *v1alpha1.IPAddressClaim
	e.eventually(func(g Gomega) {
		c = e.getClaim(g, claim)
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
		g.Expect(names(c.Status.Addresses)).To(Equal(addresses))
		for _, name := range addresses {
			a := e.getAddress(g, name)
			g.Expect(a.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: e.ns, Name: claim, UID: c.UID}))
			g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressBound))
		}
	}, "claim %s should be Bound to %v", claim, addresses)
	return c
}

// addressPhase waits until the address is in phase.
func (e *env) addressPhase(name string, phase v1alpha1.AddressPhase) *v1alpha1.IPAddress {
	e.t.Helper()
	var a *v1alpha1.IPAddress
	e.eventually(func(g Gomega) {
		a = e.getAddress(g, name)
		g.Expect(a.Status.Phase).To(Equal(phase))
	}, "address %s should be %s", name, phase)
	return a
}

func names(addrs []v1alpha1.ClaimedAddress) []string {
	out := []string{}
	for _, a := range addrs {
		out = append(out, a.Name)
	}
	return out
}

// events lists the events.k8s.io/v1 Events regarding the named object with
// reason, in any namespace (a cluster-scoped object's land in default).
func (e *env) events(g Gomega, regarding, reason string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8s.List(e.ctx, &list, client.MatchingFields{"regarding.name": regarding})).To(Succeed())
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// --- cleanup ---

// cleanup removes the test's claims, addresses, classes and namespace,
// stripping finalizers: no manager runs by then.
func (e *env) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	var claims v1alpha1.IPAddressClaimList
	errs = append(errs, k8s.List(ctx, &claims, client.InNamespace(e.ns)))
	for i := range claims.Items {
		errs = append(errs, forceDelete(ctx, &claims.Items[i]))
	}
	var addrs v1alpha1.IPAddressList
	errs = append(errs, k8s.List(ctx, &addrs))
	for i := range addrs.Items {
		a := &addrs.Items[i]
		if e.ownsClass(a.Spec.ClassName) || a.Spec.ClaimRef != nil && a.Spec.ClaimRef.Namespace == e.ns {
			errs = append(errs, forceDelete(ctx, a))
		}
	}
	var classes v1alpha1.IPAddressClassList
	errs = append(errs, k8s.List(ctx, &classes))
	for i := range classes.Items {
		if e.ownsClass(classes.Items[i].Name) {
			errs = append(errs, forceDelete(ctx, &classes.Items[i]))
		}
	}
	errs = append(errs, client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})))
	if err := errors.Join(errs...); err != nil {
		e.t.Errorf("cleanup: %v", err)
	}
}

// dumpIfFailed logs the test's claims and addresses when it failed.
func (e *env) dumpIfFailed() {
	if !e.t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	var claims v1alpha1.IPAddressClaimList
	if err := k8s.List(ctx, &claims, client.InNamespace(e.ns)); err == nil {
		for _, c := range claims.Items {
			fmt.Fprintf(&b, "claim %s uid=%s phase=%s class=%s addresses=%v deleting=%v finalizers=%v annotations=%v\n",
				c.Name, c.UID, c.Status.Phase, c.Status.ClassName, names(c.Status.Addresses), c.DeletionTimestamp != nil, c.Finalizers, c.Annotations)
			for _, cond := range c.Status.Conditions {
				fmt.Fprintf(&b, "    %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
	}
	var addrs v1alpha1.IPAddressList
	if err := k8s.List(ctx, &addrs); err == nil {
		slices.SortFunc(addrs.Items, func(x, y v1alpha1.IPAddress) int { return strings.Compare(x.Name, y.Name) })
		for _, a := range addrs.Items {
			if !e.ownsClass(a.Spec.ClassName) {
				continue
			}
			fmt.Fprintf(&b, "address %s class=%s phase=%s claimRef=%+v deleting=%v finalizers=%v\n",
				a.Name, a.Spec.ClassName, a.Status.Phase, a.Spec.ClaimRef, a.DeletionTimestamp != nil, a.Finalizers)
		}
	}
	e.t.Logf("state at failure:\n%s", b.String())
}
