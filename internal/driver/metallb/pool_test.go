package metallb

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

func class(name, params string, age time.Duration) v1alpha1.IPAddressClass {
	c := v1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age)}},
		Spec:       v1alpha1.IPAddressClassSpec{Provisioner: Provisioner},
	}
	if params != "" {
		c.Spec.Parameters = &runtime.RawExtension{Raw: []byte(params)}
	}
	return c
}

func pool(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
}

// TestResolve_OlderClassBeingDeleted: a class replacing one being deleted
// (held by its tenants' addresses) serves the pool at once.
func TestResolve_OlderClassBeingDeleted(t *testing.T) {
	good := pool(map[string]any{"addresses": []any{"203.0.113.0/24"}, "autoAssign": false})
	older, newer := class("older", `{"pool":"shared"}`, time.Hour), class("newer", `{"pool":"shared"}`, 0)
	older.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if c := Resolve(&newer, []v1alpha1.IPAddressClass{older, newer}, good, "metallb-system", "metallb-iad-system"); c.Refusal != "" {
		t.Errorf("refusal = %q, want none", c.Refusal)
	}
}

func TestResolve(t *testing.T) {
	good := pool(map[string]any{"addresses": []any{"203.0.113.0/24", "2001:db8::1-2001:db8::ff"}, "autoAssign": false})
	older := class("older", `{"pool":"shared"}`, time.Hour)
	tests := []struct {
		name    string
		class   v1alpha1.IPAddressClass
		pool    *unstructured.Unstructured
		refusal string
	}{
		{"accepted", class("public", `{"pool":"public"}`, 0), good, ""},
		{"no parameters", class("public", "", 0), good, "spec.parameters.pool is required"},
		{"no pool parameter", class("public", `{}`, 0), good, "spec.parameters.pool is required"},
		{"unknown parameter", class("public", `{"pool":"public","pools":"x"}`, 0), good, "spec.parameters: unknown field(s) pools; the only parameter is pool"},
		{"missing pool", class("public", `{"pool":"public"}`, 0), nil, "IPAddressPool metallb-system/public not found"},
		{"autoAssign unset", class("public", `{"pool":"public"}`, 0), pool(map[string]any{"addresses": []any{"203.0.113.0/24"}}),
			"IPAddressPool metallb-system/public must set spec.autoAssign: false, or MetalLB hands its addresses to any Service"},
		{"autoAssign true", class("public", `{"pool":"public"}`, 0), pool(map[string]any{"addresses": []any{"203.0.113.0/24"}, "autoAssign": true}),
			"IPAddressPool metallb-system/public must set spec.autoAssign: false, or MetalLB hands its addresses to any Service"},
		{"avoidBuggyIPs honoured, not refused", class("public", `{"pool":"public"}`, 0), pool(map[string]any{"addresses": []any{"203.0.113.0/24"}, "autoAssign": false, "avoidBuggyIPs": true}), ""},
		{"invalid range", class("public", `{"pool":"public"}`, 0), pool(map[string]any{"addresses": []any{"203.0.113.0/24", "nonsense"}, "autoAssign": false}),
			`IPAddressPool metallb-system/public: spec.addresses[1] "nonsense": `},
		{"named by an older class", class("newer", `{"pool":"shared"}`, 0), good, "IPAddressPool metallb-system/shared is already named by IPAddressClass older"},
		{"the older class keeps its pool", older, good, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Resolve(&tc.class, []v1alpha1.IPAddressClass{older, tc.class}, tc.pool, "metallb-system", "metallb-iad-system")
			if got := c.Refusal; !strings.HasPrefix(got, tc.refusal) || (tc.refusal == "") != (got == "") {
				t.Errorf("refusal = %q, want %q", got, tc.refusal)
			}
		})
	}
}

