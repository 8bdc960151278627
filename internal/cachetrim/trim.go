package cachetrim

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/untrack"
)

// Transform shares the repeated strings of a claim or an address and drops
// its managedFields unless a server-side apply wrote them (package
// untrack); other objects pass unchanged. It is a cache transform:
// it may change the object it is given.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1alpha1.IPAddressClaim:
		trimMeta(&o.TypeMeta, &o.ObjectMeta)
		o.Spec.ClassName = share(o.Spec.ClassName)
		o.Spec.Family = share(o.Spec.Family)
		o.Status.Phase = share(o.Status.Phase)
		o.Status.ClassName = share(o.Status.ClassName)
		conditions(o.Status.Conditions)
	case *v1alpha1.IPAddress:
		trimMeta(&o.TypeMeta, &o.ObjectMeta)
		o.Spec.ClassName = share(o.Spec.ClassName)
		o.Spec.ReclaimPolicy = share(o.Spec.ReclaimPolicy)
		if ref := o.Spec.ClaimRef; ref != nil {
			ref.Namespace = share(ref.Namespace)
		}
		o.Status.Phase = share(o.Status.Phase)
		if w := o.Status.AssociatedTo; w != nil {
			w.Kind, w.Namespace = share(w.Kind), share(w.Namespace)
		}
		conditions(o.Status.Conditions)
	}
	return obj, nil
}

func trimMeta(t *metav1.TypeMeta, m *metav1.ObjectMeta) {
	t.APIVersion, t.Kind = share(t.APIVersion), share(t.Kind)
	m.ManagedFields = untrack.Kept(m.ManagedFields)
	m.Namespace = share(m.Namespace)
	for i := range m.Finalizers {
		m.Finalizers[i] = share(m.Finalizers[i])
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = share(r.APIVersion), share(r.Kind)
	}
	m.Labels = shareMap(m.Labels, func(string) bool { return true })
	// Annotation values may be anything (a last-applied copy): only the
	// keys, and the project's own values, are few.
	m.Annotations = shareMap(m.Annotations, func(k string) bool { return k == v1alpha1.AnnotationProvisioner })
}

func conditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Status, c.Reason = share(c.Type), share(c.Status), share(c.Reason)
		// A claim's ClassResolved message names its class and provisioner:
		// every claim of a class carries the same one. Other messages name
		// their object, and stay its own.
		if c.Type == v1alpha1.ConditionClassResolved {
			c.Message = share(c.Message)
		}
	}
}

// shareMap is m with shared keys, and shared values where shareValue
// says; nil stays nil. A small map equal to one seen recently is that very
// map: a /16 of claims carries 65,536 equal {provisioner: …} annotations,
// a few hundred bytes each as maps of their own. One map can serve many
// objects because nothing changes a cached object in place: readers get
// copies, or read the cache's own objects and leave them be.
func shareMap(m map[string]string, shareValue func(key string) bool) map[string]string {
	if m == nil {
		return nil
	}
	build := func() map[string]string {
		out := make(map[string]string, len(m))
		for k, v := range m {
			if shareValue(k) {
				v = share(v)
			}
			out[share(k)] = v
		}
		return out
	}
	if key, ok := mapKey(m); ok {
		return sharedMaps.get(key, build)
	}
	return build()
}

// mapKey is m's contents as one string, sorted by key, when they are short
// enough to be worth sharing.
func mapKey(m map[string]string) (string, bool) {
	n := 0
	for k, v := range m {
		n += len(k) + len(v) + 2
	}
	if n > maxSharedMapBytes {
		return "", false
	}
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String(), true
}

// Bounds on the shared maps: a map longer than maxSharedMapBytes is kept
// per object, and the table starts afresh once it holds maxSharedMaps, so
// objects whose maps are all different cost a bounded table, while the
// common maps come back into it at their next sighting.
const (
	maxSharedMapBytes = 256
	maxSharedMaps     = 4096
)

var sharedMaps = mapTable{maps: map[string]map[string]string{}}

type mapTable struct {
	mu   sync.Mutex
	maps map[string]map[string]string
}

// get is the map filed under key, built and filed if there is none.
func (t *mapTable) get(key string, build func() map[string]string) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.maps[key]; ok {
		return m
	}
	if len(t.maps) >= maxSharedMaps {
		t.maps = map[string]map[string]string{}
	}
	m := build()
	t.maps[key] = m
	return m
}

// share is s's canonical copy: equal strings share one allocation for as
// long as any object holds them.
func share[S ~string](s S) S {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
