package integration

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Capacity that explains itself: a full class says so (status counts,
// Exhausted), its waiting claims say where they stand, and freed
// addresses go to the oldest waiting claim first.
func TestLine_4_7_OldestWaitingClaimFirst(t *testing.T) {
	e := newEnv(t)
	class := e.class("public")
	e.createClass(class)
	first := e.createAddress(e.v4(1), class)
	second := e.createAddress(e.v4(2), class)
	startManager(t)
	e.addressPhase(first.Name, v1alpha1.AddressAvailable)
	e.addressPhase(second.Name, v1alpha1.AddressAvailable)
	e.createClaim("x", class)
	e.createClaim("y", class)
	e.claimBoundTo("x", first.Name)
	e.claimBoundTo("y", second.Name)
	e.eventually(func(g Gomega) {
		c := e.getClass(g, class)
		g.Expect(c.Status.Addresses).To(Equal([]v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 2, Bound: 2}}))
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionExhausted)).To(BeTrue())
	}, "the class counts its addresses and says it is exhausted")

	// Five claims queue, oldest first; their names sort the other way, so
	// only their age puts them in line.
	queue := []string{"e", "d", "c", "b", "a"}
	for _, name := range queue {
		e.createClaim(name, class)
		time.Sleep(1100 * time.Millisecond) // creation times have a second's resolution
	}
	for i, name := range queue {
		e.eventually(func(g Gomega) {
			cond := meta.FindStatusCondition(e.getClaim(g, name).Status.Conditions, v1alpha1.ConditionBound)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(v1alpha1.ReasonClassExhausted))
			g.Expect(cond.Message).To(HavePrefix(fmt.Sprintf("%s waiting for IPv4 in class %s", []string{"1st", "2nd", "3rd", "4th", "5th"}[i], class)))
		}, "claim %s says its place in line", name)
	}

	// Freed one at a time, the addresses go to the oldest claims, in order.
	for i, freed := range []*v1alpha1.IPAddress{first, second} {
		holder := []string{"x", "y"}[i]
		e.delete(e.getClaimNow(holder))
		e.addressPhase(freed.Name, v1alpha1.AddressReleased)
		e.update(freed, func() { freed.Spec.ClaimRef = nil }) // an admin recycles it
		e.claimBoundTo(queue[i], freed.Name)
		e.consistently(time.Second, func(g Gomega) {
			for _, later := range queue[i+1:] {
				g.Expect(e.getClaim(g, later).Status.Phase).To(Equal(v1alpha1.ClaimPending))
			}
		})
	}

	// The claims left move up as the line moves, and as a claim ahead of
	// them leaves it without binding, which changes no address.
	place := func(g Gomega, name, ordinal string) {
		cond := meta.FindStatusCondition(e.getClaim(g, name).Status.Conditions, v1alpha1.ConditionBound)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Message).To(HavePrefix(ordinal + " waiting for IPv4 in class " + class))
	}
	e.eventually(func(g Gomega) { place(g, "c", "1st"); place(g, "b", "2nd"); place(g, "a", "3rd") })
	e.delete(e.getClaimNow("c"))
	e.eventually(func(g Gomega) { place(g, "b", "1st"); place(g, "a", "2nd") }, "the claims behind the one gone move up")
}

// getClaimNow reads a claim once.
func (e *env) getClaimNow(name string) *v1alpha1.IPAddressClaim {
	e.t.Helper()
	var c *v1alpha1.IPAddressClaim
	e.eventually(func(g Gomega) { c = e.getClaim(g, name) })
	return c
}

// A MetalLB class whose pool is used up says so: its Exhausted condition
// (from the driver's count of the pool), and the next claim's reason and
// place in line.
func TestLine_Driver_PoolUsedUp(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/32"), v1alpha1.ReclaimDelete)
	e.createClaim("first", class)
	e.boundAddresses("first", 1)
	e.createClaim("second", class)
	e.eventually(func(g Gomega) {
		c := e.getClass(g, class)
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionExhausted)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionNearlyExhausted)).To(BeTrue())
		cond := meta.FindStatusCondition(e.getClaim(g, "second").Status.Conditions, v1alpha1.ConditionBound)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(v1alpha1.ReasonClassExhausted))
		g.Expect(cond.Message).To(HavePrefix("1st waiting for IPv4 in class " + class))
	}, "the class and the waiting claim say the pool is used up")
}

// TestLine_Driver_OldestWaitingClaimFirst is the line on the driver's
// path: with the pool used up, addresses freed one at a time are
// provisioned for the oldest waiting claims, in order, while the younger
// ones keep waiting.
func TestLine_Driver_OldestWaitingClaimFirst(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/31"), v1alpha1.ReclaimDelete)
	holders := []string{"x", "y"}
	freed := map[string]string{}
	for _, name := range holders {
		e.createClaim(name, class)
		freed[name] = e.boundAddresses(name, 1)[0]
	}
	queue := []string{"e", "d", "c", "b", "a"} // oldest first; names sort the other way
	for _, name := range queue {
		e.createClaim(name, class)
		time.Sleep(1100 * time.Millisecond) // creation times have a second's resolution
	}
	e.eventually(func(g Gomega) {
		cond := meta.FindStatusCondition(e.getClaim(g, queue[4]).Status.Conditions, v1alpha1.ConditionBound)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Message).To(HavePrefix("5th waiting for IPv4 in class " + class))
	}, "the youngest claim is fifth in line")

	for i, holder := range holders {
		e.delete(e.getClaimNow(holder))
		got := e.boundAddresses(queue[i], 1)
		if got[0] != freed[holder] {
			t.Fatalf("claim %s got %s, want the address %s let go of (%s)", queue[i], got[0], holder, freed[holder])
		}
		e.consistently(time.Second, func(g Gomega) {
			for _, later := range queue[i+1:] {
				g.Expect(e.getClaim(g, later).Status.Phase).To(Equal(v1alpha1.ClaimPending))
			}
		})
	}
}
