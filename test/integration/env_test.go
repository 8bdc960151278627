package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

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
	t.Cleanup(e.teardown)
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
