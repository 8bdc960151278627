package webhook

import (
	"fmt"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

func newAddress(mods ...func(*v1alpha1.IPAddress)) *v1alpha1.IPAddress {
	a := &v1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-7"},
		Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.7", ClassName: "public", ReclaimPolicy: v1alpha1.ReclaimRetain,
			Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}},
	}
	for _, m := range mods {
		m(a)
	}
	return a
}

func ip(addr, name string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) { a.Spec.Address, a.Name = addr, name }
}

func boundTo(namespace, name, uid string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: namespace, Name: name, UID: types.UID(uid)}
	}
}

func addrPhase(ph v1alpha1.AddressPhase) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) { a.Status.Phase = ph }
}

func holding(name string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.Holding = &v1alpha1.Holding{Workload: &v1alpha1.HeldReference{Kind: "Service", Namespace: "tenant", Name: name, UID: "uid-" + types.UID(name)}}
	}
}

func associated(name string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.AssociatedTo = &v1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: name}
	}
}

// cond sets a condition of type t with status s.
func cond(t string, s metav1.ConditionStatus) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.Conditions = append(a.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: "Test", LastTransitionTime: deletedAt})
	}
}

// coreBound is the Bound condition the core writes with phase Bound.
var coreBound = cond(v1alpha1.ConditionBound, metav1.ConditionTrue)

func TestValidateAddressCreate(t *testing.T) {
	root := (*field.Path)(nil)
	badIP := func(addr, detail string) field.ErrorList {
		return field.ErrorList{field.Invalid(root.Child("spec", "address"), addr, detail)}
	}
	for _, tc := range []struct {
		name string
		a    *v1alpha1.IPAddress
		want field.ErrorList
	}{
		{"an IPv4 address named after its IP passes", newAddress(), nil},
		{"an IPv6 address named after its IP passes", newAddress(ip("2001:db8::7", "ip-2001-db8--7")), nil},
		{"an IPv6 address ending in :: passes with the 0-suffixed name", newAddress(ip("2001:db8::", "ip-2001-db8--0")), nil},
		{"a name not derived from the IP is refused on metadata.name, naming the expected one",
			newAddress(ip("203.0.113.7", "web-address")),
			field.ErrorList{field.Invalid(root.Child("metadata", "name"), "web-address",
				"must be ip-203-0-113-7, the name derived from spec.address 203.0.113.7")}},
		{"the name of another IP is refused",
			newAddress(ip("203.0.113.8", "ip-203-0-113-7")),
			field.ErrorList{field.Invalid(root.Child("metadata", "name"), "ip-203-0-113-7",
				"must be ip-203-0-113-8, the name derived from spec.address 203.0.113.8")}},
		{"an IPv6 address in upper case is refused on spec.address", newAddress(ip("2001:DB8::7", "ip-2001-db8--7")),
			badIP("2001:DB8::7", `"2001:DB8::7" is not in canonical form; write it as "2001:db8::7"`)},
		{"an IPv4-mapped IPv6 address is refused", newAddress(ip("::ffff:203.0.113.7", "ip-203-0-113-7")),
			badIP("::ffff:203.0.113.7", `"::ffff:203.0.113.7" is an IPv4-mapped IPv6 address; write it as IPv4`)},
		{"an address with a zone is refused", newAddress(ip("fe80::1%eth0", "ip-fe80--1")),
			badIP("fe80::1%eth0", `"fe80::1%eth0" has a zone; an IPAddress records an IP without one`)},
		{"a prefix is refused", newAddress(ip("203.0.113.0/24", "ip-203-0-113-0")),
			badIP("203.0.113.0/24", `"203.0.113.0/24" is not an IP address`)},
		{"an empty address is refused", newAddress(ip("", "ip-")), badIP("", `"" is not an IP address`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateAddressCreate(tc.a, nil), tc.want)
		})
	}
}

