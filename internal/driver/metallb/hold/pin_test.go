package hold

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/address-controller/internal/driver/metallb"
)

// The driver's hold of an address removed by force comes off the Services
// it was pinned to, and only that address's.
func TestOrphan(t *testing.T) {
	const gone = "ip-203-0-113-1"
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want string
	}{
		{"1 the only address: the Service is released, finalizer and all", svc(ns, "a", pinnedBy(v4)), "tenant/a -"},
		{"2 a withdrawn pin: released too", svc(ns, "a", withdrawn(v4)), "tenant/a -"},
		{"3 one of two: pinned to the other alone, under the same key", svc(ns, "a", pinnedBy(v4+","+v6)),
			"tenant/a loadBalancerIPs=" + v6 + " pinned=" + v6 + " shared-ip=" + key + " finalizer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := describe(orphan(tc.svc, gone)); got != tc.want {
				t.Errorf("orphan = %q, want %q", got, tc.want)
			}
		})
	}
}

// A recorded Service is still the address's while its marker names the
// address, or — between the driver's writes — it keeps the handoff
// finalizer with no marker at all. Re-pinned to another claim's address,
// it is that claim's: the finalizer it carries is for that pin.
func TestStillHeld(t *testing.T) {
	ip := netip.MustParseAddr(v4)
	other := "203.0.113.99"
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want bool
	}{
		{"1 pinned with the address", svc(ns, "a", pinnedBy(v4)), true},
		{"2 pinned with it and another family", svc(ns, "a", pinnedBy(v4+","+v6)), true},
		{"3 pin withdrawn, marker kept", svc(ns, "a", withdrawn(v4)), true},
		{"4 unmarked, the finalizer still on", svc(ns, "a", func(s *corev1.Service) {
			s.Finalizers = []string{metallb.FinalizerHandoff}
		}), true},
		{"5 re-pinned to another claim's address", svc(ns, "a", pinnedBy(other)), false},
		{"6 released", svc(ns, "a"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stillHeld(tc.svc, ip); got != tc.want {
				t.Errorf("stillHeld = %v, want %v", got, tc.want)
			}
		})
	}
}
