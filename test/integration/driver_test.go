package integration

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	metallbiad "github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/quota"
	"github.com/cozystack/address-controller/test/metallb"
)

// The driver's tests run the core, the driver and MetalLB's own controller
// on the local control plane. Test names follow contract §7's obligations.

// 7-2, 7-5: claim → Bound → attach A → delete A → held again → attach B →
// same IP → detach B without deleting it; MetalLB never has the address
// unassigned nor assigned to anyone else after it was first held.
func TestDriver_7_5_AttachMoveDetachHitless(t *testing.T) {
	e := newDriverEnv(t)
	pool := e.pool("pool", e.v4(0)+"/28")
	class := e.metalLBClass("public", pool, v1alpha1.ReclaimRetain)
	e.createClaim("web", class)
	ips := e.boundAddresses("web", 1)
	ip := ips[0]
	e.g.Expect(ip).To(Equal(e.v4(0)), "the smallest free address of the pool")
	e.placeholderHolds(ip)
	addr := nameOf(ip)
	w := e.watchHolders(ip, driverNamespace+"/"+addr, e.ns+"/a", e.ns+"/b")

	a := e.service("a", naming("web"))
	e.heldBy(e.ns, "a", ip)
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, "web", metallbiad.ReasonAssociated)).NotTo(BeEmpty(), "the tenant learns from the claim")
		got := e.getAddress(g, addr)
		g.Expect(got.Status.AssociatedTo).To(Equal(&v1alpha1.WorkloadReference{Kind: "Service", Namespace: e.ns, Name: "a"}))
		g.Expect(got.Status.Phase).To(Equal(v1alpha1.AddressBound))
	})
	e.eventually(func(g Gomega) {
		var ph corev1.Service
		err := k8s.Get(e.ctx, client.ObjectKey{Namespace: driverNamespace, Name: addr}, &ph)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the placeholder goes once A holds the address")
	})

	e.delete(a)
	e.placeholderHolds(ip)
	e.eventually(func(g Gomega) { e.gone(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "a"}}) })
	e.eventually(func(g Gomega) {
		got := e.getAddress(g, addr)
		g.Expect(got.Status.Phase).To(Equal(v1alpha1.AddressBound))
		g.Expect(got.Status.AssociatedTo).To(BeNil())
	})

	b := e.service("b", naming("web"))
	e.heldBy(e.ns, "b", ip)
	e.eventually(func(g Gomega) {
		var notes []string
		for _, ev := range e.events(g, "web", metallbiad.ReasonAssociated) {
			notes = append(notes, ev.Note)
		}
		g.Expect(notes).To(ContainElement(ip+" is attached to Service b"),
			"an event of the same reason minutes later keeps its own message")
	})

	e.update(b, func() { delete(b.Annotations, v1alpha1.AnnotationIPAddressClaim) })
	e.placeholderHolds(ip)
	e.heldBy(e.ns, "b")
	e.eventually(func(g Gomega) {
		var got corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(b), &got)).To(Succeed())
		g.Expect(got.Annotations).NotTo(HaveKey(metallbiad.AnnotationLoadBalancerIPs))
		g.Expect(got.Annotations).NotTo(HaveKey(metallbiad.AnnotationPinned))
		g.Expect(got.Annotations).NotTo(HaveKey(metallbiad.AnnotationAllowSharedIP))
		g.Expect(got.Finalizers).NotTo(ContainElement(metallbiad.FinalizerHandoff))
		g.Expect(e.getAddress(g, addr).Status.AssociatedTo).To(BeNil())
	})
	e.consistently(time.Second, func(g Gomega) { g.Expect(ingressOf(g, e.ns, "b")).To(BeEmpty()) })
	e.g.Expect(e.getClaim(e.g, "web").Status.Phase).To(Equal(v1alpha1.ClaimBound))
	w.check(t)
}

// 7-5: one workload per claim — a second Service naming the claim gets a
// warning and no pin.
func TestDriver_7_5_OneWorkloadPerClaim(t *testing.T) {
	e := newDriverEnv(t)
	_, ip := e.webBound(v1alpha1.ReclaimRetain)
	e.service("first", naming("web"))
	e.heldBy(e.ns, "first", ip)
	e.service("second", naming("web"))
	e.eventually(func(g Gomega) { g.Expect(e.events(g, "second", metallbiad.ReasonClaimInUse)).NotTo(BeEmpty()) })
	e.consistently(2*time.Second, func(g Gomega) {
		var svc corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "second"}, &svc)).To(Succeed())
		g.Expect(svc.Annotations).NotTo(HaveKey(metallbiad.AnnotationLoadBalancerIPs))
		g.Expect(ingressOf(g, e.ns, "second")).To(BeEmpty())
		g.Expect(ingressOf(g, e.ns, "first")).To(Equal([]string{ip}))
	})
}

// 7-5: a Service MetalLB would not serve (of another load-balancer class)
// that names a claim is told why it gets nothing; the address stays on its
// placeholder.
func TestDriver_7_5_ServiceMetalLBDoesNotServeIsTold(t *testing.T) {
	e := newDriverEnv(t)
	_, ip := e.webBound(v1alpha1.ReclaimRetain)
	e.placeholderHolds(ip)
	e.service("other", naming("web"), func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") })
	e.eventually(func(g Gomega) { g.Expect(e.events(g, "other", metallbiad.ReasonNotAttachable)).NotTo(BeEmpty()) })
	e.consistently(2*time.Second, func(g Gomega) {
		var svc corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "other"}, &svc)).To(Succeed())
		g.Expect(svc.Annotations).NotTo(HaveKey(metallbiad.AnnotationLoadBalancerIPs))
		g.Expect(ingressOf(g, driverNamespace, nameOf(ip))).To(Equal([]string{ip}))
	})
}

// 6, 7-2: Retain — deleting the claim leaves the address Released and
// still held; once an admin clears its claimRef it is Available, and a new
// claim of the class binds it before anything new is allocated.
func TestDriver_6_RetainReleasedHeldThenRecycled(t *testing.T) {
	e := newDriverEnv(t)
	class, ip := e.webBound(v1alpha1.ReclaimRetain)
	addr := nameOf(ip)
	e.service("a", naming("web"))
	e.heldBy(e.ns, "a", ip)
	w := e.watchHolders(ip, driverNamespace+"/"+addr, e.ns+"/a")

	e.delete(e.newClaim("web", class))
	e.addressPhase(addr, v1alpha1.AddressReleased)
	e.placeholderHolds(ip)
	e.heldBy(e.ns, "a")

	a := e.addressPhase(addr, v1alpha1.AddressReleased)
	e.update(a, func() { a.Spec.ClaimRef = nil })
	e.addressPhase(addr, v1alpha1.AddressAvailable)
	e.placeholderHolds(ip)
	e.eventually(func(g Gomega) {
		var ph corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKey{Namespace: driverNamespace, Name: addr}, &ph)).To(Succeed())
		g.Expect(ph.Annotations).NotTo(HaveKey(metallbiad.AnnotationAllowSharedIP))
	}, "recycled, the placeholder drops the key the former tenant's Service carried")
	e.placeholderHolds(ip)

	e.createClaim("again", class)
	e.g.Expect(e.boundAddresses("again", 1)).To(Equal([]string{ip}))
	var all v1alpha1.IPAddressList
	e.g.Expect(k8s.List(e.ctx, &all, client.MatchingFields{"spec.className": class})).To(Succeed())
	e.g.Expect(all.Items).To(HaveLen(1), "no new allocation")
	w.check(t)
}

