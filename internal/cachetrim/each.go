package cachetrim

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Each calls f with every object of obj's kind that r holds. When r is a
// cache, f gets the informer's own objects, uncopied: it must neither
// change nor keep them. Any other reader is listed into list.
func Each[T client.Object](ctx context.Context, r client.Reader, obj T, list client.ObjectList, f func(T)) error {
	if c, ok := r.(cache.Cache); ok {
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(true))
		if err != nil {
			return err
		}
		store, ok := inf.(interface{ GetStore() toolscache.Store })
		if !ok {
			return fmt.Errorf("the informer of %T has no store", obj)
		}
		each := func(o any) {
			if t, ok := o.(T); ok {
				f(t)
			}
		}
		if w, ok := store.GetStore().(interface{ walk(func(any)) }); ok {
			w.walk(each)
			return nil
		}
		for _, o := range store.GetStore().List() {
			each(o)
		}
		return nil
	}
	if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		if t, ok := o.(T); ok {
			f(t)
		}
		return nil
	})
}
