package integration

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver"
	metallbiad "github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/test/metallb"
)

// metalLBWait bounds waits on MetalLB's controller, which assigns about
// twenty Services a second.
const metalLBWait = 30 * time.Second

var driverMetricsTaken atomic.Bool

// startDriver runs the metallb-iad driver in-process, as cmd/metallb-iad
// does but without leader election; mods adjust its client configuration.
func startDriver(t *testing.T, mods ...func(*rest.Config)) (stop func()) {
	t.Helper()
	opts := driver.DefaultOptions()
	opts.Namespace, opts.MetalLBNamespace = driverNamespace, metallb.Namespace
	opts.CapacityInterval = time.Second
	opts.SkipMetrics = !driverMetricsTaken.CompareAndSwap(false, true)
	return runManager(t, driver.CacheOptions(opts), driver.ClientOptions(), func(ctx context.Context, mgr manager.Manager) error {
		return driver.Setup(ctx, mgr, opts)
	}, mods...)
}

// newDriverEnvWith is newDriverEnv with the driver's client configuration
// adjusted by mods.
func newDriverEnvWith(t *testing.T, mods ...func(*rest.Config)) *env {
	t.Helper()
	e := newEnvForDriver(t)
	startDriver(t, mods...)
	return e
}

// newEnvForDriver is newDriverEnv without the driver, for tests that start
// and stop it themselves.
func newEnvForDriver(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	needMetalLB(t)
	startManager(t)
	return e
}

// newDriverEnv is newEnv for the driver's tests: the core and the driver
// run, and cleanup also removes the test's pools, placeholders and the
// driver's finalizers on the test's Services.
func newDriverEnv(t *testing.T) *env {
	t.Helper()
	return newDriverEnvWith(t)
}

// pool creates an autoAssign: false IPAddressPool named it<n>-suffix.
func (e *env) pool(suffix string, addresses ...string) string {
	e.t.Helper()
	name := e.class(suffix)
	e.create(metallb.Pool(name, false, addresses...))
	return name
}