// 6, 7-4: Delete — deleting the claim deletes the address; the driver
// withdraws its pin and placeholder first, and MetalLB can give the IP to
// anyone again.
func TestDriver_7_4_DeleteFreesTheAddress(t *testing.T) {
	e := newDriverEnv(t)
	class, ip := e.webBound(v1alpha1.ReclaimDelete)
	addr := nameOf(ip)
	a := e.service("a", naming("web"))
	e.heldBy(e.ns, "a", ip)

	e.delete(e.newClaim("web", class))
	e.eventually(func(g Gomega) { e.gone(g, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: addr}}) })
	e.eventually(func(g Gomega) {
		e.gone(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: driverNamespace, Name: addr}})
		var got corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(a), &got)).To(Succeed())
		g.Expect(got.Annotations).NotTo(HaveKey(metallbiad.AnnotationLoadBalancerIPs))
		g.Expect(got.Finalizers).To(BeEmpty())
	})
	e.heldBy(e.ns, "a")

	e.service("next", map[string]string{metallbiad.AnnotationLoadBalancerIPs: ip})
	e.heldBy(e.ns, "next", ip)
}

// 7-6: a Service pinning a reserved address directly never gets it while
// the driver holds it, and the address says who tries: Conflict, naming it.
func TestDriver_7_6_ThiefNeverGetsAReservedAddress(t *testing.T) {
	e := newDriverEnv(t)
	_, ip := e.webBound(v1alpha1.ReclaimRetain)
	e.placeholderHolds(ip)
	e.service("thief", map[string]string{metallbiad.AnnotationLoadBalancerIPs: ip})
	e.consistently(3*time.Second, func(g Gomega) {
		g.Expect(ingressOf(g, e.ns, "thief")).To(BeEmpty())
		g.Expect(ingressOf(g, driverNamespace, nameOf(ip))).To(Equal([]string{ip}))
	})
	a := e.getAddress(e.g, nameOf(ip))
	e.g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressConflict))
	e.g.Expect(meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionConflict).Message).To(
		Equal("Service " + e.ns + "/thief pins " + ip + " without authorization"))
}

// 7-2, 7-5: a Dual claim gets an address of each family, both pinned to a
// dual-stack Service.
func TestDriver_7_5_DualStack(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28", e.v6(0)+"/120"), v1alpha1.ReclaimRetain)
	e.createClaim("web", class, family(v1alpha1.Dual))
	ips := e.boundAddresses("web", 2)
	e.g.Expect(ips).To(ConsistOf(e.v4(0), fmt.Sprintf("2001:db8:%x::", e.id)))
	for _, ip := range ips {
		e.placeholderHolds(ip)
	}
	e.service("a", naming("web"), dualStack)
	e.heldBy(e.ns, "a", ips...)
	for _, ip := range ips {
		e.eventually(func(g Gomega) {
			g.Expect(e.getAddress(g, nameOf(ip)).Status.AssociatedTo).NotTo(BeNil())
		})
	}
}

// 7-1: every cause of refusal — missing pool, auto-assigning pool, a pool
// another class names, a pool range the driver cannot make addresses of —
// is a PoolRefused event and Ready=False on the
// class, and its claims stay Pending saying why; fixing it provisions.
func TestDriver_7_1_PoolRefused(t *testing.T) {
	e := newDriverEnv(t)
	missing := e.metalLBClass("missing", e.class("nopool"), v1alpha1.ReclaimRetain)
	auto := e.class("auto")
	e.create(metallb.Pool(auto, true, e.v4(16)+"/28"))
	autoClass := e.metalLBClass("autoclass", auto, v1alpha1.ReclaimRetain)
	shared := e.pool("shared", e.v4(32)+"/28")
	e.metalLBClass("first", shared, v1alpha1.ReclaimRetain)
	time.Sleep(1100 * time.Millisecond) // creation timestamps have a one-second resolution
	second := e.metalLBClass("second", shared, v1alpha1.ReclaimRetain)
	// IPv4 in IPv6 spelling: no address object could be named for it.
	mappedEntry := "::ffff:" + e.v4(64) + "/124"
	mapped := e.metalLBClass("mapped", e.pool("mapped", mappedEntry), v1alpha1.ReclaimRetain)

	for class, why := range map[string]string{
		missing: "not found", autoClass: "autoAssign", second: "already named by IPAddressClass " + e.class("first"),
		mapped: fmt.Sprintf("addresses[0] %q: reaches into ::ffff:0:0/96", mappedEntry),
	} {
		e.eventually(func(g Gomega) {
			c := e.getClass(g, class)
			ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(metallbiad.ReasonPoolRefused))
			g.Expect(ready.Message).To(ContainSubstring(why))
			g.Expect(e.events(g, class, metallbiad.ReasonPoolRefused)).NotTo(BeEmpty())
			// Not even the autoAssign pool's or the first class's
			// addresses: the class will provision none of them.
			g.Expect(c.Status.Capacity).To(BeEmpty())
		}, "class %s should be refused, counting nothing", class)
		claim := "for-" + class
		e.createClaim(claim, class)
		e.eventually(func(g Gomega) {
			c := e.getClaim(g, claim)
			g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending))
			bound := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound)
			g.Expect(bound).NotTo(BeNil())
			g.Expect(bound.Reason).To(Equal(v1alpha1.ReasonPoolRefused))
			g.Expect(bound.Message).To(ContainSubstring(why))
		}, "claim of %s should say why it waits", class)
	}

	e.create(metallb.Pool(e.class("nopool"), false, e.v4(48)+"/28"))
	e.g.Expect(e.boundAddresses("for-"+missing, 1)).To(Equal([]string{e.v4(48)}))
}

// 7-6: a Service holding a reserved address without authorization puts the
// address in Conflict, naming it, with events on both; it clears once the
// Service lets go.
func TestDriver_7_6_ConflictSetAndCleared(t *testing.T) {
	e := newDriverEnv(t)
	_, ip := e.webBound(v1alpha1.ReclaimRetain)
	addr := nameOf(ip)
	// Another load-balancer implementation hands out the same address.
	other := e.service("other", nil, func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") })
	e.update(other, func() {})
	e.eventually(func(g Gomega) {
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
		other.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		g.Expect(k8s.Status().Update(e.ctx, other)).To(Succeed())
	})
	e.eventually(func(g Gomega) {
		a := e.getAddress(g, addr)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressConflict))
		c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionConflict)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring(e.ns + "/other"))
		g.Expect(e.events(g, addr, metallbiad.ReasonUnauthorizedHolder)).NotTo(BeEmpty())
		g.Expect(e.events(g, "other", metallbiad.ReasonAddressReserved)).NotTo(BeEmpty())
	})
	e.delete(other)
	e.eventually(func(g Gomega) {
		a := e.getAddress(g, addr)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressBound))
		g.Expect(meta.IsStatusConditionFalse(a.Status.Conditions, v1alpha1.ConditionConflict)).To(BeTrue())
	})
}

