package metallb

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
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
