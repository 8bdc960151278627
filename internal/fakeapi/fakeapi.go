package fakeapi

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/index"
)

// Scheme knows the API group and core/v1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, corev1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Indexes registers field indexes with an indexer, as index.Setup does.
type Indexes func(context.Context, client.FieldIndexer) error

// API is a fake API server: a client over objects, whose writes are counted
// and the FailAt-th of which fails with a conflict.
type API struct {
	client.Client
	mu     sync.Mutex
	writes int
	// FailAt is the write that fails (1 is the first); 0 fails none.
	FailAt int
	// Failed is set once the FailAt-th write has failed.
	Failed bool
	// Refuse, when set, is the API server's answer to a write of obj
	// (an admission refusal, say); nil lets the write through.
	Refuse func(obj client.Object) error
}

// New is an API holding objs, with the IPAddress CRD's selectable fields
// and the given indexes registered: a binary's own (metallb.SetupIndexes),
// or when none is given every index of the core (index.Setup).
func New(t testing.TB, objs []client.Object, indexes ...Indexes) *API {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(Scheme()).
		WithStatusSubresource(&v1alpha1.IPAddressClaim{}, &v1alpha1.IPAddress{}, &v1alpha1.IPAddressClass{}, &corev1.Service{}).
		WithObjects(objs...)
	if len(indexes) == 0 {
		indexes = []Indexes{func(ctx context.Context, i client.FieldIndexer) error { return index.Setup(ctx, i) }}
	}
	for _, setup := range append(indexes, selectable) {
		if err := setup(context.Background(), indexer{b}); err != nil {
			t.Fatal(err)
		}
	}
	api := &API{}
	api.Client = interceptor.NewClient(b.Build(), api.reactor())
	return api
}

// Writes is the number of writes so far, the failed one included.
func (a *API) Writes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writes
}

// write counts a write and says whether it fails.
func (a *API) write(obj client.Object) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writes++
	if a.Refuse != nil {
		if err := a.Refuse(obj); err != nil {
			return err
		}
	}
	if a.writes != a.FailAt {
		return nil
	}
	a.Failed = true
	gvk, _ := a.GroupVersionKindFor(obj)
	return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, obj.GetName(),
		fmt.Errorf("write %d fails (injected)", a.writes))
}

// reactor passes every write through write first.
func (a *API) reactor() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return first(a.write(obj), func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return first(a.write(obj), func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return first(a.write(obj), func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return first(a.write(obj), func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return first(a.write(obj), func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return first(a.write(obj), func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	}
}

func first(err error, then func() error) error {
	if err != nil {
		return err
	}
	return then()
}

// indexer registers indexes on a fake client's builder.
type indexer struct{ b *fake.ClientBuilder }

func (i indexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// selectable registers the IPAddress CRD's selectable fields, which the
// API server itself selects on.
func selectable(_ context.Context, i client.FieldIndexer) error {
	claimRef := func(f func(*v1alpha1.ClaimReference) string) client.IndexerFunc {
		return func(o client.Object) []string {
			if ref := o.(*v1alpha1.IPAddress).Spec.ClaimRef; ref != nil {
				return []string{f(ref)}
			}
			return nil
		}
	}
	for field, fn := range map[string]client.IndexerFunc{
		index.SelectableClaimNamespace: claimRef(func(r *v1alpha1.ClaimReference) string { return r.Namespace }),
		index.SelectableClaimName:      claimRef(func(r *v1alpha1.ClaimReference) string { return r.Name }),
		index.SelectableClassName:      func(o client.Object) []string { return []string{o.(*v1alpha1.IPAddress).Spec.ClassName} },
	} {
		if err := i.IndexField(context.Background(), &v1alpha1.IPAddress{}, field, fn); err != nil {
			return err
		}
	}
	return nil
}