// 5-1, 7-6: an address in Conflict is still its claim's: deleting it
// leaves it, and its placeholder, in place while the claim lives.
func TestDriver_5_1_DeletedAddressInConflictStaysHeld(t *testing.T) {
	e := newDriverEnv(t)
	_, ip := e.webBound(v1alpha1.ReclaimRetain)
	addr := nameOf(ip)
	e.placeholderHolds(ip)
	other := e.service("other", nil, func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") })
	e.eventually(func(g Gomega) {
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
		other.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		g.Expect(k8s.Status().Update(e.ctx, other)).To(Succeed())
	})
	e.eventually(func(g Gomega) { g.Expect(e.getAddress(g, addr).Status.Phase).To(Equal(v1alpha1.AddressConflict)) })

	e.delete(&v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: addr}})
	e.consistently(5*time.Second, func(g Gomega) {
		a := e.getAddress(g, addr)
		g.Expect(a.Finalizers).To(ContainElement(v1alpha1.FinalizerAddressProtection))
		g.Expect(ingressOf(g, driverNamespace, addr)).To(Equal([]string{ip}))
		g.Expect(e.getClaim(g, "web").Status.Phase).To(Equal(v1alpha1.ClaimBound))
	}, "the claim keeps its address, held by its placeholder")
}

// 7-6: a Lost address is restored by any pool that comes to cover it,
// not only by the one its class names: here the pool is re-created under
// another name, and the class is left as it was.
func TestDriver_7_6_LostRestoredByAnotherPool(t *testing.T) {
	e := newDriverEnv(t)
	pool := e.pool("pool", e.v4(0)+"/28")
	class := e.metalLBClass("public", pool, v1alpha1.ReclaimRetain)
	e.createClaim("web", class)
	ip := e.boundAddresses("web", 1)[0]
	addr := nameOf(ip)
	e.placeholderHolds(ip)

	e.delete(metallb.Pool(pool, false))
	e.eventually(func(g Gomega) { g.Expect(e.getAddress(g, addr).Status.Phase).To(Equal(v1alpha1.AddressLost)) })
	e.pool("renamed", e.v4(0)+"/28")
	e.eventually(func(g Gomega) {
		g.Expect(e.getAddress(g, addr).Status.Phase).To(Equal(v1alpha1.AddressBound))
		g.Expect(e.getClaim(g, "web").Status.Phase).To(Equal(v1alpha1.ClaimBound))
	}, "restored by the pool that covers it now")
	e.placeholderHolds(ip)
}

// 7-6: an address its pool no longer covers, or whose pool is gone, is
// Lost (and so is its claim); restoring the pool restores both.
func TestDriver_7_6_LostSetAndCleared(t *testing.T) {
	e := newDriverEnv(t)
	pool := e.pool("pool", e.v4(0)+"/28")
	class := e.metalLBClass("public", pool, v1alpha1.ReclaimRetain)
	e.createClaim("web", class)
	ip := e.boundAddresses("web", 1)[0]
	addr := nameOf(ip)
	e.placeholderHolds(ip)

	p := metallb.Pool(pool, false)
	e.g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	setAddresses := func(addresses ...string) {
		e.update(p, func() { _ = unstructured.SetNestedStringSlice(p.Object, addresses, "spec", "addresses") })
	}
	setAddresses(e.v4(8) + "/29")
	lost := func(reason string) {
		e.eventually(func(g Gomega) {
			a := e.getAddress(g, addr)
			g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressLost))
			held := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionInBackend)
			g.Expect(held).NotTo(BeNil())
			g.Expect(held.Reason).To(Equal(reason))
			g.Expect(e.getClaim(g, "web").Status.Phase).To(Equal(v1alpha1.ClaimLost))
		})
	}
	restored := func() {
		e.eventually(func(g Gomega) {
			a := e.getAddress(g, addr)
			g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressBound))
			g.Expect(meta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionInBackend)).To(BeTrue())
			g.Expect(e.getClaim(g, "web").Status.Phase).To(Equal(v1alpha1.ClaimBound))
		})
		e.placeholderHolds(ip)
	}
	lost(metallbiad.ReasonNotInPool)
	setAddresses(e.v4(0) + "/28")
	restored()

	e.delete(p)
	lost(metallbiad.ReasonPoolNotFound)
	e.create(metallb.Pool(pool, false, e.v4(0)+"/28"))
	restored()
}

// 7: a driver restarted at any moment — while provisioning, attaching and
// detaching — loses no reservation, creates no duplicate, and never lets
// MetalLB hand an attached address to nobody or to someone else.
func TestDriver_7_RestartAtAnyPoint(t *testing.T) {
	e := newEnvForDriver(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/24"), v1alpha1.ReclaimRetain)
	claim := func(i int) string { return fmt.Sprintf("claim-%02d", i) }

	stop := startDriver(t)
	const attached, total = 8, 40
	var watches []*holderWatch
	for i := range attached {
		e.createClaim(claim(i), class)
	}
	for i := range attached {
		ip := e.boundAddresses(claim(i), 1)[0]
		e.placeholderHolds(ip)
		watches = append(watches, e.watchHolders(ip, driverNamespace+"/"+nameOf(ip), fmt.Sprintf("%s/svc-%02d", e.ns, i)))
	}
	stop()

	rng := rand.New(rand.NewPCG(uint64(e.id), 7))
	for round := range 8 {
		stop := startDriver(t)
		switch round {
		case 0:
			for i := attached; i < total; i++ {
				e.createClaim(claim(i), class)
			}
		case 2:
			for i := range attached {
				e.service(fmt.Sprintf("svc-%02d", i), naming(claim(i)))
			}
		case 5:
			for i := range attached / 2 {
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: fmt.Sprintf("svc-%02d", i)}}
				e.update(svc, func() { delete(svc.Annotations, v1alpha1.AnnotationIPAddressClaim) })
			}
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		stop()
	}
	startDriver(t)

	seen := map[string]string{}
	for i := range total {
		ips := e.boundAddresses(claim(i), 1)
		e.g.Expect(seen).NotTo(HaveKey(ips[0]), "address %s bound twice", ips[0])
		seen[ips[0]] = claim(i)
		switch {
		case i < attached/2 || i >= attached:
			e.placeholderHolds(ips[0])
		default:
			e.heldBy(e.ns, fmt.Sprintf("svc-%02d", i), ips[0])
		}
	}
	var all v1alpha1.IPAddressList
	e.g.Expect(k8s.List(e.ctx, &all, client.MatchingFields{"spec.className": class})).To(Succeed())
	e.g.Expect(all.Items).To(HaveLen(total), "one address per claim, no duplicate")
	for _, a := range all.Items {
		e.g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressBound), "address %s", a.Name)
	}
	for i := range attached / 2 {
		e.heldBy(e.ns, fmt.Sprintf("svc-%02d", i))
	}
	for _, w := range watches {
		w.check(t)
	}
}