// A pool that sets avoidBuggyIPs gives the driver its ranges without the
// IPv4 addresses ending in .0 or .255, as MetalLB assigns them; IPv6 is
// untouched.
func TestResolveAvoidsBuggyIPs(t *testing.T) {
	p := pool(map[string]any{"addresses": []any{"203.0.113.250-203.0.114.5", "198.51.100.0/31", "2001:db8::/120"}, "autoAssign": false, "avoidBuggyIPs": true})
	public := class("public", `{"pool":"public"}`, 0)
	c := Resolve(&public, nil, p, "metallb-system", "metallb-iad-system")
	var got []string
	for _, r := range c.Ranges.Ranges() {
		got = append(got, r.String())
	}
	want := []string{"198.51.100.1-198.51.100.1", "203.0.113.250-203.0.113.254", "203.0.114.1-203.0.114.5", "2001:db8::-2001:db8::ff"}
	if !slices.Equal(got, want) {
		t.Errorf("ranges %q, want %q", got, want)
	}
}

// Addresses are read as MetalLB reads them: an IPv4-mapped spelling is the
// IPv4 address (a pin so spelt asks for it), a zoned one is none.
func TestParseIPsAsMetalLB(t *testing.T) {
	got := ParseIPs("::ffff:203.0.113.7, fe80::1%eth0, 2001:db8::1")
	want := []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::1")}
	if !slices.Equal(got, want) {
		t.Errorf("ParseIPs = %v, want %v", got, want)
	}
	svc := &corev1.Service{Spec: corev1.ServiceSpec{LoadBalancerIP: "::ffff:198.51.100.1"}}
	if got := RequestedIPs(svc); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("198.51.100.1")}) {
		t.Errorf("RequestedIPs = %v, want 198.51.100.1", got)
	}
}

// A pool whose serviceAllocation visibly leaves the driver's placeholders
// out is accepted (tenant namespaces are the operator's to admit), with a
// caution: MetalLB would hold none of the class's addresses.
func TestResolveCautions(t *testing.T) {
	public := class("public", `{"pool":"public"}`, 0)
	alloc := func(a map[string]any) *unstructured.Unstructured {
		return pool(map[string]any{"addresses": []any{"203.0.113.0/24"}, "autoAssign": false, "serviceAllocation": a})
	}
	selects := func(labels map[string]any) map[string]any { return map[string]any{"matchLabels": labels} }
	for _, tc := range []struct {
		name    string
		pool    *unstructured.Unstructured
		caution string
	}{
		{"1 no allocation", pool(map[string]any{"addresses": []any{"203.0.113.0/24"}, "autoAssign": false}), ""},
		{"2 priority alone", alloc(map[string]any{"priority": int64(10)}), ""},
		{"3 namespaces with the driver's", alloc(map[string]any{"namespaces": []any{"metallb-iad-system", "shop"}}), ""},
		{"4 namespaces without the driver's", alloc(map[string]any{"namespaces": []any{"shop"}}),
			"spec.serviceAllocation.namespaces leaves out metallb-iad-system, where the driver's placeholders live: MetalLB will hold none of the class's addresses"},
		{"5 namespaces and a namespace selector (labels unknown here)", alloc(map[string]any{"namespaces": []any{"shop"}, "namespaceSelectors": []any{selects(map[string]any{"tier": "lb"})}}), ""},
		{"6 a Service selector the placeholders match", alloc(map[string]any{"serviceSelectors": []any{
			selects(map[string]any{"app": "web"}),
			map[string]any{"matchExpressions": []any{map[string]any{"key": LabelAddress, "operator": "Exists"}}}}}), ""},
		{"7 Service selectors the placeholders do not match", alloc(map[string]any{"serviceSelectors": []any{selects(map[string]any{"app": "web"})}}),
			"spec.serviceAllocation.serviceSelectors select none of the driver's placeholders (label " + LabelAddress + "): MetalLB will hold none of the class's addresses"},
	} {
		if got := Resolve(&public, nil, tc.pool, "metallb-system", "metallb-iad-system"); got.Refusal != "" || got.Caution != tc.caution {
			t.Errorf("%s: refusal %q, caution %q; want accepted, caution %q", tc.name, got.Refusal, got.Caution, tc.caution)
		}
	}
}
