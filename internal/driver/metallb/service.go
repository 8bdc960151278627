package metallb

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// IngressIPs are the addresses MetalLB assigned to svc, as its status
// reports them.
func IngressIPs(svc *corev1.Service) []netip.Addr {
	var ips []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, ok := parseIP(in.IP); ok {
			ips = append(ips, ip)
		}
	}
	return ips
}

// RequestedIPs are the addresses svc asks MetalLB for, by any of the means
// MetalLB honours: its loadBalancerIPs annotation under either prefix, and
// spec.loadBalancerIP.
func RequestedIPs(svc *corev1.Service) []netip.Addr {
	ips := append(ParseIPs(svc.Annotations[AnnotationLoadBalancerIPs]), ParseIPs(svc.Annotations[LegacyLoadBalancerIPs])...)
	if ip, ok := parseIP(svc.Spec.LoadBalancerIP); ok {
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	return slices.Compact(ips)
}

// Holds reports whether MetalLB assigned ip to svc.
func Holds(svc *corev1.Service, ip netip.Addr) bool {
	return svc != nil && slices.Contains(IngressIPs(svc), ip)
}

// ParseIPs reads a comma-separated list of addresses, as MetalLB's
// loadBalancerIPs annotation and the driver's pinned marker hold them;
// entries that do not parse are skipped.
func ParseIPs(s string) []netip.Addr {
	var ips []netip.Addr
	for _, f := range strings.Split(s, ",") {
		if ip, ok := parseIP(strings.TrimSpace(f)); ok {
			ips = append(ips, ip)
		}
	}
	return ips
}

// parseIP reads an address as MetalLB does (net.ParseIP): an IPv4-mapped
// IPv6 spelling is the IPv4 address, and a zone makes it no address.
func parseIP(s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// FormatIPs is the inverse of ParseIPs: sorted, so one set of addresses
// always reads the same.
func FormatIPs(ips []netip.Addr) string {
	sorted := slices.Clone(ips)
	slices.SortFunc(sorted, netip.Addr.Compare)
	parts := make([]string, len(sorted))
	for i, ip := range sorted {
		parts[i] = ip.String()
	}
	return strings.Join(parts, ",")
}

// DriverPinned are the addresses the driver pinned to svc: its marker,
// while the pin it wrote is still in place.
func DriverPinned(svc *corev1.Service) []netip.Addr {
	marker, ok := svc.Annotations[AnnotationPinned]
	if !ok || svc.Annotations[AnnotationLoadBalancerIPs] != marker {
		return nil
	}
	return ParseIPs(marker)
}

// SharingKey is svc's MetalLB sharing key, current prefix first.
func SharingKey(svc *corev1.Service) string {
	if k, ok := svc.Annotations[AnnotationAllowSharedIP]; ok {
		return k
	}
	return svc.Annotations[legacyAllowSharedIP]
}
