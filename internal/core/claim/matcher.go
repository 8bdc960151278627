package claim

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

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
	// line is the waiting line, the claims of each pool oldest first
	// (nil in tests without a manager: the cache is listed).
	line *index.Book
}

// waitingChanged enqueues the pools a claim enters or leaves the line of.
// Leaving matters as much as entering: a claim woken for an address may
// turn out bound already (the index still listed it), or held back by its
// quota, and the pool's next waiting claim is then woken on the pass its
// leaving triggers.
func waitingChanged() handler.TypedEventHandler[*v1alpha1.IPAddressClaim, reconcile.Request] {
	enqueue := func(keys []string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, k := range keys {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: k}})
		}
	}
	return handler.TypedFuncs[*v1alpha1.IPAddressClaim, reconcile.Request]{
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1alpha1.IPAddressClaim], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			before, after := index.LineKeys(e.ObjectOld), index.LineKeys(e.ObjectNew)
			if !slices.Equal(before, after) {
				enqueue(before, q)
				enqueue(after, q)
				// Left or entered: a claim entering at its creation time
				// (its quota raised, re-targeted here) may go ahead of others.
				moved(symmetricDifference(before, after), q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*v1alpha1.IPAddressClaim], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(index.LineKeys(e.Object), q)
			moved(index.LineKeys(e.Object), q)
		},
	}
}

// movedLine marks a request for a line a claim left or entered: the
// claims near its front may have changed places, which their Bound
// condition gives.
const movedLine = "moved"

// movedDelay lets the line's book, fed by a handler of its own, file the
// move before the claims near the front read their places from it.
const movedDelay = 250 * time.Millisecond

// moved enqueues, for each line of keys, a request to tell the claims near
// its front their places.
func moved(keys []string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	for _, k := range keys {
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: movedLine, Name: k}}, movedDelay)
	}
}

// symmetricDifference are the keys in one of a and b only.
func symmetricDifference(a, b []string) []string {
	var out []string
	for _, k := range a {
		if !slices.Contains(b, k) {
			out = append(out, k)
		}
	}
	for _, k := range b {
		if !slices.Contains(a, k) {
			out = append(out, k)
		}
	}
	return out
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
	if req.Namespace == movedLine {
		if m.line == nil {
			return reconcile.Result{}, nil
		}
		// Only in a line with nothing left to bind, and only the places
		// given exactly: where addresses are free, the front binds, and
		// that is the request without the mark.
		if available, err := m.available(ctx, req.Name); err != nil || available > 0 {
			return reconcile.Result{}, err
		}
		claims, _, err := m.fromLine(ctx, req.Name, exactPlaces)
		if err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, m.wakeAll(ctx, claims)
	}
	if m.line != nil && m.line.Len(req.Name) > 0 {
		available, err := m.available(ctx, req.Name)
		if err != nil || available == 0 {
			return reconcile.Result{}, err
		}
		claims, ok, err := m.fromLine(ctx, req.Name, available)
		if err != nil {
			return reconcile.Result{}, err
		}
		if ok {
			return reconcile.Result{}, m.wakeAll(ctx, claims)
		}
	}
	var claims v1alpha1.IPAddressClaimList
	if err := m.client.List(ctx, &claims, client.UnsafeDisableDeepCopy, client.MatchingFields{index.ClaimWaiting: req.Name}); err != nil {
		return reconcile.Result{}, err
	}
	// A claim its quota holds back could not take an address: it would
	// spend a wake-up a claim in line can use.
	claims.Items = slices.DeleteFunc(claims.Items, func(c v1alpha1.IPAddressClaim) bool { return index.HeldByQuota(&c) })
	if len(claims.Items) == 0 {
		return reconcile.Result{}, nil
	}
	available, err := m.available(ctx, req.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, m.wakeAll(ctx, oldestFirst(claims.Items, available))
}

// available is how many addresses of the pool waiting key names are free.
func (m *matcher) available(ctx context.Context, waiting string) (int, error) {
	class, family, _ := strings.Cut(waiting, "/")
	key := index.PoolKey(class, v1alpha1.IPFamily(family), v1alpha1.AddressAvailable)
	if m.free != nil {
		if n := m.free.Len(key); n > 0 {
			return n, nil
		}
	}
	// The book is fed by its own handler and may not have filed the
	// address whose arrival woke this pass; the cache has it.
	var addrs v1alpha1.IPAddressList
	if err := m.client.List(ctx, &addrs, client.UnsafeDisableDeepCopy, client.MatchingFields{index.AddressPool: key}); err != nil {
		return 0, err
	}
	return len(addrs.Items), nil
}

// fromLine is the n oldest claims of the waiting line under key that the
// cache shows still waiting there, walked in order without listing the
// line: a burst of claims makes it tens of thousands long, and a list
// copies each one. ok is false when the line names fewer than n: it may
// lag the cache by an event, and a claim it has yet to file would then
// never be woken; the caller asks the cache instead.
func (m *matcher) fromLine(ctx context.Context, key string, n int) (claims []*v1alpha1.IPAddressClaim, ok bool, err error) {
	m.line.Walk(key, func(entry string) bool {
		ns, name, _ := strings.Cut(index.LineClaim(entry), "/")
		var c v1alpha1.IPAddressClaim
		if err = m.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &c); client.IgnoreNotFound(err) != nil {
			return false
		}
		err = nil
		if c.Name != "" && slices.Contains(index.WaitingKeys(&c), key) {
			claims = append(claims, &c)
		}
		return len(claims) < n
	})
	return claims, err == nil && len(claims) == n, err
}

// wakeAll hands claims to the claim controller.
func (m *matcher) wakeAll(ctx context.Context, claims []*v1alpha1.IPAddressClaim) error {
	for _, c := range claims {
		select {
		case m.wake <- event.TypedGenericEvent[*v1alpha1.IPAddressClaim]{Object: c}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
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