func TestValidateAddressUpdate(t *testing.T) {
	claimRef := specPath.Child("claimRef")
	uid := claimRef.Child("uid")
	var (
		bind     = field.ErrorList{field.Forbidden(claimRef, msgBind)}
		complete = field.ErrorList{field.Forbidden(uid, msgCompleteUID)}
		unbind   = field.ErrorList{field.Forbidden(claimRef, msgClearBind)}
		repoint  = field.ErrorList{field.Forbidden(claimRef, msgRepoint)}
		reUID    = field.ErrorList{field.Forbidden(uid, msgRepoint)}
	)
	preBound, bound := boundTo("tenant", "web", ""), boundTo("tenant", "web", "uid-web")
	for _, tc := range []struct {
		name     string
		u        authenticationv1.UserInfo
		old, new *v1alpha1.IPAddress
		want     field.ErrorList
	}{
		{"nobody can change spec.address, not even the core", core, newAddress(), newAddress(ip("203.0.113.8", "ip-203-0-113-7")),
			field.ErrorList{field.Invalid(specPath.Child("address"), "203.0.113.8", "field is immutable")}},
		{"an admin cannot change spec.className", admin, newAddress(),
			newAddress(func(a *v1alpha1.IPAddress) { a.Spec.ClassName = "private" }),
			field.ErrorList{field.Invalid(specPath.Child("className"), "private", "field is immutable")}},
		{"a driver cannot change spec.source", driver, newAddress(),
			newAddress(func(a *v1alpha1.IPAddress) {
				a.Spec.Source = v1alpha1.AddressSource{ProviderRef: &v1alpha1.ProviderReference{ID: "eipalloc-1"}}
			}),
			field.ErrorList{field.Invalid(specPath.Child("source"), v1alpha1.AddressSource{ProviderRef: &v1alpha1.ProviderReference{ID: "eipalloc-1"}},
				"field is immutable")}},
		{"an admin can change reclaimPolicy", admin, newAddress(bound),
			newAddress(bound, func(a *v1alpha1.IPAddress) { a.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete }), nil},
		{"an update that leaves the spec as it was passes for a tenant", tenant, newAddress(bound, addrPhase(v1alpha1.AddressBound)),
			newAddress(bound, func(a *v1alpha1.IPAddress) { a.Labels = map[string]string{"team": "a"} }), nil},

		{"the core can bind an unbound address", core, newAddress(), newAddress(bound), nil},
		{"7-3 a driver cannot bind an existing address", driver, newAddress(), newAddress(preBound), bind},
		{"an admin cannot bind an existing address", admin, newAddress(), newAddress(preBound), bind},
		{"a tenant cannot bind an address", tenant, newAddress(), newAddress(bound), bind},

		{"the core can complete the uid of a pre-binding", core, newAddress(preBound), newAddress(bound), nil},
		{"a driver cannot complete the uid of its pre-binding", driver, newAddress(preBound), newAddress(bound), complete},
		{"an admin cannot complete the uid of a pre-binding", admin, newAddress(preBound), newAddress(bound), complete},
		{"a tenant cannot complete the uid of a pre-binding", tenant, newAddress(preBound), newAddress(bound), complete},

		{"the core can clear a binding", core, newAddress(bound), newAddress(), nil},
		{"an admin can clear a binding", admin, newAddress(bound, addrPhase(v1alpha1.AddressReleased)), newAddress(addrPhase(v1alpha1.AddressReleased)), nil},
		{"a member of a listed admin group can clear a pre-binding",
			authenticationv1.UserInfo{Username: "oidc:root", Groups: []string{"cozystack-cluster-admin"}}, newAddress(preBound), newAddress(), nil},
		{"the core can clear a Bound address's binding", core, newAddress(bound, addrPhase(v1alpha1.AddressBound)), newAddress(addrPhase(v1alpha1.AddressBound)), nil},
		{"a driver cannot clear a binding", driver, newAddress(bound), newAddress(), unbind},
		{"a tenant cannot clear a binding", tenant, newAddress(bound), newAddress(), unbind},

		{"the core cannot re-point a binding to another claim", core, newAddress(bound), newAddress(boundTo("tenant", "api", "uid-api")), repoint},
		{"the core binds a Released address to another claim of its namespace (keepReleasedInNamespace)", core,
			newAddress(bound, addrPhase(v1alpha1.AddressReleased)), newAddress(boundTo("tenant", "api", "uid-api")), nil},
		{"the core binds a Released address to a new claim of the same name", core,
			newAddress(bound, addrPhase(v1alpha1.AddressReleased)), newAddress(boundTo("tenant", "web", "uid-web-2")), nil},
		{"the core never moves a Released address to another namespace", core,
			newAddress(bound, addrPhase(v1alpha1.AddressReleased)), newAddress(boundTo("other", "api", "uid-api")), repoint},
		{"an admin cannot re-bind a Released address", admin,
			newAddress(bound, addrPhase(v1alpha1.AddressReleased)), newAddress(boundTo("tenant", "api", "uid-api")), repoint},
		{"an admin cannot re-point a binding to another namespace", admin, newAddress(bound), newAddress(boundTo("other", "web", "uid-web")), repoint},
		{"a driver cannot re-point its pre-binding", driver, newAddress(preBound), newAddress(boundTo("tenant", "api", "")), repoint},
		{"the core cannot change a completed uid", core, newAddress(bound), newAddress(boundTo("tenant", "web", "uid-web-2")), reUID},
		{"an admin cannot remove a completed uid", admin, newAddress(bound), newAddress(preBound), reUID},

		{"a change of address and a re-pointed binding are both reported", core, newAddress(bound),
			newAddress(ip("203.0.113.8", "ip-203-0-113-7"), boundTo("tenant", "api", "uid-api")),
			field.ErrorList{field.Invalid(specPath.Child("address"), "203.0.113.8", "field is immutable"), repoint[0]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateAddressUpdate(tc.old, tc.new, nil, tc.u, principals, specPath), tc.want)
		})
	}
}

