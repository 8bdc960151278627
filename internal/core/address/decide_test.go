package address

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newAddress(mods ...func(*v1alpha1.IPAddress)) *v1alpha1.IPAddress {
	a := &v1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-7", Finalizers: []string{v1alpha1.FinalizerAddressProtection}},
		Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.7", ClassName: "public", ReclaimPolicy: v1alpha1.ReclaimRetain,
			Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}},
	}
	for _, m := range mods {
		m(a)
	}
	return a
}

func claimRef(uid string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: typesUID(uid)}
	}
}

func typesUID(s string) types.UID { return types.UID(s) }

func phase(p v1alpha1.AddressPhase) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) { a.Status.Phase = p }
}

// releasedAt gives the address the Bound condition of a release at t.
func releasedAt(t time.Time) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.Phase = v1alpha1.AddressReleased
		a.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionBound, Status: metav1.ConditionFalse,
			Reason: string(v1alpha1.AddressReleased), Message: "claim tenant/web was deleted; the address is retained", LastTransitionTime: metav1.NewTime(t)}}
	}
}

// releasedFrom words the release as one from claim tenant/name.
func releasedFrom(name string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.Conditions[0].Message = "claim tenant/" + name + " was deleted; the address is retained"
	}
}

func held(a *v1alpha1.IPAddress) {
	a.Annotations = map[string]string{v1alpha1.AnnotationHeld: "true"}
}

func deleted(a *v1alpha1.IPAddress) { a.DeletionTimestamp = &metav1.Time{Time: now} }

func policyDelete(a *v1alpha1.IPAddress) { a.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete }

func newClaim(uid string, mods ...func(*v1alpha1.IPAddressClaim)) *v1alpha1.IPAddressClaim {
	c := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: typesUID(uid)}}
	for _, m := range mods {
		m(c)
	}
	return c
}

func claimDeleting(c *v1alpha1.IPAddressClaim) { c.DeletionTimestamp = &metav1.Time{Time: now} }

func classWithDelay(d time.Duration) *v1alpha1.IPAddressClass {
	return &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: "p", ReleaseDelay: &metav1.Duration{Duration: d}}}
}

func keeping(c *v1alpha1.IPAddressClass) *v1alpha1.IPAddressClass {
	c.Spec.KeepReleasedInNamespace = true
	return c
}

type outcome struct {
	addFinalizer, removeFinalizer, clearClaimRef, remove, claimGone bool
	phase                                                           v1alpha1.AddressPhase // written phase, "" when unchanged
	reason                                                          string                // Bound condition reason written
	requeueAfter                                                    time.Duration
	events                                                          []string
}

func summarize(p plan) outcome {
	o := outcome{addFinalizer: p.addFinalizer, removeFinalizer: p.removeFinalizer, clearClaimRef: p.clearClaimRef,
		remove: p.remove, claimGone: p.claimGone, requeueAfter: p.requeueAfter}
	if p.status != nil {
		o.phase = p.status.Phase
		o.reason = meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionBound).Reason
	}
	for _, e := range p.events {
		o.events = append(o.events, e.Type+" "+e.Reason)
	}
	return o
}

