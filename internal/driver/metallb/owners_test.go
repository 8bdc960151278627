package metallb

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// owners knows the classes given: "lb" is the driver's, "static" another
// provisioner's; any other class is unknown.
func owners(t *testing.T) *ClassOwners {
	t.Helper()
	s := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for name, p := range map[string]string{"lb": Provisioner, "static": "static.example.com"} {
		if err := s.Add(&v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.IPAddressClassSpec{Provisioner: p}}); err != nil {
			t.Fatal(err)
		}
	}
	o := &ClassOwners{}
	o.store.Store(&s)
	return o
}

func wholeAddress(class string, finalizers ...string) *v1alpha1.IPAddress {
	return &v1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1", UID: "u", ResourceVersion: "7",
			Finalizers:    append([]string{v1alpha1.FinalizerAddressProtection}, finalizers...),
			Labels:        map[string]string{"team": "a"},
			Annotations:   map[string]string{"note": "x"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: v1alpha1.IPAddressSpec{Address: "192.0.2.1", ClassName: class, ReclaimPolicy: v1alpha1.ReclaimRetain,
			ClaimRef: &v1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: "c"},
			Source:   v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}},
		Status: v1alpha1.IPAddressStatus{Phase: v1alpha1.AddressBound,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionBound, Status: metav1.ConditionTrue, Reason: "Bound", Message: "bound to tenant/web"}}},
	}
}

// TestTransformAddress: an address of the driver's class, or one it holds,
// stays whole (managedFields aside); any other is kept in outline, which
// Outlined tells apart.
func TestTransformAddress(t *testing.T) {
	o := owners(t)
	for i, tc := range []struct {
		name       string
		class      string
		finalizers []string
		outline    bool
		spec       bool // the outline keeps the whole spec
	}{
		{"1: the driver's class", "lb", nil, false, false},
		{"2: held by the driver, its class gone", "gone", []string{FinalizerTeardown}, false, false},
		{"3: held by the driver, its class another's now", "static", []string{FinalizerTeardown}, false, false},
		{"4: another provisioner's class", "static", nil, true, false},
		{"5: a class the cache has not shown", "later", nil, true, true},
	} {
		got, err := o.TransformAddress(wholeAddress(tc.class, tc.finalizers...))
		if err != nil {
			t.Fatal(err)
		}
		in := wholeAddress(tc.class, tc.finalizers...)
		want := in.DeepCopy()
		want.ManagedFields = nil
		if tc.outline {
			want = &v1alpha1.IPAddress{
				ObjectMeta: metav1.ObjectMeta{Name: in.Name, ResourceVersion: in.ResourceVersion, Finalizers: in.Finalizers},
				Spec:       v1alpha1.IPAddressSpec{Address: in.Spec.Address, ClassName: in.Spec.ClassName},
				Status:     v1alpha1.IPAddressStatus{Phase: in.Status.Phase},
			}
			if tc.spec {
				want.Spec = in.Spec
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%d %s (-want +got):\n%s", i, tc.name, diff)
		}
		if Outlined(got.(*v1alpha1.IPAddress)) != tc.outline {
			t.Errorf("%d %s: Outlined is %v", i, tc.name, !tc.outline)
		}
	}
}

// TestRelevant: the events of addresses the driver neither holds nor could
// are filtered out, but their deletions; without owners every event passes.
func TestRelevant(t *testing.T) {
	for i, tc := range []struct {
		name   string
		owners *ClassOwners
		addr   *v1alpha1.IPAddress
		passes bool
	}{
		{"1: the driver's class", owners(t), wholeAddress("lb"), true},
		{"2: another's class", owners(t), wholeAddress("static"), false},
		{"3: another's class, held by the driver", owners(t), wholeAddress("static", FinalizerTeardown), true},
		{"4: a class not known yet", owners(t), wholeAddress("later"), true},
		{"5: no owners", nil, wholeAddress("static"), true},
	} {
		p := tc.owners.Relevant()
		got := []bool{p.Create(event.CreateEvent{Object: tc.addr}), p.Update(event.UpdateEvent{ObjectOld: tc.addr, ObjectNew: tc.addr}),
			p.Generic(event.GenericEvent{Object: tc.addr})}
		for j, passed := range got {
			if passed != tc.passes {
				t.Errorf("%d %s: event %d passed: %v", i, tc.name, j, passed)
			}
		}
		if !p.Delete(event.DeleteEvent{Object: tc.addr}) {
			t.Errorf("%d %s: a deletion was filtered out", i, tc.name)
		}
	}
}

// TestOwnersTransformClaim: the driver's claims stay whole; another
// provisioner's keep TransformClaim's outline less what only a claim of
// the driver's class could need (its UID and addresses); a claim whose
// class the cache has not shown keeps the whole outline.
func TestOwnersTransformClaim(t *testing.T) {
	o := owners(t)
	claim := func(class, stamp string) *v1alpha1.IPAddressClaim {
		return &v1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "u", ResourceVersion: "7",
				Annotations: map[string]string{v1alpha1.AnnotationProvisioner: stamp}},
			Spec: v1alpha1.IPAddressClaimSpec{ClassName: class, Family: v1alpha1.IPv4},
			Status: v1alpha1.IPAddressClaimStatus{Phase: v1alpha1.ClaimBound, ClassName: class,
				Addresses: []v1alpha1.ClaimedAddress{{Name: "ip-192-0-2-1", Address: "192.0.2.1"}}},
		}
	}
	for i, tc := range []struct {
		name, class, stamp string
		uid                bool
	}{
		{"1: the driver's", "lb", Provisioner, true},
		{"2: another provisioner's", "static", "static.example.com", false},
		{"3: of a class not shown yet", "later", "", true},
	} {
		got, err := o.TransformClaim(claim(tc.class, tc.stamp))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := TransformClaim(claim(tc.class, tc.stamp))
		if !tc.uid {
			w := want.(*v1alpha1.IPAddressClaim)
			w.UID, w.Status.Addresses = "", nil
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%d %s (-want +got):\n%s", i, tc.name, diff)
		}
	}
}