func TestValidateAddressStatusUpdate(t *testing.T) {
	phase, assoc, conds := statusPath.Child("phase"), statusPath.Child("associatedTo"), statusPath.Child("conditions")
	var (
		corePhase    = field.ErrorList{field.Forbidden(phase, msgCorePhase)}
		driverPhase  = field.ErrorList{field.Forbidden(phase, msgDriverPhase)}
		notAssoc     = field.ErrorList{field.Forbidden(assoc, msgAssociated)}
		notHolding   = field.ErrorList{field.Forbidden(statusPath.Child("holding"), msgHolding)}
		notBound     = field.ErrorList{field.Forbidden(conds.Key("Bound"), msgCoreBound)}
		notInBackend = field.ErrorList{field.Forbidden(conds.Key("InBackend"), "only a driver writes the InBackend condition (the drivers are the core's --driver-usernames, the chart's driverUsernames)")}
	)
	st := newAddress
	var (
		available = addrPhase(v1alpha1.AddressAvailable)
		bound     = addrPhase(v1alpha1.AddressBound)
		released  = addrPhase(v1alpha1.AddressReleased)
		conflict  = addrPhase(v1alpha1.AddressConflict)
		lost      = addrPhase(v1alpha1.AddressLost)
	)
	for _, tc := range []struct {
		name     string
		u        authenticationv1.UserInfo
		old, new *v1alpha1.IPAddress
		want     field.ErrorList
	}{
		{"the core can set the first phase", core, st(), st(addrPhase(v1alpha1.AddressPending)), nil},
		{"the core can make a Pending address Available", core, st(addrPhase(v1alpha1.AddressPending)), st(available), nil},
		{"the core can set Bound with its condition", core, st(available), st(bound, coreBound), nil},
		{"the core can set Released", core, st(bound, coreBound), st(released, cond(v1alpha1.ConditionBound, metav1.ConditionFalse)), nil},
		{"7-3 a driver cannot set Bound", driver, st(available), st(bound), corePhase},
		{"an admin cannot set Released", admin, st(bound), st(released), corePhase},
		{"a tenant cannot set Bound", tenant, st(available), st(bound), corePhase},
		{"a tenant cannot clear the phase", tenant, st(bound), st(), corePhase},

		{"a driver can set Conflict", driver, st(bound), st(conflict), nil},
		{"a driver can set Lost", driver, st(available), st(lost), nil},
		{"a driver can clear Conflict back to Bound", driver, st(conflict), st(bound), nil},
		{"a driver can clear Lost back to Released", driver, st(lost), st(released), nil},
		{"a driver can move Conflict to Lost", driver, st(conflict), st(lost), nil},
		{"the core cannot set Conflict", core, st(bound), st(conflict), driverPhase},
		{"the core cannot clear Lost", core, st(lost), st(bound), driverPhase},
		{"an admin cannot clear Conflict", admin, st(conflict), st(available), driverPhase},
		{"a tenant cannot set Lost", tenant, st(bound), st(lost), driverPhase},

		{"a driver can set associatedTo", driver, st(bound), st(bound, associated("web")), nil},
		{"a driver can move associatedTo to another workload", driver, st(bound, associated("web")), st(bound, associated("api")), nil},
		{"a driver can clear associatedTo", driver, st(bound, associated("web")), st(bound), nil},
		{"the core cannot set associatedTo", core, st(bound), st(bound, associated("web")), notAssoc},
		{"an admin cannot clear associatedTo", admin, st(bound, associated("web")), st(bound), notAssoc},
		{"a tenant cannot set associatedTo", tenant, st(bound), st(bound, associated("web")), notAssoc},
		{"a driver can record where it holds the address", driver, st(bound), st(bound, holding("web")), nil},
		{"an admin cannot rewrite the driver's holding record", admin, st(bound, holding("web")), st(bound, holding("forged")), notHolding},
		{"a tenant cannot write the driver's holding record", tenant, st(bound), st(bound, holding("forged")), notHolding},
		{"the core cannot clear the driver's holding record", core, st(bound, holding("web")), st(bound), notHolding},

		{"the core can change the Bound condition", core, st(bound, coreBound), st(bound, cond(v1alpha1.ConditionBound, metav1.ConditionUnknown)), nil},
		{"a driver cannot write the Bound condition", driver, st(bound), st(bound, coreBound), notBound},
		{"a driver cannot remove the Bound condition", driver, st(bound, coreBound), st(bound), notBound},
		{"a tenant cannot write the Bound condition", tenant, st(bound, coreBound), st(bound, cond(v1alpha1.ConditionBound, metav1.ConditionFalse)), notBound},
		{"a driver can write Held and Conflict", driver, st(bound),
			st(bound, cond(v1alpha1.ConditionInBackend, metav1.ConditionTrue), cond(v1alpha1.ConditionConflict, metav1.ConditionFalse)), nil},
		{"a driver can add a condition of its own", driver, st(bound), st(bound, cond("Pinned", metav1.ConditionTrue)), nil},
		{"the core cannot write the InBackend condition", core, st(bound), st(bound, cond(v1alpha1.ConditionInBackend, metav1.ConditionTrue)), notInBackend},
		{"the core cannot write a driver's own condition", core, st(bound), st(bound, cond("Pinned", metav1.ConditionTrue)),
			field.ErrorList{field.Forbidden(conds.Key("Pinned"), "only a driver writes the Pinned condition (the drivers are the core's --driver-usernames, the chart's driverUsernames)")}},
		{"an admin cannot remove the Conflict condition", admin, st(bound, cond(v1alpha1.ConditionConflict, metav1.ConditionFalse)), st(bound),
			field.ErrorList{field.Forbidden(conds.Key("Conflict"), "only a driver writes the Conflict condition (the drivers are the core's --driver-usernames, the chart's driverUsernames)")}},

		{"a driver setting Lost beside the core's Bound condition passes", driver,
			st(bound, coreBound, associated("web")), st(lost, coreBound, cond(v1alpha1.ConditionInBackend, metav1.ConditionFalse), associated("web")), nil},
		{"a write that leaves the status as it was passes for a tenant", tenant,
			st(bound, coreBound, associated("web")), st(bound, coreBound, associated("web")), nil},
		{"a tenant rewriting the status gets one error per field, conditions by type", tenant,
			st(bound, coreBound, cond(v1alpha1.ConditionInBackend, metav1.ConditionTrue)),
			st(conflict, associated("web"), cond(v1alpha1.ConditionInBackend, metav1.ConditionFalse)),
			field.ErrorList{driverPhase[0], notAssoc[0], notBound[0], notInBackend[0]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateAddressStatusUpdate(tc.old, tc.new, tc.u, principals, statusPath), tc.want)
		})
	}
}