// 10, 7-5: a plain LoadBalancer Service naming a MetalLB class is
// auto-claimed by the core, provisioned and attached by the driver; deleting
// the Service hands the address back to a placeholder and then, with the
// auto-claim, deletes it and frees the IP.
func TestDriver_10_AutoClaimedServiceGetsAnAddress(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28"), v1alpha1.ReclaimRetain)
	svc := e.service("plain", map[string]string{v1alpha1.AnnotationIPAddressClass: class})
	ip := e.boundAddresses("plain", 1)[0]
	e.heldBy(e.ns, "plain", ip)

	e.delete(svc)
	e.eventually(func(g Gomega) {
		e.gone(g, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "plain"}})
		e.gone(g, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: nameOf(ip)}})
		e.gone(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: driverNamespace, Name: nameOf(ip)}})
	})
	e.service("next", map[string]string{metallbiad.AnnotationLoadBalancerIPs: ip})
	e.heldBy(e.ns, "next", ip)
}

// 10-5: an auto-claimed Service that loses its claim annotation keeps its
// address: the driver's pins on it are not the Service choosing its own
// address, so the core names the claim again and deletes nothing.
func TestDriver_10_AutoClaimedServiceLosingItsAnnotationKeepsItsAddress(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28"), v1alpha1.ReclaimRetain)
	svc := e.service("plain", map[string]string{v1alpha1.AnnotationIPAddressClass: class})
	ip := e.boundAddresses("plain", 1)[0]
	e.heldBy(e.ns, "plain", ip)

	e.update(svc, func() { delete(svc.Annotations, v1alpha1.AnnotationIPAddressClaim) })
	e.consistently(5*time.Second, func(g Gomega) {
		g.Expect(ingressOf(g, e.ns, "plain")).To(Equal([]string{ip}))
		c := e.getClaim(g, "plain")
		g.Expect(c.DeletionTimestamp).To(BeNil())
		g.Expect(names(c.Status.Addresses)).To(Equal([]string{nameOf(ip)}))
	}, "the Service keeps its address, and its claim")
	e.eventually(func(g Gomega) {
		var got corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(svc), &got)).To(Succeed())
		g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationIPAddressClaim, "plain"))
	}, "the core names the claim again")
}

// Adopting an address a Service already holds: an admin pinned a Service
// to an address of a driver's pool directly; the Service's own pin gives
// way to a claim naming that address, and MetalLB never takes the address
// from the Service on the way.
func TestDriver_AdoptAnAddressAServiceHolds(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28"), v1alpha1.ReclaimRetain)
	ip := e.v4(5)
	svc := e.service("legacy", map[string]string{metallbiad.AnnotationLoadBalancerIPs: ip})
	e.heldBy(e.ns, "legacy", ip)
	w := e.watchHolders(ip, e.ns+"/legacy", driverNamespace+"/"+nameOf(ip))

	// 1. The Service names the claim instead of pinning the address itself.
	e.update(svc, func() {
		delete(svc.Annotations, metallbiad.AnnotationLoadBalancerIPs)
		svc.Annotations[v1alpha1.AnnotationIPAddressClaim] = "legacy"
	})
	// 2. The claim asks for exactly that address, and waits for it: the
	// driver provisions nothing for a claim that names its address.
	e.createClaim("legacy", class, addressName(nameOf(ip)))
	e.eventually(func(g Gomega) {
		g.Expect(e.getClaim(g, "legacy").Status.Phase).To(Equal(v1alpha1.ClaimPending))
	})
	// 3. The address enters the ledger, pre-bound to the claim.
	e.createAddress(ip, class, preBound(e.ns, "legacy"))

	e.claimBoundTo("legacy", nameOf(ip))
	e.eventually(func(g Gomega) {
		var got corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(svc), &got)).To(Succeed())
		g.Expect(got.Annotations).To(HaveKeyWithValue(metallbiad.AnnotationPinned, ip), "the driver's pin now")
		a := e.getAddress(g, nameOf(ip))
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressBound))
		g.Expect(a.Status.AssociatedTo).To(Equal(&v1alpha1.WorkloadReference{Kind: "Service", Namespace: e.ns, Name: "legacy"}))
	})
	e.heldBy(e.ns, "legacy", ip)
	var all v1alpha1.IPAddressList
	e.g.Expect(k8s.List(e.ctx, &all, client.MatchingFields{"spec.className": class})).To(Succeed())
	e.g.Expect(all.Items).To(HaveLen(1), "nothing else allocated")
	w.check(t)
}

// Issue 11 defect 2: a claim deleted and re-created under its name within
// a minute (a GitOps re-apply) is provisioned at once. The pool has one
// address, so the re-created claim gets it only if neither the old claim's
// memory (keyed by name, it said the claim already had an address) nor the
// memory of the deleted address (it said the IP was taken) outlives them.
func TestDriver_7_2_ClaimRecreatedUnderItsName(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/32"), v1alpha1.ReclaimDelete)
	old := e.createClaim("web", class)
	ip := e.boundAddresses("web", 1)[0]
	e.placeholderHolds(ip)

	e.delete(old)
	e.eventually(func(g Gomega) { e.gone(g, old) })
	e.eventually(func(g Gomega) { e.gone(g, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: nameOf(ip)}}) })
	fresh := e.createClaim("web", class)
	c := e.claimBoundTo("web", nameOf(ip))
	e.g.Expect(c.UID).To(Equal(fresh.UID))
	e.placeholderHolds(ip)
}

// 4-4, 7-2: an address of another class pre-bound to the claim (an
// administrator's slip, or what a driver of the claim's former class left)
// is refused by the core, so it holds no family: the family is charged to
// the namespace's quota and the driver provisions the claim's address
// around it, instead of both waiting on it for good.
func TestDriver_7_2_RefusedPreBindingIsProvisionedAround(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/32"), v1alpha1.ReclaimDelete)
	e.createQuota("addresses", map[corev1.ResourceName]int64{quota.ClassKey(class): 1})
	other := e.class("other")
	e.createClass(other)
	e.createAddress(e.v4(8), other, preBound(e.ns, "web"))
	e.createClaim("web", class)
	e.g.Expect(e.boundAddresses("web", 1)).To(Equal([]string{e.v4(0)}))
	e.placeholderHolds(e.v4(0))
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, "web", v1alpha1.ReasonPreBindingRefused)).NotTo(BeEmpty())
		g.Expect(e.getAddress(g, nameOf(e.v4(8))).Spec.ClaimRef.UID).To(BeEmpty())
	})
}

