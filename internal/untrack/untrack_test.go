package untrack

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDroppableAndKept(t *testing.T) {
	update := metav1.ManagedFieldsEntry{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate}
	status := metav1.ManagedFieldsEntry{Manager: "address-controller", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}
	apply := metav1.ManagedFieldsEntry{Manager: "flux", Operation: metav1.ManagedFieldsOperationApply}
	for _, tc := range []struct {
		name      string
		entries   []metav1.ManagedFieldsEntry
		droppable bool
		kept      []metav1.ManagedFieldsEntry
	}{
		{name: "no record: nothing to drop", entries: nil, droppable: false, kept: nil},
		{name: "updates only: dropped", entries: []metav1.ManagedFieldsEntry{update, status}, droppable: true, kept: nil},
		{name: "an apply entry: kept whole", entries: []metav1.ManagedFieldsEntry{update, apply, status}, droppable: false,
			kept: []metav1.ManagedFieldsEntry{update, apply, status}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Droppable(tc.entries); got != tc.droppable {
				t.Errorf("Droppable = %v, want %v", got, tc.droppable)
			}
			if diff := cmp.Diff(tc.kept, Kept(tc.entries)); diff != "" {
				t.Errorf("Kept (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOnUpdate(t *testing.T) {
	var m metav1.ObjectMeta
	OnUpdate(&m)
	if diff := cmp.Diff([]metav1.ManagedFieldsEntry{{}}, m.ManagedFields); diff != "" {
		t.Errorf("an object cached without a record asks for it to be cleared (-want +got):\n%s", diff)
	}
	applied := []metav1.ManagedFieldsEntry{{Manager: "flux", Operation: metav1.ManagedFieldsOperationApply}}
	m.ManagedFields = applied
	OnUpdate(&m)
	if diff := cmp.Diff(applied, m.ManagedFields); diff != "" {
		t.Errorf("an applier's record is sent as cached (-want +got):\n%s", diff)
	}
}
