package cachetrim

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Transform shares the repeated strings of a claim or an address and drops
// its managedFields; other objects pass unchanged. It is a cache transform:
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
	m.ManagedFields = nil
	m.Namespace = share(m.Namespace)
	for i := range m.Finalizers {
		m.Finalizers[i] = share(m.Finalizers[i])
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = share(r.APIVersion), share(r.Kind)
	}
	m.Labels = shareMap(m.Labels, true)
	// Annotation values may be anything (a last-applied copy): only the
	// keys, and the project's own values, are few.
	m.Annotations = shareMap(m.Annotations, false)
	if v, ok := m.Annotations[v1alpha1.AnnotationProvisioner]; ok {
		m.Annotations[v1alpha1.AnnotationProvisioner] = share(v)
	}
}

func conditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Status, c.Reason = share(c.Type), share(c.Status), share(c.Reason)
	}
}

// shareMap rebuilds m with shared keys, and shared values when values is
// set; nil stays nil.
func shareMap(m map[string]string, values bool) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if values {
			v = share(v)
		}
		out[share(k)] = v
	}
	return out
}

// share is s's canonical copy: equal strings share one allocation for as
// long as any object holds them.
func share[S ~string](s S) S {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
