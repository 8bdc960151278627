package index

import (
	"context"
	"strings"
	"sync"
	"unique"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Tally counts, per key, the objects filed under it, fed by an informer's
// events: "how many", where a Book also answers "which, in order". It
// keeps per object only where it is counted — one handle to a set of keys
// every object of a class and phase shares — so a /16 of addresses costs
// a map entry each, not a tree entry per key. Like a Book it is an
// accelerator that may lag the cache by an event.
type Tally struct {
	keys func(client.Object) []string

	mu     sync.RWMutex
	counts map[string]int
	// of is where each object is counted: its keys, joined by keySep.
	of map[string]unique.Handle[string]
	// peak is the most objects of has held since it was last made anew.
	peak int
}

// keySep joins an object's keys into the one string its handle interns;
// no key contains it.
const keySep = "\x00"

// NewTally counts each object under keys(object); an object with no keys
// is not counted.
func NewTally(keys func(client.Object) []string) *Tally {
	return &Tally{keys: keys, counts: map[string]int{}, of: map[string]unique.Handle[string]{}}
}

// Feed registers the tally on the informer of obj's kind.
func (t *Tally) Feed(ctx context.Context, c cache.Cache, obj client.Object) error {
	return feed(ctx, c, obj, t.File, func(name string) { t.put(name, nil) })
}

// File counts o as its informer's handler would: how a test sets a tally
// up.
func (t *Tally) File(o client.Object) { t.put(ObjectName(o), t.keys(o)) }

// put counts the object name under keys, and under nothing else.
func (t *Tally) put(name string, keys []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.of[name]; ok {
		for k := range strings.SplitSeq(old.Value(), keySep) {
			if t.counts[k]--; t.counts[k] <= 0 {
				delete(t.counts, k)
			}
		}
	}
	if len(keys) == 0 {
		delete(t.of, name)
		t.of = shrunk(t.of, &t.peak)
		return
	}
	t.of[name] = unique.Make(strings.Join(keys, keySep))
	t.peak = max(t.peak, len(t.of))
	for _, k := range keys {
		t.counts[k]++
	}
}

// Len is how many objects are counted under key.
func (t *Tally) Len(key string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.counts[key]
}
