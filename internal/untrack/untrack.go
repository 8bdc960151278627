package untrack

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Droppable reports whether an object whose record is entries may lose it:
// it has one, and no entry in it is a server-side apply.
func Droppable(entries []metav1.ManagedFieldsEntry) bool {
	for _, e := range entries {
		if e.Operation == metav1.ManagedFieldsOperationApply {
			return false
		}
	}
	return len(entries) > 0
}

// Kept is what a cache keeps of an object's record: nothing, unless an
// entry is a server-side apply — then all of it, since an update that
// sends a record sends it whole.
func Kept(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	if Droppable(entries) {
		return nil
	}
	return entries
}

// OnUpdate readies a cached object for an update that drops its record: a
// record of one empty entry is the API server's sign to clear it (an update
// that sends none keeps the stored one). An object whose cache kept its
// record (an applier's) is left alone.
func OnUpdate(m *metav1.ObjectMeta) {
	if len(m.ManagedFields) == 0 {
		m.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	}
}
