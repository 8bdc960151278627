package metallb

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/fakeapi"
)

// TestUsedCountsPins: an address a Service pins is taken even before
// MetalLB serves the pin (a pool just created, a namespace the policy does
// not guard): allocated again, its placeholder and the Service would race
// for it. Addresses outside the class's ranges are not its business.
func TestUsedCountsPins(t *testing.T) {
	svc := func(name string, annotations map[string]string, lbIP string, ingress ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Annotations: annotations},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: lbIP}}
		for _, ip := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	objs := []client.Object{
		&v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-1"}, Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.1"}},
		svc("assigned", nil, "", "203.0.113.2"),
		svc("pinned", map[string]string{AnnotationLoadBalancerIPs: "203.0.113.3"}, ""),
		svc("legacy", map[string]string{LegacyLoadBalancerIPs: "203.0.113.5"}, ""),
		svc("field", nil, "203.0.113.4"),
		svc("elsewhere", map[string]string{AnnotationLoadBalancerIPs: "198.51.100.9"}, "", "198.51.100.9"),
		// A pin MetalLB would not honour is taken too: given to a claim,
		// the hold controller would judge it a Conflict at once.
		func() *corev1.Service {
			s := svc("clusterip", map[string]string{AnnotationLoadBalancerIPs: "203.0.113.6"}, "")
			s.Spec.Type = corev1.ServiceTypeClusterIP
			return s
		}(),
	}
	var b netipx.IPSetBuilder
	b.AddPrefix(netip.MustParsePrefix("203.0.113.0/28"))
	ranges, _ := b.IPSet()
	used, err := Books{Reader: fakeapi.New(t, objs)}.Used(context.Background(), Class{Name: "public", Ranges: ranges})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(used, netip.Addr.Compare)
	want := []netip.Addr{netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2"), netip.MustParseAddr("203.0.113.3"),
		netip.MustParseAddr("203.0.113.4"), netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("203.0.113.6")}
	if !slices.Equal(used, want) {
		t.Errorf("used = %v, want %v", used, want)
	}
}
