package hold

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// The cache may show an address newer than a Service: the driver let go
// of the Service and recorded so, while the Service's own watch has yet to
// report that MetalLB took the address back. A Conflict is declared only
// on what the API server shows (refresh), so no tenant is told its Service
// holds an address without authorization when it does not.
func TestRefreshJudgesConflictOnTheAPIServer(t *testing.T) {
	stale := svc(ns, "a", holding(v4))
	live := svc(ns, "a")
	live.ResourceVersion = "2"
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	placeholder := ph(v4, key, holding(v4))
	r := &Reconciler{APIReader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(live, placeholder.DeepCopy()).Build()}
	// Let go of, recorded by nobody: the placeholder alone holds it.
	s := snapshotOf(world{address: addr(v4, v1alpha1.AddressBound), strangers: []*corev1.Service{stale},
		placeholders: []*corev1.Service{placeholder}})

	if got := summarize(s.address, decide(s)); got.phase != v1alpha1.AddressConflict {
		t.Fatalf("on the stale cache the pass should see a Conflict (the case refresh exists for), got %s", got.phase)
	}
	if err := r.refresh(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	if got := summarize(s.address, decide(s)); got.phase != v1alpha1.AddressBound || len(got.events)+len(got.create)+len(got.update) > 0 {
		t.Errorf("after refresh: %+v; want Bound, no write and no event", got)
	}
}
