package provision

// Design:
//
// The driver writes exactly one kind of object here: a new IPAddress,
// pre-bound to the claim (claimRef with the claim's UID), carrying the
// driver's teardown finalizer. It never writes a claim, and never writes an
// existing address: the core accepts the binding (§4 step 4, skipped when
// the UID is already there) and drives the phases.
//
// Double allocation is impossible by construction: an address's name is
// derived from its IP, so a second create of one IP fails with
// AlreadyExists. Double provisioning for one claim is prevented by
// remembering every address this reconciler created for a while (inflight,
// far longer than the cache takes to show it), and by letting the core bind
// Available addresses of the class before allocating anything new. A
// restart loses the memory but not the cache, which is synced before the
// first pass.
//
// The taken addresses of a class are listed from the cache at most once per
// usedTTL and completed with inflight, so a burst of claims costs a few
// lists, not one per claim.

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/allocator"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/quota"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/retry"
)

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=list;watch;create
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=list;watch
// A ResourceQuota that limits addresses must have charged a family to the
// claim before it is provisioned (package quota).
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=list;watch
// +kubebuilder:rbac:groups=metallb.io,resources=ipaddresspools,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// created is an address created for a claim's family, and when.
type created struct {
	name string
	at   time.Time
}

// inflightTTL is how long a created address is remembered as the claim's
// and as taken: far longer than the cache takes to show it, and than usedTTL.
const inflightTTL = time.Minute

// usedTTL is how long a list of a class's taken addresses is reused.
const usedTTL = 500 * time.Millisecond

// behindRecheck is how soon a claim that let older ones go first looks
// again: a claim ahead of it leaving the line wakes nobody else.
const behindRecheck = 2 * time.Second

// Reconciler provisions addresses for the driver's claims.
type Reconciler struct {
	Client  client.Client
	Books   metallb.Books
	Classes *metallb.Classes
	// Owners filters out the creations and updates of addresses of other
	// provisioners' classes; nil passes all.
	Owners   *metallb.ClassOwners
	Recorder *recorder.Recorder

	// mu serialises choosing addresses, so that concurrent passes never
	// pick the same free address; the creates run outside it.
	mu sync.Mutex
	// inflight are the addresses this reconciler created lately, by name;
	// claims the families it created them for, by claim UID — a claim
	// deleted and re-created under its name is another claim, owed its own
	// addresses at once.
	inflight map[string]inflight
	claims   map[types.UID]map[v1alpha1.IPFamily]created
	// used is, per class, the taken addresses listed from the cache
	// (refreshed after usedTTL) plus every address reserved since.
	used map[string]usedList
	// line is the waiting line of every class and family (index.NewLine):
	// new addresses go to its front first.
	line *index.Book
}

type inflight struct {
	class string
	ip    netip.Addr
	at    time.Time
}

// usedList is a class's taken addresses as listed at, within the ranges
// its pool had then: a pool edited or re-pointed since is listed anew, or
// an address a stranger holds in the new ranges would look free.
type usedList struct {
	ips    *allocator.Used
	ranges *netipx.IPSet
	at     time.Time
}

// fresh reports whether the list may still be used at now for ranges.
func (l usedList) fresh(now time.Time, ranges *netipx.IPSet) bool {
	sameRanges := l.ranges == ranges || l.ranges != nil && ranges != nil && l.ranges.Equal(ranges)
	return sameRanges && now.Sub(l.at) <= usedTTL
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.inflight = map[string]inflight{}
	r.claims = map[types.UID]map[v1alpha1.IPFamily]created{}
	r.used = map[string]usedList{}
	r.line = index.NewLine()
	if err := r.line.Feed(context.Background(), mgr.GetCache(), &v1alpha1.IPAddressClaim{}); err != nil {
		return err
	}
	if err := index.WatchNamespaces(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	stamped := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetAnnotations()[v1alpha1.AnnotationProvisioner] == metallb.Provisioner
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("metallb-iad-provision").
		For(&v1alpha1.IPAddressClaim{}, builder.WithPredicates(stamped)).
		Watches(&v1alpha1.IPAddress{}, r.addressHandler(), builder.WithPredicates(r.Owners.Relevant())).
		Watches(&v1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.Classes.ForClass(ctx, o, r.waiting)
		}), builder.WithPredicates(metallb.SpecChanged)).
		Watches(metallb.NewPool(), handler.EnqueueRequestsFromMapFunc(r.forPool), builder.WithPredicates(metallb.SpecChanged)).
		Watches(&corev1.ResourceQuota{}, handler.EnqueueRequestsFromMapFunc(r.claimsIn), builder.WithPredicates(index.QuotaLimitsAddresses)).
		WithOptions(retry.Options(workers)).
		Complete(r)
}

