package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/quota"
)

// Keep my address (IPAddressClass.spec.keepReleasedInNamespace): a
// Released address stays its namespace's, and a new claim there takes it
// back before anything else.

func keepInNamespace(c *v1alpha1.IPAddressClass) { c.Spec.KeepReleasedInNamespace = true }

// The same name gets the same address back; another name in the namespace
// gets the namespace's oldest Released address; another namespace gets
// only Available ones.
func TestKeep_4_7_ReleasedStaysInItsNamespace(t *testing.T) {
	e := newEnv(t)
	other := newEnv(t)
	class := e.class("public")
	e.createClass(class, keepInNamespace)
	first := e.createAddress(e.v4(1), class)
	second := e.createAddress(e.v4(2), class)
	third := e.createAddress(e.v4(3), class)
	startManager(t)
	for _, a := range []*v1alpha1.IPAddress{first, second, third} {
		e.addressPhase(a.Name, v1alpha1.AddressAvailable)
	}

	web := e.createClaim("web", class)
	e.claimBoundTo("web", first.Name)
	e.delete(web)
	e.addressPhase(first.Name, v1alpha1.AddressReleased)
	e.eventually(func(g Gomega) { e.gone(g, web) })

	// Another namespace never gets it: it binds the smallest Available one.
	other.createClaim("web", class)
	other.claimBoundTo("web", second.Name)

	// The same name in the namespace gets it back, before the Available one.
	again := e.createClaim("web", class)
	c := e.claimBoundTo("web", first.Name)
	e.g.Expect(c.UID).To(Equal(again.UID))

	// Released again, a claim of another name takes it too.
	e.delete(again)
	e.addressPhase(first.Name, v1alpha1.AddressReleased)
	e.eventually(func(g Gomega) { e.gone(g, again) })
	e.createClaim("api", class)
	e.claimBoundTo("api", first.Name)
	e.addressPhase(third.Name, v1alpha1.AddressAvailable)
}

// A Dual claim takes back one address of each family.
func TestKeep_4_7_DualTakesBackBoth(t *testing.T) {
	e := newEnv(t)
	class := e.class("public")
	e.createClass(class, keepInNamespace)
	ips := []string{e.v4(10), e.v4(11), e.v6(16), e.v6(17)}
	for _, ip := range ips {
		e.createAddress(ip, class)
	}
	startManager(t)
	for _, ip := range ips {
		e.addressPhase(nameOf(ip), v1alpha1.AddressAvailable)
	}

	// It binds the smallest of each family; released, a new claim takes
	// those back rather than the Available ones left.
	web := e.createClaim("web", class, family(v1alpha1.Dual))
	held := namesOf(e, "web")
	e.g.Expect(held).To(ConsistOf(nameOf(e.v4(10)), nameOf(e.v6(16))))
	e.delete(web)
	for _, n := range held {
		e.addressPhase(n, v1alpha1.AddressReleased)
	}
	e.eventually(func(g Gomega) { e.gone(g, web) })
	e.createClaim("web", class, family(v1alpha1.Dual))
	e.claimBoundTo("web", held...)
}

// The releaseDelay still recycles a kept address: once Available, any
// namespace may take it.
func TestKeep_5_7_ReleaseDelayRecycles(t *testing.T) {
	e := newEnv(t)
	other := newEnv(t)
	class := e.class("public")
	e.createClass(class, keepInNamespace, releaseDelay(3*time.Second))
	only := e.createAddress(e.v4(1), class)
	startManager(t)
	e.addressPhase(only.Name, v1alpha1.AddressAvailable)

	web := e.createClaim("web", class)
	e.claimBoundTo("web", only.Name)
	e.delete(web)
	e.addressPhase(only.Name, v1alpha1.AddressReleased)
	// Kept from the other namespace until the delay passes, then its.
	other.createClaim("web", class)
	other.consistently(time.Second, func(g Gomega) {
		g.Expect(other.getClaim(g, "web").Status.Phase).NotTo(Equal(v1alpha1.ClaimBound))
	})
	other.claimBoundTo("web", only.Name)
}

// namesOf is the addresses claim name is Bound to, as it reports them.
func namesOf(e *env, claim string) []string {
	var out []string
	e.eventually(func(g Gomega) {
		c := e.getClaim(g, claim)
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
		out = names(c.Status.Addresses)
	})
	return out
}

// A LoadBalancer Service deleted and created again gets its address back:
// under keepReleasedInNamespace its auto-claim follows the class's
// reclaimPolicy (Retain) instead of deleting the address, and the new
// auto-claim of the same name takes it back. MetalLB shows the same IP in
// the new Service's status.
func TestKeep_10_ServiceRecreatedGetsItsAddressBack(t *testing.T) {
	e := newDriverEnv(t)
	class := e.metalLBClass("public", e.pool("pool", e.v4(0)+"/28"), v1alpha1.ReclaimRetain)
	c := &v1alpha1.IPAddressClass{}
	e.eventually(func(g Gomega) { c = e.getClass(g, class) })
	e.update(c, func() { c.Spec.KeepReleasedInNamespace = true })
	byClass := func() map[string]string { return map[string]string{v1alpha1.AnnotationIPAddressClass: class} }

	svc := e.service("web", byClass())
	ip := e.boundAddresses("web", 1)[0]
	e.heldBy(e.ns, "web", ip)

	e.delete(svc)
	e.eventually(func(g Gomega) {
		e.gone(g, svc)
		e.gone(g, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "web"}})
		g.Expect(e.getAddress(g, nameOf(ip)).Status.Phase).To(Equal(v1alpha1.AddressReleased))
	}, "the auto-claim went with its Service; its address stays, Released")
	e.placeholderHolds(ip)

	e.service("web", byClass())
	e.heldBy(e.ns, "web", ip)
}

// A claim that takes back its namespace's kept address needs no new place:
// at the limit of its quota it is admitted, and binds it.
func TestKeep_QuotaAtItsLimitAdmitsTheTakeBack(t *testing.T) {
	e := newEnv(t)
	class := e.class("public")
	e.createClass(class, keepInNamespace)
	first := e.createAddress(e.v4(1), class)
	e.createAddress(e.v4(2), class)
	e.createQuota("addresses", map[corev1.ResourceName]int64{quota.ClassKey(class): 1})
	startManager(t)
	e.addressPhase(first.Name, v1alpha1.AddressAvailable)

	web := e.createClaim("web", class)
	e.claimBoundTo("web", first.Name)
	e.delete(web)
	e.addressPhase(first.Name, v1alpha1.AddressReleased)
	e.eventually(func(g Gomega) { e.gone(g, web) })

	e.createClaim("api", class)
	e.claimBoundTo("api", first.Name)
}