// metalLBClass creates a class of the driver naming pool.
func (e *env) metalLBClass(suffix, pool string, policy v1alpha1.ReclaimPolicy) string {
	e.t.Helper()
	name := e.class(suffix)
	e.create(&v1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.IPAddressClassSpec{
			Provisioner: metallbiad.Provisioner, ReclaimPolicy: policy,
			Parameters: &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"pool":%q}`, pool)},
		},
	})
	return name
}

// webBound creates a /28 pool, a class of it with policy and a claim "web"
// of that class, and waits until the claim is Bound; it returns the class
// and the claim's address.
func (e *env) webBound(policy v1alpha1.ReclaimPolicy) (class, ip string) {
	e.t.Helper()
	class = e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28"), policy)
	e.createClaim("web", class)
	return class, e.boundAddresses("web", 1)[0]
}

// service creates a LoadBalancer Service in the test's namespace with the
// given annotations.
func (e *env) service(name string, annotations map[string]string, mods ...func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	return e.createService(name, append([]func(*corev1.Service){func(s *corev1.Service) { s.Annotations = annotations }}, mods...)...)
}

func naming(claim string) map[string]string {
	return map[string]string{v1alpha1.AnnotationIPAddressClaim: claim}
}

func dualStack(svc *corev1.Service) {
	p := corev1.IPFamilyPolicyRequireDualStack
	svc.Spec.IPFamilyPolicy = &p
}

// ingressOf reads the addresses MetalLB assigned to a Service; a missing
// Service has none.
func ingressOf(g Gomega, ns, name string) []string {
	var svc corev1.Service
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return nil
	}
	out := []string{}
	for _, ip := range metallbiad.IngressIPs(&svc) {
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return out
}

// heldBy waits until MetalLB assigned exactly ips to the Service.
func (e *env) heldBy(ns, name string, ips ...string) {
	e.t.Helper()
	slices.Sort(ips)
	e.g.Eventually(func(g Gomega) []string { return append([]string{}, ingressOf(g, ns, name)...) }).
		WithTimeout(metalLBWait).WithPolling(poll).Should(Equal(append([]string{}, ips...)), "Service %s/%s should hold %v", ns, name, ips)
}

// placeholderHolds waits until the address's placeholder holds its IP.
func (e *env) placeholderHolds(ip string) { e.t.Helper(); e.heldBy(driverNamespace, nameOf(ip), ip) }

// boundAddress waits until the claim is Bound and returns its addresses' IPs.
func (e *env) boundAddresses(claim string, n int) []string {
	e.t.Helper()
	var ips []string
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, claim)
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
		g.Expect(c.Status.Addresses).To(HaveLen(n))
		// 4-8: the class it resolved to is recorded, also when its driver
		// bound it before its first status was written.
		g.Expect(c.Status.ClassName).NotTo(BeEmpty(), "status.className")
		if c.Spec.ClassName != "" {
			g.Expect(c.Status.ClassName).To(Equal(c.Spec.ClassName), "status.className")
		}
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionClassResolved)).To(BeTrue(), "ClassResolved")
		ips = nil
		for _, a := range c.Status.Addresses {
			ips = append(ips, a.Address)
		}
	}, "claim %s should be Bound to %d addresses", claim, n)
	return ips
}

// holderWatch follows MetalLB's assignments of one address through a watch
// on every Service, and records every instant at which nobody, or a
// Service not in allowed, holds it — once it has first been held.
type holderWatch struct {
	ip      string
	allowed []string
	mu      sync.Mutex
	holders map[string]bool
	started bool
	history []string
	bad     []string
	stop    context.CancelFunc
	done    chan struct{}
}

// watchHolders starts a holderWatch; allowed are namespace/name keys.
func (e *env) watchHolders(ip string, allowed ...string) *holderWatch {
	e.t.Helper()
	w := &holderWatch{ip: ip, allowed: allowed, holders: map[string]bool{}, done: make(chan struct{})}
	wc, err := client.NewWithWatch(adminCfg, client.Options{Scheme: scheme})
	e.g.Expect(err).NotTo(HaveOccurred())
	var list corev1.ServiceList
	e.g.Expect(wc.List(e.ctx, &list)).To(Succeed())
	for i := range list.Items {
		w.observe(watch.Added, &list.Items[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	wi, err := wc.Watch(ctx, &corev1.ServiceList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	e.g.Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(w.done)
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			if svc, ok := ev.Object.(*corev1.Service); ok {
				w.observe(ev.Type, svc)
			}
		}
	}()
	e.t.Cleanup(w.close)
	return w
}

func (w *holderWatch) observe(t watch.EventType, svc *corev1.Service) {
	key := svc.Namespace + "/" + svc.Name
	holds := t != watch.Deleted && slices.Contains(metallbiad.IngressIPs(svc), netip.MustParseAddr(w.ip))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holders[key] == holds {
		return
	}
	if holds {
		w.holders[key] = true
	} else {
		delete(w.holders, key)
	}
	var now []string
	for k := range w.holders {
		now = append(now, k)
	}
	slices.Sort(now)
	w.history = append(w.history, fmt.Sprintf("%s rv=%s → %v", key, svc.ResourceVersion, now))
	if len(now) > 0 {
		w.started = true
	}
	switch {
	case w.started && len(now) == 0:
		w.bad = append(w.bad, fmt.Sprintf("nobody holds %s after %s rv=%s", w.ip, key, svc.ResourceVersion))
	case slices.ContainsFunc(now, func(k string) bool { return !slices.Contains(w.allowed, k) }):
		w.bad = append(w.bad, fmt.Sprintf("%s is held by %v, allowed %v", w.ip, now, w.allowed))
	}
}

func (w *holderWatch) close() {
	w.stop()
	<-w.done
}

// check fails the test if any instant so far broke the rule.
func (w *holderWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bad) > 0 {
		t.Errorf("MetalLB's assignments of %s were not hitless:\n  %s\nhistory:\n  %s", w.ip, strings.Join(w.bad, "\n  "), strings.Join(w.history, "\n  "))
	}
}
