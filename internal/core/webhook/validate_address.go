package webhook

import (
	"fmt"
	"sort"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

const (
	msgBind = "only the address-controller core binds an existing address to a claim; " +
		"a driver or an administrator pre-binds one only by creating the address with claimRef set"
	msgCompleteUID = "only the address-controller core completes a pre-binding's uid, when it accepts the binding"
	msgClearBind   = "only an administrator or the address-controller core clears a binding"
	// msgClearLive takes the claim's namespace, name and uid.
	msgClearLive = "IPAddressClaim %[1]s/%[2]s (uid %[3]s) holds this address, and an administrator clears only a binding whose claim is gone: " +
		"to release it, delete IPAddressClaim %[1]s/%[2]s (its addresses' reclaimPolicy then applies)"
	msgRepoint = "re-pointing a binding to another claim is never allowed; clear it first"

	msgCorePhase   = "only the address-controller core moves an address between Pending, Available, Bound and Released"
	msgDriverPhase = "only a driver moves an address into or out of Conflict and Lost" + driversAre
	msgAssociated  = "only a driver writes associatedTo, the workload it announces the address for" + driversAre
	msgHolding     = "only a driver writes holding, its record of where it holds the address" + driversAre
	msgCoreBound   = "only the address-controller core writes the Bound condition"
	// msgDriverCondition takes the condition's type.
	msgDriverCondition = "only a driver writes the %s condition" + driversAre
	// driversAre says where a driver refused here is told to be one: a
	// driver installed under another name than the core was told of
	// learns what to change.
	driversAre = " (the drivers are the core's --driver-usernames, the chart's driverUsernames)"
)

// ValidateAddressDelete refuses the foreground deletion of an address a
// live claim holds (holder, from Holder): the garbage collector would first
// delete what the address owns — the driver's placeholder holding the IP in
// its backend — while the core keeps the address for its claim, so the IP
// would be left unheld, for any Service pinning it to take. An address no
// live claim holds goes at once, whatever the policy. fldPath is the path
// of the delete options.
func ValidateAddressDelete(options *metav1.DeleteOptions, holder *v1alpha1.IPAddressClaim, fldPath *field.Path) field.ErrorList {
	if holder == nil || options == nil || options.PropagationPolicy == nil || *options.PropagationPolicy != metav1.DeletePropagationForeground {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath.Child("propagationPolicy"), *options.PropagationPolicy,
		fmt.Sprintf("IPAddressClaim %s/%s holds the address, and a foreground deletion would delete its hold on the IP first; delete it in the background (the default), or delete the claim",
			holder.Namespace, holder.Name))}
}

// ValidateAddressCreate checks what makes an address one object per IP: a
// canonical spec.address and the name derived from it. The CRD's CEL
// checks both too; this names the field and the expected value. fldPath is
// the object's path.
func ValidateAddressCreate(a *v1alpha1.IPAddress, fldPath *field.Path) field.ErrorList {
	if _, err := v1alpha1.ParseCanonicalIP(a.Spec.Address); err != nil {
		return field.ErrorList{field.Invalid(fldPath.Child("spec", "address"), a.Spec.Address, err.Error())}
	}
	// Cannot fail: the address parsed.
	name, _ := v1alpha1.IPAddressName(a.Spec.Address)
	if a.Name != name {
		return field.ErrorList{field.Invalid(fldPath.Child("metadata", "name"), a.Name,
			fmt.Sprintf("must be %s, the name derived from spec.address %s", name, a.Spec.Address))}
	}
	return nil
}

// ValidatePreBinding refuses an address created pre-bound (spec.claimRef)
// to a claim that does not exist or is being deleted, or to another claim
// of the name than the UID it gives: the core would reclaim it at once — delete it under
// reclaimPolicy Delete, and with it a reservation the address recorded. The
// claim comes first; the address pre-bound to it after. claim is the claim
// the reference names, nil when there is none. fldPath is the spec's path.
func ValidatePreBinding(ref *v1alpha1.ClaimReference, claim *v1alpha1.IPAddressClaim, fldPath *field.Path) field.ErrorList {
	if ref == nil {
		return nil
	}
	key := ref.Namespace + "/" + ref.Name
	switch {
	case claim == nil:
		return field.ErrorList{field.Invalid(fldPath.Child("claimRef"), key,
			"IPAddressClaim "+key+" does not exist; create the claim first, then the address pre-bound to it (an address bound to no claim is reclaimed)")}
	case ref.UID != "" && ref.UID != claim.UID:
		return field.ErrorList{field.Invalid(fldPath.Child("claimRef", "uid"), ref.UID,
			fmt.Sprintf("IPAddressClaim %s has UID %s; leave uid empty, the core completes it", key, claim.UID))}
	case claim.DeletionTimestamp != nil:
		return field.ErrorList{field.Invalid(fldPath.Child("claimRef"), key,
			"IPAddressClaim "+key+" is being deleted; an address pre-bound to it would be reclaimed as soon as it goes")}
	}
	return nil
}