// 4-6/4-8/7.1: a claim naming no class, of a default MetalLB class and
// created where no webhook names it, is served as soon as the core has
// resolved it: the driver learns its class from status.className, so the
// core writes that status at once rather than waiting for the driver.
func TestDriver_7_1_ClaimOfTheDefaultClassNamingNone(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/32"), v1alpha1.ReclaimDelete)
	obj := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}}
	e.update(obj, func() { asDefault(obj) })
	e.eventually(func(g Gomega) {
		g.Expect(meta.IsStatusConditionTrue(e.getClass(g, class).Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
	}, "the driver serves the class")
	e.createClaim("web", "")
	e.g.Expect(e.boundAddresses("web", 1)).To(Equal([]string{e.v4(0)}))
	e.g.Expect(e.getClaim(e.g, "web").Status.ClassName).To(Equal(class))
}

// Issue 11 defect 1: a slip in a class's parameters — an unknown key, a
// misspelt pool — or the class removed by force refuses the class (no new
// addresses, Ready=False PoolRefused, its Pending claims say why) but takes
// nothing from existing bindings: the address stays Bound and attached, and
// MetalLB never has it on anyone but the Service.
func TestDriver_7_6_ClassSlipTakesNothing(t *testing.T) {
	e := newDriverEnv(t)
	class, ip := e.webBound(v1alpha1.ReclaimRetain)
	pool := e.class("pool") // webBound's
	addr := nameOf(ip)
	e.placeholderHolds(ip)
	e.service("a", naming("web"))
	e.heldBy(e.ns, "a", ip)
	e.eventually(func(g Gomega) {
		g.Expect(e.getAddress(g, addr).Status.AssociatedTo).NotTo(BeNil())
	})
	w := e.watchHolders(ip, e.ns+"/a")

	untouched := func(why string) {
		e.t.Helper()
		e.consistently(2*time.Second, func(g Gomega) {
			a := e.getAddress(g, addr)
			g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressBound), why)
			g.Expect(a.Status.AssociatedTo).To(Equal(&v1alpha1.WorkloadReference{Kind: "Service", Namespace: e.ns, Name: "a"}), why)
			g.Expect(ingressOf(g, e.ns, "a")).To(Equal([]string{ip}), why)
			g.Expect(e.getClaim(g, "web").Status.Phase).To(Equal(v1alpha1.ClaimBound), why)
		})
	}
	refused := func(why, says string) {
		e.t.Helper()
		e.eventually(func(g Gomega) {
			ready := meta.FindStatusCondition(e.getClass(g, class).Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(metallbiad.ReasonPoolRefused), why)
			g.Expect(ready.Message).To(ContainSubstring(says), why)
		})
	}
	setParameters := func(raw string) {
		c := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}}
		e.update(c, func() { c.Spec.Parameters.Raw = []byte(raw) })
	}

	setParameters(fmt.Sprintf(`{"pool":%q,"note":"x"}`, pool))
	refused("an unknown key", "note")
	untouched("an unknown key")
	e.createClaim("late", class)
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, "late")
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending))
		g.Expect(meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound).Message).To(ContainSubstring("note"))
	})

	setParameters(fmt.Sprintf(`{"pool":%q}`, pool+"-typo"))
	refused("a misspelt pool", "not found")
	untouched("a misspelt pool")

	setParameters(fmt.Sprintf(`{"pool":%q}`, pool))
	e.boundAddresses("late", 1)

	// A pool entry MetalLB reads (package net allows a leading zero in a
	// prefix length) and the driver refuses: the class is refused, and
	// MetalLB, which still holds every address, is not taken for letting go.
	setPool := func(addresses ...string) {
		p := metallb.Pool(pool, false)
		e.g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		e.g.Expect(unstructured.SetNestedStringSlice(p.Object, addresses, "spec", "addresses")).To(Succeed())
		e.g.Expect(k8s.Update(e.ctx, p)).To(Succeed())
	}
	setPool(e.v4(0)+"/28", e.v4(64)+"/028")
	refused("a pool entry only MetalLB reads", "addresses[1]")
	untouched("a pool entry only MetalLB reads")
	setPool(e.v4(0) + "/28")

	e.forceDelete(&v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}})
	untouched("the class removed by force")
	w.check(t)
}

// Issue 11 defect 3: next to a pool MetalLB assigns from automatically,
// twenty Services opting in to auto-claim at once race MetalLB — it may
// assign one an address between the claim's creation and the annotation.
// Every claim the core created ends named by its Service, which then holds
// the claim's reserved address; none is left Bound for nobody.
func TestDriver_10_AutoClaimRacesMetalLB(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/27"), v1alpha1.ReclaimDelete)
	e.create(metallb.Pool(e.class("auto"), true, e.v4(64)+"/27"))
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- k8s.Create(e.ctx, e.newService(fmt.Sprintf("s%d", i), svcAnnotation(v1alpha1.AnnotationIPAddressClass, class)))
		}()
	}
	for range n {
		e.g.Expect(<-errs).To(Succeed())
	}
	e.eventuallyWithin(2*metalLBWait, func(g Gomega) {
		var claims v1alpha1.IPAddressClaimList
		g.Expect(k8s.List(e.ctx, &claims, client.InNamespace(e.ns))).To(Succeed())
		for _, c := range claims.Items {
			var svc corev1.Service
			g.Expect(k8s.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: c.Name}, &svc)).To(Succeed())
			g.Expect(svc.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationIPAddressClaim, c.Name), "the claim the core created is named by its Service")
			g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
			g.Expect(ingressOf(g, e.ns, c.Name)).To(Equal([]string{c.Status.Addresses[0].Address}), "Service %s holds its claim's address", c.Name)
		}
		// A Service MetalLB assigned before the core saw it does not
		// qualify (§10) and gets no claim at all.
		g.Expect(claims.Items).NotTo(BeEmpty())
	})
}

// Issue 11 defect 8: a Dual claim named by a single-stack Service gets the
// address of the Service's family attached, never a pin of two families
// MetalLB must refuse; the other address stays on its placeholder, reserved,
// and an event on the Service says which one is not attached.
func TestDriver_7_5_DualClaimSingleStackService(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28", e.v6(0)+"/120"), v1alpha1.ReclaimRetain)
	e.createClaim("web", class, family(v1alpha1.Dual))
	ips := e.boundAddresses("web", 2)
	v4, v6 := ips[0], ips[1]
	if netip.MustParseAddr(v4).Is6() {
		v4, v6 = v6, v4
	}
	e.placeholderHolds(v4)
	e.placeholderHolds(v6)
	e.service("a", naming("web"))
	e.heldBy(e.ns, "a", v4)
	e.eventually(func(g Gomega) {
		var svc corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "a"}, &svc)).To(Succeed())
		g.Expect(svc.Annotations).To(HaveKeyWithValue(metallbiad.AnnotationLoadBalancerIPs, v4))
		g.Expect(e.events(g, "a", metallbiad.ReasonFamilyNotAttached)).NotTo(BeEmpty())
		g.Expect(e.getAddress(g, nameOf(v4)).Status.AssociatedTo).NotTo(BeNil())
		g.Expect(e.getAddress(g, nameOf(v6)).Status.AssociatedTo).To(BeNil())
	})
	e.placeholderHolds(v6)
	e.g.Expect(e.getClaim(e.g, "web").Status.Phase).To(Equal(v1alpha1.ClaimBound))
}