// TestValidatePreBinding: an address is created pre-bound only to a claim
// that exists, and with its UID or none.
// An admin clears a binding only when no live claim holds it (its uid
// names one), whatever the phase says: a claim taking a Released address
// back holds it before its phase is Bound, and a Lost address whose claim
// is gone is the admin's to recycle.
func TestValidateAddressUpdateClearsOnlyUnheldBindings(t *testing.T) {
	claimRef := specPath.Child("claimRef")
	bound := boundTo("tenant", "web", "uid-web")
	web := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "uid-web"}}
	live := field.ErrorList{field.Forbidden(claimRef, fmt.Sprintf(msgClearLive, "tenant", "web", "uid-web"))}
	for _, tc := range []struct {
		name   string
		phase  v1alpha1.AddressPhase
		holder *v1alpha1.IPAddressClaim
		want   field.ErrorList
	}{
		{"Bound, its claim live", v1alpha1.AddressBound, web, live},
		{"Lost, its claim live", v1alpha1.AddressLost, web, live},
		{"not yet judged by the core, its claim live", "", web, live},
		{"Released, taken back by a claim a moment ago", v1alpha1.AddressReleased, web, live},
		{"Released, its claim gone", v1alpha1.AddressReleased, nil, nil},
		{"Lost, its claim gone", v1alpha1.AddressLost, nil, nil},
		{"Conflict, its claim gone", v1alpha1.AddressConflict, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateAddressUpdate(newAddress(bound, addrPhase(tc.phase)), newAddress(addrPhase(tc.phase)), tc.holder, admin, principals, specPath), tc.want)
		})
	}
	ref := newAddress(bound).Spec.ClaimRef
	deleting := web.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, c := range []*v1alpha1.IPAddressClaim{nil, deleting, {ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "uid-web-2"}}} {
		if Holder(ref, c) != nil {
			t.Errorf("Holder(%v) is not nil: a claim gone, being deleted or of another uid holds nothing", c)
		}
	}
	if Holder(ref, web) != web {
		t.Error("the live claim of the uid holds the binding")
	}
}

