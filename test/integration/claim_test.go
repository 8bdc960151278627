package integration

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Contract §4: the claim reconciler.

// 4-2 protection and 4-6 the provisioner stamp, which follows the class
// while the claim is unbound.
func TestClaim_4_2_4_6_ProtectsAndStampsProvisioner(t *testing.T) {
	e := newEnv(t)
	a, b := e.class("a"), e.class("b")
	classA := e.createClass(a)
	classB := e.createClass(b)
	startManager(t)

	claim := e.createClaim("c", a)
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, "c")
		g.Expect(c.Finalizers).To(ContainElement(v1alpha1.FinalizerClaimProtection))
		g.Expect(c.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationProvisioner, classA.Spec.Provisioner))
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending))
		g.Expect(c.Status.ClassName).To(Equal(a))
		resolved := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionClassResolved)
		g.Expect(resolved).NotTo(BeNil())
		g.Expect(resolved.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(resolved.Reason).To(Equal(v1alpha1.ReasonResolved))
		bound := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound)
		g.Expect(bound).NotTo(BeNil())
		g.Expect(bound.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(bound.Reason).To(Equal(v1alpha1.ReasonWaitingForProvisioning))
		g.Expect(bound.Message).To(ContainSubstring(classA.Spec.Provisioner))
	})

	// Re-targeted before binding: the stamp and the recorded class follow.
	e.update(claim, func() { claim.Spec.ClassName = b })
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, "c")
		g.Expect(c.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationProvisioner, classB.Spec.Provisioner))
		g.Expect(c.Status.ClassName).To(Equal(b))
	})
}

// 4-7: the Available address of the class and family with the
// lexicographically smallest name. ip-10-0-n-10 < ip-10-0-n-100 <
// ip-10-0-n-9: the order is by name, not by IP.
func TestClaim_4_7_BindsSmallestAvailable(t *testing.T) {
	e := newEnv(t)
	class, other := e.class("a"), e.class("other")
	e.createClass(class)
	e.createClass(other)
	startManager(t)

	for _, n := range []int{9, 100, 10} {
		e.createAddress(e.v4(n), class)
	}
	// Smaller names that are no candidates: another class's address, and an
	// IPv6 address of the class (ip-10--… sorts before ip-10-0-…).
	e.createAddress(e.v4(1), other)
	v6 := fmt.Sprintf("10::%x:1", e.id)
	e.createAddress(v6, class)
	for _, ip := range []string{e.v4(9), e.v4(10), e.v4(100), e.v4(1), v6} {
		e.addressPhase(nameOf(ip), v1alpha1.AddressAvailable)
	}

	for i, n := range []int{10, 100, 9} {
		name := fmt.Sprintf("c%d", i)
		e.createClaim(name, class)
		c := e.claimBoundTo(name, nameOf(e.v4(n)))
		e.g.Expect(c.Status.Addresses).To(Equal([]v1alpha1.ClaimedAddress{{Name: nameOf(e.v4(n)), Address: e.v4(n)}}))
		e.g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionBound)).To(BeTrue())
	}
	e.g.Expect(e.getAddress(e.g, nameOf(e.v4(1))).Status.Phase).To(Equal(v1alpha1.AddressAvailable))
	e.g.Expect(e.getAddress(e.g, nameOf(v6)).Status.Phase).To(Equal(v1alpha1.AddressAvailable))

	// The pool is empty now: the next claim says the class is exhausted
	// (every IPv4 address of it is taken) and waits.
	e.createClaim("c3", class)
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, "c3")
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending))
		g.Expect(meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound).Reason).To(Equal(v1alpha1.ReasonClassExhausted))
	})
	// A new Available address wakes it.
	e.createAddress(e.v4(50), class)
	e.claimBoundTo("c3", nameOf(e.v4(50)))
}