// A Dual claim moved from a dual-stack Service to a single-stack IPv4 one:
// its IPv4 address goes to the new Service, its IPv6 one back to its
// placeholder, and neither is held by nobody at any instant. MetalLB drops
// both families of a Service whose pin goes, so the old Service lets go
// only once the IPv6 placeholder holds its address too.
func TestDriver_7_5_DualClaimMovedToASingleStackService(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28", e.v6(0)+"/120"), v1alpha1.ReclaimRetain)
	e.createClaim("web", class, family(v1alpha1.Dual))
	ips := e.boundAddresses("web", 2)
	v4, v6 := ips[0], ips[1]
	if netip.MustParseAddr(v4).Is6() {
		v4, v6 = v6, v4
	}
	e.placeholderHolds(v4)
	e.placeholderHolds(v6)
	a := e.service("a", naming("web"), dualStack)
	e.heldBy(e.ns, "a", v4, v6)
	w4 := e.watchHolders(v4, e.ns+"/a", e.ns+"/b", driverNamespace+"/"+nameOf(v4))
	w6 := e.watchHolders(v6, e.ns+"/a", driverNamespace+"/"+nameOf(v6))

	e.service("b", naming("web"))
	e.update(a, func() { delete(a.Annotations, v1alpha1.AnnotationIPAddressClaim) })
	e.heldBy(e.ns, "b", v4)
	e.placeholderHolds(v6)
	e.eventually(func(g Gomega) { g.Expect(ingressOf(g, e.ns, "a")).To(BeEmpty()) })
	w4.check(t)
	w6.check(t)
}

// Issue 13 (make chaos): MetalLB takes a pin only when it covers every
// family of the Service, so a dual-stack Service naming an IPv4 claim is
// never pinned — before the fix it was, MetalLB refused it over and over
// (AllocationFailed) and the Service got nothing without being told why.
// It gets a FamilyNotAttached event saying what to do, the address stays
// on its placeholder, and re-made single-stack the Service is attached.
func TestDriver_7_5_DualStackServiceNeedsEveryFamily(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28", e.v6(0)+"/120"), v1alpha1.ReclaimRetain)
	e.createClaim("web", class)
	ip := e.boundAddresses("web", 1)[0]
	e.placeholderHolds(ip)
	e.service("dual", naming("web"), dualStack)
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, "dual", metallbiad.ReasonFamilyNotAttached)).NotTo(BeEmpty())
	})
	e.consistently(2*time.Second, func(g Gomega) {
		var svc corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "dual"}, &svc)).To(Succeed())
		g.Expect(svc.Annotations).NotTo(HaveKey(metallbiad.AnnotationLoadBalancerIPs))
		g.Expect(ingressOf(g, e.ns, "dual")).To(BeEmpty())
		for _, ev := range e.events(g, "dual", "AllocationFailed") {
			g.Expect(ev.Note).NotTo(ContainSubstring("does not match the ipFamily"), "MetalLB was never asked for what it refuses")
		}
	})
	e.placeholderHolds(ip)

	e.delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "dual"}})
	e.service("single", naming("web"))
	e.heldBy(e.ns, "single", ip)
}

// Issue 11 defect 6: an address removed by force while attached leaves no
// driver finalizer or pin on its Service, which deletes as usual.
func TestDriver_7_4_ForcedAddressRemovalFreesItsService(t *testing.T) {
	e := newDriverEnv(t)
	// A pool of one address: the claim, live, is owed a new address at
	// once, and would have it attached to the Service again; here the
	// Service still holds the only one.
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/32"), v1alpha1.ReclaimRetain)
	e.createClaim("web", class)
	ip := e.boundAddresses("web", 1)[0]
	e.placeholderHolds(ip)
	a := e.service("a", naming("web"))
	e.heldBy(e.ns, "a", ip)
	e.eventually(func(g Gomega) {
		var svc corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(a), &svc)).To(Succeed())
		g.Expect(svc.Finalizers).To(ContainElement(metallbiad.FinalizerHandoff))
	})

	e.forceDelete(&v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: nameOf(ip)}})
	e.eventually(func(g Gomega) {
		var svc corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(a), &svc)).To(Succeed())
		g.Expect(svc.Finalizers).NotTo(ContainElement(metallbiad.FinalizerHandoff))
		g.Expect(svc.Annotations).NotTo(HaveKey(metallbiad.AnnotationPinned))
		g.Expect(svc.Annotations).NotTo(HaveKey(metallbiad.AnnotationLoadBalancerIPs))
	}, "the driver's hold comes off the Service")
	e.delete(a)
	e.eventually(func(g Gomega) { e.gone(g, a) }, "the Service deletes as usual")
}

// 5-1: an address deleted while its claim lives stays that claim's, in
// MetalLB's books too: its Service keeps the IP, a Service naming the claim
// later gets it, no second address is provisioned; only the claim's
// deletion lets it go, and then the driver's teardown runs as usual.
func TestDriver_5_1_DeletedAddressOfALiveClaimStaysAttached(t *testing.T) {
	e := newDriverEnv(t)
	class, ip := e.webBound(v1alpha1.ReclaimRetain)
	addr := nameOf(ip)
	a := e.service("a", naming("web"))
	e.heldBy(e.ns, "a", ip)

	e.delete(&v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: addr}})
	e.consistently(5*time.Second, func(g Gomega) {
		g.Expect(ingressOf(g, e.ns, "a")).To(Equal([]string{ip}))
		c := e.getClaim(g, "web")
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
		g.Expect(names(c.Status.Addresses)).To(Equal([]string{addr}))
	}, "the claim keeps its address, on its Service")
	e.delete(a)
	e.placeholderHolds(ip)
	e.service("b", naming("web"))
	e.heldBy(e.ns, "b", ip)

	e.delete(e.newClaim("web", class))
	e.eventually(func(g Gomega) { e.gone(g, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: addr}}) })
	e.heldBy(e.ns, "b")
}

// Issue 11 defect 9: Service t holds claim a's address; Service s, holding
// claim b's, is re-pointed to a. t keeps a's address at every instant, s
// gets nothing but a Warning, and b's address goes back to its placeholder
// without a gap.
func TestDriver_7_5_RepointedServiceStealsNothing(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28"), v1alpha1.ReclaimRetain)
	e.createClaim("a", class)
	e.createClaim("b", class)
	ipA, ipB := e.boundAddresses("a", 1)[0], e.boundAddresses("b", 1)[0]
	e.service("t", naming("a"))
	s := e.service("s", naming("b"))
	e.heldBy(e.ns, "t", ipA)
	e.heldBy(e.ns, "s", ipB)
	// The handoff to t is over only once a's placeholder let go too: t
	// alone holds a's address from here on.
	e.heldBy(driverNamespace, nameOf(ipA))
	wa := e.watchHolders(ipA, e.ns+"/t")
	wb := e.watchHolders(ipB, e.ns+"/s", driverNamespace+"/"+nameOf(ipB))

	e.update(s, func() { s.Annotations[v1alpha1.AnnotationIPAddressClaim] = "a" })
	e.placeholderHolds(ipB)
	e.heldBy(e.ns, "s")
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, "s", metallbiad.ReasonClaimInUse)).NotTo(BeEmpty())
	})
	e.consistently(2*time.Second, func(g Gomega) {
		g.Expect(ingressOf(g, e.ns, "t")).To(Equal([]string{ipA}))
		g.Expect(ingressOf(g, e.ns, "s")).To(BeEmpty())
		g.Expect(e.getAddress(g, nameOf(ipA)).Status.AssociatedTo.Name).To(Equal("t"))
	})
	wa.check(t)
	wb.check(t)
}

