package webhook

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

var deletedAt = metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

// class builds an IPAddressClass; mods annotate it or mark it deleted.
func class(name string, mods ...func(*v1alpha1.IPAddressClass)) v1alpha1.IPAddressClass {
	c := v1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.IPAddressClassSpec{Provisioner: "metallb.drivers.local.sdn.cozystack.io", ReclaimPolicy: v1alpha1.ReclaimRetain},
	}
	for _, m := range mods {
		m(&c)
	}
	return c
}

func annotated(key, value string) func(*v1alpha1.IPAddressClass) {
	return func(c *v1alpha1.IPAddressClass) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[key] = value
	}
}

var (
	isDefault   = annotated(v1alpha1.AnnotationDefaultClass, "true")
	isAutoClaim = annotated(v1alpha1.AnnotationAutoClaimClass, "true")
)

func beingDeleted(c *v1alpha1.IPAddressClass) {
	c.DeletionTimestamp = &deletedAt
	c.Finalizers = []string{v1alpha1.FinalizerClassProtection}
}

func TestDefaultClaim(t *testing.T) {
	const (
		noDefault = "spec.className is left empty: no IPAddressClass is annotated " +
			"ipaddressclass.local.sdn.cozystack.io/is-default-class: \"true\"; " +
			"the claim stays Pending until one is, or until it names a class"
		twoDefaults = "spec.className is left empty: 2 IPAddressClasses are annotated " +
			"ipaddressclass.local.sdn.cozystack.io/is-default-class: \"true\" (private, public); " +
			"the claim stays Pending until exactly one is, or until it names a class"
	)
	for _, tc := range []struct {
		name     string
		spec     v1alpha1.IPAddressClaimSpec
		classes  []v1alpha1.IPAddressClass
		want     v1alpha1.IPAddressClaimSpec
		warnings []string
	}{
		{"an empty family becomes IPv4",
			v1alpha1.IPAddressClaimSpec{ClassName: "public"}, []v1alpha1.IPAddressClass{class("public")},
			v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv4}, nil},
		{"a family that is set is kept",
			v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.Dual}, []v1alpha1.IPAddressClass{class("public")},
			v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.Dual}, nil},
		{"an empty className becomes the single default class",
			v1alpha1.IPAddressClaimSpec{}, []v1alpha1.IPAddressClass{class("private"), class("public", isDefault)},
			v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv4}, nil},
		{"addressName does not stop the class being defaulted",
			v1alpha1.IPAddressClaimSpec{Family: v1alpha1.IPv6, AddressName: "ip-2001-db8--7"}, []v1alpha1.IPAddressClass{class("public", isDefault)},
			v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv6, AddressName: "ip-2001-db8--7"}, nil},
		{"a default class being deleted is passed over for the one that is not",
			v1alpha1.IPAddressClaimSpec{}, []v1alpha1.IPAddressClass{class("old", isDefault, beingDeleted), class("public", isDefault)},
			v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv4}, nil},
		{"with no default class className stays empty, with a warning",
			v1alpha1.IPAddressClaimSpec{}, []v1alpha1.IPAddressClass{class("public")},
			v1alpha1.IPAddressClaimSpec{Family: v1alpha1.IPv4}, []string{noDefault}},
		{"with no class at all className stays empty, with a warning",
			v1alpha1.IPAddressClaimSpec{}, nil,
			v1alpha1.IPAddressClaimSpec{Family: v1alpha1.IPv4}, []string{noDefault}},
		{"a default class being deleted is no default, and the warning names it",
			v1alpha1.IPAddressClaimSpec{}, []v1alpha1.IPAddressClass{class("public", isDefault, beingDeleted)},
			v1alpha1.IPAddressClaimSpec{Family: v1alpha1.IPv4}, []string{"spec.className is left empty: the default IPAddressClass public is being deleted; " +
				"the claim stays Pending until another class is annotated ipaddressclass.local.sdn.cozystack.io/is-default-class: \"true\", or until it names a class"}},
		{"an annotation value other than \"true\" makes no default",
			v1alpha1.IPAddressClaimSpec{}, []v1alpha1.IPAddressClass{class("public", annotated(v1alpha1.AnnotationDefaultClass, "True"))},
			v1alpha1.IPAddressClaimSpec{Family: v1alpha1.IPv4}, []string{noDefault}},
		{"the auto-claim annotation makes no default",
			v1alpha1.IPAddressClaimSpec{}, []v1alpha1.IPAddressClass{class("public", isAutoClaim)},
			v1alpha1.IPAddressClaimSpec{Family: v1alpha1.IPv4}, []string{noDefault}},
		{"with two default classes className stays empty, with a warning naming both",
			v1alpha1.IPAddressClaimSpec{}, []v1alpha1.IPAddressClass{class("public", isDefault), class("private", isDefault)},
			v1alpha1.IPAddressClaimSpec{Family: v1alpha1.IPv4}, []string{twoDefaults}},
		{"a named class that exists is kept without a warning",
			v1alpha1.IPAddressClaimSpec{ClassName: "private"}, []v1alpha1.IPAddressClass{class("private"), class("public", isDefault)},
			v1alpha1.IPAddressClaimSpec{ClassName: "private", Family: v1alpha1.IPv4}, nil},
		{"a named class that does not exist is kept, with a warning",
			v1alpha1.IPAddressClaimSpec{ClassName: "later"}, []v1alpha1.IPAddressClass{class("public", isDefault)},
			v1alpha1.IPAddressClaimSpec{ClassName: "later", Family: v1alpha1.IPv4},
			[]string{"IPAddressClass later does not exist (yet): the claim stays Pending until it does"}},
		{"a named class being deleted is kept, with a warning",
			v1alpha1.IPAddressClaimSpec{ClassName: "old"}, []v1alpha1.IPAddressClass{class("old", beingDeleted)},
			v1alpha1.IPAddressClaimSpec{ClassName: "old", Family: v1alpha1.IPv4},
			[]string{"IPAddressClass old is being deleted: the claim stays Pending unless it is recreated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"}, Spec: tc.spec}
			warnings := DefaultClaim(claim, tc.classes)
			if diff := cmp.Diff(tc.want, claim.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// A claim restored from a backup comes with the status it had: it takes
// back the class it resolved to (status.className), not today's default,
// and a class it names is kept.
func TestDefaultClaimFromItsRestoredStatus(t *testing.T) {
	classes := []v1alpha1.IPAddressClass{class("kept"), class("public", isDefault), class("leaving", beingDeleted)}
	for _, tc := range []struct{ name, spec, resolved, want string }{
		{"restored: its former class", "", "kept", "kept"},
		{"restored before its class (a restore brings classes last): its former class", "", "later", "later"},
		{"restored, its class being deleted: the default, as for a new claim", "", "leaving", "public"},
		{"a class it names wins", "public", "kept", "public"},
		{"no status: the default", "", "", "public"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"},
				Spec: v1alpha1.IPAddressClaimSpec{ClassName: tc.spec}, Status: v1alpha1.IPAddressClaimStatus{ClassName: tc.resolved}}
			DefaultClaim(claim, classes)
			if claim.Spec.ClassName != tc.want {
				t.Errorf("spec.className = %q, want %q", claim.Spec.ClassName, tc.want)
			}
		})
	}
}