func TestValidatePreBinding(t *testing.T) {
	spec := field.NewPath("spec")
	claim := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "uid-web"}}
	ref := func(uid types.UID) *v1alpha1.ClaimReference {
		return &v1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: uid}
	}
	deleting := claim.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name  string
		ref   *v1alpha1.ClaimReference
		claim *v1alpha1.IPAddressClaim
		want  field.ErrorList
	}{
		{"1 not pre-bound", nil, nil, nil},
		{"2 pre-bound to a claim that exists, without its UID", ref(""), claim, nil},
		{"3 pre-bound with the claim's UID", ref("uid-web"), claim, nil},
		{"4 pre-bound to a claim that does not exist", ref(""), nil, field.ErrorList{field.Invalid(spec.Child("claimRef"), "tenant/web",
			"IPAddressClaim tenant/web does not exist; create the claim first, then the address pre-bound to it (an address bound to no claim is reclaimed)")}},
		{"5 pre-bound with an earlier claim's UID", ref("uid-old"), claim, field.ErrorList{field.Invalid(spec.Child("claimRef", "uid"), types.UID("uid-old"),
			"IPAddressClaim tenant/web has UID uid-web; leave uid empty, the core completes it")}},
		{"6 pre-bound to a claim being deleted (a driver's create racing an auto-claim's deletion)", ref("uid-web"), deleting,
			field.ErrorList{field.Invalid(spec.Child("claimRef"), "tenant/web",
				"IPAddressClaim tenant/web is being deleted; an address pre-bound to it would be reclaimed as soon as it goes")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidatePreBinding(tc.ref, tc.claim, spec), tc.want)
		})
	}
}

// An address a live claim holds is never deleted in the foreground: the
// garbage collector would delete its placeholder first. Any other goes as
// asked.
func TestValidateAddressDelete(t *testing.T) {
	holder := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"}}
	path := (*field.Path)(nil).Child("propagationPolicy")
	for _, tc := range []struct {
		name   string
		policy *metav1.DeletionPropagation
		holder *v1alpha1.IPAddressClaim
		want   field.ErrorList
	}{
		{"held, no policy: the default, Background", nil, holder, nil},
		{"held, Background", ptr.To(metav1.DeletePropagationBackground), holder, nil},
		{"held, Orphan", ptr.To(metav1.DeletePropagationOrphan), holder, nil},
		{"held, Foreground: refused on the field, naming the claim", ptr.To(metav1.DeletePropagationForeground), holder,
			field.ErrorList{field.Invalid(path, metav1.DeletePropagationForeground,
				"IPAddressClaim tenant/web holds the address, and a foreground deletion would delete its hold on the IP first; delete it in the background (the default), or delete the claim")}},
		{"no live claim holds it, Foreground: it goes at once anyway", ptr.To(metav1.DeletePropagationForeground), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateAddressDelete(&metav1.DeleteOptions{PropagationPolicy: tc.policy}, tc.holder, nil), tc.want)
		})
	}
}
