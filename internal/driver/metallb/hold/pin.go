package hold

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
)

// sharingKeyPrefix starts every sharing key the driver writes.
const sharingKeyPrefix = "metallb-iad-"

// sharingKey is the key a claim's addresses are shared under during a
// handoff: private to the claim, and only principals the service-pins
// policy admits can write it on a Service.
func sharingKey(claimUID types.UID) string { return sharingKeyPrefix + string(claimUID) }

// The pin protocol, readers first: what the driver pinned to a Service
// (its marker, metallb.AnnotationPinned, names it, the pin withdrawn or
// not), and whether it may pin one.

// pinnedWith reports whether the driver's marker on svc names ip.
func pinnedWith(svc *corev1.Service, ip netip.Addr) bool {
	return slices.Contains(marker(svc), ip)
}

// marker are the addresses the driver's marker on svc names: every address
// it pinned there and has not let go of, the pin withdrawn or not.
func marker(svc *corev1.Service) []netip.Addr {
	return metallb.ParseIPs(svc.Annotations[metallb.AnnotationPinned])
}

// pinnable reports whether the driver may pin svc: it pins nothing, or
// only what the driver itself pinned. A pin someone else wrote is theirs.
func pinnable(svc *corev1.Service) bool {
	pins := svc.Annotations[metallb.AnnotationLoadBalancerIPs]
	if pins == "" {
		_, legacy := svc.Annotations[metallb.LegacyLoadBalancerIPs]
		return !legacy && svc.Spec.LoadBalancerIP == ""
	}
	return pins == svc.Annotations[metallb.AnnotationPinned]
}

// pinnedAs reports whether svc carries exactly the driver's pin of ips
// under key, and the handoff finalizer.
func pinnedAs(svc *corev1.Service, ips, key string) bool {
	return svc.Annotations[metallb.AnnotationLoadBalancerIPs] == ips &&
		svc.Annotations[metallb.AnnotationPinned] == ips &&
		svc.Annotations[metallb.AnnotationAllowSharedIP] == key &&
		controllerutil.ContainsFinalizer(svc, metallb.FinalizerHandoff)
}

// Writers: each returns the Service as the next step of the protocol
// leaves it.

// pin is svc pinned to ips under key, marked as the driver's pin, and held
// by the handoff finalizer so that its deletion waits for the placeholder.
func pin(svc *corev1.Service, ips, key string) *corev1.Service {
	out := svc.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[metallb.AnnotationLoadBalancerIPs] = ips
	out.Annotations[metallb.AnnotationPinned] = ips
	out.Annotations[metallb.AnnotationAllowSharedIP] = key
	controllerutil.AddFinalizer(out, metallb.FinalizerHandoff)
	return out
}

// withdraw takes the driver's pin off svc: the pin and the sharing key the
// driver wrote. The marker and the handoff finalizer stay until MetalLB
// has taken the address back (unmarked), so that the Service is still
// known as the driver's while it holds the address for the last moments.
func withdraw(svc *corev1.Service) *corev1.Service {
	out := svc.DeepCopy()
	if metallb.DriverPinned(svc) != nil {
		delete(out.Annotations, metallb.AnnotationLoadBalancerIPs)
	}
	if strings.HasPrefix(out.Annotations[metallb.AnnotationAllowSharedIP], sharingKeyPrefix) {
		delete(out.Annotations, metallb.AnnotationAllowSharedIP)
	}
	return out
}

// unmarked is svc forgotten by the driver: the marker and the handoff finalizer go.
func unmarked(svc *corev1.Service) *corev1.Service {
	out := withdraw(svc)
	delete(out.Annotations, metallb.AnnotationPinned)
	controllerutil.RemoveFinalizer(out, metallb.FinalizerHandoff)
	return out
}

// orphan is svc with the driver's hold of the gone address name taken off:
// released when it was the only address the driver pinned there, else
// pinned to the others alone.
func orphan(svc *corev1.Service, name string) *corev1.Service {
	var rest []netip.Addr
	for _, ip := range marker(svc) {
		if n, _ := v1alpha1.IPAddressName(ip.String()); n != name {
			rest = append(rest, ip)
		}
	}
	if len(rest) == 0 {
		return unmarked(svc)
	}
	out := svc.DeepCopy()
	ips := metallb.FormatIPs(rest)
	if metallb.DriverPinned(svc) != nil {
		out.Annotations[metallb.AnnotationLoadBalancerIPs] = ips
	}
	out.Annotations[metallb.AnnotationPinned] = ips
	return out
}

// reshared is svc, whose pin the driver withdrew, sharing its address
// again under key, its pin still withdrawn.
func reshared(svc *corev1.Service, key string) *corev1.Service {
	out := svc.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[metallb.AnnotationAllowSharedIP] = key
	return out
}

// unpinStep is the next step of taking the driver's pin off svc once that is
// safe: withdraw the pin (and the driver's sharing key) while in place,
// then unmark the Service once MetalLB no longer assigns it any address of
// the marker.
func unpinStep(svc *corev1.Service) *corev1.Service {
	if metallb.DriverPinned(svc) != nil || strings.HasPrefix(svc.Annotations[metallb.AnnotationAllowSharedIP], sharingKeyPrefix) {
		return withdraw(svc)
	}
	for _, ip := range marker(svc) {
		if metallb.Holds(svc, ip) {
			return nil
		}
	}
	return unmarked(svc)
}

// shares reports whether placeholder p can share its address with peer
// under key: same key, disjoint ports, same backend.
func shares(p, peer *corev1.Service, key string) bool {
	if metallb.SharingKey(p) != key {
		return false
	}
	for _, pp := range p.Spec.Ports {
		for _, wp := range peer.Spec.Ports {
			if pp.Port == wp.Port && pp.Protocol == wp.Protocol {
				return false
			}
		}
	}
	return backend(p) == backend(peer)
}

// backend is MetalLB's backend key: node-local traffic shares an address
// only between Services with the same selector.
func backend(svc *corev1.Service) string {
	if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		return ""
	}
	return labelsString(svc.Spec.Selector)
}

func labelsString(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	s := ""
	for _, k := range keys {
		s += k + "=" + m[k] + ","
	}
	return s
}

// stillHeld reports whether svc still carries the driver's hold of ip: its
// marker names ip, or it has no marker and keeps the handoff finalizer the
// driver has yet to release. A recorded Service that carries neither is the
// driver's no more. The finalizer alone does not say whose: a Service
// re-pinned to another claim's address carries it for that claim, and this
// address's record must let go of it, not edit another claim's live pin.
func stillHeld(svc *corev1.Service, ip netip.Addr) bool {
	return pinnedWith(svc, ip) || len(marker(svc)) == 0 && controllerutil.ContainsFinalizer(svc, metallb.FinalizerHandoff)
}

// lets reports whether edit e takes from a Service a pin or the driver's
// marker it carries.
func lets(e edit) bool {
	for _, k := range []string{metallb.AnnotationLoadBalancerIPs, metallb.AnnotationPinned} {
		if v, ok := e.from.Annotations[k]; ok && e.to.Annotations[k] != v {
			return true
		}
	}
	return false
}
