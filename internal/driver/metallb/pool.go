package metallb

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go4.org/netipx"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/allocator"
	"github.com/cozystack/address-controller/internal/index"
)

// PoolGVK is MetalLB's IPAddressPool. The driver reads pools as
// unstructured objects: two fields do not justify MetalLB's module.
var PoolGVK = schema.GroupVersionKind{Group: "metallb.io", Version: "v1beta1", Kind: "IPAddressPool"}

// NewPool is an empty IPAddressPool object, to read into or to watch: the
// driver has no Go types of MetalLB's.
func NewPool() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(PoolGVK)
	return u
}

// Parameters is the spec.parameters of a class this driver serves.
type Parameters struct {
	// Pool names a MetalLB IPAddressPool in the MetalLB namespace.
	Pool string `json:"pool"`
}

// ParseParameters reads a class's parameters: an object whose one key is
// "pool", spelled exactly so (encoding/json would also take "Pool" or
// "POOL", which the class-parameters policy refuses as unknown), naming a
// pool. Any other key is refused, so a typo is reported instead of ignored.
func ParseParameters(class *v1alpha1.IPAddressClass) (Parameters, error) {
	var p Parameters
	if class.Spec.Parameters == nil || len(class.Spec.Parameters.Raw) == 0 {
		return p, fmt.Errorf("spec.parameters.pool is required")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(class.Spec.Parameters.Raw, &fields); err != nil {
		return p, fmt.Errorf("spec.parameters: %w", err)
	}
	var unknown []string
	for k := range fields {
		if k != "pool" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return p, fmt.Errorf("spec.parameters: unknown field(s) %s; the only parameter is pool", strings.Join(unknown, ", "))
	}
	if raw, ok := fields["pool"]; ok {
		if err := json.Unmarshal(raw, &p.Pool); err != nil {
			return p, fmt.Errorf("spec.parameters.pool: must be a string")
		}
	}
	if p.Pool == "" {
		return p, fmt.Errorf("spec.parameters.pool is required")
	}
	return p, nil
}

// Class is a class as the driver serves it: the pool it names and, when
// the driver refuses it, why.
type Class struct {
	Name string
	// PoolName is the pool the parameters name; empty if they name none.
	PoolName string
	// PoolFound reports whether that pool exists.
	PoolFound bool
	// Ranges are the pool's addresses; nil unless the pool exists and parses.
	Ranges *netipx.IPSet
	// Refusal says why the driver does not provision from the class; empty
	// when it does.
	Refusal string
	// Caution, on an accepted class, says why MetalLB may not hold the
	// class's addresses for all that (the pool's serviceAllocation).
	Caution string
}

// Accepted reports whether the driver provisions from the class.
func (c Class) Accepted() bool { return c.Refusal == "" }

// Resolve judges class against its pool (nil when the pool does not exist)
// and the other classes of this provisioner. A pool is refused when it is
// missing, when MetalLB may auto-assign from it, or when an older class
// names it: one pool is one class's ledger. An accepted class carries a
// caution when the pool's serviceAllocation visibly leaves out the
// placeholders, in namespace placeholders. A pool that sets avoidBuggyIPs
// gives the driver its ranges without the IPv4 addresses ending in .0 or
// .255, which MetalLB never assigns from it.
func Resolve(class *v1alpha1.IPAddressClass, classes []v1alpha1.IPAddressClass, pool *unstructured.Unstructured, namespace, placeholders string) Class {
	c := Class{Name: class.Name}
	params, err := ParseParameters(class)
	if err != nil {
		c.Refusal = err.Error()
		return c
	}
	c.PoolName = params.Pool
	if pool == nil {
		c.Refusal = fmt.Sprintf("IPAddressPool %s/%s not found", namespace, params.Pool)
		return c
	}
	c.PoolFound = true
	addresses, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "addresses")
	if c.Ranges, err = allocator.ParseRanges(addresses); err != nil {
		c.Refusal = fmt.Sprintf("IPAddressPool %s/%s: spec.%v", namespace, params.Pool, err)
		return c
	}
	if avoid, _, _ := unstructured.NestedBool(pool.Object, "spec", "avoidBuggyIPs"); avoid {
		c.Ranges = withoutBuggyIPs(c.Ranges)
	}
	if auto, found, _ := unstructured.NestedBool(pool.Object, "spec", "autoAssign"); !found || auto {
		c.Refusal = fmt.Sprintf("IPAddressPool %s/%s must set spec.autoAssign: false, or MetalLB hands its addresses to any Service", namespace, params.Pool)
		return c
	}
	if other := olderClaimant(class, classes, params.Pool); other != "" {
		c.Refusal = fmt.Sprintf("IPAddressPool %s/%s is already named by IPAddressClass %s", namespace, params.Pool, other)
		return c
	}
	c.Caution = leavesOutPlaceholders(pool, placeholders)
	return c
}

