package index

import (
	"context"
	"maps"
	"sync"
	"unique"

	"github.com/google/btree"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Book keeps, per key, the names of the objects under it in order, fed by
// an informer's events. The cache's field indexes answer "which objects
// have key k" with an unordered list copied on every read — per pass, a
// cost that grows with the pool. A Book answers "how many" and "the
// smallest ones" without a copy, at O(log n). It is an accelerator, never
// the record: callers confirm what it names against the cache, and fall
// back to the index when it names nothing usable (it may lag the cache by
// an event).
type Book struct {
	keys  func(client.Object) []string
	entry func(client.Object) string

	mu   sync.RWMutex
	sets map[string]*btree.BTreeG[string]
	// of is where each object is filed, to move or drop it.
	of map[string]filing
	// peak is the most objects of has held since it was last made anew.
	peak int
}

type filing struct {
	keys  []string
	entry string
}

// NewBook files each object under keys(object), by its name (namespace/
// name); an object with no keys is not filed.
func NewBook(keys func(client.Object) []string) *Book {
	// No entry function: the entry is the name itself, one string.
	return NewOrderedBook(keys, nil)
}

// NewOrderedBook files each object under keys(object) as entry(object),
// or as its name when entry is nil: entries sort as strings, and First and
// Before follow that order.
func NewOrderedBook(keys func(client.Object) []string, entry func(client.Object) string) *Book {
	return &Book{keys: keys, entry: entry, sets: map[string]*btree.BTreeG[string]{}, of: map[string]filing{}}
}

// Feed registers the book on the informer of obj's kind.
func (b *Book) Feed(ctx context.Context, c cache.Cache, obj client.Object) error {
	return feed(ctx, c, obj, b.File, func(name string) { b.put(name, filing{}) })
}

// feed registers on the informer of obj's kind: file for every object
// added or changed, drop with the name of every object deleted.
func feed(ctx context.Context, c cache.Cache, obj client.Object, file func(client.Object), drop func(name string)) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if obj, ok := o.(client.Object); ok {
				file(obj)
			}
		},
		UpdateFunc: func(_, o any) {
			if obj, ok := o.(client.Object); ok {
				file(obj)
			}
		},
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if obj, ok := o.(client.Object); ok {
				drop(ObjectName(obj))
			}
		},
	})
	return err
}

// ObjectName is namespace/name, or name for a cluster-scoped object.
func ObjectName(o client.Object) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns + "/" + o.GetName()
	}
	return o.GetName()
}

// File files o as its informer's handler would: how a test sets a book
// up, or puts it behind the cache.
func (b *Book) File(obj client.Object) {
	f := filing{keys: b.keys(obj)}
	for i, k := range f.keys {
		// A book has few keys and many objects under each: one copy
		// of each key, not one per object.
		f.keys[i] = unique.Make(k).Value()
	}
	name := ObjectName(obj)
	if len(f.keys) > 0 {
		f.entry = name
		if b.entry != nil {
			f.entry = b.entry(obj)
		}
	}
	b.put(name, f)
}

// put files the object name as f says, and nowhere else.
func (b *Book) put(name string, f filing) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.of[name]
	for _, k := range old.keys {
		if s := b.sets[k]; s != nil {
			s.Delete(old.entry)
			if s.Len() == 0 {
				delete(b.sets, k)
			}
		}
	}
	if len(f.keys) == 0 {
		delete(b.of, name)
		b.of = shrunk(b.of, &b.peak)
		return
	}
	b.of[name] = f
	b.peak = max(b.peak, len(b.of))
	for _, k := range f.keys {
		s := b.sets[k]
		if s == nil {
			s = btree.NewOrderedG[string](32)
			b.sets[k] = s
		}
		s.ReplaceOrInsert(f.entry)
	}
}

// Len is how many objects are filed under key.
func (b *Book) Len(key string) int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if s := b.sets[key]; s != nil {
		return s.Len()
	}
	return 0
}

// Before is how many entries filed under key sort before entry: a walk
// over them, uncopied.
func (b *Book) Before(key, entry string) int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	n := 0
	if s := b.sets[key]; s != nil {
		s.AscendLessThan(entry, func(string) bool {
			n++
			return true
		})
	}
	return n
}

// Walk calls f with the entries filed under key, smallest first, until f
// returns false. f runs under the book's read lock: it must not feed the
// book.
func (b *Book) Walk(key string, f func(entry string) bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if s := b.sets[key]; s != nil {
		s.Ascend(f)
	}
}

// First is up to n entries filed under key, smallest first.
func (b *Book) First(key string, n int) []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	s := b.sets[key]
	if s == nil || n <= 0 {
		return nil
	}
	out := make([]string, 0, min(n, s.Len()))
	s.Ascend(func(name string) bool {
		out = append(out, name)
		return len(out) < n
	})
	return out
}

// shrunk is m, or a copy of it when it holds a quarter of what it once
// did: a Go map keeps the room of its largest size, and a line that a
// burst of thousands of claims passed through would keep it for good.
func shrunk[V any](m map[string]V, peak *int) map[string]V {
	if *peak < shrinkPast || len(m)*4 > *peak {
		return m
	}
	*peak = len(m)
	// A new map sized to what is left; maps.Clone would copy the room too.
	out := make(map[string]V, len(m))
	maps.Copy(out, m)
	return out
}

// shrinkPast is the size under which a map is not worth making anew.
const shrinkPast = 4096
