package metallb

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/cachetrim"
	"github.com/cozystack/address-controller/internal/index"
)

// Service index names.
const (
	// ServiceIngressIP: Service by each address in its status.
	ServiceIngressIP = "status.loadBalancer.ingress.ip"
	// ServicePinnedIP: Service by each address of the driver's pinned marker,
	// whether or not the pin it wrote is still in place.
	ServicePinnedIP = "pinned"
	// ServicePinnedAddress: Service by the IPAddress name of each address
	// of the driver's pinned marker — found when the address is gone.
	ServicePinnedAddress = "pinnedAddress"
	// ServiceRequestedIP: Service by each address it asks MetalLB for.
	ServiceRequestedIP = "requested"
	// ServiceClaim: LoadBalancer Service by index.ClaimKey of the claim it names.
	ServiceClaim = "claim"
)

// SetupIndexes registers the shared indexes the driver queries, and
// the driver's Service indexes.
func SetupIndexes(ctx context.Context, i client.FieldIndexer) error {
	if err := index.Setup(ctx, i, index.AddressClaim, index.AddressPool, index.ClaimWaiting); err != nil {
		return err
	}
	for key, values := range serviceIndexes {
		if err := i.IndexField(ctx, &corev1.Service{}, key, index.Bucketed(values)); err != nil {
			return err
		}
	}
	return nil
}

// serviceIndexes are the values each Service index files a Service under.
// Nearly every value names one Service (an address, a claim): the indexes
// file by bucket (index.Bucketed), and ServicesMatching picks the Services
// out of it.
var serviceIndexes = map[string]func(client.Object) []string{
	ServiceIngressIP: func(o client.Object) []string { return ipStrings(IngressIPs(o.(*corev1.Service))) },
	ServicePinnedIP:  func(o client.Object) []string { return ipStrings(ParseIPs(o.GetAnnotations()[AnnotationPinned])) },
	ServicePinnedAddress: func(o client.Object) []string {
		var names []string
		for _, ip := range ParseIPs(o.GetAnnotations()[AnnotationPinned]) {
			if name, err := v1alpha1.IPAddressName(ip.String()); err == nil {
				names = append(names, name)
			}
		}
		return names
	},
	ServiceRequestedIP: func(o client.Object) []string { return ipStrings(RequestedIPs(o.(*corev1.Service))) },
	ServiceClaim:       serviceClaim,
}

// ServicesMatching lists into list the Services the index field files
// under value.
func ServicesMatching(ctx context.Context, c client.Reader, list *corev1.ServiceList, field, value string) error {
	values, ok := serviceIndexes[field]
	if !ok {
		return fmt.Errorf("no Service index %q", field)
	}
	return index.ListBucketed(ctx, c, list, field, values, value)
}

func serviceClaim(o client.Object) []string {
	svc := o.(*corev1.Service)
	if name := svc.Annotations[v1alpha1.AnnotationIPAddressClaim]; name != "" {
		return []string{index.ClaimKey(svc.Namespace, name)}
	}
	return nil
}

func ipStrings(ips []netip.Addr) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// Used lists the addresses of class c's pool that are taken: every
// IPAddress in it, of any class, every address MetalLB assigned to a
// Service, and every address a Service pins, whatever the Service: the
// hold controller judges any pin of an address a claim holds a Conflict,
// so such an address is never given to a claim. A taken address is never
// allocated again: a pin MetalLB has yet to serve (the pool was just
// created, or the Service's namespace is not the driver's to guard) would
// race the new address's placeholder for it.
func (b Books) Used(ctx context.Context, c Class) ([]netip.Addr, error) {
	if c.Ranges == nil {
		return nil, nil
	}
	r := b.Cache
	if r == nil {
		r = b.Reader
	}
	var used []netip.Addr
	if err := cachetrim.Each(ctx, r, &v1alpha1.IPAddress{}, &v1alpha1.IPAddressList{}, func(a *v1alpha1.IPAddress) {
		if ip, err := netip.ParseAddr(a.Spec.Address); err == nil && c.Ranges.Contains(ip) {
			used = append(used, ip)
		}
	}); err != nil {
		return nil, err
	}
	err := cachetrim.Each(ctx, r, &corev1.Service{}, &corev1.ServiceList{}, func(svc *corev1.Service) {
		for _, ip := range append(IngressIPs(svc), RequestedIPs(svc)...) {
			if c.Ranges.Contains(ip) {
				used = append(used, ip)
			}
		}
	})
	return used, err
}
