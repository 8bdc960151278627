package lastwrite

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TTL bounds how long a written version is remembered: far longer than any
// informer lag, short enough that a lost event cannot wedge an object.
const TTL = 2 * time.Minute

// prunePast is the size past which Wrote forgets expired entries: only
// Stale forgets otherwise, and it is never asked about a deleted object.
const prunePast = 1024

// Versions is the memory; the zero value is not usable, use New.
type Versions struct {
	mu      sync.Mutex
	written map[types.NamespacedName]version
	// prune is the size at which Wrote next forgets expired entries:
	// doubling, so pruning costs amortised constant time per write.
	prune int
	now   func() time.Time
}

type version struct {
	rv string
	at time.Time
}

// New returns an empty memory.
func New() *Versions {
	return &Versions{written: map[types.NamespacedName]version{}, prune: prunePast, now: time.Now}
}

// Wrote records the version a write to key returned.
func (v *Versions) Wrote(key types.NamespacedName, rv string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	v.written[key] = version{rv: rv, at: now}
	if len(v.written) < v.prune {
		return
	}
	for k, w := range v.written {
		if now.Sub(w.at) >= TTL {
			delete(v.written, k)
		}
	}
	v.prune = max(prunePast, 2*len(v.written))
}

// Stale reports whether the cached copy of key predates the last write; a
// copy that caught up ends the memory of it.
func (v *Versions) Stale(key types.NamespacedName, cachedRV string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.written[key]
	if !ok {
		return false
	}
	if Newer(w.rv, cachedRV) && v.now().Sub(w.at) < TTL {
		return true
	}
	delete(v.written, key)
	return false
}

// Newer reports whether resource version a is newer than b. Resource
// versions are opaque to clients in general; this API server's are etcd
// revisions, and anything else compares as not newer.
func Newer(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}
