package claim

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/recorder"
)

// decideReclaim runs contract §6 for a claim being deleted: every address it
// holds (and every pre-binding step 4 would accept) is Released under Retain
// or deleted under Delete — always deleted when a controller owns the claim —
// and then the protection finalizer goes. Conflict and Lost belong to the
// driver and keep their phase.
func decideReclaim(s snapshot) plan {
	var p plan
	claim := s.claim
	if !controllerutil.ContainsFinalizer(claim, v1alpha1.FinalizerClaimProtection) {
		return p
	}
	bound, preBound := collect(s)
	if len(preBound) > 0 {
		var scratch plan
		bound = append(bound, scratch.acceptPreBindings(claim, &s.class, preBound, families(bound))...)
	}
	// A claim a controller owns (an auto-claim) takes its addresses with it
	// [6-2] — unless its class keeps Released addresses in their namespace:
	// then they follow their reclaimPolicy, and the Service created again
	// gets them back.
	keeps := s.class.class != nil && s.class.class.Spec.KeepReleasedInNamespace
	owned := metav1.GetControllerOf(claim) != nil && !keeps
	for _, a := range bound {
		a := a.DeepCopy()
		if a.Status.Phase == v1alpha1.AddressReleased && !releasedBy(a, claim) {
			// Taken back (claimRef rewritten) and its claim deleted before
			// the address's pass marked it Bound: the release on record is
			// the earlier claim's. Dated anew, releaseDelay counts from
			// this one.
			meta.RemoveStatusCondition(&a.Status.Conditions, v1alpha1.ConditionBound)
		}
		switch {
		case owned || a.Spec.ReclaimPolicy == v1alpha1.ReclaimDelete:
			p.remove = append(p.remove, a)
		case a.Status.Phase == v1alpha1.AddressConflict || a.Status.Phase == v1alpha1.AddressLost:
		case binding.SetPhase(&a.Status, v1alpha1.AddressReleased, releasedMessage(claim, a, s.class.class), s.now):
			p.release = append(p.release, a)
			p.events = append(p.events, recorder.Normal(a, v1alpha1.ReasonReleased, "%s", releasedMessage(claim, a, s.class.class)))
		}
	}
	p.removeFinalizer = true
	return p
}

// releasedBy reports whether the release a records is claim's own (an
// earlier pass of this reclaim): one this reclaim words (deleted), no
// older than claim — an earlier claim of the name was gone before claim
// could be created. The address's pass words its own releases otherwise,
// and writes none for a claim being deleted.
func releasedBy(a *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionBound)
	return binding.ReleasedFrom(&a.Status, claim.Namespace, claim.Name) && strings.HasPrefix(c.Message, deleted(claim)) &&
		!c.LastTransitionTime.Before(&claim.CreationTimestamp)
}

// deleted starts the message of a release by the claim's own reclaim.
func deleted(claim *v1alpha1.IPAddressClaim) string {
	return binding.ReleaseOf(claim.Namespace, claim.Name) + "was deleted"
}

// releasedMessage says what becomes of a Released address: an admin's to
// clear or delete, back in the pool after its class's releaseDelay (5-7)
// unless it is held, and open to the namespace's next claim in a class
// that keeps Released addresses there.
func releasedMessage(claim *v1alpha1.IPAddressClaim, a *v1alpha1.IPAddress, class *v1alpha1.IPAddressClass) string {
	msg := deleted(claim) + "; the address is retained"
	if class == nil || class.Name != a.Spec.ClassName {
		return msg + " until an admin clears spec.claimRef or deletes it"
	}
	if class.Spec.KeepReleasedInNamespace {
		msg += " for the next claim in namespace " + claim.Namespace + " that asks for its class,"
	}
	if d := class.Spec.ReleaseDelay; d != nil && a.Annotations[v1alpha1.AnnotationHeld] != "true" {
		return msg + " and returns to the pool " + d.Duration.String() + " after its release unless an admin clears spec.claimRef or deletes it first"
	}
	return msg + " until an admin clears spec.claimRef or deletes it"
}
