package metallb

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// TestTransformService: what the driver reads survives, what a tenant may
// make large does not.
func TestTransformService(t *testing.T) {
	in := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "tenant", Name: "web", UID: "u", ResourceVersion: "7", Finalizers: []string{FinalizerHandoff},
			Labels:          map[string]string{LabelAddress: "ip-192-0-2-1", "app": "web"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "IPAddress", Name: "ip-192-0-2-1", UID: "a"}},
			Annotations: map[string]string{
				AnnotationLoadBalancerIPs: "192.0.2.1", AnnotationPinned: "192.0.2.1", AnnotationAllowSharedIP: "k",
				v1alpha1.AnnotationIPAddressClaim:                  "web",
				"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1<<20),
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector: map[string]string{"app": "web"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}}},
	}
	out, err := TransformService(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "tenant", Name: "web", UID: "u", ResourceVersion: "7", Finalizers: []string{FinalizerHandoff},
			Labels:          map[string]string{LabelAddress: "ip-192-0-2-1"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "IPAddress", Name: "ip-192-0-2-1", UID: "a"}}, // a placeholder's
			Annotations: map[string]string{
				AnnotationLoadBalancerIPs: "192.0.2.1", AnnotationPinned: "192.0.2.1", AnnotationAllowSharedIP: "k",
				v1alpha1.AnnotationIPAddressClaim: "web",
			},
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector: map[string]string{"app": "web"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
		Status: in.Status,
	}
	if d := cmp.Diff(want, out); d != "" {
		t.Fatalf("trimmed Service (-want +got):\n%s", d)
	}
}

// TestTransformClaim: the driver's own claims stay whole (managedFields
// aside); another provisioner's keep their outline only.
func TestTransformClaim(t *testing.T) {
	claim := func(provisioner string) *v1alpha1.IPAddressClaim {
		return &v1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "u", ResourceVersion: "7",
				Finalizers:    []string{v1alpha1.FinalizerClaimProtection},
				Annotations:   map[string]string{v1alpha1.AnnotationProvisioner: provisioner, "note": "x"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv4},
			Status: v1alpha1.IPAddressClaimStatus{Phase: v1alpha1.ClaimBound, ClassName: "public",
				Addresses:  []v1alpha1.ClaimedAddress{{Name: "ip-192-0-2-1", Address: "192.0.2.1"}},
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionBound, Status: metav1.ConditionTrue, Reason: "Bound"}}},
		}
	}
	own, err := TransformClaim(claim(Provisioner))
	if err != nil {
		t.Fatal(err)
	}
	want := claim(Provisioner)
	want.ManagedFields = nil
	if diff := cmp.Diff(want, own); diff != "" {
		t.Errorf("own claim (-want +got):\n%s", diff)
	}
	other, err := TransformClaim(claim("static.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	c := claim("")
	want = &v1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "u", ResourceVersion: "7"},
		Spec:       c.Spec,
		Status:     v1alpha1.IPAddressClaimStatus{Phase: c.Status.Phase, ClassName: c.Status.ClassName, Addresses: c.Status.Addresses},
	}
	if diff := cmp.Diff(want, other); diff != "" {
		t.Errorf("another provisioner's claim (-want +got):\n%s", diff)
	}
}
