package webhook

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/fakeapi"
)

var (
	specPath   = field.NewPath("spec")
	statusPath = field.NewPath("status")
)

func newClaim(mods ...func(*v1alpha1.IPAddressClaim)) *v1alpha1.IPAddressClaim {
	c := &v1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "uid-web"},
		Spec:       v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv4},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func claimPhase(ph v1alpha1.ClaimPhase) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Status.Phase = ph }
}

// boundClaim is a claim as the core leaves it once bound.
func boundClaim(c *v1alpha1.IPAddressClaim) {
	c.Status = v1alpha1.IPAddressClaimStatus{
		Phase:     v1alpha1.ClaimBound,
		ClassName: "public",
		Addresses: []v1alpha1.ClaimedAddress{{Name: "ip-203-0-113-7", Address: "203.0.113.7"}},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionBound, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonBound, Message: "bound to 203.0.113.7", LastTransitionTime: deletedAt}},
	}
}

func className(n string) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Spec.ClassName = n }
}

func family(f v1alpha1.IPFamily) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Spec.Family = f }
}

func addressName(n string) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Spec.AddressName = n }
}

func TestValidateClaimUpdate(t *testing.T) {
	forbidden := func(f string) *field.Error { return field.Forbidden(specPath.Child(f), msgClaimBound) }
	for _, tc := range []struct {
		name     string
		old, new *v1alpha1.IPAddressClaim
		want     field.ErrorList
	}{
		{"a pending claim can be re-targeted at another class",
			newClaim(claimPhase(v1alpha1.ClaimPending)), newClaim(className("private")), nil},
		{"a claim without status can change class, family and addressName",
			newClaim(), newClaim(className("private"), family(v1alpha1.IPv6), addressName("ip-2001-db8--7")), nil},
		{"a bound claim cannot change its class",
			newClaim(boundClaim), newClaim(boundClaim, className("private")), field.ErrorList{forbidden("className")}},
		{"a bound claim cannot drop its class",
			newClaim(boundClaim), newClaim(boundClaim, className("")), field.ErrorList{forbidden("className")}},
		{"a bound claim cannot change its family",
			newClaim(boundClaim), newClaim(boundClaim, family(v1alpha1.Dual)), field.ErrorList{forbidden("family")}},
		{"a bound claim cannot set addressName",
			newClaim(boundClaim), newClaim(boundClaim, addressName("ip-203-0-113-8")), field.ErrorList{forbidden("addressName")}},
		{"a bound claim reports each field it changes",
			newClaim(boundClaim, addressName("ip-203-0-113-7")),
			newClaim(boundClaim, className("private"), family(v1alpha1.IPv6), addressName("ip-2001-db8--7")),
			field.ErrorList{forbidden("className"), forbidden("family"), forbidden("addressName")}},
		{"a Lost claim counts as bound",
			newClaim(claimPhase(v1alpha1.ClaimLost)), newClaim(claimPhase(v1alpha1.ClaimLost), className("private")),
			field.ErrorList{forbidden("className")}},
		{"a Pending claim still reporting an address counts as bound",
			newClaim(boundClaim, claimPhase(v1alpha1.ClaimPending)), newClaim(boundClaim, claimPhase(v1alpha1.ClaimPending), family(v1alpha1.Dual)),
			field.ErrorList{forbidden("family")}},
		{"a bound claim can spell out its empty family as IPv4",
			newClaim(boundClaim, family("")), newClaim(boundClaim, family(v1alpha1.IPv4)), nil},
		{"a bound claim can edit everything but its class, family and addressName",
			newClaim(boundClaim), newClaim(boundClaim, func(c *v1alpha1.IPAddressClaim) { c.Labels = map[string]string{"app": "web"} }), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateClaimUpdate(tc.old, tc.new, false, specPath), tc.want)
		})
	}
}

