package claim

import (
	"sync"
	"time"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/lastwrite"
)

// assumeCache remembers the addresses this binder wrote until the informer
// delivers them, so that a pass reading a stale cache never binds a claim
// twice or offers an address it just bound as a candidate again. It is the
// analogue of the PV controller's own-write cache.
//
// It also holds in-flight reservations: an address one worker is about to
// bind is skipped by the others of this process, so concurrent workers do
// not all race for the same smallest candidate. Reservations are an
// optimisation only; the resource-version precondition on the write is what
// makes a double binding impossible, across processes too.
type assumeCache struct {
	mu       sync.Mutex
	written  map[string]assumed
	inFlight map[string]bool
}

type assumed struct {
	addr *v1alpha1.IPAddress
	at   time.Time
}

func newAssumeCache() *assumeCache {
	return &assumeCache{written: map[string]assumed{}, inFlight: map[string]bool{}}
}

// reserve marks an address in flight; false if another worker holds it.
func (c *assumeCache) reserve(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight[name] {
		return false
	}
	c.inFlight[name] = true
	return true
}

// unreserve ends in-flight reservations.
func (c *assumeCache) unreserve(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		delete(c.inFlight, n)
	}
}

// reserveSmallest reserves and returns a copy of the smallest-named address
// of list that is not in flight and, with this binder's writes laid over
// it, still satisfies free. One pass over the list, no sorting or copying
// of the rest: a pool may be large. busy reports that an address was passed
// over only because another worker holds it.
func (c *assumeCache) reserveSmallest(list []v1alpha1.IPAddress, free func(*v1alpha1.IPAddress) bool) (_ *v1alpha1.IPAddress, busy bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *v1alpha1.IPAddress
	for i := range list {
		a := &list[i]
		if best != nil && a.Name >= best.Name {
			continue
		}
		if c.inFlight[a.Name] {
			busy = true
			continue
		}
		if w, ok := c.written[a.Name]; ok && lastwrite.Newer(w.addr.ResourceVersion, a.ResourceVersion) {
			a = w.addr
		}
		if free(a) {
			best = a
		}
	}
	if best == nil {
		return nil, busy
	}
	c.inFlight[best.Name] = true
	return best.DeepCopy(), false
}

// assume records the object a write returned.
func (c *assumeCache) assume(a *v1alpha1.IPAddress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[a.Name] = assumed{addr: a.DeepCopy(), at: time.Now()}
}

// forget drops what is remembered of an address (it was deleted).
func (c *assumeCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.written, name)
}

// caughtUp forgets a remembered write once the informer shows it, or a
// later version: at a burst of binds the memory would otherwise hold a
// copy of every address written in the last lastwrite.TTL.
func (c *assumeCache) caughtUp(a *v1alpha1.IPAddress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.written[a.Name]; ok && !lastwrite.Newer(w.addr.ResourceVersion, a.ResourceVersion) {
		delete(c.written, a.Name)
	}
}

// overlay replaces informer copies older than a remembered write by the
// write, and adds remembered addresses the informer lists lack that keep
// matches true. Remembered writes the informer has caught up with are dropped.
// keep runs under the cache's lock and must not call back into it.
func (c *assumeCache) overlay(list []v1alpha1.IPAddress, keep func(*v1alpha1.IPAddress) bool) []v1alpha1.IPAddress {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	seen := map[string]bool{}
	out := make([]v1alpha1.IPAddress, 0, len(list))
	for i := range list {
		a := &list[i]
		seen[a.Name] = true
		if w, ok := c.written[a.Name]; ok {
			if lastwrite.Newer(w.addr.ResourceVersion, a.ResourceVersion) && now.Sub(w.at) < lastwrite.TTL {
				a = w.addr
			} else {
				delete(c.written, a.Name)
			}
		}
		if keep(a) {
			out = append(out, *a)
		}
	}
	for name, w := range c.written {
		if now.Sub(w.at) >= lastwrite.TTL {
			delete(c.written, name)
			continue
		}
		if !seen[name] && keep(w.addr) {
			out = append(out, *w.addr.DeepCopy())
		}
	}
	return out
}