// 4-7: an address an administrator applies server-side keeps its
// field-tracking record through the bind: the core's cache keeps an
// applier's record and its claimRef write sends it back, so the applier
// still owns what it applied and the core's write is recorded beside it
// (package untrack; any other address's record is cleared by that write).
func TestClaim_4_7_AppliedAddressKeepsItsRecord(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	applied := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "IPAddress",
		"metadata": map[string]any{"name": nameOf(e.v4(1))},
		"spec":     map[string]any{"address": e.v4(1), "className": class, "source": map[string]any{"fromClass": map[string]any{}}}}}
	e.g.Expect(k8s.Apply(e.ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner("gitops"))).To(Succeed())
	e.createClaim("c", class)
	e.claimBoundTo("c", nameOf(e.v4(1)))

	owners := map[string]string{}
	for _, mf := range e.getAddress(e.g, nameOf(e.v4(1))).ManagedFields {
		owners[fmt.Sprintf("%s/%s", mf.Operation, mf.Subresource)] = string(mf.FieldsV1.GetRawBytes())
	}
	e.g.Expect(owners).To(HaveKeyWithValue("Apply/", ContainSubstring(`"f:address"`)))
	e.g.Expect(owners).To(HaveKeyWithValue("Update/", ContainSubstring(`"f:claimRef"`)))
}

// 4-5/4-7 Dual: one address of each family; status.addresses sorted by
// object name (here the IPv4 one sorts first).
func TestClaim_4_7_DualBindsOneOfEachFamily(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	v4 := func(n int) string { return fmt.Sprintf("100.127.%d.%d", e.id, n) }
	v6 := func(n int) string { return fmt.Sprintf("2001:db8:ff:%x::%x", e.id, n) }
	for n := 1; n <= 2; n++ {
		e.createAddress(v4(n), class)
		e.createAddress(v6(n), class)
	}
	for n := 1; n <= 2; n++ {
		e.addressPhase(nameOf(v4(n)), v1alpha1.AddressAvailable)
		e.addressPhase(nameOf(v6(n)), v1alpha1.AddressAvailable)
	}
	e.createClaim("dual", class, family(v1alpha1.Dual))
	c := e.claimBoundTo("dual", nameOf(v4(1)), nameOf(v6(1)))
	e.g.Expect(c.Status.Addresses).To(Equal([]v1alpha1.ClaimedAddress{
		{Name: nameOf(v4(1)), Address: v4(1)},
		{Name: nameOf(v6(1)), Address: v6(1)},
	}))
	e.consistently(time.Second, func(g Gomega) {
		for _, ip := range []string{v4(2), v6(2)} {
			g.Expect(e.getAddress(g, nameOf(ip)).Spec.ClaimRef).To(BeNil())
		}
	})
}

// 4-7: spec.addressName binds that address, not the smallest; a claim naming
// an address that does not exist yet waits for it.
func TestClaim_4_7_AddressNameBindsThatOne(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	for n := 1; n <= 3; n++ {
		e.createAddress(e.v4(n), class)
	}
	for n := 1; n <= 3; n++ {
		e.addressPhase(nameOf(e.v4(n)), v1alpha1.AddressAvailable)
	}
	e.createClaim("named", class, addressName(nameOf(e.v4(3))))
	e.claimBoundTo("named", nameOf(e.v4(3)))

	e.createClaim("later", class, addressName(nameOf(e.v4(7))))
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, "later")
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending))
		cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(v1alpha1.ReasonWaitingForAddress))
		g.Expect(cond.Message).To(ContainSubstring(nameOf(e.v4(7))))
	})
	e.createAddress(e.v4(7), class)
	e.claimBoundTo("later", nameOf(e.v4(7)))
	for n := 1; n <= 2; n++ {
		e.g.Expect(e.getAddress(e.g, nameOf(e.v4(n))).Spec.ClaimRef).To(BeNil())
	}
}

