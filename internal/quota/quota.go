package quota

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
)

// AllClasses is the key limiting a namespace's addresses of every class.
const AllClasses corev1.ResourceName = "local.sdn.cozystack.io/addresses"

// classSuffix ends the key limiting one class.
const classSuffix = ".ipaddressclass.local.sdn.cozystack.io/addresses"

// ChargesAnnotation on a ResourceQuota records the charges against it.
const ChargesAnnotation = "local.sdn.cozystack.io/address-charges"

// ClassKey is the key limiting the addresses of class.
func ClassKey(class string) corev1.ResourceName { return corev1.ResourceName(class + classSuffix) }

// Keys are the keys of rq that limit addresses of class, in a fixed order.
func Keys(rq *corev1.ResourceQuota, class string) []corev1.ResourceName {
	var keys []corev1.ResourceName
	for _, k := range []corev1.ResourceName{ClassKey(class), AllClasses} {
		if _, ok := rq.Spec.Hard[k]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// Ours reports whether rq limits addresses at all.
func Ours(rq *corev1.ResourceQuota) bool {
	for k := range rq.Spec.Hard {
		if isAddressKey(k) {
			return true
		}
	}
	return false
}

func isAddressKey(k corev1.ResourceName) bool {
	return k == AllClasses || strings.HasSuffix(string(k), classSuffix)
}

// SameForAddresses reports whether a and b, two versions of one quota,
// agree on everything addresses depend on: their address keys' limits and
// usage, and their charges. The API server rewrites a quota's usage at
// every admission it counts (a pod created), which changes nothing for
// addresses.
func SameForAddresses(a, b *corev1.ResourceQuota) bool {
	return a.Annotations[ChargesAnnotation] == b.Annotations[ChargesAnnotation] &&
		sameAddressKeys(a.Spec.Hard, b.Spec.Hard) && sameAddressKeys(a.Status.Hard, b.Status.Hard) &&
		sameAddressKeys(a.Status.Used, b.Status.Used)
}

func sameAddressKeys(a, b corev1.ResourceList) bool {
	for _, pair := range [][2]corev1.ResourceList{{a, b}, {b, a}} {
		for k, qa := range pair[0] {
			if qb, ok := pair[1][k]; isAddressKey(k) && (!ok || qa.Cmp(qb) != 0) {
				return false
			}
		}
	}
	return true
}

// Charge is one claim's charge: the families of its class it may take.
type Charge struct {
	Claim    string              `json:"claim"`
	Class    string              `json:"class"`
	Families []v1alpha1.IPFamily `json:"families"`
}

// Charges are a quota's charges by claim UID.
type Charges map[types.UID]Charge

// ChargesOf reads rq's charges; an unreadable record reads as none (the
// core rewrites it whole).
func ChargesOf(rq *corev1.ResourceQuota) Charges {
	c := Charges{}
	if v := rq.Annotations[ChargesAnnotation]; v != "" {
		_ = json.Unmarshal([]byte(v), &c)
	}
	return c
}

// String is the record as the annotation holds it (keys sorted).
func (c Charges) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// Holds reports whether claim has family f of class charged. A charge of
// another class is void for this one: the claim was re-targeted while it
// waited, and what it was charged says nothing of its new class's room.
func (c Charges) Holds(claim types.UID, class string, f v1alpha1.IPFamily) bool {
	ch, ok := c[claim]
	return ok && ch.Class == class && slices.Contains(ch.Families, f)
}

// Usage is what counts against rq's keys in its namespace: addresses are
// every IPAddress whose claimRef names the namespace. It returns the
// count per key of rq.
func Usage(rq *corev1.ResourceQuota, addresses []v1alpha1.IPAddress, charges Charges) corev1.ResourceList {
	n := map[corev1.ResourceName]int64{}
	count := func(class string, k int64) {
		if _, ok := rq.Spec.Hard[ClassKey(class)]; ok {
			n[ClassKey(class)] += k
		}
		if _, ok := rq.Spec.Hard[AllClasses]; ok {
			n[AllClasses] += k
		}
	}
	for i := range addresses {
		if a := &addresses[i]; a.Spec.ClaimRef != nil && a.Spec.ClaimRef.Namespace == rq.Namespace {
			count(a.Spec.ClassName, 1)
		}
	}
	for uid, ch := range charges {
		count(ch.Class, int64(len(unsettled(uid, ch, rq.Namespace, addresses))))
	}
	used := corev1.ResourceList{}
	for k := range rq.Spec.Hard {
		if k == AllClasses || strings.HasSuffix(string(k), classSuffix) {
			used[k] = *resource.NewQuantity(n[k], resource.DecimalSI)
		}
	}
	return used
}

// unsettled are the charged families no address naming the claim has yet.
func unsettled(uid types.UID, ch Charge, namespace string, addresses []v1alpha1.IPAddress) []v1alpha1.IPFamily {
	var out []v1alpha1.IPFamily
	for _, f := range ch.Families {
		if !slices.ContainsFunc(addresses, func(a v1alpha1.IPAddress) bool { return covers(&a, namespace, ch.Claim, uid, ch.Class, f) }) {
			out = append(out, f)
		}
	}
	return out
}

// covers reports whether a stands for the claim's family f in class: its
// claimRef names the claim (bound to its UID, or pre-bound to its name and
// not Released — a Released pre-binding is no claim's, binding.PreBound)
// and it is of that class. A pre-binding of another class is one the binder
// refuses (contract §4 step 4): it settles no charge, or the claim would
// wait for an address nobody provisions.
func covers(a *v1alpha1.IPAddress, namespace, claim string, uid types.UID, class string, f v1alpha1.IPFamily) bool {
	ref := a.Spec.ClaimRef
	return ref != nil && ref.Namespace == namespace && ref.Name == claim &&
		(ref.UID == uid || ref.UID == "" && a.Status.Phase != v1alpha1.AddressReleased) &&
		a.Spec.ClassName == class && binding.Family(a) == f
}

// Request is a claim asking to be charged for families of class.
type Request struct {
	Claim    string
	UID      types.UID
	Class    string
	Families []v1alpha1.IPFamily
}

// Decision is what charging a request against one quota comes to.
type Decision struct {
	// Charges is the quota's record after the charge; nil when it does not
	// change (already charged, or refused with nothing to drop).
	Charges Charges
	// Refusal says why the request does not fit; empty when it does.
	Refusal string
}

// Decide charges req against rq, whose current charges are charges and
// whose namespace's addresses (read from the API server) are addresses.
// What the claim was charged and no longer asks for (Stale: another
// class, another family — its spec changed while it waited) is dropped: it
// neither counts for the new request nor keeps its room, whether or not
// the new charge fits.
func Decide(rq *corev1.ResourceQuota, req Request, charges Charges, addresses []v1alpha1.IPAddress) Decision {
	dropped := Stale(charges, req.UID, req.Class, req.Families)
	if dropped != nil {
		charges = dropped
	}
	keys := Keys(rq, req.Class)
	var need []v1alpha1.IPFamily
	for _, f := range req.Families {
		if !charges.Holds(req.UID, req.Class, f) && !slices.ContainsFunc(addresses, func(a v1alpha1.IPAddress) bool {
			return covers(&a, rq.Namespace, req.Claim, req.UID, req.Class, f)
		}) {
			need = append(need, f)
		}
	}
	if len(keys) == 0 || len(need) == 0 {
		return Decision{Charges: dropped}
	}
	used := Usage(rq, addresses, charges)
	for _, k := range keys {
		hard, have := rq.Spec.Hard[k], used[k]
		if have.Value()+int64(len(need)) > hard.Value() {
			return Decision{Charges: dropped, Refusal: exceeded(rq, k, have.Value(), len(need), addresses)}
		}
	}
	out := charges.without("")
	ch := out[req.UID]
	ch.Claim, ch.Class = req.Claim, req.Class
	ch.Families = append(slices.Clone(ch.Families), need...)
	sort.Slice(ch.Families, func(i, j int) bool { return ch.Families[i] < ch.Families[j] })
	out[req.UID] = ch
	return Decision{Charges: out}
}

// Stale is rq's record without what the claim uid, now asking for
// families of class, no longer asks for: a charge of another class, or of
// a family it dropped (its spec changed while it waited). nil when nothing
// is stale.
func Stale(charges Charges, uid types.UID, class string, families []v1alpha1.IPFamily) Charges {
	ch, ok := charges[uid]
	if !ok {
		return nil
	}
	keep := slices.DeleteFunc(slices.Clone(ch.Families), func(f v1alpha1.IPFamily) bool { return ch.Class != class || !slices.Contains(families, f) })
	if len(keep) == len(ch.Families) {
		return nil
	}
	out := charges.without(uid)
	if len(keep) > 0 {
		ch.Families = keep
		out[uid] = ch
	}
	return out
}

// without is a copy of c without uid's charge.
func (c Charges) without(uid types.UID) Charges {
	out := make(Charges, len(c))
	for k, ch := range c {
		if k != uid {
			out[k] = ch
		}
	}
	return out
}

// Prune drops the charges that are settled (every family has an address
// naming the claim) or whose claim is gone (live reports whether a claim
// UID still exists). It returns nil when nothing is dropped.
func Prune(rq *corev1.ResourceQuota, charges Charges, addresses []v1alpha1.IPAddress, live func(types.UID) bool) Charges {
	out := Charges{}
	for uid, ch := range charges {
		if live(uid) && len(unsettled(uid, ch, rq.Namespace, addresses)) > 0 {
			out[uid] = ch
		}
	}
	if len(out) == len(charges) {
		return nil
	}
	return out
}

// exceeded says that quota rq has no room on key k for need more
// addresses, naming the quota, the key and the numbers — and how many of
// those in use are Released: a tenant counting its claims would otherwise
// not see what fills the quota (an address kept in the namespace, or one
// a Retain class leaves until an administrator deletes or recycles it).
func exceeded(rq *corev1.ResourceQuota, k corev1.ResourceName, used int64, need int, addresses []v1alpha1.IPAddress) string {
	hard := rq.Spec.Hard[k]
	msg := fmt.Sprintf("exceeded quota: ResourceQuota %s limits %s in namespace %s to %d; %d are in use and the claim needs %d more",
		rq.Name, k, rq.Namespace, hard.Value(), used, need)
	if n := released(rq.Namespace, k, addresses); n > 0 {
		msg += fmt.Sprintf("; %d of those in use %s Released, still the namespace's until recycled or deleted", n, map[bool]string{true: "is", false: "are"}[n == 1])
	}
	return msg
}

// released counts the Released addresses of namespace that count on key k.
func released(namespace string, k corev1.ResourceName, addresses []v1alpha1.IPAddress) int {
	n := 0
	for i := range addresses {
		a := &addresses[i]
		if a.Status.Phase == v1alpha1.AddressReleased && a.Spec.ClaimRef != nil && a.Spec.ClaimRef.Namespace == namespace &&
			(k == AllClasses || k == ClassKey(a.Spec.ClassName)) {
			n++
		}
	}
	return n
}

// Admit is the early refusal at the creation of claim (its name) of
// class: the first quota among quotas whose limit on class the namespace's
// usage (addresses and charges, as a cache shows them) already leaves no
// room for the families that need a new address, said as a denial; "" when
// every quota has room. A family an address of the namespace already
// stands for needs no room, for it counts already: one pre-bound to the
// claim's name, or — where the class keeps Released addresses in their
// namespace (keep) — a Released one the claim would take back. An address
// an earlier claim of the name still holds (its UID) is no new claim's, as
// for the binder's charge (covers). The exact judgement is the binder's
// charge; this only spares a tenant a claim that could not bind.
func Admit(quotas []corev1.ResourceQuota, claim, class string, families []v1alpha1.IPFamily, keep bool, addresses []v1alpha1.IPAddress) string {
	need := 0
	for _, f := range families {
		if !slices.ContainsFunc(addresses, func(a v1alpha1.IPAddress) bool { return standsFor(&a, claim, class, f, keep) }) {
			need++
		}
	}
	if need == 0 {
		return ""
	}
	for i := range quotas {
		rq := &quotas[i]
		used := Usage(rq, addresses, ChargesOf(rq))
		for _, k := range Keys(rq, class) {
			hard, have := rq.Spec.Hard[k], used[k]
			if have.Value()+int64(need) > hard.Value() {
				return exceeded(rq, k, have.Value(), need, addresses)
			}
		}
	}
	return ""
}

// standsFor reports whether address a, of the claim's namespace, would
// serve a new claim of that name for family f of class without a new
// place (Admit).
func standsFor(a *v1alpha1.IPAddress, claim, class string, f v1alpha1.IPFamily, keep bool) bool {
	ref := a.Spec.ClaimRef
	return ref != nil && a.DeletionTimestamp == nil && a.Spec.ClassName == class && binding.Family(a) == f &&
		(ref.Name == claim && ref.UID == "" && a.Status.Phase != v1alpha1.AddressReleased || keep && a.Status.Phase == v1alpha1.AddressReleased)
}
