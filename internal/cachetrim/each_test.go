package cachetrim

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/fakeapi"
)

// A reader that is no cache is listed. (The cache's own store is walked in
// the tests against a real API server: the manager's metrics, the driver's
// used set.)
func TestEachLists(t *testing.T) {
	a, c0 := address(), claim()
	a.ManagedFields, c0.ManagedFields = nil, nil
	c := fake.NewClientBuilder().WithScheme(fakeapi.Scheme()).WithObjects(a, c0).Build()
	var names []string
	err := Each(context.Background(), c, &v1alpha1.IPAddress{}, &v1alpha1.IPAddressList{}, func(a *v1alpha1.IPAddress) {
		names = append(names, a.Name)
	})
	if err != nil || len(names) != 1 || names[0] != "ip-192-0-2-1" {
		t.Errorf("got %v, %v", names, err)
	}
}
