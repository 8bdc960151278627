package metallb

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/cachetrim"
)

// keptAnnotations are the Service annotations the driver reads: the claim
// a Service names, MetalLB's, the driver's marker, and the auto-claim
// opt-out a placeholder carries.
var keptAnnotations = append([]string{v1alpha1.AnnotationIPAddressClaim, v1alpha1.AnnotationAutoClaim, AnnotationPinned}, BackendAnnotations...)

// TransformService keeps of a Service only what the driver reads, so that
// what tenants put on their Services (a large annotation, a last-applied
// copy, managed fields) costs the driver nothing. The driver writes
// Services only with patches computed between two such copies, so the
// fields left out are never sent back.
func TransformService(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	out := &corev1.Service{
		TypeMeta: svc.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
			CreationTimestamp: svc.CreationTimestamp, DeletionTimestamp: svc.DeletionTimestamp,
			Finalizers: svc.Finalizers,
		},
		Spec: corev1.ServiceSpec{
			Type: svc.Spec.Type, LoadBalancerClass: svc.Spec.LoadBalancerClass, LoadBalancerIP: svc.Spec.LoadBalancerIP,
			IPFamilies: svc.Spec.IPFamilies, ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy,
			Selector: svc.Spec.Selector, HealthCheckNodePort: svc.Spec.HealthCheckNodePort,
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: svc.Status.LoadBalancer.Ingress}},
	}
	for _, p := range svc.Spec.Ports {
		// A placeholder's port moves off its peer's: number and protocol.
		out.Spec.Ports = append(out.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
	}
	if v, ok := svc.Labels[LabelAddress]; ok {
		out.Labels = map[string]string{LabelAddress: v}
		// A placeholder's owner says which incarnation of its address it
		// holds for: one a stale pass made for an earlier one is adopted
		// (hold.ownedAlike), or garbage collection deletes it.
		out.OwnerReferences = svc.OwnerReferences
	}
	for _, k := range keptAnnotations {
		v, ok := svc.Annotations[k]
		if !ok {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	return out, nil
}

// TransformClaim keeps of a claim that is not the driver's — stamped with
// another provisioner, or none — only what names it, its spec, and the
// phase, class and addresses of its status: the driver never writes a
// claim, serves only its own, and at a /16 of another class would
// otherwise hold every tenant's conditions and annotations. Its own
// claims are kept whole, their repeated strings shared.
func TransformClaim(obj any) (any, error) {
	c, ok := obj.(*v1alpha1.IPAddressClaim)
	if !ok || c.Annotations[v1alpha1.AnnotationProvisioner] == Provisioner {
		return cachetrim.Transform(obj)
	}
	out := &v1alpha1.IPAddressClaim{
		TypeMeta: c.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion,
			CreationTimestamp: c.CreationTimestamp, DeletionTimestamp: c.DeletionTimestamp,
		},
		Spec:   c.Spec,
		Status: v1alpha1.IPAddressClaimStatus{Phase: c.Status.Phase, ClassName: c.Status.ClassName, Addresses: c.Status.Addresses},
	}
	return cachetrim.Transform(out)
}