// classResolved waits for the claim's ClassResolved condition to have reason.
func (e *env) classResolved(claim string, status metav1.ConditionStatus, reason string) {
	e.t.Helper()
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, claim)
		cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionClassResolved)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(status))
		g.Expect(cond.Reason).To(Equal(reason))
		if status == metav1.ConditionFalse {
			g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending))
			g.Expect(meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound).Reason).To(Equal(v1alpha1.ReasonWaitingForClass))
		}
	}, "claim %s: ClassResolved should be %s/%s", claim, status, reason)
}

// 4-6: with no default class a claim naming none waits (NoDefaultClass)
// and binds once a default appears; with two defaults a claim waits
// (MultipleDefaultClasses) and binds once one of them stops being default.
// Each time the claim is retried on the class change alone.
func TestClaim_4_6_DefaultClassResolution(t *testing.T) {
	e := newEnv(t)
	a, b := e.class("a"), e.class("b")
	startManager(t)

	// Available before their class exists, so only class changes can
	// retry the claims.
	e.createAddress(e.v4(1), a)
	e.createAddress(e.v4(2), a)
	e.addressPhase(nameOf(e.v4(1)), v1alpha1.AddressAvailable)
	e.addressPhase(nameOf(e.v4(2)), v1alpha1.AddressAvailable)

	e.createClaim("first", "")
	e.classResolved("first", metav1.ConditionFalse, v1alpha1.ReasonNoDefaultClass)
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, "first", v1alpha1.ReasonNoDefaultClass)).NotTo(BeEmpty())
	})
	e.g.Expect(e.getClaim(e.g, "first").Annotations).NotTo(HaveKey(v1alpha1.AnnotationProvisioner))

	e.createClass(a, asDefault)
	c := e.claimBoundTo("first", nameOf(e.v4(1)))
	e.g.Expect(c.Status.ClassName).To(Equal(a))
	e.g.Expect(c.Spec.ClassName).To(BeEmpty())
	e.classResolved("first", metav1.ConditionTrue, v1alpha1.ReasonResolved)

	classB := e.createClass(b, asDefault)
	// Class and claim reach the manager on separate watches: the claim is
	// created once the manager has seen the second default (its finalizer
	// is on), as a tenant's claim would come long after an operator's slip.
	e.eventually(func(g Gomega) {
		g.Expect(e.getClass(g, b).Finalizers).To(ContainElement(v1alpha1.FinalizerClassProtection))
	})
	e.createClaim("second", "")
	e.classResolved("second", metav1.ConditionFalse, v1alpha1.ReasonMultipleDefaultClasses)
	e.g.Expect(e.getClaim(e.g, "second").Annotations).NotTo(HaveKey(v1alpha1.AnnotationProvisioner))
	e.g.Expect(e.getAddress(e.g, nameOf(e.v4(2))).Spec.ClaimRef).To(BeNil())

	e.update(classB, func() { delete(classB.Annotations, v1alpha1.AnnotationDefaultClass) })
	c = e.claimBoundTo("second", nameOf(e.v4(2)))
	e.g.Expect(c.Status.ClassName).To(Equal(a))
	e.classResolved("second", metav1.ConditionTrue, v1alpha1.ReasonResolved)
	e.claimBoundTo("first", nameOf(e.v4(1)))
}

// 4-6: a named class that does not exist; the claim binds once it is created.
func TestClaim_4_6_ClassNotFoundRetriedOnClassChange(t *testing.T) {
	e := newEnv(t)
	class := e.class("late")
	startManager(t)

	// The address is Available before the class exists; only the class's
	// creation can retry the claim.
	e.createAddress(e.v4(1), class)
	e.addressPhase(nameOf(e.v4(1)), v1alpha1.AddressAvailable)
	e.createClaim("c", class)
	e.classResolved("c", metav1.ConditionFalse, v1alpha1.ReasonClassNotFound)
	e.consistently(time.Second, func(g Gomega) {
		g.Expect(e.getAddress(g, nameOf(e.v4(1))).Spec.ClaimRef).To(BeNil())
	})

	e.createClass(class)
	e.claimBoundTo("c", nameOf(e.v4(1)))
	e.classResolved("c", metav1.ConditionTrue, v1alpha1.ReasonResolved)
}

