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
	// doubling, so pruning costs amortised constant time per write. It
	// also forgets them once a TTL after it last did, so that the room a
	// burst took goes back once the writes slow down.
	prune  int
	pruned int64
	now    func() time.Time
}

// version is a write: the resource version it returned, as a number, and
// when (Unix nanoseconds). A burst writes to tens of thousands of objects
// within TTL, so an entry is kept small.
type version struct {
	rv uint64
	at int64
}

// New returns an empty memory.
func New() *Versions {
	return &Versions{written: map[types.NamespacedName]version{}, prune: prunePast, now: time.Now}
}

// Wrote records the version a write to key returned. A version that is no
// number is not remembered: no cached one could be told older than it.
func (v *Versions) Wrote(key types.NamespacedName, rv string) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now().UnixNano()
	v.written[key] = version{rv: n, at: now}
	if len(v.written) < v.prune && now-v.pruned < int64(TTL) {
		return
	}
	v.pruned = now
	// A map keeps the room it once needed: the entries still in TTL go
	// to a new one, and the old one's memory goes back after a burst.
	kept := make(map[types.NamespacedName]version, len(v.written)/2)
	for k, w := range v.written {
		if now-w.at < int64(TTL) {
			kept[k] = w
		}
	}
	v.written = kept
	v.prune = max(prunePast, 2*len(kept))
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
	cached, err := strconv.ParseUint(cachedRV, 10, 64)
	if err == nil && w.rv > cached && v.now().UnixNano()-w.at < int64(TTL) {
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
