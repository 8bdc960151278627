package provision

import (
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/allocator"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/driver/metallb"
)

// snapshot is what one pass decides on.
type snapshot struct {
	claim *v1alpha1.IPAddressClaim
	// class is the claim's class as the driver judges it, object the class
	// itself (nil when gone), and policy the reclaim policy the class
	// gives its addresses.
	class  metallb.Class
	object *v1alpha1.IPAddressClass
	policy v1alpha1.ReclaimPolicy
	// has are the families the claim already has an address of: bound,
	// pre-bound, or created by this driver and not yet in the cache.
	has map[v1alpha1.IPFamily]bool
	// available are the families the class has Available addresses of: the
	// core binds those before the driver allocates anything new.
	available map[v1alpha1.IPFamily]bool
	// used are the taken addresses of the class's pool.
	used *allocator.Used
	// uncharged are the families a ResourceQuota of the namespace limits
	// and has not charged to the claim yet: the core charges a family
	// before anything is provisioned for it (package quota).
	uncharged map[v1alpha1.IPFamily]bool
	// ahead are, per family, the claims waiting in line before this one
	// with no address yet (counted only when the pool cannot serve the
	// whole line, and only up to its room).
	ahead map[v1alpha1.IPFamily]int
}

// plan is what one pass writes: addresses to create, or why it cannot;
// behind when older claims come first.
type plan struct {
	create  []*v1alpha1.IPAddress
	failure string
	behind  bool
}

// className is the class the claim is of: spec.className — which the
// core's webhook stamped the claim for at its creation — unless the core
// resolved it otherwise (status.className), then none until the core has
// caught up; without spec.className, the class the core resolved.
func className(c *v1alpha1.IPAddressClaim) string {
	if c.Spec.ClassName != "" && c.Status.ClassName != "" && c.Spec.ClassName != c.Status.ClassName {
		return ""
	}
	return binding.ClassName(c)
}

// serves reports whether the claim is the driver's to provision for: stamped
// with its provisioner (§7.1), resolved by the core, live, asking for no
// specific address, and not reporting an address of every family it asks
// for already.
func serves(c *v1alpha1.IPAddressClaim) bool {
	return c.Annotations[v1alpha1.AnnotationProvisioner] == metallb.Provisioner &&
		c.DeletionTimestamp == nil && c.Spec.AddressName == "" && className(c) != "" &&
		len(binding.UnreportedFamilies(c)) > 0
}

// live reports whether class is one the driver provisions for: of its
// provisioner and not being deleted. The stamp alone is not enough — anyone
// who may write the claim could write it — so the class the core resolved
// must be the driver's too.
func live(class *v1alpha1.IPAddressClass) bool {
	return class != nil && class.Spec.Provisioner == metallb.Provisioner && class.DeletionTimestamp == nil
}

// decide allocates one address per family the claim misses (§7.2).
func decide(s snapshot) plan {
	var p plan
	if !serves(s.claim) || !live(s.object) {
		return p
	}
	for _, f := range s.claim.Spec.Family.Families() {
		if s.has[f] || s.available[f] || s.uncharged[f] {
			continue
		}
		if !s.class.Accepted() {
			p.failure = "class " + s.class.Name + " is refused: " + s.class.Refusal
			return p
		}
		// One address per family: the families never compete for one.
		ip, ok := allocator.FirstFree(s.class.Ranges, s.used, f)
		switch {
		case !ok && allocator.Count(s.class.Ranges, nil, f).Total.Sign() == 0:
			p.failure = fmt.Sprintf("IPAddressPool %s has no %s range: the claim's %s address is not provisioned until the pool gets one", s.class.PoolName, f, f)
			continue
		case !ok:
			p.failure = fmt.Sprintf("IPAddressPool %s has no free %s address", s.class.PoolName, f)
			continue
		}
		if n := s.ahead[f]; n > 0 && allocator.Free(s.class.Ranges, s.used, f, n+1) <= n {
			// The oldest waiting claims come first (4-7): the pool's room
			// is theirs.
			p.behind = true
			continue
		}
		p.create = append(p.create, newAddress(s.claim, s.class.Name, s.policy, ip))
	}
	return p
}

// newAddress is an IPAddress pre-bound to claim, with the UID set (the
// tighter form §7.2 allows), named from its IP so that the API server's
// name uniqueness refuses a second object for one address. It carries the
// core's protection finalizer from the start, which the core would
// otherwise add in a write of its own (5-2): protected from its creation.
func newAddress(claim *v1alpha1.IPAddressClaim, class string, policy v1alpha1.ReclaimPolicy, ip netip.Addr) *v1alpha1.IPAddress {
	name, _ := v1alpha1.IPAddressName(ip.String())
	return &v1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{metallb.FinalizerTeardown, v1alpha1.FinalizerAddressProtection}},
		Spec: v1alpha1.IPAddressSpec{
			Address:       ip.String(),
			ClassName:     class,
			ClaimRef:      &v1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			ReclaimPolicy: policy,
			Source:        v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}},
		},
	}
}
