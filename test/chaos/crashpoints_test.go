package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	mlb "github.com/cozystack/address-controller/test/metallb"
)

// The sweep's classes: a static one the core matches, and one of the
// driver's that deletes what its claims release (nothing accumulates).
const (
	sweepStatic = "sweep-static"
	sweepLB     = "sweep-lb"
)

var sweepPool = []string{"100.64.2.0/24", "2001:db8:c2::/120"}

// The binaries whose writes a scenario counts: the name its process runs
// under, and its user agent.
type writerOf struct{ process, agent string }

var (
	core   = writerOf{"manager-0", "address-controller"}
	driver = writerOf{"driver-0", "metallb-iad"}
)

// A scenario is one write sequence of the contract: what must stand
// before it (setup), what a user does to start it (act), and where it
// ends (done: nil once reached). Each takes a fresh id, so every run of it
// has objects of its own.
type scenario struct {
	name   string
	writer writerOf
	setup  func(sw *sweep, id string) error
	act    func(sw *sweep, id string) error
	done   func(sw *sweep, id string) error
}

// scenarios are the sequences of bind, reclaim, auto-claim, provision,
// attach, detach, move and teardown, each with the binary that carries it
// out (and provision and teardown with the core's part too).
var scenarios = []scenario{
	{"bind", core, (*sweep).staticAddress, (*sweep).staticClaim, (*sweep).staticBound},
	{"reclaim", core, (*sweep).staticClaimBound, (*sweep).deleteClaim, (*sweep).staticReleased},
	{"auto-claim", core, nothing, (*sweep).autoService, (*sweep).autoAttached},
	{"provision", driver, nothing, (*sweep).lbClaim, (*sweep).onPlaceholders},
	{"provision (core's part)", core, nothing, (*sweep).lbClaim, (*sweep).onPlaceholders},
	{"attach", driver, (*sweep).claimAndService, (*sweep).attach, (*sweep).attached},
	{"detach", driver, (*sweep).claimAttached, (*sweep).detach, (*sweep).detached},
	{"move", driver, (*sweep).claimAttachedAndOther, (*sweep).move, (*sweep).moved},
	{"teardown", driver, (*sweep).claimAttached, (*sweep).deleteClaim, (*sweep).tornDown},
	{"teardown (core's part)", core, (*sweep).claimAttached, (*sweep).deleteClaim, (*sweep).tornDown},
}

// maxWrites bounds a sequence: one longer is a controller that does not
// settle.
const maxWrites = 16

// TestCrashPoints crashes the binary carrying out each write sequence
// right after its n-th write, for every n of the sequence (the API server
// has done the write; the binary never learns it did), starts it again,
// and checks that the sequence still ends where it must, with every
// invariant of the ledger kept throughout.
func TestCrashPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash-point sweep takes minutes; -short skips it")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	var proxy *crashProxy
	s := newSystem(ctx, t, options{managers: 1, drivers: 1, proxy: func(apiServer string, cfg *rest.Config) (string, []byte) {
		proxy = newCrashProxy(t, apiServer, cfg)
		return proxy.url, proxy.ca
	}})
	sw := &sweep{s: s, p: proxy, ctx: ctx}
	sw.setup()
	ledger := NewLedger(driverNS, func(class string) bool { return class == sweepLB })
	ledger.Pools = prefixes(sweepPool)
	ledger.Trace = s.logFile("changes")
	f := &feed{c: s.admin, l: ledger}
	stopFeed := f.watch(ctx)

	type result struct {
		name    string
		writes  []string
		crashes int
		took    time.Duration
	}
	var results []result
	for _, sc := range scenarios {
		start := time.Now()
		writes, crashes, err := sw.run(sc)
		if err != nil {
			t.Errorf("%s: %v", sc.name, err)
		}
		results = append(results, result{sc.name, writes, crashes, time.Since(start)})
	}
	stopFeed()
	total := 0
	for _, r := range results {
		t.Logf("%-24s %2d writes, crashed after each: %2d runs, %s\n    %s", r.name, len(r.writes), r.crashes, r.took.Round(time.Second),
			strings.Join(r.writes, "\n    "))
		total += r.crashes
	}
	t.Logf("%d crash points survived; changes judged: %d", total, ledger.Events)
	for _, inv := range Invariants {
		t.Logf("  invariant %-40s violated %d", inv, ledger.Violations[inv])
	}
	for _, n := range ledger.Notes {
		t.Error(n)
	}
}

// sweep runs the scenarios against one system.
type sweep struct {
	s   *system
	p   *crashProxy
	ctx context.Context
	// ids counts the static addresses handed out.
	static int
}

