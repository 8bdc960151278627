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

// Versions is the memory; the zero value is not usable, use New.
type Versions struct {
	mu      sync.Mutex
	written map[types.NamespacedName]version
}

type version struct {
	rv string
	at time.Time
}

// New returns an empty memory.
func New() *Versions { return &Versions{written: map[types.NamespacedName]version{}} }

// Wrote records the version a write to key returned.
func (v *Versions) Wrote(key types.NamespacedName, rv string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.written[key] = version{rv: rv, at: time.Now()}
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
	if Newer(w.rv, cachedRV) && time.Since(w.at) < TTL {
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