// ValidateAddressUpdate keeps an address's identity and its binding in the
// hands §3 gives them. address, className and source never change: the IP
// names the object and the class and source say who holds the reservation.
// claimRef is the only record of a binding, so u may write it only as its
// owner would. reclaimPolicy is anybody's with write access. holder is the
// claim the old claimRef's uid names when it exists and is not being
// deleted, nil otherwise. fldPath is the spec's path.
func ValidateAddressUpdate(oldAddr, newAddr *v1alpha1.IPAddress, holder *v1alpha1.IPAddressClaim, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	o, n := &oldAddr.Spec, &newAddr.Spec
	var errs field.ErrorList
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(n.Address, o.Address, fldPath.Child("address"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(n.ClassName, o.ClassName, fldPath.Child("className"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(n.Source, o.Source, fldPath.Child("source"))...)
	return append(errs, validateClaimRefUpdate(o.ClaimRef, n.ClaimRef, oldAddr.Status.Phase, holder != nil, u, p, fldPath.Child("claimRef"))...)
}

// Holder is claim when it is the live claim ref's uid names: the one whose
// binding an admin may not clear. nil otherwise.
func Holder(ref *v1alpha1.ClaimReference, claim *v1alpha1.IPAddressClaim) *v1alpha1.IPAddressClaim {
	if ref == nil || ref.UID == "" || claim == nil || claim.UID != ref.UID || claim.DeletionTimestamp != nil {
		return nil
	}
	return claim
}

// validateClaimRefUpdate: the core sets a binding when it matches and
// completes the uid of a pre-binding when it accepts it; the core
// (releaseDelay) clears one, and so does an admin recycling a Released
// address or withdrawing a pre-binding no claim has accepted. An admin
// never clears a binding a live claim holds (held: its uid names one), in
// whatever phase — a claim taking a Released address back holds it before
// the phase says Bound: the claim would lose its address, and its Service
// the address, without reclaim running. A binding whose claim is gone is
// the admin's to clear, Lost or Conflict too.
// Drivers and admins bind only by creating an address pre-bound, which is
// not an update. Nobody re-points a binding in place, for the same reason —
// but the core, which binds a Released address to another claim of the same
// namespace when its class keeps it there (keepReleasedInNamespace).
func validateClaimRefUpdate(o, n *v1alpha1.ClaimReference, phase v1alpha1.AddressPhase, held bool, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	switch {
	case o == nil && n == nil:
		return nil
	case o == nil:
		return forbiddenUnless(p.IsCore(u), fldPath, msgBind)
	case n == nil && p.IsCore(u):
		return nil
	case n == nil && p.IsAdmin(u) && held:
		return field.ErrorList{field.Forbidden(fldPath, fmt.Sprintf(msgClearLive, o.Namespace, o.Name, o.UID))}
	case n == nil:
		return forbiddenUnless(p.IsAdmin(u), fldPath, msgClearBind)
	case rebinds(o, n, phase) && p.IsCore(u):
		// A class that keeps Released addresses in their namespace: the
		// core binds one to another claim of the same namespace.
		return nil
	case o.Namespace != n.Namespace || o.Name != n.Name:
		return field.ErrorList{field.Forbidden(fldPath, msgRepoint)}
	case o.UID == n.UID:
		return nil
	case o.UID == "":
		return forbiddenUnless(p.IsCore(u), fldPath.Child("uid"), msgCompleteUID)
	default:
		// Another uid is another claim of the same name; removing the uid
		// would let such a claim accept the binding as its own.
		return field.ErrorList{field.Forbidden(fldPath.Child("uid"), msgRepoint)}
	}
}

// rebinds: a Released address's binding moves to another claim of the
// same namespace, with that claim's UID.
func rebinds(o, n *v1alpha1.ClaimReference, phase v1alpha1.AddressPhase) bool {
	return phase == v1alpha1.AddressReleased && o.Namespace == n.Namespace && n.UID != "" && n.UID != o.UID
}

// ValidateAddressStatusUpdate keeps each part of an address's status to its
// owner (§3): the core owns the phases Pending, Available, Bound and Released
// and the Bound condition that dates them; drivers own Conflict and Lost
// (entering them and clearing them back to a core phase), associatedTo and
// every other condition. Tenants and admins write none of it: being an admin
// grants nothing here, so every status write comes from the identity that
// owns it. An admin who must repair an address's status removes the webhook
// configuration or acts as the core's ServiceAccount. fldPath is the
// status's path.
func ValidateAddressStatusUpdate(oldAddr, newAddr *v1alpha1.IPAddress, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	o, n := &oldAddr.Status, &newAddr.Status
	var errs field.ErrorList
	errs = append(errs, validatePhaseUpdate(o.Phase, n.Phase, u, p, fldPath.Child("phase"))...)
	if !equality.Semantic.DeepEqual(o.AssociatedTo, n.AssociatedTo) {
		errs = append(errs, forbiddenUnless(p.IsDriver(u), fldPath.Child("associatedTo"), msgAssociated)...)
	}
	if !equality.Semantic.DeepEqual(o.Holding, n.Holding) {
		errs = append(errs, forbiddenUnless(p.IsDriver(u), fldPath.Child("holding"), msgHolding)...)
	}
	return append(errs, validateConditionsUpdate(o.Conditions, n.Conditions, u, p, fldPath.Child("conditions"))...)
}

// validatePhaseUpdate: a transition with Conflict or Lost at either end is
// the driver's (the core treats both as sticky, and the driver clears them
// by restoring a core phase); any other transition is the core's. An
// unknown phase, which the CRD's enum refuses anyway, counts as the core's.
func validatePhaseUpdate(o, n v1alpha1.AddressPhase, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	switch {
	case o == n:
		return nil
	case driverPhase(o) || driverPhase(n):
		return forbiddenUnless(p.IsDriver(u), fldPath, msgDriverPhase)
	default:
		return forbiddenUnless(p.IsCore(u), fldPath, msgCorePhase)
	}
}

func driverPhase(ph v1alpha1.AddressPhase) bool {
	return ph == v1alpha1.AddressConflict || ph == v1alpha1.AddressLost
}

// validateConditionsUpdate judges each condition that was added, removed or
// changed, by type. The list is a map keyed by type, so an error's path names
// the type (conditions[InBackend]) rather than an index that differs between the
// old and the new list.
func validateConditionsUpdate(o, n []metav1.Condition, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, t := range conditionTypes(o, n) {
		if equality.Semantic.DeepEqual(meta.FindStatusCondition(o, t), meta.FindStatusCondition(n, t)) {
			continue
		}
		if t == v1alpha1.ConditionBound {
			errs = append(errs, forbiddenUnless(p.IsCore(u), fldPath.Key(t), msgCoreBound)...)
			continue
		}
		// Conflict and InBackend go with the driver's phases; any other type can
		// only be a driver's, as the core writes Bound alone.
		errs = append(errs, forbiddenUnless(p.IsDriver(u), fldPath.Key(t), fmt.Sprintf(msgDriverCondition, t))...)
	}
	return errs
}

// conditionTypes returns the types in either list, sorted and without
// repeats, so errors come in a stable order.
func conditionTypes(lists ...[]metav1.Condition) []string {
	seen := map[string]bool{}
	var types []string
	for _, l := range lists {
		for _, c := range l {
			if !seen[c.Type] {
				seen[c.Type] = true
				types = append(types, c.Type)
			}
		}
	}
	sort.Strings(types)
	return types
}

// forbiddenUnless returns nothing when allowed, else one Forbidden error.
func forbiddenUnless(allowed bool, fldPath *field.Path, detail string) field.ErrorList {
	if allowed {
		return nil
	}
	return field.ErrorList{field.Forbidden(fldPath, detail)}
}