func (sw *sweep) setup() {
	must := func(err error) {
		if err != nil {
			sw.s.t.Fatal(err)
		}
	}
	must(sw.s.admin.Create(sw.ctx, mlb.Pool(sweepLB, false, sweepPool...)))
	must(sw.s.admin.Create(sw.ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: sweepLB},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: metallb.Provisioner, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Parameters: &apiruntime.RawExtension{Raw: fmt.Appendf(nil, `{"pool":%q}`, sweepLB)}}}))
	must(sw.s.admin.Create(sw.ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: sweepStatic},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: staticProvisioner, ReclaimPolicy: v1alpha1.ReclaimRetain}}))
}

// run sweeps one scenario: for n = 1, 2, … it sets up fresh objects, arms
// the crash after the writer's n-th write, acts, and — the writer killed —
// starts it again and waits for the end. The first n the sequence does
// not reach ends the sweep; it returns that run's writes and the number
// of crashes survived.
func (sw *sweep) run(sc scenario) ([]string, int, error) {
	short := strings.ReplaceAll(strings.Fields(sc.name)[0], "-", "")
	for n := 1; n <= maxWrites; n++ {
		id := fmt.Sprintf("%s-%d-%s", short, n, sc.writer.agent[:1])
		if err := sc.setup(sw, id); err != nil {
			return nil, n - 1, fmt.Errorf("setting up %s: %w", id, err)
		}
		if err := sw.until(30*time.Second, func() error { return sw.quiet(sc.done, id, true) }); err != nil {
			return nil, n - 1, fmt.Errorf("before %s: %w", id, err)
		}
		a := sw.p.arm(sc.writer.agent, n, func() { sw.s.kill(sc.writer.process) })
		if err := sc.act(sw, id); err != nil {
			sw.p.disarm(sc.writer.agent, a)
			return nil, n - 1, fmt.Errorf("acting on %s: %w", id, err)
		}
		err := sw.until(60*time.Second, func() error {
			select {
			case <-a.fired:
				return nil
			default:
			}
			return sw.quiet(sc.done, id, false)
		})
		wrote := sw.p.disarm(sc.writer.agent, a)
		select {
		case <-a.fired:
		default:
			if err != nil {
				return wrote, n - 1, fmt.Errorf("%s did not end: %w", id, err)
			}
			return wrote, n - 1, sw.cleanup(id) // the sequence has fewer than n writes
		}
		sleep(sw.ctx, 200*time.Millisecond)
		sw.s.start(sc.writer.process)
		if err := sw.until(60*time.Second, func() error { return sc.done(sw, id) }); err != nil {
			return wrote, n - 1, fmt.Errorf("crashed after write %d (%s), %s did not end: %w", n, wrote[n-1], id, err)
		}
		if err := sw.cleanup(id); err != nil {
			return wrote, n, fmt.Errorf("cleaning up: %w", err)
		}
	}
	return nil, maxWrites, fmt.Errorf("more than %d writes", maxWrites)
}

// quiet is done, and no binary wrote for the last second; with
// before, done must not hold yet (the setup of a run is not its end).
func (sw *sweep) quiet(done func(*sweep, string) error, id string, before bool) error {
	if !sw.p.quietFor(time.Second) {
		return errors.New("writes still under way")
	}
	if before {
		return nil
	}
	return done(sw, id)
}

// until polls f until it returns nil or d passes; it returns f's last
// error then.
func (sw *sweep) until(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) || sw.ctx.Err() != nil {
			return err
		}
		sleep(sw.ctx, 100*time.Millisecond)
	}
}

// --- setups and acts ---

func nothing(*sweep, string) error { return nil }

// write does a write of the harness, retried while the API server cannot
// call the webhooks (the manager just killed is starting again).
func (sw *sweep) write(f func() error) error {
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = f(); !apierrors.IsInternalError(err) || time.Now().After(deadline) {
			return err
		}
		sleep(sw.ctx, 200*time.Millisecond)
	}
}

func (sw *sweep) create(c client.Client, obj client.Object) error {
	return sw.write(func() error { return c.Create(sw.ctx, obj) })
}

