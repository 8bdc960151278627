package claim

import (
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/core/webhook"
	"github.com/cozystack/address-controller/internal/fuzzbytes"
)

// fuzzBytes hands out fuzzed bytes, zeros once they run out.
type fuzzBytes = fuzzbytes.Bytes

var (
	fuzzIPs     = []string{"203.0.113.1", "203.0.113.2", "203.0.113.3", "2001:db8::1", "2001:db8::2", "2001:db8::3", "198.51.100.1", "not-an-ip"}
	fuzzClasses = []string{"public", "private", "", "gone"}
	fuzzPhases  = []v1alpha1.AddressPhase{"", v1alpha1.AddressPending, v1alpha1.AddressAvailable, v1alpha1.AddressBound,
		v1alpha1.AddressReleased, v1alpha1.AddressConflict, v1alpha1.AddressLost, v1alpha1.AddressAvailable}
)

// fuzzSnapshot builds a snapshot from b: a claim (two bytes, then its
// addressName and provisioner stamp last), the classes public and private,
// and up to six addresses (two bytes each) in any phase, bound to the
// claim, pre-bound to it, bound to an earlier claim of its name, to other
// claims, or free — more than gather would pass, so that decide is seen
// to pick its own.
func fuzzSnapshot(b fuzzBytes) snapshot {
	c0, c1 := b.Next(), b.Next()
	claim := newClaim("web", withFamily([]v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6, v1alpha1.Dual, ""}[c0&3]),
		withClass(fuzzClasses[c1&3]), withStatusClass(fuzzClasses[c1>>2&3]),
		withPhase([]v1alpha1.ClaimPhase{"", v1alpha1.ClaimPending, v1alpha1.ClaimBound, v1alpha1.ClaimLost}[c0>>5&3]))
	if c0&4 != 0 {
		deleting(claim)
	}
	if c0&8 != 0 {
		noFinalizer(claim)
	}
	if c0&16 != 0 {
		ownedByController(claim)
	}
	public, private := newClass("public"), newClass("private")
	if c1&16 != 0 {
		asDefault(&public)
	}
	if c1&32 != 0 {
		asDefault(&private)
	}
	if c1&64 != 0 {
		classDeleting(&public)
	}
	if c1&128 != 0 {
		classDeleting(&private)
	}
	s := newSnapshot(claim, nil, []v1alpha1.IPAddressClass{public, private}, now)

	refs := []*v1alpha1.ClaimReference{
		nil,
		{Namespace: ns, Name: "web", UID: claim.UID},
		{Namespace: ns, Name: "web"},
		{Namespace: ns, Name: "web", UID: "uid-of-an-earlier-claim"},
		{Namespace: ns, Name: "db", UID: "uid-db"},
		{Namespace: "other", Name: "web", UID: claim.UID},
		{Namespace: "other", Name: "web"},
		nil,
	}
	for n := b.Next() % 7; n > 0; n-- {
		a0, a1 := b.Next(), b.Next()
		ip := fuzzIPs[a0&7]
		name, err := v1alpha1.IPAddressName(ip)
		if err != nil {
			name = "ip-" + ip
		}
		if slices.ContainsFunc(s.addresses, func(o v1alpha1.IPAddress) bool { return o.Name == name }) {
			continue // one object per name
		}
		phase := fuzzPhases[a0>>5&7]
		a := newAddress("203.0.113.9", fuzzClasses[a0>>3&3], func(a *v1alpha1.IPAddress) {
			a.Name, a.Spec.Address = name, ip
			a.Status.Phase = ""
			if a1&32 != 0 {
				// The core's record of its last phase, under a driver's.
				recorded := phase
				if phase == "" || phase == v1alpha1.AddressConflict || phase == v1alpha1.AddressLost {
					recorded = v1alpha1.AddressBound
				}
				binding.SetPhase(&a.Status, recorded, "", now.Add(-time.Minute))
			}
			a.Status.Phase = phase
			if ref := refs[a1&7]; ref != nil {
				a.Spec.ClaimRef = ref.DeepCopy()
			}
			if a1&8 != 0 {
				a.DeletionTimestamp = &metav1.Time{Time: now}
			}
			if a1&16 != 0 {
				reclaimDelete(a)
			}
			if a1&128 != 0 {
				a.Status.AssociatedTo = &v1alpha1.WorkloadReference{Kind: "Service", Namespace: ns, Name: "web"}
				a.Status.Holding = &v1alpha1.Holding{Workload: &v1alpha1.HeldReference{Kind: "Service", Namespace: ns, Name: "web", UID: "svc"}}
			}
		})
		if a1&64 != 0 {
			withReported(a)(claim)
		}
		s.addresses = append(s.addresses, a)
	}
	if c0&128 != 0 && len(s.addresses) > 0 {
		claim.Spec.AddressName = s.addresses[int(b.Next())%len(s.addresses)].Name
	}
	if stamp := []string{"", "p.example.com/public", "p.example.com/private", "someone.example.com"}[b.Next()&3]; stamp != "" {
		claim.Annotations[v1alpha1.AnnotationProvisioner] = stamp
	}
	return s
}