func TestDefaultClaimLeavesANilClaimAlone(t *testing.T) {
	if w := DefaultClaim(nil, []v1alpha1.IPAddressClass{class("public", isDefault)}); w != nil {
		t.Errorf("warnings = %q, want none", w)
	}
}

// The claim's first metadata write — protection finalizer and provisioner
// stamp — is made at admission, saving the reconciler a patch per claim.
func TestProtectClaim(t *testing.T) {
	const stamp = "metallb.drivers.local.sdn.cozystack.io"
	for _, tc := range []struct {
		name      string
		className string
		classes   []v1alpha1.IPAddressClass
		stamped   bool
	}{
		{"4-6 a class that exists: stamped", "public", []v1alpha1.IPAddressClass{class("private"), class("public")}, true},
		{"4-6 a class yet to exist: not stamped", "public", []v1alpha1.IPAddressClass{class("private")}, false},
		{"4-6 a class being deleted: not stamped", "public", []v1alpha1.IPAddressClass{class("public", beingDeleted)}, false},
		{"4-6 no class named: not stamped", "", []v1alpha1.IPAddressClass{class("public", isDefault)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &v1alpha1.IPAddressClaim{Spec: v1alpha1.IPAddressClaimSpec{ClassName: tc.className}}
			if got := ProtectClaim(claim, tc.classes); got != tc.stamped {
				t.Errorf("stamped = %v, want %v", got, tc.stamped)
			}
			if diff := cmp.Diff([]string{v1alpha1.FinalizerClaimProtection}, claim.Finalizers); diff != "" {
				t.Errorf("4-2 finalizers (-want +got):\n%s", diff)
			}
			want := ""
			if tc.stamped {
				want = stamp
			}
			if got := claim.Annotations[v1alpha1.AnnotationProvisioner]; got != want {
				t.Errorf("stamp = %q, want %q", got, want)
			}
		})
	}
}

