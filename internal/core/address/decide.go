package address

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/recorder"
)

// snapshot is everything one pass decides on.
type snapshot struct {
	address *v1alpha1.IPAddress
	// claim is the claim spec.claimRef names (by namespace and name), nil
	// when there is none.
	claim *v1alpha1.IPAddressClaim
	// class is the address's class, nil when it does not exist.
	class *v1alpha1.IPAddressClass
	now   time.Time
}

// plan is what one pass writes, in order: metadata, status, claimRef,
// deletion, events.
type plan struct {
	addFinalizer    bool
	removeFinalizer bool
	// status is the status to write; nil when unchanged.
	status *v1alpha1.IPAddressStatus
	// clearClaimRef recycles a Released address whose delay has passed.
	clearClaimRef bool
	// remove deletes the address (safety-net reclaim under Delete).
	remove bool
	// claimGone: the plan rests on the claim being gone or replaced; the
	// reconciler confirms that with a live read before acting.
	claimGone    bool
	requeueAfter time.Duration
	events       []recorder.Event
}

// decide runs contract §5 over s.
func decide(s snapshot) plan {
	var p plan
	a := s.address
	if a.DeletionTimestamp != nil {
		p.syncDeleting(s) // [5-1]
		return p
	}
	p.addFinalizer = !controllerutil.ContainsFinalizer(a, v1alpha1.FinalizerAddressProtection) // [5-2]
	if msg := invalid(a); msg != "" {
		if p.setPhase(s, v1alpha1.AddressPending, msg) { // [5-3]
			p.events = append(p.events, recorder.Warning(a, v1alpha1.ReasonInvalidAddress, "%s", msg))
		}
		return p
	}
	switch a.Status.Phase {
	case v1alpha1.AddressConflict, v1alpha1.AddressLost:
		return p // [5-4] driver territory
	}
	if a.Spec.ClaimRef == nil {
		p.syncUnbound(s) // [5-5]
		return p
	}
	p.syncBound(s) // [5-6]
	if p.status != nil && p.status.Phase == v1alpha1.AddressReleased || p.status == nil && a.Status.Phase == v1alpha1.AddressReleased {
		p.syncReleased(s) // [5-7]
	}
	return p
}

// invalid explains why spec.address cannot be trusted, or returns "".
func invalid(a *v1alpha1.IPAddress) string {
	name, err := v1alpha1.IPAddressName(a.Spec.Address)
	switch {
	case err != nil:
		return "spec.address is invalid: " + err.Error()
	case name != a.Name:
		return fmt.Sprintf("the address %s must be recorded by an object named %s, one object per IP", a.Spec.Address, name)
	}
	return ""
}

// syncDeleting releases the protection finalizer unless a live claim holds
// the address: a Bound address never vanishes from under its claim, nor
// one in Conflict — still the claim's, and attached, while a stranger
// tries for its IP; deleting it would hand the IP to the stranger. Holding
// is the binding record, not the phase: an address whose claimRef a bind
// (or a take-back) has just written still shows Available or Released
// until its next pass, and its claim already reports it. A Lost address is
// no longer in the backend's books, and an admin may remove it.
func (p *plan) syncDeleting(s snapshot) {
	if !controllerutil.ContainsFinalizer(s.address, v1alpha1.FinalizerAddressProtection) {
		return
	}
	ref := s.address.Spec.ClaimRef
	if ref != nil && ref.UID != "" && s.address.Status.Phase != v1alpha1.AddressLost {
		if s.claim != nil && s.claim.DeletionTimestamp == nil && s.claim.UID == ref.UID {
			if ph := s.address.Status.Phase; ph != v1alpha1.AddressConflict && ph != v1alpha1.AddressBound {
				// Kept for its claim, it is Bound like any address its
				// claim holds: its driver attaches only a Bound one.
				p.setPhase(s, v1alpha1.AddressBound, "bound to claim "+ref.Namespace+"/"+ref.Name)
			}
			return
		}
		p.claimGone = s.claim == nil || s.claim.UID != ref.UID
	}
	p.removeFinalizer = true
}

// syncUnbound: no claimRef means Available; this is also how a Released
// address is recycled once its claimRef is cleared.
func (p *plan) syncUnbound(s snapshot) {
	msg := "not bound; claims of class " + s.address.Spec.ClassName + " can match it"
	was := s.address.Status.Phase
	if p.setPhase(s, v1alpha1.AddressAvailable, msg) && was == v1alpha1.AddressReleased {
		p.events = append(p.events, recorder.Normal(s.address, v1alpha1.ReasonAvailable, "spec.claimRef was cleared; the address is Available again"))
	}
}

// syncBound follows the claim claimRef names.
func (p *plan) syncBound(s snapshot) {
	a, ref, claim := s.address, s.address.Spec.ClaimRef, s.claim
	key := ref.Namespace + "/" + ref.Name
	switch {
	case claim != nil && ref.UID == "":
		if claim.DeletionTimestamp == nil && a.Status.Phase != v1alpha1.AddressReleased {
			p.setPhase(s, v1alpha1.AddressPending, "pre-bound to claim "+key+"; waiting for the claim to accept it "+
				"(it refuses an address of another class or family, or of a family it holds already: its PreBindingRefused events say so)")
		}
	case claim != nil && claim.UID == ref.UID && claim.DeletionTimestamp != nil:
		// The claim's reclaim owns this transition.
	case claim != nil && claim.UID == ref.UID:
		p.setPhase(s, v1alpha1.AddressBound, "bound to claim "+key)
	default:
		p.reclaim(s, key)
	}
}