// cleanup deletes what a run of id made and waits until it is gone, so
// that the next run meets a system as small as the first did.
func (sw *sweep) cleanup(id string) error {
	for _, obj := range []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: id}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: id + "-b"}},
		&v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: id}},
	} {
		if err := sw.write(func() error { return client.IgnoreNotFound(sw.s.tenant.Delete(sw.ctx, obj)) }); err != nil {
			return err
		}
	}
	return sw.until(60*time.Second, func() error {
		var addrs v1alpha1.IPAddressList
		if err := sw.s.admin.List(sw.ctx, &addrs); err != nil {
			return err
		}
		for _, a := range addrs.Items {
			if ref := a.Spec.ClaimRef; ref != nil && ref.Name == id || a.Labels["sweep"] == id {
				if a.Status.Phase == v1alpha1.AddressReleased && a.DeletionTimestamp == nil {
					if err := sw.write(func() error { return client.IgnoreNotFound(sw.s.admin.Delete(sw.ctx, &a)) }); err != nil {
						return err
					}
				}
				return fmt.Errorf("address %s of %s is still there", a.Name, id)
			}
		}
		for _, name := range []string{id, id + "-b"} {
			if _, err := sw.service(name); !apierrors.IsNotFound(err) {
				return stillThere("Service "+name, err)
			}
		}
		if _, err := sw.claim(id); !apierrors.IsNotFound(err) {
			return stillThere("claim "+id, err)
		}
		return nil
	})
}

// staticAddress pre-provisions an address of the static class, as an
// admin does, and waits until it is Available.
func (sw *sweep) staticAddress(id string) error {
	sw.static++
	ip := fmt.Sprintf("198.51.100.%d", sw.static)
	name, _ := v1alpha1.IPAddressName(ip)
	a := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sweep": id}},
		Spec: v1alpha1.IPAddressSpec{Address: ip, ClassName: sweepStatic, ReclaimPolicy: v1alpha1.ReclaimRetain,
			Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}}
	if err := sw.create(sw.s.admin, a); err != nil {
		return err
	}
	return sw.until(30*time.Second, func() error {
		if err := sw.s.admin.Get(sw.ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return err
		}
		return want(a.Status.Phase == v1alpha1.AddressAvailable, "address %s is %q", name, a.Status.Phase)
	})
}

func (sw *sweep) staticClaim(id string) error {
	return sw.create(sw.s.tenant, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: id},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: sweepStatic, Family: v1alpha1.IPv4}})
}

func (sw *sweep) staticClaimBound(id string) error {
	if err := sw.staticAddress(id); err != nil {
		return err
	}
	if err := sw.staticClaim(id); err != nil {
		return err
	}
	return sw.until(30*time.Second, func() error { return sw.staticBound(id) })
}

func (sw *sweep) lbClaim(id string) error {
	return sw.create(sw.s.tenant, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: id},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: sweepLB, Family: v1alpha1.Dual}})
}

func (sw *sweep) deleteClaim(id string) error {
	return sw.write(func() error {
		return sw.s.tenant.Delete(sw.ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: id}})
	})
}

// dualService is a dual-stack LoadBalancer Service opted out of
// auto-claim, on port.
func dualService(name string, port int32, annotations map[string]string) *corev1.Service {
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.AnnotationAutoClaim] = "false"
	return loadBalancer(name, corev1.IPFamilyPolicyRequireDualStack, port, annotations)
}

func (sw *sweep) claimAndService(id string) error {
	if err := sw.lbClaim(id); err != nil {
		return err
	}
	if err := sw.until(30*time.Second, func() error { return sw.onPlaceholders(id) }); err != nil {
		return err
	}
	return sw.create(sw.s.tenant, dualService(id, 80, nil))
}

func (sw *sweep) claimAttached(id string) error {
	if err := sw.claimAndService(id); err != nil {
		return err
	}
	if err := sw.attach(id); err != nil {
		return err
	}
	return sw.until(30*time.Second, func() error { return sw.attached(id) })
}

func (sw *sweep) claimAttachedAndOther(id string) error {
	if err := sw.claimAttached(id); err != nil {
		return err
	}
	return sw.create(sw.s.tenant, dualService(id+"-b", 443, nil))
}

func (sw *sweep) annotate(name, claim string) error {
	value := "null"
	if claim != "" {
		value = fmt.Sprintf("%q", claim)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, v1alpha1.AnnotationIPAddressClaim, value)
	return sw.write(func() error {
		return sw.s.tenant.Patch(sw.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name}},
			client.RawPatch(types.MergePatchType, []byte(patch)))
	})
}

func (sw *sweep) attach(id string) error { return sw.annotate(id, id) }
func (sw *sweep) detach(id string) error { return sw.annotate(id, "") }

func (sw *sweep) move(id string) error {
	if err := sw.annotate(id, ""); err != nil {
		return err
	}
	return sw.annotate(id+"-b", id)
}