// addressHandler wakes the claim an address names and, when an address
// stops being Available or Released or goes away — which may leave a claim
// of its class unprovisioned (one that counted on it, as a kept address
// another claim took back) or make room in its pool — the claims waiting
// on its class.
// Only those transitions fan out: a burst of new addresses must not wake
// every waiting claim once per address.
func (r *Reconciler) addressHandler() handler.EventHandler {
	named := func(a *v1alpha1.IPAddress, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if ref := a.Spec.ClaimRef; ref != nil {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}})
		}
	}
	waiting := func(ctx context.Context, a *v1alpha1.IPAddress, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range index.Requests(ctx, r.Client, &v1alpha1.IPAddressClaimList{},
			client.MatchingFields{index.ClaimWaiting: index.WaitingKey(a.Spec.ClassName, binding.Family(a))}) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			named(e.Object.(*v1alpha1.IPAddress), q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, a := e.ObjectOld.(*v1alpha1.IPAddress), e.ObjectNew.(*v1alpha1.IPAddress)
			named(a, q)
			if old.Status.Phase == v1alpha1.AddressAvailable && a.Status.Phase != v1alpha1.AddressAvailable ||
				old.Status.Phase == v1alpha1.AddressReleased && a.Status.Phase != v1alpha1.AddressReleased {
				waiting(ctx, a, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if a, ok := e.Object.(*v1alpha1.IPAddress); ok {
				r.forget(a)
				named(a, q)
				waiting(ctx, a, q)
			}
		},
	}
}

func (r *Reconciler) forPool(ctx context.Context, o client.Object) []reconcile.Request {
	return r.Classes.ForPool(ctx, o, r.waiting)
}

// waiting are the claims of class still waiting for an address.
func (r *Reconciler) waiting(ctx context.Context, class string) []reconcile.Request {
	return index.WaitingOnClass(ctx, r.Client, class)
}

// Reconcile gathers a snapshot, decides, and creates the addresses.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var claim v1alpha1.IPAddressClaim
	if err := r.Client.Get(ctx, req.NamespacedName, &claim); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !serves(&claim) || index.NamespaceLeaving(ctx, r.Client, claim.Namespace) {
		// A claim deleted with its namespace any moment gets no address.
		return reconcile.Result{}, nil
	}
	class, obj, err := r.Classes.Class(ctx, className(&claim))
	if err != nil {
		return reconcile.Result{}, err
	}
	s := snapshot{claim: &claim, class: class, object: obj, policy: v1alpha1.ReclaimRetain}
	if obj != nil && obj.Spec.ReclaimPolicy != "" {
		s.policy = obj.Spec.ReclaimPolicy
	}

	r.mu.Lock()
	recheck, err := r.gather(ctx, &s)
	var p plan
	if err == nil {
		p = decide(s)
		r.reserve(claim.UID, p.create)
	}
	r.mu.Unlock()
	if err != nil {
		return reconcile.Result{}, err
	}

	if p.failure != "" {
		r.Recorder.Record(recorder.WarningOnce(&claim, metallb.ReasonProvisioningFailed, "%s", p.failure))
	}
	res, err := r.create(ctx, &claim, p.create)
	if err == nil && res.IsZero() && recheck > 0 {
		// Only the memory said the claim has a family: if the address it
		// remembers never shows up, nothing else would wake the claim.
		res.RequeueAfter = recheck
	}
	if err == nil && p.behind && (res.IsZero() || res.RequeueAfter > behindRecheck) {
		res.RequeueAfter = behindRecheck
	}
	return res, err
}

