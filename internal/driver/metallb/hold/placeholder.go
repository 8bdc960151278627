package hold

import (
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
)

// holdPort is the placeholder's one port (a LoadBalancer Service needs
// one). MetalLB lets two Services share an address only on disjoint ports,
// so the placeholder moves off a port its peer uses.
func holdPort(peer *corev1.Service) int32 {
	port := int32(65535)
	for peer != nil && slices.ContainsFunc(peer.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Port == port && p.Protocol == corev1.ProtocolTCP
	}) {
		port--
	}
	return port
}

// placeholder is the Service that holds address a in MetalLB's books: in
// the driver's namespace, named after the address, selectorless (no
// endpoints, so never announced), single family, no node ports, pinned to
// exactly its IP and opted out of auto-claim. While it shares the address
// with peer during a handoff it carries peer's sharing key and, when peer
// keeps traffic node-local, peer's backend (MetalLB shares only equal ones).
func placeholder(a *v1alpha1.IPAddress, ip netip.Addr, pool, namespace, key string, peer *corev1.Service) *corev1.Service {
	family := corev1.IPv4Protocol
	if ip.Is6() {
		family = corev1.IPv6Protocol
	}
	annotations := map[string]string{
		metallb.AnnotationLoadBalancerIPs: ip.String(),
		v1alpha1.AnnotationAutoClaim:      "false",
	}
	if pool != "" {
		annotations[metallb.AnnotationAddressPool] = pool
	}
	if key != "" {
		annotations[metallb.AnnotationAllowSharedIP] = key
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: a.Name,
			Labels:      map[string]string{metallb.LabelAddress: a.Name},
			Annotations: annotations,
			// Garbage collection removes the hold even if the driver is
			// gone when the address is deleted by force.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "IPAddress", Name: a.Name, UID: a.UID,
			}},
		},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			IPFamilyPolicy:                ptr.To(corev1.IPFamilyPolicySingleStack),
			IPFamilies:                    []corev1.IPFamily{family},
			AllocateLoadBalancerNodePorts: ptr.To(false),
			ExternalTrafficPolicy:         corev1.ServiceExternalTrafficPolicyCluster,
			Ports:                         []corev1.ServicePort{{Name: "hold", Protocol: corev1.ProtocolTCP, Port: holdPort(peer)}},
		},
	}
	if peer != nil && key != "" && peer.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		svc.Spec.Selector = maps.Clone(peer.Spec.Selector)
	}
	return svc
}

// placeholderAnnotations are the annotations the driver owns on a placeholder.
var placeholderAnnotations = []string{
	metallb.AnnotationLoadBalancerIPs, metallb.AnnotationAddressPool,
	metallb.AnnotationAllowSharedIP, v1alpha1.AnnotationAutoClaim,
}

// samePlaceholder reports whether have already is want in every field the
// driver sets.
func samePlaceholder(have, want *corev1.Service) bool {
	for _, k := range placeholderAnnotations {
		hv, hok := have.Annotations[k]
		wv, wok := want.Annotations[k]
		if hv != wv || hok != wok {
			return false
		}
	}
	return slices.Equal(portNumbers(have), portNumbers(want)) &&
		have.Spec.ExternalTrafficPolicy == want.Spec.ExternalTrafficPolicy &&
		maps.Equal(have.Spec.Selector, want.Spec.Selector) &&
		ownedAlike(have, want)
}

// ownedAlike reports whether have is owned by the address incarnation want
// is. A placeholder a stale pass made for an earlier incarnation of the
// address's name is owned by one that is gone, and garbage collection
// would delete it from under the address that now holds it: it is adopted.
func ownedAlike(have, want *corev1.Service) bool {
	return !slices.ContainsFunc(have.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "IPAddress" && !slices.ContainsFunc(want.OwnerReferences, func(w metav1.OwnerReference) bool { return w.UID == o.UID })
	})
}

func portNumbers(svc *corev1.Service) []int32 {
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	return ports
}

// updatedPlaceholder is have with want's driver-set fields.
func updatedPlaceholder(have, want *corev1.Service) *corev1.Service {
	svc := have.DeepCopy()
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	for _, k := range placeholderAnnotations {
		if v, ok := want.Annotations[k]; ok {
			svc.Annotations[k] = v
		} else {
			delete(svc.Annotations, k)
		}
	}
	svc.OwnerReferences = want.OwnerReferences
	svc.Spec.Ports = want.Spec.Ports
	svc.Spec.ExternalTrafficPolicy = want.Spec.ExternalTrafficPolicy
	svc.Spec.Selector = want.Spec.Selector
	if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		svc.Spec.HealthCheckNodePort = 0
	}
	return svc
}
