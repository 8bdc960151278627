package hold

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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
