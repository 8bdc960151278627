package core_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/core/address"
	"github.com/cozystack/address-controller/internal/core/claim"
	"github.com/cozystack/address-controller/internal/fakeapi"
	"github.com/cozystack/address-controller/internal/recorder"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// binder is one process of the core: the real claim and address
// reconcilers, with their own memory, over an API.
type binder struct {
	claims    *claim.Reconciler
	addresses *address.Reconciler
}

func newBinder(c client.Client) binder {
	rec := recorder.New(&events.FakeRecorder{})
	clock := func() time.Time { return now }
	return binder{
		claims:    &claim.Reconciler{Client: c, APIReader: c, Recorder: rec, Now: clock},
		addresses: &address.Reconciler{Client: c, APIReader: c, Recorder: rec, Now: clock},
	}
}

// round reconciles every address, then every claim, once; errors are the
// next round's business, as a controller's requeue makes them.
func (b binder) round(ctx context.Context, t *testing.T, c client.Reader) {
	t.Helper()
	var addrs v1alpha1.IPAddressList
	var claims v1alpha1.IPAddressClaimList
	if err := c.List(ctx, &addrs); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs.Items {
		_, _ = b.addresses.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
	}
	for _, cl := range claims.Items {
		_, _ = b.claims.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&cl)})
	}
}

// converge runs rounds until one writes nothing, at most 100. A failed
// write is a crash: the binder that made it is replaced by a new one with
// no memory of its own writes.
func converge(t *testing.T, api *fakeapi.API) {
	t.Helper()
	ctx := context.Background()
	b := newBinder(api)
	for range 100 {
		before, failed := api.Writes(), api.Failed
		b.round(ctx, t, api)
		if api.Failed && !failed {
			b = newBinder(api)
		}
		if api.Writes() == before {
			return
		}
	}
	t.Fatal("did not converge in 100 rounds")
}

// check asserts the binding invariants: no claim holds two addresses of a
// family, each claim's status lists exactly the addresses bound to it, and
// wantBound claims are Bound.
func check(t *testing.T, c client.Reader, wantBound int) {
	t.Helper()
	var addrs v1alpha1.IPAddressList
	var claims v1alpha1.IPAddressClaimList
	if err := c.List(context.Background(), &addrs); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	bound := 0
	for _, cl := range claims.Items {
		var held, listed []string
		families := map[v1alpha1.IPFamily]int{}
		for _, a := range addrs.Items {
			if binding.Holds(&a, &cl) {
				held = append(held, a.Name)
				families[binding.Family(&a)]++
			}
		}
		for f, n := range families {
			if n > 1 {
				t.Errorf("claim %s holds %d %s addresses", cl.Name, n, f)
			}
		}
		for _, a := range cl.Status.Addresses {
			listed = append(listed, a.Name)
		}
		slices.Sort(held)
		if fmt.Sprint(held) != fmt.Sprint(listed) {
			t.Errorf("claim %s: status lists %v, claimRefs say %v", cl.Name, listed, held)
		}
		if cl.Status.Phase == v1alpha1.ClaimBound {
			bound++
		}
	}
	if bound != wantBound {
		t.Errorf("%d claims Bound, want %d", bound, wantBound)
	}
}

// TestMultisync runs the real claim and address reconcilers until nothing
// changes, from each scenario's start and with a conflict injected at
// every single write in turn (each a crash of the binder that made it):
// a failure between any two writes converges to the same bindings.
func TestMultisync(t *testing.T) {
	scenarios := []struct {
		name      string
		objects   []client.Object
		wantBound int
	}{
		{"4-7 three claims, two addresses: two bind, one waits", []client.Object{
			unprotected(newClaim("a", v1alpha1.IPv4)), unprotected(newClaim("b", v1alpha1.IPv4)), unprotected(newClaim("c", v1alpha1.IPv4)),
			newAddress("203.0.113.1", nil), newAddress("203.0.113.2", nil),
		}, 2},
		{"4-7 Dual and single claims share a pool", []client.Object{
			newClaim("a", v1alpha1.Dual), newClaim("b", v1alpha1.IPv6),
			newAddress("203.0.113.1", nil), newAddress("2001:db8::1", nil), newAddress("2001:db8::2", nil),
		}, 2},
		{"4-4 pre-bindings are accepted after any failure", []client.Object{
			newClaim("a", v1alpha1.IPv4), newClaim("b", v1alpha1.IPv4),
			newAddress("203.0.113.1", &v1alpha1.ClaimReference{Namespace: "tenant", Name: "b"}), newAddress("203.0.113.2", nil),
		}, 2},
		{"6-1 a deleted claim's Retain address is Released, and kept from the next claim", []client.Object{
			deleting(newClaim("gone", v1alpha1.IPv4)), newClaim("next", v1alpha1.IPv4),
			newAddress("203.0.113.1", &v1alpha1.ClaimReference{Namespace: "tenant", Name: "gone", UID: "uid-gone"}),
		}, 0},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			clean := fakeapi.New(t, withClass(sc.objects))
			converge(t, clean)
			check(t, clean, sc.wantBound)
			for k := 1; k <= clean.Writes(); k++ {
				api := fakeapi.New(t, withClass(sc.objects))
				api.FailAt = k
				converge(t, api)
				check(t, api, sc.wantBound)
			}
		})
	}
}