// An address's protection finalizer is added at admission (contract 5-2)
// by a patch of the finalizers alone, saving the reconciler a patch per
// address an administrator creates; one that has it, or is being deleted,
// gets no patch.
func TestProtectAddress(t *testing.T) {
	const f = v1alpha1.FinalizerAddressProtection
	for _, tc := range []struct {
		name       string
		finalizers []string
		deleting   *metav1.Time
		want       []jsonpatch.JsonPatchOperation
	}{
		{"5-2 an address without finalizers gets the list", nil, nil,
			[]jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/finalizers", Value: []string{f}}}},
		{"5-2 one with another finalizer gets it appended", []string{"example.com/teardown"}, nil,
			[]jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/finalizers/-", Value: f}}},
		{"5-2 one that carries it gets no patch", []string{"example.com/teardown", f}, nil, nil},
		{"5-2 one being deleted gets no patch", []string{"example.com/teardown"}, &deletedAt, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Finalizers: tc.finalizers, DeletionTimestamp: tc.deleting}}
			if diff := cmp.Diff(tc.want, ProtectAddress(a)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
	if ProtectAddress(nil) != nil {
		t.Error("a nil address got a patch")
	}
}

// A new claim or address loses the field-tracking record its creator's
// request gave it, unless a server-side apply made it (package untrack).
func TestUntrack(t *testing.T) {
	update := metav1.ManagedFieldsEntry{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate}
	apply := metav1.ManagedFieldsEntry{Manager: "flux", Operation: metav1.ManagedFieldsOperationApply}
	remove := []jsonpatch.JsonPatchOperation{{Operation: "remove", Path: "/metadata/managedFields"}}
	for _, tc := range []struct {
		name      string
		entries   []metav1.ManagedFieldsEntry
		wantPatch []jsonpatch.JsonPatchOperation
		wantKept  []metav1.ManagedFieldsEntry
	}{
		{"a creator's update entry is dropped", []metav1.ManagedFieldsEntry{update}, remove, nil},
		{"an applied object keeps its record", []metav1.ManagedFieldsEntry{apply}, nil, []metav1.ManagedFieldsEntry{apply}},
		{"no record: no patch", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metav1.ObjectMeta{ManagedFields: tc.entries}
			if diff := cmp.Diff(tc.wantPatch, UntrackPatch(&m)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
			Untrack(&m)
			if diff := cmp.Diff(tc.wantKept, m.ManagedFields); diff != "" {
				t.Errorf("managedFields after Untrack (-want +got):\n%s", diff)
			}
		})
	}
}