// Issue 11 defect 10: a Service moved to another claim and deleted — at
// once, while the driver is down, or once attached to the other claim —
// hands its old claim's address back to the placeholder and goes; neither
// address is ever unheld.
func TestDriver_7_5_MovedThenDeletedServiceLetsGo(t *testing.T) {
	e := newEnvForDriver(t)
	stop := startDriver(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28"), v1alpha1.ReclaimRetain)
	e.createClaim("a", class)
	e.createClaim("b", class)
	ipA, ipB := e.boundAddresses("a", 1)[0], e.boundAddresses("b", 1)[0]
	e.placeholderHolds(ipB)
	for _, mode := range []string{"at once", "driver down", "attached first"} {
		restart := mode == "driver down"
		x := e.service("x", naming("a"))
		e.heldBy(e.ns, "x", ipA)
		wa := e.watchHolders(ipA, e.ns+"/x", driverNamespace+"/"+nameOf(ipA))
		wb := e.watchHolders(ipB, e.ns+"/x", driverNamespace+"/"+nameOf(ipB))
		if restart {
			stop()
		}
		e.update(x, func() { x.Annotations[v1alpha1.AnnotationIPAddressClaim] = "b" })
		if mode == "attached first" {
			e.heldBy(e.ns, "x", ipB)
			e.placeholderHolds(ipA)
		}
		e.delete(x)
		if restart {
			stop = startDriver(t)
		}
		e.eventuallyWithin(metalLBWait, func(g Gomega) { e.gone(g, x) }, "the moved Service deletes (%s)", mode)
		e.placeholderHolds(ipA)
		e.placeholderHolds(ipB)
		wa.check(t)
		wb.check(t)
		wa.close()
		wb.close()
	}
}

// Issue 11 defect 7: MetalLB's controller killed and restarted right after
// each step that moves an address — attach, move, detach, teardown — and a
// moment later: every step completes, and MetalLB never has the address on
// nobody or on a Service it was not handed to.
func TestDriver_7_MetalLBRestartAtEveryStep(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28"), v1alpha1.ReclaimDelete)
	for _, delay := range []time.Duration{0, 300 * time.Millisecond} {
		claim := e.createClaim(fmt.Sprintf("web-%d", delay.Milliseconds()), class)
		ip := e.boundAddresses(claim.Name, 1)[0]
		addr := nameOf(ip)
		e.placeholderHolds(ip)
		a, b := fmt.Sprintf("a-%d", delay.Milliseconds()), fmt.Sprintf("b-%d", delay.Milliseconds())
		w := e.watchHolders(ip, driverNamespace+"/"+addr, e.ns+"/"+a, e.ns+"/"+b)
		restart := func(step string) {
			time.Sleep(delay)
			killMetalLB(t)
			t.Logf("MetalLB restarted %s after %s", delay, step)
		}

		sa := e.service(a, naming(claim.Name))
		restart("attach")
		e.heldBy(e.ns, a, ip)

		e.update(sa, func() { delete(sa.Annotations, v1alpha1.AnnotationIPAddressClaim) })
		sb := e.service(b, naming(claim.Name))
		restart("move")
		e.heldBy(e.ns, b, ip)
		e.heldBy(e.ns, a)

		e.update(sb, func() { delete(sb.Annotations, v1alpha1.AnnotationIPAddressClaim) })
		restart("detach")
		e.placeholderHolds(ip)
		e.heldBy(e.ns, b)

		e.update(sb, func() { sb.Annotations = naming(claim.Name) })
		e.heldBy(e.ns, b, ip)
		w.check(t) // after the teardown the address is free by design
		w.close()
		e.delete(claim)
		restart("teardown")
		e.eventuallyWithin(2*metalLBWait, func(g Gomega) {
			e.gone(g, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: addr}})
		}, "the teardown completes")
		e.heldBy(e.ns, b)
		e.eventually(func(g Gomega) {
			var svc corev1.Service
			g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(sb), &svc)).To(Succeed())
			g.Expect(svc.Finalizers).NotTo(ContainElement(metallbiad.FinalizerHandoff))
		})
	}
}

// Issue 11 defect 11: with the driver stopped and restarted at random
// moments while Services attach, move between claims, detach and go, no
// reserved address is ever on no Service in MetalLB's books, and every
// claim's address ends on its placeholder or on the one Service naming it.
func TestDriver_7_HeldAtEveryInstantUnderChurnAndRestarts(t *testing.T) {
	e := newEnvForDriver(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/27"), v1alpha1.ReclaimRetain)
	const n = 6
	claim := func(i int) string { return fmt.Sprintf("claim-%d", i) }
	service := func(i int) string { return fmt.Sprintf("svc-%d", i) }

	stop := startDriver(t)
	var allowed []string
	for i := range n {
		allowed = append(allowed, e.ns+"/"+service(i))
		e.createClaim(claim(i), class)
	}
	var watches []*holderWatch
	for i := range n {
		ip := e.boundAddresses(claim(i), 1)[0]
		e.placeholderHolds(ip)
		watches = append(watches, e.watchHolders(ip, append([]string{driverNamespace + "/" + nameOf(ip)}, allowed...)...))
	}
	for i := range n {
		e.service(service(i), naming(claim(i)))
	}
	stop()

	rng := rand.New(rand.NewPCG(uint64(e.id), 11))
	for range 12 {
		stop := startDriver(t)
		for range 3 {
			i := rng.IntN(n)
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: service(i)}}
			if err := k8s.Get(e.ctx, client.ObjectKeyFromObject(svc), svc); err != nil || svc.DeletionTimestamp != nil {
				// Deleted earlier: it comes back naming its own claim, if gone.
				if apierrors.IsNotFound(err) {
					e.service(service(i), naming(claim(i)))
				}
				continue
			}
			switch op := rng.IntN(4); op {
			case 0: // detach
				e.update(svc, func() { delete(svc.Annotations, v1alpha1.AnnotationIPAddressClaim) })
			case 1, 2: // attach or move, maybe to a claim another Service names
				j := rng.IntN(n)
				e.update(svc, func() {
					if svc.Annotations == nil {
						svc.Annotations = map[string]string{}
					}
					svc.Annotations[v1alpha1.AnnotationIPAddressClaim] = claim(j)
				})
			case 3: // delete, to come back later
				e.delete(svc)
			}
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		stop()
	}
	startDriver(t)

	e.eventuallyWithin(2*metalLBWait, func(g Gomega) {
		for i := range n {
			ip := e.boundAddresses(claim(i), 1)[0]
			var namers []string
			var svcs corev1.ServiceList
			g.Expect(k8s.List(e.ctx, &svcs, client.InNamespace(e.ns))).To(Succeed())
			for _, s := range svcs.Items {
				g.Expect(s.DeletionTimestamp).To(BeNil(), "deleted Service %s is gone", s.Name)
				if s.Annotations[v1alpha1.AnnotationIPAddressClaim] == claim(i) {
					namers = append(namers, s.Name)
				}
			}
			holders := 0
			for _, s := range svcs.Items {
				if slices.Contains(ingressOf(g, e.ns, s.Name), ip) {
					holders++
					g.Expect(namers).To(ContainElement(s.Name), "%s holds %s of %s, which it does not name", s.Name, ip, claim(i))
				}
			}
			if len(namers) == 0 {
				g.Expect(ingressOf(g, driverNamespace, nameOf(ip))).To(ContainElement(ip), "%s is back on its placeholder", ip)
			} else {
				g.Expect(holders).To(Equal(1), "%s of %s is on exactly one of %v", ip, claim(i), namers)
			}
		}
	})
	for _, w := range watches {
		w.check(t)
	}
}