// A spec.addressName no IPAddress can have, or of another family than the
// claim's, is refused on the field: the claim would wait for it for good.
func TestValidateClaimAddressName(t *testing.T) {
	invalid := func(v, detail string) field.ErrorList {
		return field.ErrorList{field.Invalid(specPath.Child("addressName"), v, detail)}
	}
	const naming = "no IPAddress has this name: an IPAddress is named ip- followed by its IP with '.' and ':' replaced by '-', and 0 appended to a trailing '-' (ip-203-0-113-7, ip-2001-db8--7, ip-2001-db8--0 for 2001:db8::)"
	for _, tc := range []struct {
		name  string
		claim *v1alpha1.IPAddressClaim
		want  field.ErrorList
	}{
		{"none", newClaim(), nil},
		{"an IPv4 address's name", newClaim(addressName("ip-203-0-113-7")), nil},
		{"an IPv6 address's name on an IPv6 claim", newClaim(family(v1alpha1.IPv6), addressName("ip-2001-db8--0")), nil},
		{"an IP instead of its name", newClaim(addressName("203.0.113.7")),
			invalid("203.0.113.7", "is an IP, not the name of an IPAddress; the IPAddress of 203.0.113.7 is named ip-203-0-113-7")},
		{"an IPv6 written long instead of its name", newClaim(family(v1alpha1.IPv6), addressName("2001:DB8:0::7")),
			invalid("2001:DB8:0::7", "is an IP, not the name of an IPAddress; the IPAddress of 2001:db8::7 is named ip-2001-db8--7")},
		{"a name without the prefix", newClaim(addressName("203-0-113-7")), invalid("203-0-113-7", naming)},
		{"a name of a non-canonical IP", newClaim(addressName("ip-203-0-113-07")), invalid("ip-203-0-113-07", naming)},
		{"an IPv6 address's name on a claim of the default family", newClaim(family(""), addressName("ip-2001-db8--7")),
			invalid("ip-2001-db8--7", "names an IPv6 address (2001:db8::7) and spec.family is IPv4")},
		{"an IPv4 address's name on an IPv6 claim", newClaim(family(v1alpha1.IPv6), addressName("ip-203-0-113-7")),
			invalid("ip-203-0-113-7", "names an IPv4 address (203.0.113.7) and spec.family is IPv6")},
		{"a family the schema refuses (ipv6): left to it, on spec.family", newClaim(family("ipv6"), addressName("ip-2001-db8--7")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateClaimAddressName(&tc.claim.Spec, specPath), tc.want)
		})
	}
}

// A claim an address holds already (its claimRef carries the claim's UID:
// a driver's new address), its status not yet written, counts as bound.
func TestValidateClaimUpdateWhileAnAddressHoldsIt(t *testing.T) {
	checkErrors(t, ValidateClaimUpdate(newClaim(), newClaim(family(v1alpha1.IPv6)), true, specPath),
		field.ErrorList{field.Forbidden(specPath.Child("family"), msgClaimBound)})
	checkErrors(t, ValidateClaimUpdate(newClaim(), newClaim(func(c *v1alpha1.IPAddressClaim) { c.Labels = map[string]string{"app": "web"} }), true, specPath), nil)
}

func TestValidateClaimStatusUpdate(t *testing.T) {
	denied := field.ErrorList{field.Forbidden(statusPath, msgClaimStatus)}
	addsCondition := func(c *v1alpha1.IPAddressClaim) {
		c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionClassResolved,
			Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonResolved, LastTransitionTime: deletedAt})
	}
	emptyLists := func(c *v1alpha1.IPAddressClaim) {
		c.Status.Addresses, c.Status.Conditions = []v1alpha1.ClaimedAddress{}, []metav1.Condition{}
	}
	for _, tc := range []struct {
		name     string
		u        authenticationv1.UserInfo
		old, new *v1alpha1.IPAddressClaim
		want     field.ErrorList
	}{
		{"the core can bind a claim", core, newClaim(claimPhase(v1alpha1.ClaimPending)), newClaim(boundClaim), nil},
		{"the core can mark a claim Lost", core, newClaim(boundClaim), newClaim(boundClaim, claimPhase(v1alpha1.ClaimLost)), nil},
		{"a tenant cannot set Bound", tenant, newClaim(claimPhase(v1alpha1.ClaimPending)), newClaim(claimPhase(v1alpha1.ClaimBound)), denied},
		{"a tenant cannot add an address", tenant, newClaim(claimPhase(v1alpha1.ClaimPending)), newClaim(boundClaim, claimPhase(v1alpha1.ClaimPending)), denied},
		{"a tenant cannot add a condition", tenant, newClaim(boundClaim), newClaim(boundClaim, addsCondition), denied},
		{"a tenant cannot change status.className", tenant, newClaim(boundClaim),
			newClaim(boundClaim, func(c *v1alpha1.IPAddressClaim) { c.Status.ClassName = "private" }), denied},
		{"a driver cannot set Bound", driver, newClaim(claimPhase(v1alpha1.ClaimPending)), newClaim(claimPhase(v1alpha1.ClaimBound)), denied},
		{"an admin cannot clear a claim's status", admin, newClaim(boundClaim), newClaim(), denied},
		{"a tenant's write that leaves the status as it was passes", tenant, newClaim(boundClaim), newClaim(boundClaim), nil},
		{"a driver's write that leaves the status as it was passes", driver, newClaim(boundClaim), newClaim(boundClaim), nil},
		{"empty lists in place of absent ones are no change", tenant, newClaim(), newClaim(emptyLists), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateClaimStatusUpdate(tc.old, tc.new, tc.u, principals, statusPath), tc.want)
		})
	}
}

