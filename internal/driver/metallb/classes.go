package metallb

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/allocator"
)

// Classes remembers resolved classes until a class or pool changes: every
// pass of every driver reconciler needs its class judged, and judging reads
// all classes and the pool (copies of unstructured objects, the costliest
// reads the driver makes).
//
// Every event handler of a class or pool calls Changed before it enqueues
// anything, and the informer updates its cache before it calls handlers, so
// a pass woken by a change never reuses a judgement older than the change.
type Classes struct {
	Books Books

	mu         sync.Mutex
	generation uint64
	resolved   map[string]resolved
	// pools are the parsed pools of MetalLB's namespace, by name, as of
	// poolsGeneration; nil until first read.
	pools           []poolRanges
	poolsGeneration uint64
	// lastRead are the ranges last read of each pool, for a pool whose
	// entries MetalLB now refuses: MetalLB keeps the configuration it had.
	lastRead map[string]poolRanges
}

type poolRanges struct {
	name   string
	ranges *netipx.IPSet
	// avoidBuggy: MetalLB holds no IPv4 address ending in .0 or .255 of
	// the pool (spec.avoidBuggyIPs).
	avoidBuggy bool
}

// holds says whether MetalLB can hold ip in the pool.
func (p poolRanges) holds(ip netip.Addr) bool {
	if p.avoidBuggy && ip.Is4() && (ip.As4()[3] == 0 || ip.As4()[3] == 255) {
		return false
	}
	return p.ranges.Contains(ip)
}

type resolved struct {
	generation uint64
	class      Class
	obj        *v1alpha1.IPAddressClass
}

// Changed forgets every judgement: a class or a pool changed.
func (c *Classes) Changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	c.resolved = nil
	c.pools = nil
}

// PoolUnreadError says a pool does not parse and this process never read
// it, so whether MetalLB holds an address it may cover is unknown. A class
// naming the pool says PoolRefused, and fixing the pool wakes its
// addresses; a pool no class names shows only in the driver's log.
type PoolUnreadError struct {
	Namespace, Pool string
	IP              netip.Addr
}

func (e *PoolUnreadError) Error() string {
	return fmt.Sprintf("IPAddressPool %s/%s does not parse and was not read before: whether MetalLB still holds %s is unknown", e.Namespace, e.Pool, e.IP)
}

// Covering names the pool in MetalLB's books that contains ip (the first by
// name), or "" when none does. This, not a class's parameters, says whether
// MetalLB can still hold an address: a class whose parameters an operator
// mistyped, or that was removed by force, changes nothing in MetalLB. Pools
// are read as MetalLB reads them, not as the driver allocates: an entry
// only the driver refuses refuses the class, and takes nothing from
// MetalLB's books.
func (c *Classes) Covering(ctx context.Context, ip netip.Addr) (string, error) {
	c.mu.Lock()
	gen, pools := c.generation, c.pools
	fresh := pools != nil && c.poolsGeneration == gen
	c.mu.Unlock()
	if !fresh {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(PoolGVK.GroupVersion().WithKind(PoolGVK.Kind + "List"))
		if err := c.Books.Reader.List(ctx, list, client.InNamespace(c.Books.Namespace)); err != nil {
			return "", err
		}
		c.mu.Lock()
		var read map[string]poolRanges
		pools, read = c.readPools(list.Items)
		if c.generation == gen {
			c.pools, c.poolsGeneration, c.lastRead = pools, gen, read
		}
		c.mu.Unlock()
	}
	var unread string
	for _, p := range pools {
		switch {
		case p.ranges == nil:
			unread = p.name
		case p.holds(ip):
			return p.name, nil
		}
	}
	if unread != "" {
		// Not knowing what MetalLB kept, the pass decides nothing: it
		// would otherwise take the address for let go.
		return "", &PoolUnreadError{Namespace: c.Books.Namespace, Pool: unread, IP: ip}
	}
	return "", nil
}

// readPools parses pools as MetalLB reads them, sorted by name, and
// returns them by name as read; a pool MetalLB refuses counts as last read,
// and one never read has no ranges (unknown). Called with c.mu held.
func (c *Classes) readPools(items []unstructured.Unstructured) ([]poolRanges, map[string]poolRanges) {
	pools := make([]poolRanges, 0, len(items))
	read := make(map[string]poolRanges, len(items))
	for i := range items {
		name := items[i].GetName()
		addresses, _, _ := unstructured.NestedStringSlice(items[i].Object, "spec", "addresses")
		avoid, _, _ := unstructured.NestedBool(items[i].Object, "spec", "avoidBuggyIPs")
		p, ok := c.lastRead[name]
		if ranges, err := allocator.ParseRangesAsMetalLB(addresses); err == nil {
			p, ok = poolRanges{name: name, ranges: ranges, avoidBuggy: avoid}, true
		}
		if ok {
			read[name] = p
		} else {
			p = poolRanges{name: name}
		}
		pools = append(pools, p)
	}
	slices.SortFunc(pools, func(a, b poolRanges) int { return strings.Compare(a.name, b.name) })
	return pools, read
}

// Class is Books.Class, remembered. obj is shared: callers must not modify it.
func (c *Classes) Class(ctx context.Context, name string) (Class, *v1alpha1.IPAddressClass, error) {
	c.mu.Lock()
	gen := c.generation
	r, ok := c.resolved[name]
	c.mu.Unlock()
	if ok && r.generation == gen {
		return r.class, r.obj, nil
	}
	class, obj, err := c.Books.Class(ctx, name)
	if err != nil {
		return class, obj, err
	}
	c.mu.Lock()
	if c.generation == gen {
		if c.resolved == nil {
			c.resolved = map[string]resolved{}
		}
		c.resolved[name] = resolved{generation: gen, class: class, obj: obj}
	}
	c.mu.Unlock()
	return class, obj, nil
}

// ForClass is the body of a reconciler's class watch: it forgets every
// judgement (a pool belongs to the oldest class naming it, so any class
// may change another's), then maps the class through each.
func (c *Classes) ForClass(ctx context.Context, o client.Object, each func(context.Context, string) []reconcile.Request) []reconcile.Request {
	c.Changed()
	return each(ctx, o.GetName())
}

// ForPool is the body of a reconciler's pool watch: it forgets every
// judgement, then maps the pool to each class of the driver naming it
// through each.
func (c *Classes) ForPool(ctx context.Context, pool client.Object, each func(context.Context, string) []reconcile.Request) []reconcile.Request {
	c.Changed()
	if pool.GetNamespace() != c.Books.Namespace {
		return nil
	}
	classes, err := c.Books.ClassesNamingPool(ctx, pool.GetName())
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, class := range classes {
		reqs = append(reqs, each(ctx, class)...)
	}
	return reqs
}