// create creates the reserved addresses in order. At the first failure the
// addresses not yet created are released — neither the claim's nor taken —
// so that the next pass provisions their families at once.
func (r *Reconciler) create(ctx context.Context, owner *v1alpha1.IPAddressClaim, addrs []*v1alpha1.IPAddress) (reconcile.Result, error) {
	claim := owner.UID
	for i, a := range addrs {
		err := r.Client.Create(ctx, a)
		if err == nil {
			continue
		}
		for _, rest := range addrs[i+1:] {
			r.release(claim, rest, true)
		}
		if apierrors.IsAlreadyExists(err) {
			// Someone else holds this IP: the cache will show it; until
			// then the reservation keeps it out of the next choice, but it
			// is not the claim's.
			r.release(claim, a, false)
			return retry.Again()
		}
		r.release(claim, a, true)
		if retry.Refusal(err) {
			// Most often the core's webhook, not knowing this driver as
			// one: the claim's owner and the operator see why nothing
			// comes, and the pass is retried with backoff.
			r.Recorder.Record(recorder.WarningOnce(owner, metallb.ReasonWriteRefused,
				"the API server refused IPAddress %s (%s) for this claim: %v", a.Name, a.Spec.Address, err))
			return retry.End(retry.Told(err))
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// gather fills the snapshot from the cache and the inflight memory; the
// caller holds mu. recheck is how soon the memory of a family the cache
// does not show yet expires: zero when the cache shows every family the
// memory claims.
func (r *Reconciler) gather(ctx context.Context, s *snapshot) (recheck time.Duration, err error) {
	s.has = map[v1alpha1.IPFamily]bool{}
	s.available = map[v1alpha1.IPFamily]bool{}
	var named v1alpha1.IPAddressList
	if err := index.AddressesNaming(ctx, r.Client, &named, s.claim.Namespace, s.claim.Name); err != nil {
		return 0, err
	}
	for i := range named.Items {
		if a := &named.Items[i]; binding.Holds(a, s.claim) || binding.PreBoundIn(a, s.claim, s.class.Name) {
			s.has[binding.Family(a)] = true
		}
	}
	for _, f := range s.claim.Spec.Family.Families() {
		var avail v1alpha1.IPAddressList
		if err := r.Client.List(ctx, &avail, client.MatchingFields{index.AddressPool: index.PoolKey(s.class.Name, f, v1alpha1.AddressAvailable)}, client.Limit(1)); err != nil {
			return 0, err
		}
		s.available[f] = len(avail.Items) > 0
		if !s.available[f] && s.object != nil && s.object.Spec.KeepReleasedInNamespace {
			kept, err := r.keptInNamespace(ctx, s.claim, s.class.Name, f)
			if err != nil {
				return 0, err
			}
			s.available[f] = kept
		}
	}
	now := time.Now()
	list := r.used[s.class.Name]
	if !list.fresh(now, s.class.Ranges) {
		ips, err := r.Books.Used(ctx, s.class)
		if err != nil {
			return 0, err
		}
		r.expire(now)
		for _, e := range r.inflight {
			if e.class == s.class.Name {
				ips = append(ips, e.ip)
			}
		}
		list = usedList{ips: allocator.NewUsed(ips), ranges: s.class.Ranges, at: now}
		r.used[s.class.Name] = list
	}
	if s.uncharged, err = r.uncharged(ctx, s); err != nil {
		return 0, err
	}
	s.used = list.ips
	if s.ahead, err = r.ahead(ctx, s); err != nil {
		return 0, err
	}
	for f, c := range r.claims[s.claim.UID] {
		if now.Sub(c.at) >= inflightTTL {
			continue // expired; dropped with the next refresh of the list
		}
		if !s.has[f] {
			s.has[f] = true
			if left := inflightTTL - now.Sub(c.at); recheck == 0 || left < recheck {
				recheck = max(left, time.Millisecond)
			}
		}
	}
	return recheck, nil
}

// ahead counts, per family, the claims in line before this one that have
// no address of the family yet. It looks only when the pool has room, but
// not for the whole line — the one case where the order decides who gets
// an address — and stops counting at the pool's room: past it the claim
// waits anyway, so a long line costs no more than the room it shares.
func (r *Reconciler) ahead(ctx context.Context, s *snapshot) (map[v1alpha1.IPFamily]int, error) {
	out := map[v1alpha1.IPFamily]int{}
	if r.line == nil || s.class.Ranges == nil {
		return out, nil
	}
	mine := index.LineEntry(s.claim)
	for _, f := range s.claim.Spec.Family.Families() {
		key := index.WaitingKey(s.class.Name, f)
		n := r.line.Len(key)
		room := allocator.Free(s.class.Ranges, s.used, f, n+1)
		if room == 0 || room > n {
			continue
		}
		var err error
		r.line.Walk(key, func(entry string) bool {
			if entry >= mine || out[f] >= room {
				return false
			}
			var has bool
			if has, err = r.hasAddress(ctx, index.LineClaim(entry), f); err == nil && !has {
				out[f]++
			}
			return err == nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// hasAddress reports whether the claim namespace/name has a live address
// of family f: one it waits to be reported, not one a claim of its name
// before it left behind.
func (r *Reconciler) hasAddress(ctx context.Context, claimKey string, f v1alpha1.IPFamily) (bool, error) {
	namespace, name, _ := strings.Cut(claimKey, "/")
	var named v1alpha1.IPAddressList
	if err := index.AddressesNaming(ctx, r.Client, &named, namespace, name, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	return slices.ContainsFunc(named.Items, func(a v1alpha1.IPAddress) bool {
		return binding.Family(&a) == f && (a.DeletionTimestamp == nil || protected(&a)) && a.Status.Phase != v1alpha1.AddressReleased
	}), nil
}

// protected reports whether the core keeps address a, deleted, for the
// claim that holds it (§5.1): it stays that claim's address, and the claim
// gets no second one of its family.
func protected(a *v1alpha1.IPAddress) bool {
	return controllerutil.ContainsFinalizer(a, v1alpha1.FinalizerAddressProtection)
}

// expire forgets what is older than inflightTTL; the caller holds mu.
func (r *Reconciler) expire(now time.Time) {
	for name, e := range r.inflight {
		if now.Sub(e.at) > inflightTTL {
			delete(r.inflight, name)
		}
	}
	for key, fams := range r.claims {
		for f, c := range fams {
			if now.Sub(c.at) > inflightTTL {
				delete(fams, f)
			}
		}
		if len(fams) == 0 {
			delete(r.claims, key)
		}
	}
}

// reserve remembers the addresses a pass is about to create; the caller
// holds mu.
func (r *Reconciler) reserve(claim types.UID, addrs []*v1alpha1.IPAddress) {
	now := time.Now()
	for _, a := range addrs {
		ip := netip.MustParseAddr(a.Spec.Address)
		r.inflight[a.Name] = inflight{class: a.Spec.ClassName, ip: ip, at: now}
		if r.claims[claim] == nil {
			r.claims[claim] = map[v1alpha1.IPFamily]created{}
		}
		r.claims[claim][binding.Family(a)] = created{name: a.Name, at: now}
		if list, ok := r.used[a.Spec.ClassName]; ok {
			list.ips.Add(ip)
		}
	}
}

// forget drops the memory of address a once the cache shows it gone: its
// IP is free again at once, and its claim is owed the family again at once
// (an address removed by force, or deleted once Lost), not when the memory
// would have expired.
func (r *Reconciler) forget(a *v1alpha1.IPAddress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inflight, a.Name)
	delete(r.used, a.Spec.ClassName)
	if ref := a.Spec.ClaimRef; ref != nil {
		if c, ok := r.claims[ref.UID][binding.Family(a)]; ok && c.name == a.Name {
			delete(r.claims[ref.UID], binding.Family(a))
		}
	}
}

// release undoes a reservation whose create failed: the address is not the
// claim's, and — unless it exists already (taken) — not taken either.
func (r *Reconciler) release(claim types.UID, a *v1alpha1.IPAddress, free bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.claims[claim], binding.Family(a))
	if free {
		delete(r.inflight, a.Name)
		// The class's list of used addresses, reused while fresh, has
		// this one: the next pass lists anew and offers it again, rather
		// than the next free address (a refusal told on the claim would
		// name another address at each retry, and be told again).
		delete(r.used, a.Spec.ClassName)
	}
}

// uncharged are the families of the claim that a ResourceQuota of its
// namespace limits and has not charged to it (from the cache: a charge the
// cache has yet to show only delays provisioning).
func (r *Reconciler) uncharged(ctx context.Context, s *snapshot) (map[v1alpha1.IPFamily]bool, error) {
	var quotas corev1.ResourceQuotaList
	if err := r.Client.List(ctx, &quotas, client.InNamespace(s.claim.Namespace)); err != nil {
		return nil, err
	}
	out := map[v1alpha1.IPFamily]bool{}
	for i := range quotas.Items {
		rq := &quotas.Items[i]
		if len(quota.Keys(rq, s.class.Name)) == 0 {
			continue
		}
		for _, f := range s.claim.Spec.Family.Families() {
			if !quota.ChargesOf(rq).Holds(s.claim.UID, s.class.Name, f) {
				out[f] = true
			}
		}
	}
	return out, nil
}

// claimsIn: a quota's charges changed; the claims of its namespace may
// have been charged a family.
func (r *Reconciler) claimsIn(ctx context.Context, o client.Object) []reconcile.Request {
	if rq, ok := o.(*corev1.ResourceQuota); !ok || !quota.Ours(rq) {
		return nil
	}
	return index.Requests(ctx, r.Client, &v1alpha1.IPAddressClaimList{}, client.InNamespace(o.GetNamespace()))
}

// keptInNamespace reports whether the claim's class keeps a Released
// address of family f in the claim's namespace: the core binds that one to
// the claim, so nothing is provisioned for it.
func (r *Reconciler) keptInNamespace(ctx context.Context, claim *v1alpha1.IPAddressClaim, class string, f v1alpha1.IPFamily) (bool, error) {
	var released v1alpha1.IPAddressList
	if err := r.Client.List(ctx, &released, client.MatchingFields{index.AddressPool: index.PoolKey(class, f, v1alpha1.AddressReleased)}); err != nil {
		return false, err
	}
	return slices.ContainsFunc(released.Items, func(a v1alpha1.IPAddress) bool {
		return a.DeletionTimestamp == nil && a.Spec.ClaimRef != nil && a.Spec.ClaimRef.Namespace == claim.Namespace
	}), nil
}