// leavesOutPlaceholders says how the pool's spec.serviceAllocation keeps
// MetalLB from giving its addresses to the driver's placeholders, in
// namespace placeholders, empty when it does not or when that cannot be told
// from the pool alone (a namespace selector). MetalLB applies the
// allocation to pinned Services too: an address whose placeholder it leaves
// out is held by nobody, and a Service's handoff back to the placeholder
// never ends. Whether every tenant namespace is admitted is the operator's
// to get right; the driver cannot know which namespaces will name claims.
func leavesOutPlaceholders(pool *unstructured.Unstructured, placeholders string) string {
	alloc, _, _ := unstructured.NestedMap(pool.Object, "spec", "serviceAllocation")
	namespaces, _, _ := unstructured.NestedStringSlice(alloc, "namespaces")
	nsSelectors, _, _ := unstructured.NestedSlice(alloc, "namespaceSelectors")
	if len(namespaces) > 0 && len(nsSelectors) == 0 && !slices.Contains(namespaces, placeholders) {
		return fmt.Sprintf("spec.serviceAllocation.namespaces leaves out %s, where the driver's placeholders live: MetalLB will hold none of the class's addresses", placeholders)
	}
	selectors, _, _ := unstructured.NestedSlice(alloc, "serviceSelectors")
	if len(selectors) == 0 {
		return ""
	}
	probe := labels.Set{LabelAddress: "ip-192-0-2-1"}
	for _, raw := range selectors {
		m, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		var ls metav1.LabelSelector
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls) != nil {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(&ls); err == nil && sel.Matches(probe) {
			return ""
		}
	}
	return fmt.Sprintf("spec.serviceAllocation.serviceSelectors select none of the driver's placeholders (label %s): MetalLB will hold none of the class's addresses", LabelAddress)
}

// olderClaimant is the oldest other class of this provisioner naming pool,
// if it is older than class (ties broken by name). A class being deleted
// claims nothing: it provisions no more, and it may stay for as long as its
// tenants keep their claims, so the class replacing it serves the pool at
// once. Nothing is allocated twice meanwhile: the books count every
// address of the pool, whatever its class.
func olderClaimant(class *v1alpha1.IPAddressClass, classes []v1alpha1.IPAddressClass, pool string) string {
	for i := range classes {
		o := &classes[i]
		if o.Name == class.Name || o.Spec.Provisioner != Provisioner || o.DeletionTimestamp != nil {
			continue
		}
		if p, err := ParseParameters(o); err != nil || p.Pool != pool {
			continue
		}
		ot, ct := o.CreationTimestamp.Time, class.CreationTimestamp.Time
		if ot.Before(ct) || (ot.Equal(ct) && o.Name < class.Name) {
			return o.Name
		}
	}
	return ""
}

// SpecChanged passes the changes of a class or a pool that matter to how
// the driver provisions and holds: creation, deletion and spec changes
// (a new generation), or one replaced by a namesake during a watch gap
// (both may be at generation 1). MetalLB rewrites a pool's status at every
// assignment, and the class status is rewritten as its counts move;
// neither changes a decision, and each would wake every address of the
// class.
var SpecChanged = index.SpecChanged

// withoutBuggyIPs is set without its IPv4 addresses ending in .0 or .255
// (MetalLB's avoidBuggyIPs): two per /24 the set's IPv4 ranges touch.
func withoutBuggyIPs(set *netipx.IPSet) *netipx.IPSet {
	var b netipx.IPSetBuilder
	b.AddSet(set)
	for _, r := range set.Ranges() {
		if !r.From().Is4() {
			continue
		}
		for block := r.From().As4(); ; {
			block[3] = 0
			b.Remove(netip.AddrFrom4(block))
			block[3] = 255
			last := netip.AddrFrom4(block)
			b.Remove(last)
			if !last.Less(r.To()) || !last.Next().IsValid() {
				break
			}
			block = last.Next().As4()
		}
	}
	out, _ := b.IPSet() // cannot fail: nothing is added that is not a set's
	return out
}