// TestRaceOnStaleSnapshots: a hundred binders, each its own process on a
// cache that has seen none of the others' writes, race for the only
// address. The resource-version precondition lets exactly one bind it.
func TestRaceOnStaleSnapshots(t *testing.T) {
	objs := []client.Object{newAddress("203.0.113.1", nil)}
	for i := range 100 {
		objs = append(objs, newClaim(fmt.Sprintf("c%03d", i), v1alpha1.IPv4))
	}
	objs = withClass(objs)
	live, stale := fakeapi.New(t, objs), fakeapi.New(t, objs)
	won := 0
	cache := interceptor.NewClient(live.Client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return stale.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return stale.List(ctx, list, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := c.Update(ctx, obj, opts...)
			if _, ok := obj.(*v1alpha1.IPAddress); ok && err == nil {
				won++
			}
			return err
		},
	})
	for i := range 100 {
		b := newBinder(cache)
		key := types.NamespacedName{Namespace: "tenant", Name: fmt.Sprintf("c%03d", i)}
		_, _ = b.claims.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
	}
	if won != 1 {
		t.Fatalf("%d binders won the only address, want 1", won)
	}
	converge(t, live)
	check(t, live, 1)
}

func newClaim(name string, family v1alpha1.IPFamily) *v1alpha1.IPAddressClaim {
	return &v1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, UID: types.UID("uid-" + name),
			Finalizers: []string{v1alpha1.FinalizerClaimProtection}, CreationTimestamp: metav1.Time{Time: now}},
		Spec: v1alpha1.IPAddressClaimSpec{Family: family},
	}
}

// unprotected: the claim as a tenant creates it, before the core's finalizer.
func unprotected(c *v1alpha1.IPAddressClaim) *v1alpha1.IPAddressClaim {
	c.Finalizers = nil
	return c
}

func deleting(c *v1alpha1.IPAddressClaim) *v1alpha1.IPAddressClaim {
	c.DeletionTimestamp = &metav1.Time{Time: now}
	return c
}

func newAddress(ip string, ref *v1alpha1.ClaimReference) *v1alpha1.IPAddress {
	name, err := v1alpha1.IPAddressName(ip)
	if err != nil {
		panic(err)
	}
	a := &v1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1alpha1.FinalizerAddressProtection}},
		Spec: v1alpha1.IPAddressSpec{Address: ip, ClassName: "public", ReclaimPolicy: v1alpha1.ReclaimRetain, ClaimRef: ref,
			Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}},
		Status: v1alpha1.IPAddressStatus{Phase: v1alpha1.AddressAvailable},
	}
	if ref != nil {
		a.Status.Phase = v1alpha1.AddressPending
		if ref.UID != "" {
			a.Status.Phase = v1alpha1.AddressBound
		}
	}
	return a
}

// withClass adds the default class "public", of a static provisioner, to objs.
func withClass(objs []client.Object) []client.Object {
	class := &v1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "public", Annotations: map[string]string{v1alpha1.AnnotationDefaultClass: "true"}},
		Spec:       v1alpha1.IPAddressClassSpec{Provisioner: "p.example.com/public", ReclaimPolicy: v1alpha1.ReclaimRetain},
	}
	out := []client.Object{class}
	for _, o := range objs {
		out = append(out, o.DeepCopyObject().(client.Object))
	}
	return out
}