// The driver trusts only its own record of which Services it pinned: a
// Service carrying a copy of the driver's marker and a pin of a reserved
// address is not the driver's — it is never edited, and it gets nothing.
func TestDriver_7_6_ForgedMarkerIsNotTheDrivers(t *testing.T) {
	e := newDriverEnv(t)
	_, ip := e.webBound(v1alpha1.ReclaimRetain)
	e.placeholderHolds(ip)
	e.g.Expect(e.getAddress(e.g, nameOf(ip)).Status.Holding).To(BeNil(), "no record: the placeholder alone holds the address")
	forged := map[string]string{
		metallbiad.AnnotationLoadBalancerIPs: ip, metallbiad.AnnotationPinned: ip, metallbiad.AnnotationAllowSharedIP: "theirs",
	}
	holders := e.watchHolders(ip, driverNamespace+"/"+nameOf(ip))
	e.service("stranger", forged)
	stranger := e.ns + "/stranger"
	untouched := func(g Gomega) {
		var svc corev1.Service
		g.Expect(k8s.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "stranger"}, &svc)).To(Succeed())
		for k, v := range forged {
			g.Expect(svc.Annotations).To(HaveKeyWithValue(k, v), "the driver never edits a Service it did not pin")
		}
		g.Expect(svc.Finalizers).NotTo(ContainElement(metallbiad.FinalizerHandoff))
		g.Expect(ingressOf(g, e.ns, "stranger")).To(BeEmpty())
		g.Expect(ingressOf(g, driverNamespace, nameOf(ip))).To(Equal([]string{ip}))
	}
	e.eventually(func(g Gomega) {
		untouched(g)
		a := e.getAddress(g, nameOf(ip))
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressConflict))
		c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionConflict)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("Service "+stranger+" pins "+ip), "the condition names the Service")
		g.Expect(e.events(g, "stranger", metallbiad.ReasonAddressReserved)).NotTo(BeEmpty(), "and so does an event on it")
	}, "a pin of the reserved address without the driver's record is a Conflict")
	e.consistently(2*time.Second, untouched)

	// MetalLB never assigned it to the stranger, at any instant of the
	// attempt: not in the Services' status (watched throughout), not in
	// MetalLB's own events.
	holders.check(t)
	var evs corev1.EventList
	e.g.Expect(k8s.List(e.ctx, &evs, client.InNamespace(e.ns))).To(Succeed())
	for _, ev := range evs.Items {
		if ev.InvolvedObject.Name == "stranger" && strings.Contains(ev.Message, "Assigned IP") {
			e.g.Expect(ev.Message).NotTo(ContainSubstring(ip), "MetalLB assigned the reserved address to the stranger")
		}
	}

	// Gone, the Conflict clears.
	e.delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "stranger"}})
	e.eventually(func(g Gomega) {
		g.Expect(e.getAddress(g, nameOf(ip)).Status.Phase).To(Equal(v1alpha1.AddressBound))
	})
}

// 7-1: the stamp alone hands nothing to the driver. A claim stamped by
// its writer (no webhook here to remove the stamp) is served only when the
// class the core resolved it to is one of the driver's, live: not a class
// being deleted, not another provisioner's class.
func TestDriver_7_1_ForgedStampIsNotServed(t *testing.T) {
	e := newDriverEnv(t)
	class, _ := e.webBound(v1alpha1.ReclaimRetain)
	static := e.createClass(e.class("static")).Name
	stamp := func(c *v1alpha1.IPAddressClaim) {
		c.Annotations = map[string]string{v1alpha1.AnnotationProvisioner: metallbiad.Provisioner}
	}
	// The class keeps its finalizer while "web" holds an address of it.
	e.delete(&v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}})
	e.eventually(func(g Gomega) { g.Expect(e.getClass(g, class).DeletionTimestamp).NotTo(BeNil()) })
	e.createClaim("late", class, stamp)
	e.createClaim("other", static, stamp)
	e.consistently(3*time.Second, func(g Gomega) {
		var addrs v1alpha1.IPAddressList
		g.Expect(k8s.List(e.ctx, &addrs)).To(Succeed())
		for _, a := range addrs.Items {
			if ref := a.Spec.ClaimRef; ref != nil && ref.Namespace == e.ns {
				g.Expect(ref.Name).To(Equal("web"), "an address was provisioned for a forged stamp: %s", a.Name)
			}
		}
	})
	e.eventually(func(g Gomega) {
		g.Expect(e.getClaim(g, "other").Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationProvisioner, "driver.example.com/"+static),
			"the core re-stamps the claim with its class's provisioner")
	})
}

// The driver keeps addresses of classes it does not know to be its own in
// outline (no status records). An address created before its class is
// such an outline until the class arrives; the pass that finds it the
// driver's reads it whole, and it is held and claimed as any other.
func TestDriver_ClassArrivingAfterItsAddressHoldsIt(t *testing.T) {
	e := newDriverEnv(t)
	pool := e.pool("pool", e.v4(0)+"/28")
	ip := e.v4(3)
	e.createAddress(ip, e.class("late"))
	class := e.metalLBClass("late", pool, v1alpha1.ReclaimRetain)
	e.placeholderHolds(ip)
	e.eventually(func(g Gomega) {
		g.Expect(e.getAddress(g, nameOf(ip)).Finalizers).To(ContainElement(metallbiad.FinalizerTeardown))
	})
	e.createClaim("web", class)
	e.claimBoundTo("web", nameOf(ip))
	e.service("web", naming("web"))
	e.heldBy(e.ns, "web", ip)
}

// A pool that sets avoidBuggyIPs is served, without its IPv4 addresses
// ending in .0 or .255: MetalLB never assigns those from it, so the first
// address a claim gets of x.y.z.0/30 is x.y.z.1, and MetalLB holds it.
func TestDriver_AvoidBuggyIPsPoolServedWithoutThem(t *testing.T) {
	e := newDriverEnv(t)
	name := e.class("pool")
	pool := metallb.Pool(name, false, e.v4(0)+"/30")
	e.g.Expect(unstructured.SetNestedField(pool.Object, true, "spec", "avoidBuggyIPs")).To(Succeed())
	e.create(pool)
	class := e.metalLBClass("public", name, v1alpha1.ReclaimDelete)
	e.createClaim("web", class)
	e.g.Expect(e.boundAddresses("web", 1)).To(Equal([]string{e.v4(1)}))
	e.placeholderHolds(e.v4(1))
}