func stamped(provisioner string) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.AnnotationProvisioner] = provisioner
	}
}

func autoClaimedFor(uid string) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.AnnotationAutoClaimedFor] = uid
	}
}

func TestValidateClaimStampUpdate(t *testing.T) {
	denied := field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationProvisioner), msgStamp)}
	other := func(c *v1alpha1.IPAddressClaim) { c.Annotations["note"] = "x" }
	for _, tc := range []struct {
		name     string
		u        authenticationv1.UserInfo
		old, new *v1alpha1.IPAddressClaim
		want     field.ErrorList
	}{
		{"the core stamps a claim", core, newClaim(), newClaim(stamped("metallb.example.com")), nil},
		{"the core re-stamps a re-targeted claim", core, newClaim(stamped("a.example.com")), newClaim(stamped("b.example.com")), nil},
		{"a tenant cannot stamp a claim", tenant, newClaim(), newClaim(stamped("metallb.example.com")), denied},
		{"a tenant cannot change the stamp", tenant, newClaim(stamped("a.example.com")), newClaim(stamped("b.example.com")), denied},
		{"a tenant cannot remove the stamp", tenant, newClaim(stamped("a.example.com")), newClaim(), denied},
		{"nor can a driver", driver, newClaim(), newClaim(stamped("metallb.example.com")), denied},
		{"nor an admin", admin, newClaim(stamped("a.example.com")), newClaim(stamped("")), denied},
		{"a tenant's edit that keeps the stamp passes", tenant, newClaim(stamped("a.example.com")), newClaim(stamped("a.example.com"), other), nil},
		{"a tenant cannot mark a claim auto-claimed", tenant, newClaim(), newClaim(autoClaimedFor("svc-uid")),
			field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationAutoClaimedFor), msgAutoClaimed)}},
		{"nor remove the mark", tenant, newClaim(autoClaimedFor("svc-uid")), newClaim(),
			field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationAutoClaimedFor), msgAutoClaimed)}},
		{"the core marks the claims it creates", core, newClaim(), newClaim(autoClaimedFor("svc-uid")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateClaimStampUpdate(tc.old, tc.new, tc.u, principals, nil), tc.want)
		})
	}
}

func TestDropForeignStamp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		u         authenticationv1.UserInfo
		claim     *v1alpha1.IPAddressClaim
		wantStamp bool
		warned    bool
	}{
		{"a tenant's stamp is removed, with a warning", tenant, newClaim(stamped("metallb.example.com")), false, true},
		{"so is an admin's (a restored backup)", admin, newClaim(stamped("metallb.example.com")), false, true},
		{"the core's stays", core, newClaim(stamped("metallb.example.com")), true, false},
		{"no stamp, nothing to say", tenant, newClaim(), false, false},
		{"a tenant's auto-claim mark is removed, with a warning", tenant, newClaim(autoClaimedFor("svc-uid")), false, true},
		{"the core's stays", core, newClaim(autoClaimedFor("svc-uid")), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := DropForeignStamp(tc.claim, tc.u, principals)
			_, has := tc.claim.Annotations[v1alpha1.AnnotationProvisioner]
			if _, marked := tc.claim.Annotations[v1alpha1.AnnotationAutoClaimedFor]; marked {
				has = true
			}
			if has != tc.wantStamp || (len(w) > 0) != tc.warned {
				t.Fatalf("stamp kept %v (want %v), warnings %q", has, tc.wantStamp, w)
			}
		})
	}
}

