package claim

import (
	"context"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/index"
)

// matcher wakes waiting claims when addresses of their pool (class and
// family) become Available, and again whenever a claim enters or leaves the
// pool's waiting set, until no Available address is left unclaimed. Its requests are pools, so a burst of addresses
// becoming Available collapses into few passes, and a pass wakes only as
// many waiting claims as there are Available addresses, oldest first: the
// cost is linear in the pool, never waiting claims × addresses.
type matcher struct {
	client client.Client
	wake   chan<- event.TypedGenericEvent[*v1alpha1.IPAddressClaim]
	// free counts a pool's free addresses without listing them.
	free *index.Book
}

// waitingChanged enqueues the pools a claim enters or leaves. Leaving
// matters as much as entering: a claim woken for an address may turn out
// bound already (the index still listed it), and the pool's next waiting
// claim is then woken on the pass its leaving triggers.
func waitingChanged() handler.TypedEventHandler[*v1alpha1.IPAddressClaim, reconcile.Request] {
	enqueue := func(keys []string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, k := range keys {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: k}})
		}
	}
	return handler.TypedFuncs[*v1alpha1.IPAddressClaim, reconcile.Request]{
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1alpha1.IPAddressClaim], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			before, after := index.WaitingKeys(e.ObjectOld), index.WaitingKeys(e.ObjectNew)
			if !slices.Equal(before, after) {
				enqueue(before, q)
				enqueue(after, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*v1alpha1.IPAddressClaim], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(index.WaitingKeys(e.Object), q)
		},
	}
}

// becameAvailable enqueues an address's pool when the address becomes
// matchable — created Available, or turned Available — and on no other
// change: a bind, which starts from Available, must not wake the pool.
func becameAvailable() handler.TypedEventHandler[*v1alpha1.IPAddress, reconcile.Request] {
	enqueue := func(a *v1alpha1.IPAddress, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: index.WaitingKey(a.Spec.ClassName, binding.Family(a))}})
	}
	return handler.TypedFuncs[*v1alpha1.IPAddress, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*v1alpha1.IPAddress], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if free(e.Object) {
				enqueue(e.Object, q)
			}
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1alpha1.IPAddress], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if free(e.ObjectNew) && !free(e.ObjectOld) {
				enqueue(e.ObjectNew, q)
			}
		},
	}
}

func (m *matcher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var claims v1alpha1.IPAddressClaimList
	if err := m.client.List(ctx, &claims, client.UnsafeDisableDeepCopy, client.MatchingFields{index.ClaimWaiting: req.Name}); err != nil || len(claims.Items) == 0 {
		return reconcile.Result{}, err
	}
	class, family, _ := strings.Cut(req.Name, "/")
	key := index.PoolKey(class, v1alpha1.IPFamily(family), v1alpha1.AddressAvailable)
	available := 0
	if m.free != nil {
		available = m.free.Len(key)
	}
	if available == 0 {
		// The book is fed by its own handler and may not have filed the
		// address whose arrival woke this pass; the cache has it.
		var addrs v1alpha1.IPAddressList
		if err := m.client.List(ctx, &addrs, client.UnsafeDisableDeepCopy, client.MatchingFields{index.AddressPool: key}); err != nil {
			return reconcile.Result{}, err
		}
		available = len(addrs.Items)
	}
	for _, c := range oldestFirst(claims.Items, available) {
		select {
		case m.wake <- event.TypedGenericEvent[*v1alpha1.IPAddressClaim]{Object: c}:
		case <-ctx.Done():
			return reconcile.Result{}, ctx.Err()
		}
	}
	return reconcile.Result{}, nil
}

// oldestFirst picks the n oldest claims (creation time, then namespace/name).
func oldestFirst(claims []v1alpha1.IPAddressClaim, n int) []*v1alpha1.IPAddressClaim {
	sort.Slice(claims, func(i, j int) bool {
		a, b := claims[i], claims[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return index.ClaimKey(a.Namespace, a.Name) < index.ClaimKey(b.Namespace, b.Name)
	})
	out := make([]*v1alpha1.IPAddressClaim, 0, min(n, len(claims)))
	for i := 0; i < n && i < len(claims); i++ {
		out = append(out, &claims[i])
	}
	return out
}
