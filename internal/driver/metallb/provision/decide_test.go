package provision

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/allocator"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/driver/metallb/metallbtest"
)

func claim(f v1alpha1.IPFamily, mods ...func(*v1alpha1.IPAddressClaim)) *v1alpha1.IPAddressClaim {
	c := &v1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "c1",
			Annotations: map[string]string{v1alpha1.AnnotationProvisioner: metallb.Provisioner}},
		Spec:   v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: f},
		Status: v1alpha1.IPAddressClaimStatus{ClassName: "public"},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

// classObject is the class "public" of the driver's provisioner.
func classObject(mods ...func(*v1alpha1.IPAddressClass)) *v1alpha1.IPAddressClass {
	c := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}, Spec: v1alpha1.IPAddressClassSpec{Provisioner: metallb.Provisioner}}
	for _, m := range mods {
		m(c)
	}
	return c
}

// gone stands for a class that does not exist.
var gone = &v1alpha1.IPAddressClass{}

func ips(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// The table mirrors contract §7 obligations 1 (serve stamped claims) and 2
// (provision pre-bound).
func TestDecide(t *testing.T) {
	public := metallbtest.Class("203.0.113.0/30", "2001:db8::/126")
	tests := []struct {
		name      string
		claim     *v1alpha1.IPAddressClaim
		class     metallb.Class
		object    *v1alpha1.IPAddressClass // the class itself; the driver's, live, when nil here
		has       map[v1alpha1.IPFamily]bool
		available map[v1alpha1.IPFamily]bool
		used      []netip.Addr
		ahead     map[v1alpha1.IPFamily]int
		// want: "<name> <ip> <claim> <uid>" per address created.
		want    []string
		failure string
		behind  bool
	}{
		{name: "7-1 a claim stamped with another provisioner is not served",
			claim: claim(v1alpha1.IPv4, func(c *v1alpha1.IPAddressClaim) { c.Annotations[v1alpha1.AnnotationProvisioner] = "other" }), class: public},
		{name: "7-1 a claim with no class recorded yet waits",
			claim: claim(v1alpha1.IPv4, func(c *v1alpha1.IPAddressClaim) { c.Spec.ClassName, c.Status.ClassName = "", "" }), class: public},
		{name: "7-1 a new claim the core has yet to resolve is served by the class its spec names (stamped at admission)",
			claim: claim(v1alpha1.IPv4, func(c *v1alpha1.IPAddressClaim) { c.Status.ClassName = "" }), class: public,
			want: []string{"ip-203-0-113-0 203.0.113.0 tenant/web c1"}},
		{name: "7-1 a claim re-targeted at another class waits for the core's new resolution",
			claim: claim(v1alpha1.IPv4, func(c *v1alpha1.IPAddressClaim) { c.Spec.ClassName = "other" }), class: public},
		{name: "7-1 a stamp on a claim of another provisioner's class is not the driver's to serve",
			claim: claim(v1alpha1.IPv4), class: public, object: classObject(func(c *v1alpha1.IPAddressClass) { c.Spec.Provisioner = "static.example.com" })},
		{name: "7-1 a claim of a class being deleted is not served",
			claim: claim(v1alpha1.IPv4), class: public, object: classObject(func(c *v1alpha1.IPAddressClass) { c.DeletionTimestamp = &metav1.Time{} })},
		{name: "7-1 a claim of a class that is gone is not served",
			claim: claim(v1alpha1.IPv4), class: public, object: gone},
		{name: "7-1 a claim naming a specific address is the core's to match",
			claim: claim(v1alpha1.IPv4, func(c *v1alpha1.IPAddressClaim) { c.Spec.AddressName = "ip-203-0-113-3" }), class: public},
		{name: "7-1 a claim reporting an address of every family is not served",
			claim: claim(v1alpha1.IPv4, func(c *v1alpha1.IPAddressClaim) {
				c.Status.Addresses = []v1alpha1.ClaimedAddress{{Name: "ip-203-0-113-3", Address: "203.0.113.3"}}
			}), class: public},
		{name: "7-1 a claim being deleted is not served",
			claim: claim(v1alpha1.IPv4, func(c *v1alpha1.IPAddressClaim) { c.DeletionTimestamp = &metav1.Time{} }), class: public},
		{name: "7-2 the smallest free address of the pool, pre-bound with the claim's UID",
			claim: claim(v1alpha1.IPv4), class: public, used: ips("203.0.113.0", "198.51.100.1"),
			want: []string{"ip-203-0-113-1 203.0.113.1 tenant/web c1"}},
		{name: "7-2 a Dual claim gets one address per family",
			claim: claim(v1alpha1.Dual), class: public,
			want: []string{"ip-203-0-113-0 203.0.113.0 tenant/web c1", "ip-2001-db8--0 2001:db8:: tenant/web c1"}},
		{name: "7-2 only the family the claim misses",
			claim: claim(v1alpha1.Dual), class: public, has: map[v1alpha1.IPFamily]bool{v1alpha1.IPv4: true},
			want: []string{"ip-2001-db8--0 2001:db8:: tenant/web c1"}},
		{name: "7-2 nothing while the class has an Available address the core will bind",
			claim: claim(v1alpha1.IPv4), class: public, available: map[v1alpha1.IPFamily]bool{v1alpha1.IPv4: true}},
		{name: "7-2 an exhausted pool is reported",
			claim: claim(v1alpha1.IPv4), class: public, used: ips("203.0.113.0", "203.0.113.1", "203.0.113.2", "203.0.113.3"),
			failure: "IPAddressPool public has no free IPv4 address"},
		{name: "7-2 a Dual claim of a pool without an IPv6 range gets its IPv4 address, and is told the pool has no IPv6 range",
			claim: claim(v1alpha1.Dual), class: metallbtest.Class("203.0.113.0/30"),
			want:    []string{"ip-203-0-113-0 203.0.113.0 tenant/web c1"},
			failure: "IPAddressPool public has no IPv6 range: the claim's IPv6 address is not provisioned until the pool gets one"},
		{name: "4-7 a claim with older claims waiting before it lets them have the pool's last addresses",
			claim: claim(v1alpha1.IPv4), class: public, used: ips("203.0.113.0", "203.0.113.1"),
			ahead: map[v1alpha1.IPFamily]int{v1alpha1.IPv4: 2}, behind: true},
		{name: "4-7 with room for the claims ahead and for it, the claim is provisioned",
			claim: claim(v1alpha1.IPv4), class: public, used: ips("203.0.113.0"),
			ahead: map[v1alpha1.IPFamily]int{v1alpha1.IPv4: 2}, want: []string{"ip-203-0-113-1 203.0.113.1 tenant/web c1"}},
		{name: "4-7 a Dual claim behind in one line only is provisioned in the other",
			claim: claim(v1alpha1.Dual), class: public, used: ips("203.0.113.0", "203.0.113.1", "203.0.113.2"),
			ahead: map[v1alpha1.IPFamily]int{v1alpha1.IPv4: 1}, behind: true,
			want: []string{"ip-2001-db8--0 2001:db8:: tenant/web c1"}},
		{name: "7-2 a refused class is reported and provisions nothing",
			claim: claim(v1alpha1.IPv4), class: metallb.Class{Name: "public", Refusal: "spec.parameters.pool is required"},
			failure: "class public is refused: spec.parameters.pool is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.object
			switch obj {
			case gone:
				obj = nil
			case nil:
				obj = classObject()
			}
			s := snapshot{claim: tc.claim, class: tc.class, object: obj, policy: v1alpha1.ReclaimRetain, has: tc.has, available: tc.available, used: allocator.NewUsed(tc.used), ahead: tc.ahead}
			p := decide(s)
			var got []string
			for _, a := range p.create {
				got = append(got, a.Name+" "+a.Spec.Address+" "+a.Spec.ClaimRef.Namespace+"/"+a.Spec.ClaimRef.Name+" "+string(a.Spec.ClaimRef.UID))
				if a.Spec.Source.FromClass == nil || a.Spec.ReclaimPolicy != v1alpha1.ReclaimRetain || a.Spec.ClassName != "public" ||
					!slices.Equal(a.Finalizers, []string{metallb.FinalizerTeardown, v1alpha1.FinalizerAddressProtection}) {
					t.Errorf("address %s: want fromClass, the class's policy and className, and the teardown and protection finalizers; got %+v %v", a.Name, a.Spec, a.Finalizers)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("created (-want +got):\n%s", diff)
			}
			if p.failure != tc.failure {
				t.Errorf("failure = %q, want %q", p.failure, tc.failure)
			}
			if p.behind != tc.behind {
				t.Errorf("behind = %v, want %v", p.behind, tc.behind)
			}
		})
	}
}
