package binding

import (
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Names claimRef names the claim's namespace and name, whatever its UID.
func Names(addr *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim) bool {
	ref := addr.Spec.ClaimRef
	return ref != nil && ref.Namespace == claim.Namespace && ref.Name == claim.Name
}

// Holds reports whether the address is bound to this very claim: its claimRef
// names the claim and carries the claim's UID.
func Holds(addr *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim) bool {
	return Names(addr, claim) && addr.Spec.ClaimRef.UID == claim.UID
}

// PreBound reports whether the address names the claim with an empty UID: a
// pre-binding waiting for the core's acceptance. A Released one is not: the
// reclaim of a claim of that name released it before accepting it (a status
// write, which cannot record the UID), and like any Released address it
// waits for an administrator — a claim re-created under the name never
// takes it.
func PreBound(addr *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim) bool {
	return Names(addr, claim) && addr.Spec.ClaimRef.UID == "" && addr.Status.Phase != v1alpha1.AddressReleased
}

// PreBoundIn reports whether the address is a pre-binding to the claim the
// core accepts once class resolves (contract §4 step 4): of that class and
// of a family the claim requests. Any other pre-binding is refused, and
// neither satisfies nor counts toward one of the claim's families.
func PreBoundIn(addr *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim, class string) bool {
	return PreBound(addr, claim) && addr.Spec.ClassName == class && slices.Contains(claim.Spec.Family.Families(), Family(addr))
}

// Family is the family of the address's IP, "" for an invalid one.
func Family(addr *v1alpha1.IPAddress) v1alpha1.IPFamily {
	return v1alpha1.FamilyOf(addr.Spec.Address)
}

// UnreportedFamilies lists the families a claim requests that its status
// reports no address for.
func UnreportedFamilies(claim *v1alpha1.IPAddressClaim) []v1alpha1.IPFamily {
	reported := map[v1alpha1.IPFamily]bool{}
	for _, a := range claim.Status.Addresses {
		reported[v1alpha1.FamilyOf(a.Address)] = true
	}
	return MissingFamilies(claim, reported)
}

// MissingFamilies lists the families a claim requests that covered lacks.
func MissingFamilies(claim *v1alpha1.IPAddressClaim, covered map[v1alpha1.IPFamily]bool) []v1alpha1.IPFamily {
	var missing []v1alpha1.IPFamily
	for _, f := range claim.Spec.Family.Families() {
		if !covered[f] {
			missing = append(missing, f)
		}
	}
	return missing
}

// ClassName is the class a claim names in spec.className, else the one its
// status records from an earlier resolution ("" when neither).
func ClassName(claim *v1alpha1.IPAddressClaim) string {
	if claim.Spec.ClassName != "" {
		return claim.Spec.ClassName
	}
	return claim.Status.ClassName
}

// SortByName orders addresses by object name, the contract's tie-breaker.
func SortByName(addrs []v1alpha1.IPAddress) {
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Name < addrs[j].Name })
}

// SetPhase records a core-owned phase on an address status together with its
// Bound condition: True for Bound, False with the phase as reason otherwise.
// The condition's lastTransitionTime moves whenever its status or reason
// changes, so it dates every phase change the core makes — the release time
// §5 step 7 counts from. It reports whether anything changed.
func SetPhase(status *v1alpha1.IPAddressStatus, phase v1alpha1.AddressPhase, message string, now time.Time) bool {
	cond := metav1.Condition{Type: v1alpha1.ConditionBound, Status: metav1.ConditionFalse, Reason: string(phase), Message: message}
	if phase == v1alpha1.AddressBound {
		cond.Status = metav1.ConditionTrue
	}
	changed := status.Phase != phase
	status.Phase = phase
	return SetCondition(&status.Conditions, cond, now) || changed
}

// ReleasedFrom reports whether st records a release from the claim
// namespace/name: Released, its Bound condition's message naming the
// claim first, as every release the core writes does (ReleaseOf). A
// Released address a claim of another name has taken back since (its
// claimRef rewritten, its pass not run yet) still shows the earlier
// claim's release.
func ReleasedFrom(st *v1alpha1.IPAddressStatus, namespace, name string) bool {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionBound)
	return st.Phase == v1alpha1.AddressReleased && c != nil && c.Reason == string(v1alpha1.AddressReleased) &&
		strings.HasPrefix(c.Message, ReleaseOf(namespace, name))
}

// ReleaseOf starts the message of a release from the claim namespace/name.
func ReleaseOf(namespace, name string) string { return "claim " + namespace + "/" + name + " " }

// CorePhase reads back the core-owned phase SetPhase last recorded in the
// Bound condition (Pending when there is none): what a driver restores when
// the Conflict or Lost it set is over.
func CorePhase(st *v1alpha1.IPAddressStatus) v1alpha1.AddressPhase {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionBound)
	if c == nil {
		return v1alpha1.AddressPending
	}
	switch p := v1alpha1.AddressPhase(c.Reason); p {
	case v1alpha1.AddressBound, v1alpha1.AddressAvailable, v1alpha1.AddressReleased:
		return p
	}
	return v1alpha1.AddressPending
}

// SetCondition sets cond in conditions, moving lastTransitionTime when the
// status or the reason changes. It reports whether anything changed.
func SetCondition(conditions *[]metav1.Condition, cond metav1.Condition, now time.Time) bool {
	old := meta.FindStatusCondition(*conditions, cond.Type)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return false
	}
	cond.LastTransitionTime = metav1.NewTime(now)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	meta.SetStatusCondition(conditions, cond)
	// SetStatusCondition keeps the old time when only the reason changed.
	meta.FindStatusCondition(*conditions, cond.Type).LastTransitionTime = cond.LastTransitionTime
	return true
}

// AnnotatedClasses returns the sorted names of the classes annotated key:
// "true" (that exact value) and not being deleted: the candidates for the
// default class, or for the auto-claim class. The core and its webhooks
// choose from the same list.
func AnnotatedClasses(classes []v1alpha1.IPAddressClass, key string) []string {
	return annotated(classes, key, false)
}

// DepartingClasses returns the sorted names of the classes annotated key:
// "true" that are being deleted: what to name when AnnotatedClasses finds
// none, since they still show the annotation.
func DepartingClasses(classes []v1alpha1.IPAddressClass, key string) []string {
	return annotated(classes, key, true)
}

func annotated(classes []v1alpha1.IPAddressClass, key string, deleting bool) []string {
	var names []string
	for i := range classes {
		if classes[i].Annotations[key] == "true" && (classes[i].DeletionTimestamp != nil) == deleting {
			names = append(names, classes[i].Name)
		}
	}
	sort.Strings(names)
	return names
}