// The table mirrors contract §5: each name starts with the step it tests.
func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		s    snapshot
		want outcome
	}{
		{"5-1 a deleted address with no claim loses its finalizer",
			snapshot{address: newAddress(deleted, phase(v1alpha1.AddressAvailable))},
			outcome{removeFinalizer: true}},
		{"5-1 a deleted Bound address waits while its claim is live",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressBound)), claim: newClaim("u1")},
			outcome{}},
		{"5-1 a deleted Bound address goes when its claim is being deleted",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressBound)), claim: newClaim("u1", claimDeleting)},
			outcome{removeFinalizer: true}},
		{"5-1 a deleted Bound address goes when its claim is gone (confirmed live)",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressBound))},
			outcome{removeFinalizer: true, claimGone: true}},
		{"5-1 a deleted Bound address goes when a namesake replaced its claim",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressBound)), claim: newClaim("u2")},
			outcome{removeFinalizer: true, claimGone: true}},
		{"5-1 a deleted address in Conflict waits while its claim is live (a stranger would get its IP)",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressConflict)), claim: newClaim("u1")},
			outcome{}},
		{"5-1 a deleted address in Conflict goes when its claim is gone (confirmed live)",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressConflict))},
			outcome{removeFinalizer: true, claimGone: true}},
		{"5-1 a deleted address just bound (still Available) waits while its claim is live, Bound: its driver attaches only a Bound one",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressAvailable)), claim: newClaim("u1")},
			outcome{phase: v1alpha1.AddressBound, reason: "Bound"}},
		{"5-1 a deleted address just taken back (still Released) waits while its claim is live, Bound",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressReleased)), claim: newClaim("u1")},
			outcome{phase: v1alpha1.AddressBound, reason: "Bound"}},
		{"5-1 a deleted Released address goes when its claim is gone (confirmed live)",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressReleased))},
			outcome{removeFinalizer: true, claimGone: true}},
		{"5-1 a deleted pre-bound address (no UID) goes",
			snapshot{address: newAddress(deleted, claimRef(""), phase(v1alpha1.AddressPending)), claim: newClaim("u1")},
			outcome{removeFinalizer: true}},
		{"5-1 a deleted Lost address goes though its claim is live",
			snapshot{address: newAddress(deleted, claimRef("u1"), phase(v1alpha1.AddressLost)), claim: newClaim("u1")},
			outcome{removeFinalizer: true}},
		{"5-2 adds the protection finalizer",
			snapshot{address: newAddress(func(a *v1alpha1.IPAddress) { a.Finalizers = nil }, phase(v1alpha1.AddressAvailable))},
			outcome{addFinalizer: true, phase: v1alpha1.AddressAvailable, reason: "Available"}},
		{"5-3 an unparsable address is pinned at Pending",
			snapshot{address: newAddress(func(a *v1alpha1.IPAddress) { a.Spec.Address = "203.0.113.300" }, phase(v1alpha1.AddressAvailable))},
			outcome{phase: v1alpha1.AddressPending, reason: "Pending", events: []string{"Warning InvalidAddress"}}},
		{"5-3 a non-canonical address is pinned at Pending",
			snapshot{address: newAddress(func(a *v1alpha1.IPAddress) { a.Name, a.Spec.Address = "ip-2001-db8--7", "2001:DB8::7" })},
			outcome{phase: v1alpha1.AddressPending, reason: "Pending", events: []string{"Warning InvalidAddress"}}},
		{"5-3 an address named for another IP is pinned at Pending",
			snapshot{address: newAddress(func(a *v1alpha1.IPAddress) { a.Name = "ip-203-0-113-8" })},
			outcome{phase: v1alpha1.AddressPending, reason: "Pending", events: []string{"Warning InvalidAddress"}}},
		{"5-3 an invalid address already Pending is left alone",
			snapshot{address: func() *v1alpha1.IPAddress {
				a := newAddress(func(a *v1alpha1.IPAddress) { a.Name = "ip-203-0-113-8" })
				a.Status = *decide(snapshot{address: a.DeepCopy(), now: now}).status
				return a
			}()},
			outcome{}},
		{"5-4 Conflict is sticky for the core",
			snapshot{address: newAddress(phase(v1alpha1.AddressConflict))},
			outcome{}},
		{"5-4 Lost is sticky for the core, even with the claim gone",
			snapshot{address: newAddress(claimRef("u1"), phase(v1alpha1.AddressLost))},
			outcome{}},
		{"5-5 no claimRef: a new address is Available",
			snapshot{address: newAddress()},
			outcome{phase: v1alpha1.AddressAvailable, reason: "Available"}},
		{"5-5 a Released address whose claimRef an admin cleared is Available again",
			snapshot{address: newAddress(releasedAt(now.Add(-time.Hour)))},
			outcome{phase: v1alpha1.AddressAvailable, reason: "Available", events: []string{"Normal Available"}}},
		{"5-6 claim exists with the UID: Bound",
			snapshot{address: newAddress(claimRef("u1"), phase(v1alpha1.AddressAvailable)), claim: newClaim("u1")},
			outcome{phase: v1alpha1.AddressBound, reason: "Bound"}},
		{"5-6 claim exists, claimRef without UID: waits for acceptance at Pending",
			snapshot{address: newAddress(claimRef("")), claim: newClaim("u1")},
			outcome{phase: v1alpha1.AddressPending, reason: "Pending"}},
		{"5-6 claim being deleted: waits for the claim's reclaim",
			snapshot{address: newAddress(claimRef("u1"), phase(v1alpha1.AddressBound)), claim: newClaim("u1", claimDeleting)},
			outcome{}},
		{"5-6 claim gone under Retain: Released",
			snapshot{address: newAddress(claimRef("u1"), phase(v1alpha1.AddressBound))},
			outcome{phase: v1alpha1.AddressReleased, reason: "Released", claimGone: true, events: []string{"Normal Released"}}},
		{"5-6 claim gone under Delete: the address deletes itself",
			snapshot{address: newAddress(claimRef("u1"), phase(v1alpha1.AddressBound), policyDelete)},
			outcome{remove: true, claimGone: true, events: []string{"Normal Reclaimed"}}},
		{"5-6 UID mismatch: a stale binding is reclaimed",
			snapshot{address: newAddress(claimRef("u1"), phase(v1alpha1.AddressBound)), claim: newClaim("u2")},
			outcome{phase: v1alpha1.AddressReleased, reason: "Released", claimGone: true, events: []string{"Normal Released"}}},
		{"5-6 a pre-binding whose claim is gone is reclaimed too",
			snapshot{address: newAddress(claimRef(""), phase(v1alpha1.AddressPending), policyDelete)},
			outcome{remove: true, claimGone: true, events: []string{"Normal Reclaimed"}}},
		{"5-6 an already Released address stays Released without a write",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour)))},
			outcome{claimGone: true}},
		{"5-6 keep: a Released address a claim of another name took back, that claim gone by force before this pass: released anew, dated now",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour)), releasedFrom("db")), class: classWithDelay(time.Hour)},
			outcome{phase: v1alpha1.AddressReleased, reason: "Released", claimGone: true, requeueAfter: time.Hour, events: []string{"Normal Released"}}},
		{"5-6 ...as one another claim's pre-binding left Released",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour)), func(a *v1alpha1.IPAddress) {
				a.Status.Conditions[0].Message = "pre-bound to claim tenant/x, which does not exist; the address is retained"
			}), class: classWithDelay(time.Hour)},
			outcome{phase: v1alpha1.AddressReleased, reason: "Released", claimGone: true, requeueAfter: time.Hour, events: []string{"Normal Released"}}},
		{"5-6 ...one showing its own claim's release keeps its date",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour)), releasedFrom("web")), class: classWithDelay(3 * time.Hour)},
			outcome{claimGone: true, requeueAfter: 2 * time.Hour}},
		{"5-7 without a releaseDelay a Released address stays",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour))), class: &v1alpha1.IPAddressClass{}},
			outcome{claimGone: true}},
		{"5-7 releaseDelay not yet passed: requeued for the rest",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour))), class: classWithDelay(3 * time.Hour)},
			outcome{claimGone: true, requeueAfter: 2 * time.Hour}},
		{"5-7 releaseDelay passed: claimRef cleared",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour))), class: classWithDelay(time.Hour)},
			outcome{claimGone: true, clearClaimRef: true, events: []string{"Normal Recycled"}}},
		{"5-7 releaseDelay counts from the release, not from creation",
			snapshot{address: newAddress(claimRef("u1"), phase(v1alpha1.AddressBound)), class: classWithDelay(time.Hour)},
			outcome{phase: v1alpha1.AddressReleased, reason: "Released", claimGone: true, requeueAfter: time.Hour, events: []string{"Normal Released"}}},
		{"5-7 still attached to a workload: recycled only once the driver took it back",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour)), func(a *v1alpha1.IPAddress) {
				a.Status.AssociatedTo = &v1alpha1.WorkloadReference{Kind: "Service", Namespace: "t", Name: "web"}
			}), class: classWithDelay(time.Minute)},
			outcome{claimGone: true}},
		{"5-7 ...or while a handoff is under way",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour)), func(a *v1alpha1.IPAddress) {
				a.Status.Holding = &v1alpha1.Holding{From: []v1alpha1.HeldReference{{Kind: "Service", Namespace: "t", Name: "web", UID: "s"}}}
			}), class: classWithDelay(time.Minute)},
			outcome{claimGone: true}},
		{"5-7 releaseDelay passed while a claim of its name, created again, waits to take it back: not recycled",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour))), class: keeping(classWithDelay(time.Minute)),
				claim: newClaim("u2", func(c *v1alpha1.IPAddressClaim) { c.Spec.ClassName = "public" })},
			outcome{claimGone: true, requeueAfter: awaitedRecheck}},
		{"5-7 ...recycled once that claim has an address of the family",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour))), class: keeping(classWithDelay(time.Minute)),
				claim: newClaim("u2", func(c *v1alpha1.IPAddressClaim) {
					c.Spec.ClassName = "public"
					c.Status.Addresses = []v1alpha1.ClaimedAddress{{Name: "ip-203-0-113-9", Address: "203.0.113.9"}}
				})},
			outcome{claimGone: true, clearClaimRef: true, events: []string{"Normal Recycled"}}},
		{"5-7 ...and where the class keeps nothing in the namespace",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour))), class: classWithDelay(time.Minute),
				claim: newClaim("u2", func(c *v1alpha1.IPAddressClaim) { c.Spec.ClassName = "public" })},
			outcome{claimGone: true, clearClaimRef: true, events: []string{"Normal Recycled"}}},
		{"5-7 a held address is exempt",
			snapshot{address: newAddress(claimRef("u1"), releasedAt(now.Add(-time.Hour)), held), class: classWithDelay(time.Minute)},
			outcome{claimGone: true}},
		{"5-7 Released before the condition existed: dated from this pass",
			snapshot{address: newAddress(claimRef("u1"), phase(v1alpha1.AddressReleased)), class: classWithDelay(time.Minute)},
			outcome{claimGone: true, phase: v1alpha1.AddressReleased, reason: "Released", requeueAfter: time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.now = now
			if diff := cmp.Diff(tc.want, summarize(decide(tc.s)), cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("plan differs (-want +got):\n%s", diff)
			}
		})
	}
}