// reclaim is the safety net for a claim that vanished without its reclaim
// running (its finalizer was removed by force) or was replaced by a
// namesake: the address's own reclaimPolicy applies.
func (p *plan) reclaim(s snapshot, key string) {
	p.claimGone = true
	ref := s.address.Spec.ClaimRef
	why := binding.ReleaseOf(ref.Namespace, ref.Name) + "no longer exists"
	switch {
	case s.claim == nil && ref.UID == "":
		why = "pre-bound to claim " + key + ", which does not exist (create the claim before an address pre-bound to it)"
	case s.claim != nil:
		why = binding.ReleaseOf(ref.Namespace, ref.Name) + "was replaced by a new claim of the same name"
	}
	if s.address.Spec.ReclaimPolicy == v1alpha1.ReclaimDelete {
		p.remove = true
		p.events = append(p.events, recorder.Normal(s.address, v1alpha1.ReasonReclaimed, "%s; deleting the address (reclaimPolicy Delete)", why))
		return
	}
	if s.address.Status.Phase == v1alpha1.AddressReleased && !takenBack(s.address) {
		return // already released, by the claim's reclaim or an earlier pass
	}
	// A Released address whose release names no claim of this name was
	// taken back by this one, which went by force before the address's
	// pass: the release is dated anew, for releaseDelay to count from it.
	// (One of an earlier claim of the same name cannot be told apart: the
	// claim gone, its creation is not known.)
	st := s.address.Status.DeepCopy()
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionBound)
	if binding.SetPhase(st, v1alpha1.AddressReleased, why+"; the address is retained", s.now) {
		p.status = st
		p.events = append(p.events, recorder.Normal(s.address, v1alpha1.ReasonReleased, "%s; the address is retained", why))
	}
}

// takenBack reports whether Released address a is bound (claimRef with a
// UID) to a claim its release does not name: one that took it back.
func takenBack(a *v1alpha1.IPAddress) bool {
	ref := a.Spec.ClaimRef
	return ref.UID != "" && meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionBound) != nil &&
		!binding.ReleasedFrom(&a.Status, ref.Namespace, ref.Name)
}

// syncReleased applies the class's releaseDelay, dated from the Bound
// condition's lastTransitionTime; held addresses are exempt.
func (p *plan) syncReleased(s snapshot) {
	class := s.class
	if class == nil || class.Spec.ReleaseDelay == nil || s.address.Annotations[v1alpha1.AnnotationHeld] == "true" {
		return
	}
	status := &s.address.Status
	if p.status != nil {
		status = p.status
	}
	if meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionBound) == nil {
		// Released before the condition existed: date it from this pass.
		st := status.DeepCopy()
		ref := s.address.Spec.ClaimRef
		binding.SetPhase(st, v1alpha1.AddressReleased, binding.ReleaseOf(ref.Namespace, ref.Name)+"released the address; dated from the first pass that saw it", s.now)
		p.status, status = st, st
	}
	since := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionBound).LastTransitionTime.Time
	if wait := since.Add(class.Spec.ReleaseDelay.Duration).Sub(s.now); wait > 0 {
		p.requeueAfter = wait
		return
	}
	if attached(s.address) {
		// Recycled only once its driver has taken it back from the
		// workload: bound again while its old Service still held it, the
		// address would be handed between two claims' Services at once.
		// The driver's status write that ends the attachment wakes this.
		return
	}
	if awaited(s) {
		// The claim takes it back (its pass may wait while the driver
		// detaches it); recycled now, it would go to the line instead.
		// Looked at again in a while: a claim that changes its mind
		// (another class) wakes no address.
		p.requeueAfter = awaitedRecheck
		return
	}
	p.clearClaimRef = true
	p.events = append(p.events, recorder.Normal(s.address, v1alpha1.ReasonRecycled,
		"releaseDelay %s of class %s has passed since the address was released; clearing spec.claimRef", class.Spec.ReleaseDelay.Duration, class.Name))
}

// awaitedRecheck is how often an address past its releaseDelay that a claim
// is to take back is looked at again.
const awaitedRecheck = time.Minute

// awaited says whether a claim of the name the address was last bound to,
// created again in its class, which keeps Released addresses in their
// namespace, still wants the address's family: that claim takes this
// address back before any other, and waits for it while it is detached.
func awaited(s snapshot) bool {
	c, a := s.claim, s.address
	return c != nil && s.class.Spec.KeepReleasedInNamespace && c.DeletionTimestamp == nil && c.UID != a.Spec.ClaimRef.UID &&
		c.Spec.AddressName == "" && binding.ClassName(c) == a.Spec.ClassName &&
		slices.Contains(binding.UnreportedFamilies(c), binding.Family(a))
}

// attached reports whether the address's driver still reports it attached
// to a workload, or a handoff under way (status.associatedTo, holding).
func attached(a *v1alpha1.IPAddress) bool {
	return a.Status.AssociatedTo != nil || a.Status.Holding != nil
}

// setPhase plans a core-owned phase; it reports whether the status changes.
func (p *plan) setPhase(s snapshot, phase v1alpha1.AddressPhase, message string) bool {
	st := s.address.Status.DeepCopy()
	if !binding.SetPhase(st, phase, message, s.now) {
		return false
	}
	p.status = st
	return true
}