// autoService is a plain LoadBalancer Service the core auto-claims an
// address of the driver's class for.
func (sw *sweep) autoService(id string) error {
	return sw.create(sw.s.tenant, loadBalancer(id, corev1.IPFamilyPolicySingleStack, 80,
		map[string]string{v1alpha1.AnnotationIPAddressClass: sweepLB}))
}

// --- ends ---

// stillThere says why what should be gone is not: err reading it, or it
// is there.
func stillThere(what string, err error) error {
	if err != nil {
		return fmt.Errorf("reading %s: %w", what, err)
	}
	return errors.New(what + " is still there")
}

func want(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func (sw *sweep) claim(id string) (*v1alpha1.IPAddressClaim, error) {
	var c v1alpha1.IPAddressClaim
	return &c, sw.s.admin.Get(sw.ctx, types.NamespacedName{Namespace: tenantNS, Name: id}, &c)
}

func (sw *sweep) service(name string) (*corev1.Service, error) {
	var svc corev1.Service
	return &svc, sw.s.admin.Get(sw.ctx, types.NamespacedName{Namespace: tenantNS, Name: name}, &svc)
}

// bound is the claim, Bound to n addresses whose records name it by UID.
func (sw *sweep) bound(id string, n int) (*v1alpha1.IPAddressClaim, []v1alpha1.IPAddress, error) {
	c, err := sw.claim(id)
	if err != nil {
		return nil, nil, err
	}
	if c.Status.Phase != v1alpha1.ClaimBound || len(c.Status.Addresses) != n {
		return nil, nil, fmt.Errorf("claim %s is %q with %v", id, c.Status.Phase, c.Status.Addresses)
	}
	var addrs []v1alpha1.IPAddress
	for _, ca := range c.Status.Addresses {
		var a v1alpha1.IPAddress
		if err := sw.s.admin.Get(sw.ctx, types.NamespacedName{Name: ca.Name}, &a); err != nil {
			return nil, nil, err
		}
		if a.Status.Phase != v1alpha1.AddressBound || a.Spec.ClaimRef == nil || a.Spec.ClaimRef.UID != c.UID {
			return nil, nil, fmt.Errorf("address %s is %q, bound to %v", a.Name, a.Status.Phase, a.Spec.ClaimRef)
		}
		addrs = append(addrs, a)
	}
	return c, addrs, nil
}

func (sw *sweep) staticBound(id string) error {
	_, _, err := sw.bound(id, 1)
	return err
}

func (sw *sweep) staticReleased(id string) error {
	if _, err := sw.claim(id); !apierrors.IsNotFound(err) {
		return stillThere("claim "+id, err)
	}
	var addrs v1alpha1.IPAddressList
	if err := sw.s.admin.List(sw.ctx, &addrs, client.MatchingLabels{"sweep": id}); err != nil {
		return err
	}
	for _, a := range addrs.Items {
		if a.Status.Phase != v1alpha1.AddressReleased {
			return fmt.Errorf("address %s is %q", a.Name, a.Status.Phase)
		}
	}
	return want(len(addrs.Items) == 1, "%d addresses of %s", len(addrs.Items), id)
}

// holds reports whether svc holds exactly ips.
func holds(svc *corev1.Service, ips []string) bool {
	got := make([]string, 0, len(ips))
	for _, ip := range metallb.IngressIPs(svc) {
		got = append(got, ip.String())
	}
	slices.Sort(got)
	ips = slices.Sorted(slices.Values(ips))
	return slices.Equal(got, ips)
}

func ipsOf(addrs []v1alpha1.IPAddress) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.Spec.Address
	}
	return out
}

// placeholdersHold reports, for each address, whether its placeholder
// exists and holds it.
func (sw *sweep) placeholdersHold(addrs []v1alpha1.IPAddress) (all, none bool, err error) {
	all, none = true, true
	for _, a := range addrs {
		var ph corev1.Service
		err := sw.s.admin.Get(sw.ctx, types.NamespacedName{Namespace: driverNS, Name: a.Name}, &ph)
		switch {
		case apierrors.IsNotFound(err):
			all = false
		case err != nil:
			return false, false, err
		case holds(&ph, []string{a.Spec.Address}):
			none = false
		default:
			all, none = false, false
		}
	}
	return all, none, nil
}

func (sw *sweep) onPlaceholders(id string) error {
	_, addrs, err := sw.bound(id, 2)
	if err != nil {
		return err
	}
	all, _, err := sw.placeholdersHold(addrs)
	if err != nil {
		return err
	}
	return want(all, "the placeholders of %s do not hold %v", id, ipsOf(addrs))
}