// An address carrying the claim's UID holds it whether the core's cache
// shows it yet or only the API server does (a driver's address just
// created); a stale binding (another UID) does not.
func TestHolding(t *testing.T) {
	claim := newClaim()
	bound := func(uid types.UID) client.Object {
		return &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-7"},
			Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.7", ClassName: "public",
				ClaimRef: &v1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: uid}}}
	}
	for _, tc := range []struct {
		name        string
		cache, live []client.Object
		want        bool
	}{
		{"1 cached", []client.Object{bound(claim.UID)}, nil, true},
		{"2 not cached yet, on the API server", nil, []client.Object{bound(claim.UID)}, true},
		{"3 a stale binding of an earlier claim of the name", []client.Object{bound("earlier")}, []client.Object{bound("earlier")}, false},
		{"4 none", nil, nil, false},
	} {
		h := handlers{reader: fakeapi.New(t, tc.cache), live: fakeapi.New(t, tc.live)}
		if got, err := h.holding(context.Background(), claim); err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestValidateFlagAnnotations: a flag annotation is "true" or "false";
// another value is refused on its key, unless the object carried it
// already.
func TestValidateFlagAnnotations(t *testing.T) {
	root := (*field.Path)(nil)
	held := root.Child("metadata", "annotations").Key(v1alpha1.AnnotationHeld)
	for _, tc := range []struct {
		name     string
		old, new map[string]string
		want     field.ErrorList
	}{
		{"1 true passes", nil, map[string]string{v1alpha1.AnnotationHeld: "true"}, nil},
		{"2 false passes", nil, map[string]string{v1alpha1.AnnotationHeld: "false"}, nil},
		{"3 absent passes", nil, nil, nil},
		{"4 True is refused on its key", nil, map[string]string{v1alpha1.AnnotationHeld: "True"},
			field.ErrorList{field.NotSupported(held, "True", []string{"true", "false"})}},
		{"5 yes written over true is refused", map[string]string{v1alpha1.AnnotationHeld: "true"}, map[string]string{v1alpha1.AnnotationHeld: "yes"},
			field.ErrorList{field.NotSupported(held, "yes", []string{"true", "false"})}},
		{"6 a value the object carried already is left alone", map[string]string{v1alpha1.AnnotationHeld: "yes"}, map[string]string{v1alpha1.AnnotationHeld: "yes"}, nil},
		{"7 other annotations are not judged", nil, map[string]string{"example.com/x": "yes"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateFlagAnnotations(tc.old, tc.new, AddressFlags, nil), tc.want)
		})
	}
}

// The claim a reference names is read from the API server when the cache
// lacks it or shows another UID (a claim re-created under the name): an
// admin's clear must be judged against the claim that holds the binding.
func TestClaimOfReadsPastARecreation(t *testing.T) {
	old, recreated := newClaim(), newClaim()
	old.UID, recreated.UID = "uid-a", "uid-b"
	ref := &v1alpha1.ClaimReference{Namespace: old.Namespace, Name: old.Name, UID: "uid-b"}
	for _, tc := range []struct {
		name        string
		cache, live []client.Object
		want        types.UID
	}{
		{"1 cached with the UID", []client.Object{recreated}, nil, "uid-b"},
		{"2 cached with an earlier UID, re-created on the API server", []client.Object{old}, []client.Object{recreated}, "uid-b"},
		{"3 not cached yet", nil, []client.Object{recreated}, "uid-b"},
		{"4 none", nil, nil, ""},
	} {
		h := handlers{reader: fakeapi.New(t, tc.cache), live: fakeapi.New(t, tc.live)}
		c, err := h.claimOf(context.Background(), ref)
		var got types.UID
		if c != nil {
			got = c.UID
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
