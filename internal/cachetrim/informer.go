package cachetrim

import (
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// NewInformer builds the cache's informers as controller-runtime would,
// less the namespace index of the project's cluster-scoped kinds: it files
// every IPAddress under the one key "", an index entry per address at a /16
// that no list asks for (a list in no namespace walks the store itself; a
// list of these kinds in a namespace, which no code makes, now errors
// instead of finding nothing). It is the cache option NewInformer, and
// builds what controller-runtime v0.25's default constructor builds.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if clusterScoped(obj) {
		indexers = maps.Clone(indexers)
		delete(indexers, toolscache.NamespaceIndex)
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}

func clusterScoped(obj runtime.Object) bool {
	switch obj.(type) {
	case *v1alpha1.IPAddress, *v1alpha1.IPAddressClass:
		return true
	}
	return false
}