// released reports whether the driver let go of svc: no pin, marker or
// handoff finalizer left.
func released(svc *corev1.Service) error {
	return want(svc.Annotations[metallb.AnnotationPinned] == "" && svc.Annotations[metallb.AnnotationLoadBalancerIPs] == "" &&
		!slices.Contains(svc.Finalizers, metallb.FinalizerHandoff), "Service %s still carries the driver's pin: %v %v", svc.Name, svc.Annotations, svc.Finalizers)
}

// attachedTo: the claim's addresses are on Service name alone — its
// placeholders gone, the address recording the Service as its workload.
func (sw *sweep) attachedTo(id, name string) error {
	_, addrs, err := sw.bound(id, 2)
	if err != nil {
		return err
	}
	svc, err := sw.service(name)
	if err != nil {
		return err
	}
	if !holds(svc, ipsOf(addrs)) {
		return fmt.Errorf("Service %s holds %v, want %v", name, metallb.IngressIPs(svc), ipsOf(addrs))
	}
	_, none, err := sw.placeholdersHold(addrs)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a.Status.AssociatedTo == nil || a.Status.AssociatedTo.Name != name {
			return fmt.Errorf("address %s is associated to %v", a.Name, a.Status.AssociatedTo)
		}
	}
	return want(none, "a placeholder of %s still holds its address", id)
}

func (sw *sweep) attached(id string) error { return sw.attachedTo(id, id) }

func (sw *sweep) autoAttached(id string) error {
	svc, err := sw.service(id)
	if err != nil {
		return err
	}
	if svc.Annotations[v1alpha1.AnnotationIPAddressClaim] != id {
		return fmt.Errorf("Service %s names claim %q", id, svc.Annotations[v1alpha1.AnnotationIPAddressClaim])
	}
	_, addrs, err := sw.bound(id, 1)
	if err != nil {
		return err
	}
	return want(holds(svc, ipsOf(addrs)), "Service %s holds %v, want %v", id, metallb.IngressIPs(svc), ipsOf(addrs))
}

func (sw *sweep) detached(id string) error {
	_, addrs, err := sw.bound(id, 2)
	if err != nil {
		return err
	}
	svc, err := sw.service(id)
	if err != nil {
		return err
	}
	if len(svc.Status.LoadBalancer.Ingress) > 0 {
		return fmt.Errorf("Service %s still holds %v", id, metallb.IngressIPs(svc))
	}
	if err := released(svc); err != nil {
		return err
	}
	all, _, err := sw.placeholdersHold(addrs)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a.Status.AssociatedTo != nil || a.Status.Holding != nil {
			return fmt.Errorf("address %s is still associated to %v, holding %v", a.Name, a.Status.AssociatedTo, a.Status.Holding)
		}
	}
	return want(all, "the placeholders of %s do not hold its addresses", id)
}

func (sw *sweep) moved(id string) error {
	if err := sw.attachedTo(id, id+"-b"); err != nil {
		return err
	}
	old, err := sw.service(id)
	if err != nil {
		return err
	}
	if len(old.Status.LoadBalancer.Ingress) > 0 {
		return fmt.Errorf("Service %s still holds %v", id, metallb.IngressIPs(old))
	}
	return released(old)
}

func (sw *sweep) tornDown(id string) error {
	if _, err := sw.claim(id); !apierrors.IsNotFound(err) {
		return stillThere("claim "+id, err)
	}
	svc, err := sw.service(id)
	if err != nil {
		return err
	}
	if len(svc.Status.LoadBalancer.Ingress) > 0 {
		return fmt.Errorf("Service %s still holds %v", id, metallb.IngressIPs(svc))
	}
	if err := released(svc); err != nil {
		return err
	}
	var addrs v1alpha1.IPAddressList
	if err := sw.s.admin.List(sw.ctx, &addrs); err != nil {
		return err
	}
	for _, a := range addrs.Items {
		if ref := a.Spec.ClaimRef; ref != nil && ref.Namespace == tenantNS && ref.Name == id {
			return fmt.Errorf("address %s of %s is still there", a.Name, id)
		}
	}
	var phs corev1.ServiceList
	if err := sw.s.admin.List(sw.ctx, &phs, client.InNamespace(driverNS)); err != nil {
		return err
	}
	for _, ph := range phs.Items {
		if a := addressNamed(addrs.Items, ph.Name); placeholder(&ph) && a == nil {
			return fmt.Errorf("placeholder %s outlived its address", ph.Name)
		}
	}
	return nil
}

func prefixes(ranges []string) []netip.Prefix {
	out := make([]netip.Prefix, len(ranges))
	for i, r := range ranges {
		out[i] = netip.MustParsePrefix(r)
	}
	return out
}
