package cachetrim

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// decoded is obj as a cache decodes it from the API server's JSON.
func decoded[T any](t *testing.T, obj *T) *T {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func served(m *metav1.ObjectMeta) {
	m.UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	m.ResourceVersion = "123456"
	m.Generation = 2
	m.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 6, 15, 4, 5, 0, time.UTC))
	m.ManagedFields = nil
}

func boundClaim() *v1alpha1.IPAddressClaim {
	c := claim()
	served(&c.ObjectMeta)
	c.OwnerReferences = nil
	c.Annotations = map[string]string{v1alpha1.AnnotationProvisioner: "metallb-iad"}
	c.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Date(2026, 12, 6, 15, 4, 6, 0, time.UTC))
	return c
}

func boundAddress() *v1alpha1.IPAddress {
	a := address()
	served(&a.ObjectMeta)
	return a
}

// A claim or an address as the API server serves it comes back whole
// from its slim form exactly; metadata that the slim form has no room for
// keeps the object whole.
func TestSlim(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		slim bool
	}{
		{"1 a bound claim is slimmed", decoded(t, boundClaim()), true},
		{"2 a bound address is slimmed", decoded(t, boundAddress()), true},
		{"3 a claim with an owner is kept whole", decoded(t, func() *v1alpha1.IPAddressClaim {
			c := boundClaim()
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "s1"}}
			return c
		}()), false},
		{"4 an address being deleted is kept whole", decoded(t, func() *v1alpha1.IPAddress {
			a := boundAddress()
			a.DeletionTimestamp = &a.CreationTimestamp
			return a
		}()), false},
		{"5 an applied address keeps its managedFields, whole", decoded(t, func() *v1alpha1.IPAddress {
			a := boundAddress()
			a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "gitops", Operation: metav1.ManagedFieldsOperationApply}}
			return a
		}()), false},
		{"6 a UID in capitals is kept whole", decoded(t, func() *v1alpha1.IPAddress {
			a := boundAddress()
			a.UID = "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0"
			return a
		}()), false},
		{"7 a resource version that is no number is kept whole", decoded(t, func() *v1alpha1.IPAddress {
			a := boundAddress()
			a.ResourceVersion = "v1"
			return a
		}()), false},
		{"8 a claim with no creation time is slimmed", func() runtime.Object {
			c := boundClaim()
			c.CreationTimestamp = metav1.Time{}
			return c
		}(), true},
		{"9 a class is not slimmed", &v1alpha1.IPAddressClass{}, false},
		{"10 an outline without UID or creation time is slimmed", &v1alpha1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-9", ResourceVersion: "7"},
			Spec:       v1alpha1.IPAddressSpec{Address: "192.0.2.9", ClassName: "other"},
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Slim(tc.obj)
			if _, whole := s.(runtime.Object); whole == tc.slim {
				t.Fatalf("Slim gave %T, slim form wanted: %v", s, tc.slim)
			}
			if diff := cmp.Diff(tc.obj, Whole(s)); diff != "" {
				t.Errorf("whole again (-given +got):\n%s", diff)
			}
		})
	}
}

// Two claims with equal kind, namespace, labels, annotations and
// finalizers share one copy of them.
func TestSlimSharesMetadata(t *testing.T) {
	a, b := decoded(t, boundClaim()), decoded(t, boundClaim())
	b.Name = "other"
	sa, sb := Slim(a).(*slimClaim), Slim(b).(*slimClaim)
	if sa.common != sb.common {
		t.Error("equal metadata is not shared")
	}
	b.Labels = map[string]string{"app": "db"}
	if Slim(b).(*slimClaim).common == sa.common {
		t.Error("different labels share metadata")
	}
}

// The informer stores slim objects; its handlers, its index functions and
// its readers see whole ones.
func TestInformerShowsWholeObjects(t *testing.T) {
	a := decoded(t, boundAddress())
	w := watch.NewFake()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &v1alpha1.IPAddressList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []v1alpha1.IPAddress{*a}}, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil {
				return nil, errors.New("no watch list here: list, then watch")
			}
			return w, nil
		},
	}
	var indexed []any
	inf := NewInformer(lw, &v1alpha1.IPAddress{}, 0, toolscache.Indexers{"byClass": func(obj any) ([]string, error) {
		indexed = append(indexed, obj)
		return []string{obj.(*v1alpha1.IPAddress).Spec.ClassName}, nil
	}})
	if err := inf.SetTransform(Transform); err != nil {
		t.Fatal(err)
	}
	events := make(chan any, 10)
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- obj },
		UpdateFunc: func(_, obj any) { events <- obj },
		DeleteFunc: func(obj any) { events <- obj },
	}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
	wantWhole := func(what string, obj any) {
		t.Helper()
		if diff := cmp.Diff(runtime.Object(a), obj); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	wantWhole("added", <-events)
	stored, _, _ := inf.GetIndexer().GetByKey(a.Name)
	wantWhole("read by key", stored)
	byClass, _ := inf.GetIndexer().ByIndex("byClass", a.Spec.ClassName)
	if len(byClass) != 1 {
		t.Fatalf("by index: %d objects", len(byClass))
	}
	wantWhole("read by index", byClass[0])
	for _, o := range indexed {
		wantWhole("indexed", o)
	}
	raw := inf.(slimInformer).SharedIndexInformer.GetIndexer().List()
	if _, ok := raw[0].(*slimAddress); !ok {
		t.Errorf("the store holds %T, not a slim address", raw[0])
	}
	walked := 0
	inf.GetStore().(wholeIndexer).walk(func(o any) { walked++; wantWhole("walked", o) })
	if walked != 1 {
		t.Errorf("walked %d objects", walked)
	}
	w.Delete(a.DeepCopy())
	wantWhole("deleted", <-events)
}

// Whatever an address's metadata, its slim form comes back as exactly it.
func FuzzSlim(f *testing.F) {
	f.Add("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "123", int64(1796569445), int64(1), "app", "web", v1alpha1.FinalizerAddressProtection, false)
	f.Add("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fZ", "0123", int64(-1), int64(0), "", "", "", true)
	f.Fuzz(func(t *testing.T, uid, rv string, created, generation int64, key, value, finalizer string, deleting bool) {
		a := boundAddress()
		a.UID, a.ResourceVersion, a.Generation = types.UID(uid), rv, generation
		a.CreationTimestamp = metav1.NewTime(time.Unix(created%(1<<40), 0).Local())
		if key != "" {
			a.Labels = map[string]string{key: value}
		}
		if finalizer != "" {
			a.Finalizers = []string{finalizer}
		}
		if deleting {
			a.DeletionTimestamp = &a.CreationTimestamp
		}
		if diff := cmp.Diff(runtime.Object(a), Whole(Slim(a))); diff != "" {
			t.Errorf("whole again (-given +got):\n%s", diff)
		}
	})
}
