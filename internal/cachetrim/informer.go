package cachetrim

import (
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// NewInformer builds the cache's informers as controller-runtime would
// (v0.25's default constructor), with two savings for the kinds held in
// the tens of thousands:
//
//   - The cluster-scoped kinds lose the namespace index: it files every
//     IPAddress under the one key "", an index entry per address at a /16
//     that no list asks for (a list in no namespace walks the store itself;
//     a list of these kinds in a namespace, which no code makes, now errors
//     instead of finding nothing).
//   - Claims and addresses are stored slim (Slim). Everyone who reads the
//     informer — its store and indexer, its event handlers, its index
//     functions — is shown them whole (Whole), so no reader changes.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if clusterScoped(obj) {
		indexers = maps.Clone(indexers)
		delete(indexers, toolscache.NamespaceIndex)
	}
	if !slimmed(obj) {
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
	inf := slimInformer{toolscache.NewSharedIndexInformer(lw, obj, resync, wholeIndexers(indexers))}
	_ = inf.SetTransform(nil) // cannot fail before the informer runs
	return inf
}

func clusterScoped(obj runtime.Object) bool {
	switch obj.(type) {
	case *v1alpha1.IPAddress, *v1alpha1.IPAddressClass:
		return true
	}
	return false
}

func slimmed(obj runtime.Object) bool {
	switch obj.(type) {
	case *v1alpha1.IPAddress, *v1alpha1.IPAddressClaim:
		return true
	}
	return false
}

// slimInformer stores slim objects and shows them whole.
type slimInformer struct {
	toolscache.SharedIndexInformer
}

// SetTransform slims what f leaves of each object.
func (i slimInformer) SetTransform(f toolscache.TransformFunc) error {
	return i.SharedIndexInformer.SetTransform(func(obj any) (any, error) {
		if f != nil {
			var err error
			if obj, err = f(obj); err != nil {
				return nil, err
			}
		}
		return Slim(obj), nil
	})
}

func (i slimInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(wholeHandler{h})
}

func (i slimInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(wholeHandler{h}, resync)
}

func (i slimInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(wholeHandler{h}, o)
}

func (i slimInformer) AddIndexers(indexers toolscache.Indexers) error {
	return i.SharedIndexInformer.AddIndexers(wholeIndexers(indexers))
}

func (i slimInformer) GetStore() toolscache.Store {
	return wholeIndexer{i.SharedIndexInformer.GetIndexer()}
}

func (i slimInformer) GetIndexer() toolscache.Indexer {
	return wholeIndexer{i.SharedIndexInformer.GetIndexer()}
}

// wholeIndexers are indexers that index the whole object.
func wholeIndexers(indexers toolscache.Indexers) toolscache.Indexers {
	out := make(toolscache.Indexers, len(indexers))
	for name, f := range indexers {
		out[name] = func(obj any) ([]string, error) { return f(recent.whole(obj)) }
	}
	return out
}

// wholeHandler passes its handler whole objects.
type wholeHandler struct {
	h toolscache.ResourceEventHandler
}

func (w wholeHandler) OnAdd(obj any, initial bool) { w.h.OnAdd(wholeOrTombstone(obj), initial) }
func (w wholeHandler) OnUpdate(old, obj any) {
	w.h.OnUpdate(wholeOrTombstone(old), wholeOrTombstone(obj))
}
func (w wholeHandler) OnDelete(obj any) { w.h.OnDelete(wholeOrTombstone(obj)) }

func wholeOrTombstone(obj any) any {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		d.Obj = recent.whole(d.Obj)
		return d
	}
	return recent.whole(obj)
}

// wholeIndexer shows a store of slim objects whole. Its writers slim what
// they are given, like the informer's transform.
type wholeIndexer struct {
	toolscache.Indexer
}

func (v wholeIndexer) Add(obj any) error    { return v.Indexer.Add(Slim(obj)) }
func (v wholeIndexer) Update(obj any) error { return v.Indexer.Update(Slim(obj)) }
func (v wholeIndexer) Replace(objs []any, rv string) error {
	slim := make([]any, len(objs))
	for i, o := range objs {
		slim[i] = Slim(o)
	}
	return v.Indexer.Replace(slim, rv)
}

func (v wholeIndexer) List() []any { return wholeAll(v.Indexer.List()) }

func (v wholeIndexer) Get(obj any) (any, bool, error) {
	item, ok, err := v.Indexer.Get(obj)
	return recent.whole(item), ok, err
}

func (v wholeIndexer) GetByKey(key string) (any, bool, error) {
	item, ok, err := v.Indexer.GetByKey(key)
	return recent.whole(item), ok, err
}

func (v wholeIndexer) Index(name string, obj any) ([]any, error) {
	items, err := v.Indexer.Index(name, obj)
	return wholeAll(items), err
}

func (v wholeIndexer) ByIndex(name, value string) ([]any, error) {
	items, err := v.Indexer.ByIndex(name, value)
	return wholeAll(items), err
}

func (v wholeIndexer) AddIndexers(indexers toolscache.Indexers) error {
	return v.Indexer.AddIndexers(wholeIndexers(indexers))
}

// walk calls f with each object of the store, whole: a slim one is made
// whole in one scratch object, so a walk of a /16 allocates no object per
// address; f must not keep it.
func (v wholeIndexer) walk(f func(any)) {
	var a v1alpha1.IPAddress
	var c v1alpha1.IPAddressClaim
	for _, o := range v.Indexer.List() {
		switch s := o.(type) {
		case *slimAddress:
			a = v1alpha1.IPAddress{Spec: s.spec, Status: s.status}
			s.into(&a.TypeMeta, &a.ObjectMeta)
			f(&a)
		case *slimClaim:
			c = v1alpha1.IPAddressClaim{Spec: s.spec, Status: s.status}
			s.into(&c.TypeMeta, &c.ObjectMeta)
			f(&c)
		default:
			f(o)
		}
	}
}

// wholeAll makes a list's items whole, past the memory of recent ones: a
// list of a namespace's claims would only flush it.
func wholeAll(items []any) []any {
	for i, o := range items {
		items[i] = Whole(o)
	}
	return items
}

// recent remembers the objects made whole last, so that an event's index
// functions and handlers, and the reads that follow it, share one whole
// object instead of making one each. It holds two generations of at most
// recentSize each; a slim object is never changed, only replaced, so what
// it remembers is never stale.
var recent = wholeMemo{current: map[any]any{}}

const recentSize = 512

type wholeMemo struct {
	mu                sync.Mutex
	current, previous map[any]any
}

func (m *wholeMemo) whole(obj any) any {
	switch obj.(type) {
	case *slimAddress, *slimClaim:
	default:
		return obj
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if w, ok := m.current[obj]; ok {
		return w
	}
	w, ok := m.previous[obj]
	if !ok {
		w = Whole(obj)
	}
	if len(m.current) >= recentSize {
		m.previous, m.current = m.current, make(map[any]any, recentSize)
	}
	m.current[obj] = w
	return w
}