var (
	coreUser   = authenticationv1.UserInfo{Username: "core"}
	principals = webhook.Principals{Core: []string{"core"}, Drivers: []string{"driver"}}
)

// FuzzDecide runs the claim binder over fuzzed snapshots. What a pass
// writes is the core's to write and passes its admission checks; it binds
// the claim only free addresses or its own pre-bindings, of its class and
// requested families, one address per family; the claim's status
// reports exactly the addresses bound to it; reclaim writes only what the
// deleted claim held.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x00, 0x10, 2, 0x40, 0x00, 0x41, 0x00})                            // IPv4 from the default class, two candidates
	f.Add([]byte{0x02, 0x11, 3, 0x43, 0x02, 0x40, 0x01, 0x03, 0x41})                // Dual: a pre-binding, a bound address, a candidate
	f.Add([]byte{0x40, 0x05, 3, 0x60, 0x41, 0x61, 0x01, 0x62, 0x04})                // a Bound claim with two bound IPv4 addresses
	f.Add([]byte{0x84, 0x01, 4, 0x60, 0x01, 0x61, 0x11, 0xa2, 0x02, 0xc0, 0x21, 1}) // reclaim under Retain and Delete, a pre-binding in Conflict
	f.Add([]byte{0x14, 0x01, 2, 0x60, 0x01, 0x21, 0x03})                            // reclaim of a controller-owned claim beside a stale binding
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzSnapshot(data)
		claim := s.claim
		orig := snapshot{claim: claim.DeepCopy(), now: s.now}
		for i := range s.addresses {
			orig.addresses = append(orig.addresses, *s.addresses[i].DeepCopy())
		}
		p := decide(s)

		if !equality.Semantic.DeepEqual(orig.addresses, s.addresses) {
			t.Fatalf("decide changed its snapshot's addresses")
		}
		if !equality.Semantic.DeepEqual(orig.claim, s.claim) {
			t.Fatalf("decide changed its snapshot's claim")
		}

		byName := map[string]v1alpha1.IPAddress{}
		for _, a := range orig.addresses {
			byName[a.Name] = a
		}
		final := map[string]v1alpha1.IPAddress{}
		for k, v := range byName {
			final[k] = v
		}
		status := claim.Status
		if p.status != nil {
			status = *p.status
		}
		requested := claim.Spec.Family.Families()
		own := &v1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
		written := map[string]bool{}
		for _, b := range p.bind {
			before, ok := byName[b.Name]
			switch {
			case !ok:
				t.Fatalf("bound %s, which is not in the snapshot", b.Name)
			case written[b.Name]:
				t.Fatalf("%s written twice", b.Name)
			case claim.DeletionTimestamp != nil:
				t.Fatalf("a deleted claim's pass binds %s", b.Name)
			}
			written[b.Name] = true
			if errs := webhook.ValidateAddressUpdate(&before, b, nil, coreUser, principals, field.NewPath("spec")); len(errs) != 0 {
				t.Fatalf("binding %s is refused admission: %v", b.Name, errs)
			}
			rest := b.DeepCopy()
			rest.Spec.ClaimRef = before.Spec.ClaimRef
			if !equality.Semantic.DeepEqual(rest, &before) {
				t.Fatalf("binding %s writes more than its claimRef", b.Name)
			}
			ref, was := b.Spec.ClaimRef, before.Spec.ClaimRef
			fam := binding.Family(&before)
			switch {
			case ref == nil && !binding.Holds(&before, claim):
				t.Fatalf("cleared the claimRef %+v of %s, not this claim's", was, b.Name)
			case ref == nil:
			case *ref != *own:
				t.Fatalf("%s bound as %+v, not to the claim %+v", b.Name, ref, own)
			case was != nil && !binding.PreBound(&before, claim):
				t.Fatalf("%s bound to the claim over its claimRef %+v", b.Name, was)
			case before.Spec.ClassName != status.ClassName || !slices.Contains(requested, fam):
				t.Fatalf("%s of class %q and family %q bound to a claim of class %q wanting %v",
					b.Name, before.Spec.ClassName, fam, status.ClassName, requested)
			case was == nil && (before.Status.Phase != v1alpha1.AddressAvailable || before.DeletionTimestamp != nil):
				t.Fatalf("%s bound while %s (deleting %v)", b.Name, before.Status.Phase, before.DeletionTimestamp != nil)
			case was == nil && claim.Spec.AddressName != "" && b.Name != claim.Spec.AddressName:
				t.Fatalf("%s bound to a claim asking for %s", b.Name, claim.Spec.AddressName)
			}
			final[b.Name] = *b
		}

		if p.provisioner != nil {
			// The stamp names the provisioner of the class the claim
			// resolved to, and is written only when it changes.
			c := s.class.class
			if c == nil || c.Name != status.ClassName || *p.provisioner != c.Spec.Provisioner || claim.Annotations[v1alpha1.AnnotationProvisioner] == *p.provisioner {
				t.Fatalf("stamps %q on a claim of class %q stamped %q", *p.provisioner, status.ClassName, claim.Annotations[v1alpha1.AnnotationProvisioner])
			}
		}
		if claim.DeletionTimestamp == nil {
			if len(p.release)+len(p.remove) != 0 || p.removeFinalizer || p.addFinalizer == slices.Contains(claim.Finalizers, v1alpha1.FinalizerClaimProtection) {
				t.Fatalf("a live claim's pass releases %d, removes %d, finalizer +%v -%v", len(p.release), len(p.remove), p.addFinalizer, p.removeFinalizer)
			}
			// The status is the projection of the claimRefs after the pass.
			var held []v1alpha1.ClaimedAddress
			families := map[v1alpha1.IPFamily]string{}
			lost := false
			for _, a := range final {
				if !binding.Holds(&a, claim) {
					continue
				}
				fam := binding.Family(&a)
				if other, dup := families[fam]; dup {
					t.Fatalf("the claim holds %s and %s, both of family %q", other, a.Name, fam)
				}
				families[fam] = a.Name
				lost = lost || a.Status.Phase == v1alpha1.AddressLost
				held = append(held, v1alpha1.ClaimedAddress{Name: a.Name, Address: a.Spec.Address})
			}
			slices.SortFunc(held, func(x, y v1alpha1.ClaimedAddress) int { return strings.Compare(x.Name, y.Name) })
			if !equality.Semantic.DeepEqual(held, status.Addresses) {
				t.Fatalf("status reports %v, the claim holds %v", status.Addresses, held)
			}
			all := !slices.ContainsFunc(requested, func(f v1alpha1.IPFamily) bool { _, ok := families[f]; return !ok })
			if (status.Phase == v1alpha1.ClaimBound) != (all && !lost) {
				t.Fatalf("phase %s holding %v of %v (one Lost: %v)", status.Phase, families, requested, lost)
			}
			if p.boundNow != (status.Phase == v1alpha1.ClaimBound && claim.Status.Phase != v1alpha1.ClaimBound) {
				t.Fatalf("boundNow %v going from %s to %s", p.boundNow, claim.Status.Phase, status.Phase)
			}
			return
		}

		// Reclaim.
		if p.status != nil || p.addFinalizer || p.provisioner != nil ||
			p.removeFinalizer != slices.Contains(claim.Finalizers, v1alpha1.FinalizerClaimProtection) {
			t.Fatalf("reclaim writes more than addresses and the finalizer's removal")
		}
		owned := metav1.GetControllerOf(claim) != nil
		judge := func(a *v1alpha1.IPAddress, what string) v1alpha1.IPAddress {
			before, ok := byName[a.Name]
			switch {
			case !ok || written[a.Name]:
				t.Fatalf("%s %s: not in the snapshot, or written twice", what, a.Name)
			case !binding.Names(&before, claim) || (before.Spec.ClaimRef.UID != claim.UID && before.Spec.ClaimRef.UID != ""):
				t.Fatalf("%s %s, bound to %+v, not to the deleted claim", what, a.Name, before.Spec.ClaimRef)
			}
			written[a.Name] = true
			return before
		}
		for _, a := range p.release {
			before := judge(a, "released")
			if errs := webhook.ValidateAddressStatusUpdate(&before, a, coreUser, principals, field.NewPath("status")); len(errs) != 0 {
				t.Fatalf("releasing %s is refused admission: %v", a.Name, errs)
			}
			rest := a.DeepCopy()
			rest.Status = before.Status
			if binding.PreBound(&before, claim) {
				// Reclaim accepts a pre-binding on a scratch plan and
				// releases it by a status write, which drops the UID the
				// copy carries: stored, the address is Released and
				// uid-less, which binding.PreBound does not count as a
				// pre-binding, so no claim of the name takes it.
				rest.Spec.ClaimRef = before.Spec.ClaimRef
				stored := a.DeepCopy()
				stored.Spec.ClaimRef = before.Spec.ClaimRef
				if binding.PreBound(stored, claim) {
					t.Fatalf("released pre-binding %s is still a pre-binding of the name", a.Name)
				}
			}
			switch {
			case !equality.Semantic.DeepEqual(rest, &before):
				t.Fatalf("releasing %s writes more than its status", a.Name)
			case a.Status.Phase != v1alpha1.AddressReleased:
				t.Fatalf("released %s into %s", a.Name, a.Status.Phase)
			case owned || before.Spec.ReclaimPolicy == v1alpha1.ReclaimDelete:
				t.Fatalf("released %s, which reclaim deletes", a.Name)
			}
		}
		for _, a := range p.remove {
			before := judge(a, "removed")
			if !owned && before.Spec.ReclaimPolicy != v1alpha1.ReclaimDelete {
				t.Fatalf("removed %s under %s", a.Name, before.Spec.ReclaimPolicy)
			}
		}
	})
}
