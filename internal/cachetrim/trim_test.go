package cachetrim

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// fresh gives s its own allocation, as decoding does.
func fresh(s string) string { return string([]byte(s)) }

func claim() *v1alpha1.IPAddressClaim {
	return &v1alpha1.IPAddressClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: fresh("local.sdn.cozystack.io/v1alpha1"), Kind: fresh("IPAddressClaim")},
		ObjectMeta: metav1.ObjectMeta{Namespace: fresh("tenant"), Name: fresh("web"), UID: "u1",
			Finalizers:      []string{fresh(v1alpha1.FinalizerClaimProtection)},
			Annotations:     map[string]string{fresh(v1alpha1.AnnotationProvisioner): fresh("metallb-iad"), "note": fresh("free text")},
			Labels:          map[string]string{fresh("app"): fresh("web")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fresh("v1"), Kind: fresh("Service"), Name: "web", UID: "s1"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: fresh("public"), Family: v1alpha1.IPFamily(fresh("IPv4"))},
		Status: v1alpha1.IPAddressClaimStatus{Phase: v1alpha1.ClaimPhase(fresh("Bound")), ClassName: fresh("public"),
			Addresses: []v1alpha1.ClaimedAddress{{Name: "ip-192-0-2-1", Address: "192.0.2.1"}},
			Conditions: []metav1.Condition{{Type: fresh("Bound"), Status: metav1.ConditionStatus(fresh("True")), Reason: fresh("Bound"), Message: fresh("bound to ip-192-0-2-1")},
				{Type: fresh(v1alpha1.ConditionClassResolved), Status: metav1.ConditionStatus(fresh("True")), Reason: fresh("Resolved"), Message: fresh(`resolved to class "public"`)}}},
	}
}

func address() *v1alpha1.IPAddress {
	return &v1alpha1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: fresh("local.sdn.cozystack.io/v1alpha1"), Kind: fresh("IPAddress")},
		ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1", Finalizers: []string{fresh(v1alpha1.FinalizerAddressProtection)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "manager"}}},
		Spec: v1alpha1.IPAddressSpec{Address: "192.0.2.1", ClassName: fresh("public"), ReclaimPolicy: v1alpha1.ReclaimPolicy(fresh("Retain")),
			ClaimRef: &v1alpha1.ClaimReference{Namespace: fresh("tenant"), Name: "web", UID: "u1"}},
		Status: v1alpha1.IPAddressStatus{Phase: v1alpha1.AddressPhase(fresh("Bound")),
			AssociatedTo: &v1alpha1.WorkloadReference{Kind: fresh("Service"), Namespace: fresh("tenant"), Name: "web"},
			Conditions:   []metav1.Condition{{Type: fresh("Conflict"), Status: metav1.ConditionStatus(fresh("False")), Reason: fresh("NoConflict")}}},
	}
}

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func same[S ~string](a, b S) bool {
	return unsafe.StringData(string(a)) == unsafe.StringData(string(b))
}

