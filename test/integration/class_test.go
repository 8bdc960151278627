package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Contract "Class deletion".

// A class is held by its finalizer while any address of it is left, and a
// ClassInUse event names the addresses it waits for.
func TestClass_Deletion_ProtectedWhileAddressesExist(t *testing.T) {
	e := newEnv(t)
	class := e.createClass(e.class("a"))
	startManager(t)

	e.eventually(func(g Gomega) {
		g.Expect(e.getClass(g, class.Name).Finalizers).To(ContainElement(v1alpha1.FinalizerClassProtection))
	})
	available := e.createAddress(e.v4(1), class.Name)
	// A Released address holds the class too, in any phase.
	e.boundThenReleased("c", e.v4(2), class.Name)
	released := e.addressPhase(nameOf(e.v4(2)), v1alpha1.AddressReleased)
	e.addressPhase(available.Name, v1alpha1.AddressAvailable)

	e.delete(class)
	e.eventually(func(g Gomega) {
		evs := e.events(g, class.Name, v1alpha1.ReasonClassInUse)
		g.Expect(evs).NotTo(BeEmpty())
		g.Expect(evs[len(evs)-1].Note).To(And(ContainSubstring(available.Name), ContainSubstring(released.Name)))
	})
	e.consistently(time.Second, func(g Gomega) {
		c := e.getClass(g, class.Name)
		g.Expect(c.DeletionTimestamp).NotTo(BeNil())
		g.Expect(c.Finalizers).To(ContainElement(v1alpha1.FinalizerClassProtection))
	})

	e.delete(available)
	e.eventually(func(g Gomega) { e.gone(g, available) })
	e.consistently(time.Second, func(g Gomega) {
		g.Expect(e.getClass(g, class.Name).Finalizers).To(ContainElement(v1alpha1.FinalizerClassProtection))
	}, "one address of the class is left")

	e.delete(released)
	e.eventually(func(g Gomega) {
		e.gone(g, released)
		e.gone(g, class)
	})
}

// A class removed by force (its finalizer stripped) leaves existing
// bindings, status upkeep and reclaim intact; an unbound claim of it stays
// Pending with ClassNotFound.
func TestClass_Deletion_ForcedKeepsBindings(t *testing.T) {
	e := newEnv(t)
	class := e.createClass(e.class("a"))
	startManager(t)

	addr := e.createAddress(e.v4(1), class.Name)
	spare := e.createAddress(e.v4(2), class.Name)
	e.createClaim("c", class.Name, addressName(addr.Name))
	claim := e.claimBoundTo("c", addr.Name)
	e.addressPhase(spare.Name, v1alpha1.AddressAvailable)
	e.eventually(func(g Gomega) {
		g.Expect(e.getClass(g, class.Name).Finalizers).To(ContainElement(v1alpha1.FinalizerClassProtection))
	})

	e.forceDelete(class)
	e.consistently(time.Second, func(g Gomega) {
		c := e.getClaim(g, "c")
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
		g.Expect(names(c.Status.Addresses)).To(Equal([]string{addr.Name}))
		g.Expect(e.getAddress(g, addr.Name).Status.Phase).To(Equal(v1alpha1.AddressBound))
	}, "a bound claim needs nothing from its class")

	// Status upkeep: Lost and restored.
	e.setAddressPhase(addr.Name, v1alpha1.AddressLost)
	e.eventually(func(g Gomega) {
		g.Expect(e.getClaim(g, "c").Status.Phase).To(Equal(v1alpha1.ClaimLost))
	})
	e.setAddressPhase(addr.Name, v1alpha1.AddressBound)
	e.claimBoundTo("c", addr.Name)

	// A new claim of the vanished class does not bind the spare address.
	e.createClaim("late", class.Name)
	e.classResolved("late", metav1.ConditionFalse, v1alpha1.ReasonClassNotFound)
	e.g.Expect(e.getAddress(e.g, spare.Name).Spec.ClaimRef).To(BeNil())

	// Reclaim reads the policy from the address.
	e.delete(claim)
	e.eventually(func(g Gomega) { e.gone(g, claim) })
	a := e.addressPhase(addr.Name, v1alpha1.AddressReleased)
	e.g.Expect(a.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: e.ns, Name: "c", UID: claim.UID}))
}

// Issue 11 defect 4: deleting the class of a Pending claim turns its
// ClassResolved condition to ClassNotFound within seconds; nothing but the
// class's deletion wakes the claim.
func TestClass_Deletion_PendingClaimSaysClassNotFound(t *testing.T) {
	e := newEnv(t)
	class := e.createClass(e.class("a"))
	startManager(t)

	e.createClaim("c", class.Name)
	// A claim waiting for the address it names is told too.
	absent, err := v1alpha1.IPAddressName(e.v4(99))
	e.g.Expect(err).NotTo(HaveOccurred())
	e.createClaim("named", class.Name, addressName(absent))
	for _, name := range []string{"c", "named"} {
		e.classResolved(name, metav1.ConditionTrue, v1alpha1.ReasonResolved)
		e.eventually(func(g Gomega) {
			g.Expect(e.getClaim(g, name).Status.Phase).To(Equal(v1alpha1.ClaimPending))
		})
	}

	e.delete(class)
	e.classResolved("c", metav1.ConditionFalse, v1alpha1.ReasonClassNotFound)
	e.classResolved("named", metav1.ConditionFalse, v1alpha1.ReasonClassNotFound)
	e.eventually(func(g Gomega) { e.gone(g, class) })
}
