package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Contract §6: reclaim, run behind the claim's protection finalizer.

// Retain: the address goes Released and keeps its claimRef.
func TestReclaim_6_RetainReleasesKeepingClaimRef(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	addr := e.createAddress(e.v4(1), class)
	e.createClaim("c", class)
	claim := e.claimBoundTo("c", addr.Name)

	e.delete(claim)
	e.eventually(func(g Gomega) { e.gone(g, claim) })
	a := e.addressPhase(addr.Name, v1alpha1.AddressReleased)
	e.g.Expect(a.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: e.ns, Name: "c", UID: claim.UID}))
	e.g.Expect(a.Finalizers).To(ContainElement(v1alpha1.FinalizerAddressProtection))
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, addr.Name, v1alpha1.ReasonReleased)).NotTo(BeEmpty())
	})
	e.consistently(time.Second, func(g Gomega) {
		a := e.getAddress(g, addr.Name)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressReleased))
		g.Expect(a.Spec.ClaimRef).NotTo(BeNil())
	}, "a Released address is not reusable until an admin clears its claimRef")

	// Not matchable: a new claim waits.
	e.createClaim("next", class)
	e.consistently(time.Second, func(g Gomega) {
		g.Expect(e.getClaim(g, "next").Status.Phase).NotTo(Equal(v1alpha1.ClaimBound))
	})
}

// Delete: the address object is deleted.
func TestReclaim_6_DeleteDeletesAddress(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class, func(c *v1alpha1.IPAddressClass) { c.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete })
	startManager(t)

	addr := e.createAddress(e.v4(1), class, reclaimDelete)
	e.createClaim("c", class)
	claim := e.claimBoundTo("c", addr.Name)

	e.delete(claim)
	e.eventually(func(g Gomega) {
		e.gone(g, addr)
		e.gone(g, claim)
	})
}

// Conflict and Lost belong to the driver: reclaim leaves the phase alone.
func TestReclaim_6_LostKeepsPhase(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	addr := e.createAddress(e.v4(1), class)
	e.createClaim("c", class)
	claim := e.claimBoundTo("c", addr.Name)
	e.setAddressPhase(addr.Name, v1alpha1.AddressLost)
	e.eventually(func(g Gomega) {
		g.Expect(e.getClaim(g, "c").Status.Phase).To(Equal(v1alpha1.ClaimLost))
	})

	e.delete(claim)
	e.eventually(func(g Gomega) { e.gone(g, claim) })
	e.consistently(time.Second, func(g Gomega) {
		g.Expect(e.getAddress(g, addr.Name).Status.Phase).To(Equal(v1alpha1.AddressLost))
	})
}

// ownedBy makes the claim a controller-owned one, as an auto-claim is.
func ownedBy(owner *corev1.ConfigMap) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) {
		c.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true),
		}}
	}
}

// A claim with a controller owner takes its addresses with it, whatever
// their reclaimPolicy.
func TestReclaim_6_ControllerOwnedClaimDeletesAddress(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "owner"}}
	e.create(owner)
	addr := e.createAddress(e.v4(1), class)
	e.g.Expect(addr.Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimRetain))
	e.createClaim("c", class, ownedBy(owner))
	claim := e.claimBoundTo("c", addr.Name)

	e.delete(claim)
	e.eventually(func(g Gomega) {
		e.gone(g, addr)
		e.gone(g, claim)
	})
}

// Deleting the owner garbage-collects the claim (kube-controller-manager),
// and the claim's reclaim deletes its address.
func TestReclaim_6_OwnerGarbageCollected(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "owner"}}
	e.create(owner)
	addr := e.createAddress(e.v4(1), class)
	e.createClaim("c", class, ownedBy(owner))
	claim := e.claimBoundTo("c", addr.Name)

	e.delete(owner)
	e.eventually(func(g Gomega) {
		e.gone(g, claim)
		e.gone(g, addr)
	})
}
