package autoclaim

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// TransformService keeps of a Service only what auto-claim reads: its own
// annotations and the backends' sourceAnnotations. Services are the most
// numerous objects the core watches; caching whole ones (ports, selectors,
// managedFields, last-applied annotations) would cost memory for nothing.
// The core writes a Service only with a patch of one annotation, so a
// trimmed copy never reaches the API server.
func TransformService(sourceAnnotations []string) toolscache.TransformFunc {
	kept := append([]string{v1alpha1.AnnotationIPAddressClaim, v1alpha1.AnnotationIPAddressClass, v1alpha1.AnnotationAutoClaim}, sourceAnnotations...)
	return func(obj any) (any, error) {
		svc, ok := obj.(*corev1.Service)
		if !ok {
			return obj, nil
		}
		return trim(svc, kept), nil
	}
}

func trim(svc *corev1.Service, kept []string) *corev1.Service {
	out := &corev1.Service{
		TypeMeta: svc.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
			CreationTimestamp: svc.CreationTimestamp, DeletionTimestamp: svc.DeletionTimestamp,
		},
		Spec: corev1.ServiceSpec{
			Type: svc.Spec.Type, LoadBalancerClass: svc.Spec.LoadBalancerClass, LoadBalancerIP: svc.Spec.LoadBalancerIP,
			IPFamilies: svc.Spec.IPFamilies, IPFamilyPolicy: svc.Spec.IPFamilyPolicy,
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: svc.Status.LoadBalancer.Ingress}},
	}
	for _, k := range kept {
		if v, ok := svc.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out
}
