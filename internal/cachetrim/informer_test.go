package cachetrim

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// The cluster-scoped kinds lose the namespace index and keep every other;
// namespaced kinds keep all of theirs, and the caller's map is not changed.
func TestNewInformerIndexes(t *testing.T) {
	byField := func(any) ([]string, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		want []string
	}{
		{"1 an address has no namespace index", &v1alpha1.IPAddress{}, []string{"field:pool"}},
		{"2 nor has a class", &v1alpha1.IPAddressClass{}, []string{"field:pool"}},
		{"3 a claim keeps it", &v1alpha1.IPAddressClaim{}, []string{"field:pool", toolscache.NamespaceIndex}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			given := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc, "field:pool": byField}
			inf := NewInformer(&toolscache.ListWatch{}, tc.obj, time.Hour, given)
			got := inf.GetIndexer().GetIndexers()
			if len(got) != len(tc.want) {
				t.Fatalf("indexes %v, want %v", keys(got), tc.want)
			}
			for _, k := range tc.want {
				if _, ok := got[k]; !ok {
					t.Errorf("index %q missing from %v", k, keys(got))
				}
			}
			if len(given) != 2 {
				t.Errorf("the caller's indexers changed: %v", keys(given))
			}
		})
	}
}

func keys(m toolscache.Indexers) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