// 4-6: status.className is sticky: when the default annotation moves to
// another class, a claim that resolved against the old default keeps it.
func TestClaim_4_6_StickyClassName(t *testing.T) {
	e := newEnv(t)
	a, b := e.class("a"), e.class("b")
	classA := e.createClass(a, asDefault)
	classB := e.createClass(b)
	startManager(t)

	claim := e.createClaim("c", "")
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, "c")
		g.Expect(c.Status.ClassName).To(Equal(a))
		g.Expect(c.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationProvisioner, classA.Spec.Provisioner))
	})

	e.update(classA, func() { delete(classA.Annotations, v1alpha1.AnnotationDefaultClass) })
	e.update(classB, func() { asDefault(classB) })
	e.createAddress(e.v4(1), b)
	e.addressPhase(nameOf(e.v4(1)), v1alpha1.AddressAvailable)
	// Touch the claim so that it certainly gets a pass after the move.
	e.update(claim, func() { claim.Labels = map[string]string{"touched": "yes"} })
	e.consistently(2*time.Second, func(g Gomega) {
		c := e.getClaim(g, "c")
		g.Expect(c.Status.ClassName).To(Equal(a))
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending))
		g.Expect(c.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationProvisioner, classA.Spec.Provisioner))
		g.Expect(e.getAddress(g, nameOf(e.v4(1))).Spec.ClaimRef).To(BeNil())
	})

	e.createAddress(e.v4(2), a)
	e.claimBoundTo("c", nameOf(e.v4(2)))
}

// 4-4: an address created pre-bound (claimRef without a UID), as a driver
// provisions, is accepted: the core writes the claim's UID.
func TestClaim_4_4_AcceptsPreBinding(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	// An Available address that would otherwise be matched.
	e.createAddress(e.v4(1), class)
	e.addressPhase(nameOf(e.v4(1)), v1alpha1.AddressAvailable)
	// The claim waits on nothing it can match: it names a class whose
	// driver provisions (a fresh class, no Available addresses).
	driven := e.class("driven")
	e.createClass(driven)
	claim := e.createClaim("c", driven)
	e.eventually(func(g Gomega) {
		g.Expect(e.getClaim(g, "c").Annotations).To(HaveKey(v1alpha1.AnnotationProvisioner))
	})

	e.createAddress(e.v4(2), driven, preBound(e.ns, "c"))
	c := e.claimBoundTo("c", nameOf(e.v4(2)))
	e.g.Expect(c.UID).To(Equal(claim.UID))
	e.g.Expect(e.getAddress(e.g, nameOf(e.v4(1))).Spec.ClaimRef).To(BeNil())
	// The write of the UID also cleared the creator's field-tracking
	// record; the status writes after it add none (package untrack).
	e.g.Expect(e.getAddress(e.g, nameOf(e.v4(2))).ManagedFields).To(BeEmpty())
}

