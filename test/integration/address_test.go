package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Contract §5: the address reconciler. (An invalid spec.address cannot get
// past the CRD's validation, so 5-3 is covered by the pure tests only.)

// 5-2 and 5-5: a new address without a claimRef gets the protection
// finalizer and becomes Available, with a Bound condition False/Available.
func TestAddress_5_2_5_5_NewAddressAvailable(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	for _, ip := range []string{e.v4(1), e.v6(1)} {
		e.createAddress(ip, class)
	}
	for _, ip := range []string{e.v4(1), e.v6(1)} {
		a := e.addressPhase(nameOf(ip), v1alpha1.AddressAvailable)
		e.g.Expect(a.Finalizers).To(ContainElement(v1alpha1.FinalizerAddressProtection))
		cond := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionBound)
		e.g.Expect(cond).NotTo(BeNil())
		e.g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		e.g.Expect(cond.Reason).To(Equal(v1alpha1.ReasonAvailable))
		e.g.Expect(a.Spec.ClaimRef).To(BeNil())
		e.g.Expect(a.Status.AssociatedTo).To(BeNil())
	}
}

// 5-1: deleting a Bound address waits, finalizer kept, while its claim
// lives; deleting the claim lets it go.
func TestAddress_5_1_DeletionBlockedWhileBound(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	addr := e.createAddress(e.v4(1), class)
	claim := e.createClaim("c", class)
	e.claimBoundTo("c", addr.Name)

	e.delete(addr)
	e.consistently(2*time.Second, func(g Gomega) {
		a := e.getAddress(g, addr.Name)
		g.Expect(a.DeletionTimestamp).NotTo(BeNil())
		g.Expect(a.Finalizers).To(ContainElement(v1alpha1.FinalizerAddressProtection))
		g.Expect(a.Spec.ClaimRef.Name).To(Equal("c"))
		g.Expect(e.getClaim(g, "c").Status.Phase).To(Equal(v1alpha1.ClaimBound))
	}, "a Bound address must not vanish from under its live claim")

	e.delete(claim)
	e.eventually(func(g Gomega) {
		e.gone(g, addr)
		e.gone(g, claim)
	})
}

// boundThenReleased binds a claim to the address of ip, deletes the claim
// and waits for the address to be Released; it returns the claim as it was
// bound.
func (e *env) boundThenReleased(claimName, ip, class string, mods ...func(*v1alpha1.IPAddress)) *v1alpha1.IPAddressClaim {
	e.t.Helper()
	e.createAddress(ip, class, mods...)
	e.addressPhase(nameOf(ip), v1alpha1.AddressAvailable)
	e.createClaim(claimName, class, addressName(nameOf(ip)))
	claim := e.claimBoundTo(claimName, nameOf(ip))
	e.delete(claim)
	return claim
}

// 5-7: under a class's releaseDelay a Released address has its claimRef
// cleared once the delay has passed, and is Available (and matchable) again.
func TestAddress_5_7_ReleaseDelayRecycles(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class, releaseDelay(2*time.Second))
	startManager(t)

	claim := e.boundThenReleased("c", e.v4(1), class)
	deleted := time.Now()
	name := nameOf(e.v4(1))
	a := e.addressPhase(name, v1alpha1.AddressReleased)
	e.g.Expect(a.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: e.ns, Name: "c", UID: claim.UID}))

	e.eventually(func(g Gomega) {
		a := e.getAddress(g, name)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressAvailable))
		g.Expect(a.Spec.ClaimRef).To(BeNil())
	}, "the address should be recycled after its class's releaseDelay")
	// lastTransitionTime has a resolution of one second.
	e.g.Expect(time.Since(deleted)).To(BeNumerically(">=", time.Second), "recycled before the delay passed")
	e.g.Expect(time.Since(deleted)).To(BeNumerically("<", 10*time.Second), "recycled long after the delay passed")

	e.createClaim("next", class)
	e.claimBoundTo("next", name)
}

// 5-7: the held annotation exempts an address from the releaseDelay.
func TestAddress_5_7_HeldStaysReleased(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class, releaseDelay(2*time.Second))
	startManager(t)

	claim := e.boundThenReleased("c", e.v4(1), class, held)
	name := nameOf(e.v4(1))
	e.addressPhase(name, v1alpha1.AddressReleased)
	e.consistently(4*time.Second, func(g Gomega) {
		a := e.getAddress(g, name)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressReleased))
		g.Expect(a.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: e.ns, Name: "c", UID: claim.UID}))
	}, "a held address stays Released until an admin acts")

	// The admin's manual recycling (5-5): clearing the claimRef.
	a := e.getAddress(e.g, name)
	e.update(a, func() { a.Spec.ClaimRef = nil })
	e.addressPhase(name, v1alpha1.AddressAvailable)
}

// 5-7: changing a class's releaseDelay re-evaluates its Released addresses.
func TestAddress_5_7_ClassDelayChangeReevaluates(t *testing.T) {
	e := newEnv(t)
	class := e.createClass(e.class("a"))
	startManager(t)

	e.boundThenReleased("c", e.v4(1), class.Name)
	name := nameOf(e.v4(1))
	e.addressPhase(name, v1alpha1.AddressReleased)
	e.consistently(time.Second, func(g Gomega) {
		g.Expect(e.getAddress(g, name).Status.Phase).To(Equal(v1alpha1.AddressReleased))
	}, "without a releaseDelay a Released address stays")

	e.update(class, func() { releaseDelay(time.Second)(class) })
	e.eventually(func(g Gomega) {
		a := e.getAddress(g, name)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressAvailable))
		g.Expect(a.Spec.ClaimRef).To(BeNil())
	})
}

// 5-6 safety net: claims that vanish without their reclaim running (the
// finalizer removed by force while no core runs) are reclaimed by the
// address reconciler under each address's own policy.
func TestAddress_5_6_SafetyNetReclaim(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	stop := startManager(t)

	retained := e.createAddress(e.v4(1), class)
	deleted := e.createAddress(e.v4(2), class, reclaimDelete)
	e.createClaim("retain", class, addressName(retained.Name))
	e.createClaim("delete", class, addressName(deleted.Name))
	retainClaim := e.claimBoundTo("retain", retained.Name)
	deleteClaim := e.claimBoundTo("delete", deleted.Name)

	stop()
	e.forceDelete(retainClaim)
	e.forceDelete(deleteClaim)
	startManager(t)

	a := e.addressPhase(retained.Name, v1alpha1.AddressReleased)
	e.g.Expect(a.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: e.ns, Name: "retain", UID: retainClaim.UID}))
	e.eventually(func(g Gomega) { e.gone(g, deleted) })
}