// Transform changes no value but managedFields, and two objects decoded
// apart share one copy of each repeated string afterwards.
func TestTransform(t *testing.T) {
	a, b := claim(), claim()
	want := claim()
	want.ManagedFields = nil
	for _, o := range []*v1alpha1.IPAddressClaim{a, b} {
		if _, err := Transform(o); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, o); diff != "" {
			t.Errorf("claim changed (-want +got):\n%s", diff)
		}
	}
	var ak, bk string
	for k := range a.Annotations {
		if k == v1alpha1.AnnotationProvisioner {
			ak = k
		}
	}
	for k := range b.Annotations {
		if k == v1alpha1.AnnotationProvisioner {
			bk = k
		}
	}
	for name, ok := range map[string]bool{
		"apiVersion":       same(a.APIVersion, b.APIVersion),
		"kind":             same(a.Kind, b.Kind),
		"namespace":        same(a.Namespace, b.Namespace),
		"finalizer":        same(a.Finalizers[0], b.Finalizers[0]),
		"annotation key":   same(ak, bk),
		"provisioner":      same(a.Annotations[v1alpha1.AnnotationProvisioner], b.Annotations[v1alpha1.AnnotationProvisioner]),
		"label value":      same(a.Labels["app"], b.Labels["app"]),
		"owner kind":       same(a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind),
		"spec.className":   same(a.Spec.ClassName, b.Spec.ClassName),
		"family":           same(a.Spec.Family, b.Spec.Family),
		"phase":            same(a.Status.Phase, b.Status.Phase),
		"status.className": same(a.Status.ClassName, b.Status.ClassName),
		"condition reason": same(a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason),
		"class message":    same(a.Status.Conditions[1].Message, b.Status.Conditions[1].Message),
	} {
		if !ok {
			t.Errorf("claims: %s not shared", name)
		}
	}
	if same(a.Status.Conditions[0].Message, b.Status.Conditions[0].Message) {
		t.Error("a Bound message was shared: it names its address")
	}
	if !sameMap(a.Annotations, b.Annotations) || !sameMap(a.Labels, b.Labels) {
		t.Error("two equal small maps are not one map")
	}
	c := claim()
	c.Annotations["other"] = "x"
	if _, err := Transform(c); err != nil {
		t.Fatal(err)
	}
	if sameMap(a.Annotations, c.Annotations) || same(a.Annotations["note"], c.Annotations["note"]) {
		t.Error("a free-form annotation value was shared between different maps: such values are mostly unique")
	}

	x, y := address(), address()
	wantAddr := address()
	wantAddr.ManagedFields = nil
	for _, o := range []*v1alpha1.IPAddress{x, y} {
		if _, err := Transform(o); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantAddr, o); diff != "" {
			t.Errorf("address changed (-want +got):\n%s", diff)
		}
	}
	for name, ok := range map[string]bool{
		"finalizer":          same(x.Finalizers[0], y.Finalizers[0]),
		"className":          same(x.Spec.ClassName, y.Spec.ClassName),
		"reclaimPolicy":      same(x.Spec.ReclaimPolicy, y.Spec.ReclaimPolicy),
		"claimRef.namespace": same(x.Spec.ClaimRef.Namespace, y.Spec.ClaimRef.Namespace),
		"phase":              same(x.Status.Phase, y.Status.Phase),
		"associatedTo":       same(x.Status.AssociatedTo.Namespace, y.Status.AssociatedTo.Namespace),
		"condition type":     same(x.Status.Conditions[0].Type, y.Status.Conditions[0].Type),
	} {
		if !ok {
			t.Errorf("addresses: %s not shared", name)
		}
	}
}

// An applier's record is kept whole: the core's updates send it back.
func TestTransformKeepsAnAppliersRecord(t *testing.T) {
	c := claim()
	c.ManagedFields = append(c.ManagedFields, metav1.ManagedFieldsEntry{Manager: "flux", Operation: metav1.ManagedFieldsOperationApply})
	want := slices.Clone(c.ManagedFields)
	if _, err := Transform(c); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, c.ManagedFields); diff != "" {
		t.Errorf("managedFields (-want +got):\n%s", diff)
	}
}

// A map too long to be worth sharing stays the object's own, and the table
// of shared maps stays bounded however many different maps pass.
func TestShareMapBounds(t *testing.T) {
	long := map[string]string{"k": strings.Repeat("v", maxSharedMapBytes)}
	if sameMap(shareMap(long, func(string) bool { return false }), shareMap(long, func(string) bool { return false })) {
		t.Error("a long map was shared")
	}
	for i := range 2 * maxSharedMaps {
		shareMap(map[string]string{"n": strings.Repeat("x", i%200) + string(rune('a'+i%26))}, func(string) bool { return false })
	}
	if n := len(sharedMaps.maps); n > maxSharedMaps {
		t.Errorf("the table holds %d maps, more than %d", n, maxSharedMaps)
	}
	if m := shareMap(nil, func(string) bool { return true }); m != nil {
		t.Errorf("nil became %v", m)
	}
}