// 4-4: a pre-binding the claim cannot accept (an address of another class)
// is refused with a PreBindingRefused event and not collected.
func TestClaim_4_4_RefusesMismatchedPreBinding(t *testing.T) {
	e := newEnv(t)
	a, b := e.class("a"), e.class("b")
	e.createClass(a)
	e.createClass(b)
	startManager(t)

	e.createClaim("c", a)
	e.createAddress(e.v4(1), b, preBound(e.ns, "c"))
	e.eventually(func(g Gomega) {
		evs := e.events(g, "c", v1alpha1.ReasonPreBindingRefused)
		g.Expect(evs).NotTo(BeEmpty())
		g.Expect(evs[0].Note).To(ContainSubstring(nameOf(e.v4(1))))
		g.Expect(evs[0].Type).To(Equal("Warning"))
	})
	e.consistently(2*time.Second, func(g Gomega) {
		c := e.getClaim(g, "c")
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending))
		g.Expect(c.Status.Addresses).To(BeEmpty())
		ad := e.getAddress(g, nameOf(e.v4(1)))
		g.Expect(ad.Spec.ClaimRef.UID).To(BeEmpty())
		g.Expect(ad.Status.Phase).NotTo(Equal(v1alpha1.AddressBound))
	})

	// The claim still binds a proper address of its own class.
	e.createAddress(e.v4(2), a)
	e.claimBoundTo("c", nameOf(e.v4(2)))
}

// 4-3 and 5-6: an address whose claimRef carries the UID of a deleted claim
// is not collected by a new claim of the same name, and the address
// reconciler's safety net releases it.
func TestClaim_4_3_StaleUIDNotCollected(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	first := e.createClaim("c", class)
	e.eventually(func(g Gomega) {
		g.Expect(e.getClaim(g, "c").Finalizers).To(ContainElement(v1alpha1.FinalizerClaimProtection))
	})
	oldUID := first.UID
	e.forceDelete(first)
	second := e.createClaim("c", class)
	e.g.Expect(second.UID).NotTo(Equal(oldUID))

	stale := e.createAddress(e.v4(1), class, func(a *v1alpha1.IPAddress) {
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: e.ns, Name: "c", UID: oldUID}
	})
	e.createAddress(e.v4(2), class)

	e.claimBoundTo("c", nameOf(e.v4(2)))
	a := e.addressPhase(stale.Name, v1alpha1.AddressReleased)
	e.g.Expect(a.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: e.ns, Name: "c", UID: oldUID}))
	e.consistently(time.Second, func(g Gomega) {
		g.Expect(names(e.getClaim(g, "c").Status.Addresses)).To(Equal([]string{nameOf(e.v4(2))}))
		g.Expect(e.getAddress(g, stale.Name).Status.Phase).To(Equal(v1alpha1.AddressReleased))
	})
}

// 4-8 Lost: a bound address a driver marks Lost makes the claim Lost; the
// claim is not given another address meanwhile; restoring the phase makes
// it Bound again; deleting the Lost address lets it bind a new one.
func TestClaim_4_8_Lost(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	e.createAddress(e.v4(1), class)
	e.createAddress(e.v4(2), class)
	first, second := nameOf(e.v4(1)), nameOf(e.v4(2))
	e.addressPhase(first, v1alpha1.AddressAvailable)
	e.addressPhase(second, v1alpha1.AddressAvailable)
	e.createClaim("c", class)
	e.claimBoundTo("c", first)

	lost := func() {
		e.t.Helper()
		e.eventually(func(g Gomega) {
			c := e.getClaim(g, "c")
			g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimLost))
			g.Expect(names(c.Status.Addresses)).To(Equal([]string{first}))
			cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound)
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal(v1alpha1.ReasonLost))
		})
	}

	e.setAddressPhase(first, v1alpha1.AddressLost)
	lost()
	e.consistently(time.Second, func(g Gomega) {
		g.Expect(e.getAddress(g, second).Spec.ClaimRef).To(BeNil(), "a Lost binding is not re-provisioned around")
		g.Expect(e.getAddress(g, first).Status.Phase).To(Equal(v1alpha1.AddressLost), "Lost is sticky for the core")
	})

	// The driver clears the condition by setting a core-owned phase.
	e.setAddressPhase(first, v1alpha1.AddressBound)
	e.claimBoundTo("c", first)

	e.setAddressPhase(first, v1alpha1.AddressLost)
	lost()
	e.delete(&v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: first}})
	e.eventually(func(g Gomega) { e.gone(g, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: first}}) })
	e.claimBoundTo("c", second)
}
