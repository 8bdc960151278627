package class

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// The table mirrors the contract's "Class deletion".
func TestDecide(t *testing.T) {
	live := func(finalizers ...string) *v1alpha1.IPAddressClass {
		return &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public", Finalizers: finalizers}}
	}
	deleted := func(finalizers ...string) *v1alpha1.IPAddressClass {
		c := live(finalizers...)
		c.DeletionTimestamp = &metav1.Time{}
		return c
	}
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("ip-203-0-113-%d", i))
	}
	tests := []struct {
		name      string
		class     *v1alpha1.IPAddressClass
		addresses []string
		want      plan
	}{
		{"class-1 a live class gets the class-protection finalizer", live(), nil, plan{addFinalizer: true}},
		{"class-1 a protected live class needs nothing", live(v1alpha1.FinalizerClassProtection), []string{"ip-203-0-113-7"}, plan{}},
		{"class-2 a deleted class with addresses is held and says which", deleted(v1alpha1.FinalizerClassProtection), []string{"ip-203-0-113-7", "ip-2001-db8--7"},
			plan{inUse: "class is being deleted; waiting for 2 IPAddress object(s) of it to go: ip-203-0-113-7, ip-2001-db8--7"}},
		{"class-2 the event names at most ten addresses; more are told by order of magnitude", deleted(v1alpha1.FinalizerClassProtection), many,
			plan{inUse: "class is being deleted; waiting for 10 or more IPAddress objects of it to go " +
				"(kubectl get ipaddresses.local.sdn.cozystack.io --field-selector spec.className=public)"}},
		{"class-3 a deleted class with no address left is released", deleted(v1alpha1.FinalizerClassProtection), nil, plan{removeFinalizer: true}},
		{"class-3 a deleted class without the finalizer is left to go", deleted(), []string{"ip-203-0-113-7"}, plan{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decide(tc.class, tc.addresses, len(tc.addresses)), cmp.AllowUnexported(plan{})); diff != "" {
				t.Errorf("plan differs (-want +got):\n%s", diff)
			}
		})
	}
}

// A class counted by the tally alone (no names) is told by magnitude;
// magnitude rounds down to a power of ten.
func TestMagnitude(t *testing.T) {
	for n, want := range map[int]string{11: "10 or more", 99: "10 or more", 100: "100 or more", 65536: "10000 or more"} {
		if got := magnitude(n); got != want {
			t.Errorf("magnitude(%d) = %q, want %q", n, got, want)
		}
	}
	c := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public", Finalizers: []string{v1alpha1.FinalizerClassProtection}, DeletionTimestamp: &metav1.Time{}}}
	if p := decide(c, nil, 65536); p.removeFinalizer || p.inUse == "" {
		t.Errorf("65,536 counted, none named: %+v, want held with a message", p)
	}
}
