package claim

// Design:
//
// IPAddress.spec.claimRef is the only binding record. A claim's status is a
// projection of the claimRefs naming it, recomputed on every pass and never
// trusted as input — except to prefer the address a claim already reports
// when two binders raced.
//
// Write order in a pass: the claim's metadata (protection finalizer,
// provisioner stamp) first, so a claim is never bound without a route
// through reclaim; then the addresses (claimRef, written with the resource
// version read, so of two binders racing for one address exactly one
// succeeds and the other re-lists and takes the next candidate); then the
// claim's status. A crash between any two writes leaves a state the next
// pass completes: an address whose claimRef names the claim is collected
// whatever the claim's status says.
//
// Who writes what: drivers create addresses pre-bound (claimRef without a
// UID); this reconciler accepts a pre-binding by writing the UID, binds
// Available addresses by writing a whole claimRef, and writes the claim's
// status and metadata. The address reconciler owns address phases except
// Released set here by reclaim, which precedes the claim's disappearance.
//
// Every address this reconciler writes is remembered (assumeCache) until the
// informer delivers it, so a pass on a stale cache neither binds a claim
// twice nor offers an address it has just bound. A claim is woken by the
// addresses naming it, by the address it pre-binds, by class changes while
// its class is unresolved or while it waits on the changed class, and by
// the matcher — which, per pool of class and family, wakes only as many
// waiting claims as there are Available addresses, oldest first, instead of
// every waiting claim in the cluster.
//
// Nothing in a pass lists a pool or a line: two books fed by the informers
// (index.Book) keep the free addresses of each pool and the waiting claims
// of each line in order, so a pass takes the smallest free address and
// finds its place in line at O(log n) — a /16 binds as fast per claim as a
// /24. The books only point; what they name is read from the cache and
// judged there.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/lastwrite"
	"github.com/cozystack/address-controller/internal/lock"
	"github.com/cozystack/address-controller/internal/metrics"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/retry"
	"github.com/cozystack/address-controller/internal/untrack"
)

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims/status,verbs=update
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=list;watch;update;patch;delete
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses/status,verbs=update
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// Reconciler binds claims (§4) and reclaims their addresses (§6).
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache before a pass takes from a claim an
	// address it reports (confirm).
	APIReader client.Reader
	Recorder  *recorder.Recorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	once     sync.Once
	assumed  *assumeCache
	versions *lastwrite.Versions
	wake     chan event.TypedGenericEvent[*v1alpha1.IPAddressClaim]
	// freeBook files free addresses by pool, waitingBook waiting claims by
	// WaitingKey: counts and smallest names without listing (nil in tests
	// run without a manager: the indexes answer alone).
	freeBook, waitingBook *index.Book
}

// init readies the reconciler's memory: at setup, or at the first
// Reconcile of one a test runs without a manager.
func (r *Reconciler) init() {
	r.once.Do(func() {
		r.assumed = newAssumeCache()
		r.versions = lastwrite.New()
		r.wake = make(chan event.TypedGenericEvent[*v1alpha1.IPAddressClaim], 1024)
		if r.Now == nil {
			r.Now = time.Now
		}
	})
}

// SetupWithManager registers the claim controller and its matcher.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.init()
	r.freeBook = index.NewBook(func(o client.Object) []string {
		if a := o.(*v1alpha1.IPAddress); free(a) {
			return []string{index.PoolKey(a.Spec.ClassName, binding.Family(a), v1alpha1.AddressAvailable)}
		}
		return nil
	})
	r.waitingBook = index.NewLine()
	if err := r.freeBook.Feed(context.Background(), mgr.GetCache(), &v1alpha1.IPAddress{}); err != nil {
		return err
	}
	if err := r.waitingBook.Feed(context.Background(), mgr.GetCache(), &v1alpha1.IPAddressClaim{}); err != nil {
		return err
	}
	if err := index.WatchNamespaces(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("ipaddressclaim").
		For(&v1alpha1.IPAddressClaim{}).
		Watches(&v1alpha1.IPAddress{}, r.addressHandler()).
		Watches(&v1alpha1.IPAddressClass{}, r.classHandler()).
		Watches(&v1alpha1.IPAddressClass{}, r.readinessHandler()).
		Watches(&corev1.ResourceQuota{}, handler.EnqueueRequestsFromMapFunc(r.waitingInNamespace), builder.WithPredicates(index.QuotaLimitsAddresses)).
		WatchesRawSource(source.Channel(r.wake, &handler.TypedEnqueueRequestForObject[*v1alpha1.IPAddressClaim]{})).
		WithOptions(retry.Options(workers)).
		Complete(r)
	if err != nil {
		return err
	}
	m := &matcher{client: mgr.GetClient(), wake: r.wake, free: r.freeBook, line: r.waitingBook}
	return ctrl.NewControllerManagedBy(mgr).
		Named("ipaddressclaim-matcher").
		WatchesRawSource(source.Kind(mgr.GetCache(), &v1alpha1.IPAddress{}, becameAvailable())).
		WatchesRawSource(source.Kind(mgr.GetCache(), &v1alpha1.IPAddressClaim{}, waitingChanged())).
		WithOptions(retry.Options(1)).
		Complete(m)
}

// addressHandler wakes the claim an address names (before and after a
// change) and the claim that pre-binds it by spec.addressName.
func (r *Reconciler) addressHandler() handler.EventHandler {
	mapAddr := func(ctx context.Context, a *v1alpha1.IPAddress, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if ref := a.Spec.ClaimRef; ref != nil {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}})
		}
		var claims v1alpha1.IPAddressClaimList
		if err := r.Client.List(ctx, &claims, client.MatchingFields{index.ClaimAddressName: a.Name}); err == nil {
			for i := range claims.Items {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.assumed.caughtUp(e.Object.(*v1alpha1.IPAddress))
			mapAddr(ctx, e.Object.(*v1alpha1.IPAddress), q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			oldA, a := e.ObjectOld.(*v1alpha1.IPAddress), e.ObjectNew.(*v1alpha1.IPAddress)
			r.assumed.caughtUp(a)
			mapAddr(ctx, oldA, q)
			mapAddr(ctx, a, q)
			if keptFreed(oldA, a) {
				for _, req := range index.Requests(ctx, r.Client, &v1alpha1.IPAddressClaimList{}, client.InNamespace(a.Spec.ClaimRef.Namespace),
					client.MatchingFields{index.ClaimWaiting: index.WaitingKey(a.Spec.ClassName, binding.Family(a))}) {
					q.Add(req)
				}
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if a, ok := e.Object.(*v1alpha1.IPAddress); ok {
				r.assumed.forget(a.Name)
				mapAddr(ctx, a, q)
			}
		},
	}
}

// keptFreed reports whether address a has just become one a claim of its
// namespace may take back, were its class to keep Released addresses
// there (rebindable): Released, and let go by its driver from every
// workload. Nothing else wakes the claims waiting in that namespace on its
// class and family — they are not the claim its claimRef names — so the
// handler does; in any other class their pass finds nothing new.
func keptFreed(old, a *v1alpha1.IPAddress) bool {
	free := func(x *v1alpha1.IPAddress) bool {
		return x.Status.Phase == v1alpha1.AddressReleased && x.DeletionTimestamp == nil && x.Spec.ClaimRef != nil &&
			x.Status.AssociatedTo == nil && x.Status.Holding == nil
	}
	return free(a) && !free(old)
}

// readinessHandler wakes the claims waiting on a class when its driver's
// Ready condition changes: their Bound condition relays it.
func (r *Reconciler) readinessHandler() handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			oldC := meta.FindStatusCondition(e.ObjectOld.(*v1alpha1.IPAddressClass).Status.Conditions, v1alpha1.ConditionReady)
			newC := meta.FindStatusCondition(e.ObjectNew.(*v1alpha1.IPAddressClass).Status.Conditions, v1alpha1.ConditionReady)
			if equality.Semantic.DeepEqual(oldC, newC) {
				return
			}
			for _, req := range index.WaitingOnClass(ctx, r.Client, e.ObjectNew.GetName()) {
				q.Add(req)
			}
		},
	}
}

// classHandler: a class change retries the claims still waiting on the
// class, for any address or for the one they name — its deletion (or the
// start of it) must turn their ClassResolved
// condition to ClassNotFound at once, not when something else wakes them,
// and its counts say whether they wait on an exhausted class — and, when it
// can change how classes resolve, the claims whose class did not resolve.
// Not on a write of the class's status alone: the core rewrites the counts
// every few seconds while claims bind, and each would re-run every
// unresolved claim of the cluster, however many a tenant made.
func (r *Reconciler) classHandler() handler.EventHandler {
	enqueue := func(ctx context.Context, class client.Object, unresolved bool, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if unresolved {
			for _, req := range index.Requests(ctx, r.Client, &v1alpha1.IPAddressClaimList{}, client.MatchingFields{index.ClaimUnresolved: index.Unresolved}) {
				q.Add(req)
			}
		}
		for _, req := range index.WaitingOnClass(ctx, r.Client, class.GetName()) {
			q.Add(req)
		}
		for _, req := range index.NamingOnClass(ctx, r.Client, class.GetName()) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, true, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if countsOnly(e) {
				return
			}
			enqueue(ctx, e.ObjectNew, resolvesAnew(e), q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, true, q)
		},
	}
}

// countsOnly says whether a class update changed nothing but the core's
// counts of its addresses by phase (status.addresses), which no waiting
// claim reads: what it does read — Ready, Exhausted, the driver's capacity —
// changes in conditions and status.capacity. The core rewrites the counts
// every few seconds while addresses move, and each write re-ran every claim
// waiting on the class.
func countsOnly(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*v1alpha1.IPAddressClass)
	n, ok2 := e.ObjectNew.(*v1alpha1.IPAddressClass)
	if !ok1 || !ok2 || equality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses) {
		return false
	}
	ob, nb := o.DeepCopy(), n.DeepCopy()
	for _, c := range []*v1alpha1.IPAddressClass{ob, nb} {
		c.Status.Addresses, c.ResourceVersion, c.ManagedFields = nil, "", nil
	}
	return equality.Semantic.DeepEqual(ob, nb)
}

// resolvesAnew says whether a class update can change how a claim's class
// resolves: its spec (the provisioner), its annotations (the default-class
// mark), the start of its deletion, or a namesake replacing it.
func resolvesAnew(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	return o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
		o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() || index.Replaced(e)
}

// Reconcile gathers a snapshot, decides, and carries out the plan.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.init()
	var claim v1alpha1.IPAddressClaim
	if err := r.Client.Get(ctx, req.NamespacedName, &claim); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.versions.Stale(req.NamespacedName, claim.ResourceVersion) {
		// The cache has yet to deliver this binder's own last write.
		return retry.Again()
	}
	if claim.DeletionTimestamp == nil && index.NamespaceLeaving(ctx, r.Client, claim.Namespace) {
		// Deleted with its namespace any moment: its deletion wakes it.
		return reconcile.Result{}, nil
	}
	s, reserved, err := r.gather(ctx, &claim)
	defer r.assumed.unreserve(reserved...)
	if errors.Is(err, errBusy) {
		return retry.Again()
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	refused := false
	if s.quota, err = r.charge(ctx, &s); err != nil {
		if !retry.Refusal(err) {
			return retry.End(err)
		}
		// Its charge cannot be written (the charges annotation past its
		// limit, a policy guarding quotas): the claim waits as on a full
		// quota, its status and event quoting the refusal, and is looked
		// at again with backoff.
		s.quota, refused = "the API server refused this claim's quota charge: "+err.Error(), true
	}
	p := decide(s)
	if unsure(&claim, p) {
		switch err := r.confirm(ctx, &claim, &s); {
		case errors.Is(err, errStale):
			return retry.Again()
		case err != nil:
			return reconcile.Result{}, err
		}
		p = decide(s)
	}
	err = r.execute(ctx, &claim, p)
	if apierrors.IsConflict(err) {
		// Another binder or a newer version won; the next pass re-reads.
		logf.FromContext(ctx).V(1).Info("retrying after a conflict", "reason", err.Error())
		return retry.Again()
	}
	if refused && err == nil {
		return retry.Again()
	}
	return reconcile.Result{RequeueAfter: p.recheck}, err
}

// confirm reads the addresses naming the claim again from the API server,
// in place of the cache's: each kind is watched apart, and a binding
// another binder (a previous leader) wrote may not have reached this
// cache's addresses while the claim's status it wrote has.
func (r *Reconciler) confirm(ctx context.Context, claim *v1alpha1.IPAddressClaim, s *snapshot) error {
	if r.APIReader == nil {
		return nil
	}
	// The claim first: a cache older than the API server's claim (its
	// status written by another binder) is waited for, not acted on.
	var current v1alpha1.IPAddressClaim
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(claim), &current); client.IgnoreNotFound(err) != nil {
		return err
	}
	if current.UID != claim.UID || current.ResourceVersion != claim.ResourceVersion {
		return errStale
	}
	var live v1alpha1.IPAddressList
	if err := r.APIReader.List(ctx, &live, client.MatchingFields{
		index.SelectableClaimNamespace: claim.Namespace, index.SelectableClaimName: claim.Name}); err != nil {
		return err
	}
	names := func(a *v1alpha1.IPAddress) bool { return binding.Names(a, claim) }
	others := slices.DeleteFunc(s.addresses, func(a v1alpha1.IPAddress) bool { return names(&a) })
	s.addresses = append(r.assumed.overlay(live.Items, names), others...)
	return nil
}

// errStale: the cache holds an older claim than the API server.
var errStale = errors.New("the cache has yet to catch up with the claim")

// errBusy: every free candidate is being bound by another worker right now.
var errBusy = errors.New("every candidate is in flight")

// errDetaching: the family's kept address is still attached to its old
// Service (detaching).
var errDetaching = errors.New("the kept address is still attached")

// gather reads the snapshot from the cache, overlaid with this binder's own
// writes the cache has not delivered yet. The candidates it passes on are
// reserved for this pass (the caller unreserves them).
func (r *Reconciler) gather(ctx context.Context, claim *v1alpha1.IPAddressClaim) (snapshot, []string, error) {
	var classes v1alpha1.IPAddressClassList
	if err := r.Client.List(ctx, &classes); err != nil {
		return snapshot{}, nil, err
	}
	s := newSnapshot(claim, nil, classes.Items, r.Now())
	var named v1alpha1.IPAddressList
	if err := index.AddressesNaming(ctx, r.Client, &named, claim.Namespace, claim.Name); err != nil {
		return s, nil, err
	}
	s.addresses = r.assumed.overlay(named.Items, func(a *v1alpha1.IPAddress) bool { return binding.Names(a, claim) })
	if claim.DeletionTimestamp != nil {
		return s, nil, nil
	}
	s.detaching = map[v1alpha1.IPFamily]string{}
	var err error
	if s.named, err = r.named(ctx, claim); err != nil {
		return s, nil, err
	}
	candidates, err := r.candidates(ctx, claim, s.class.class, s.detaching)
	var reserved []string
	for i := range candidates {
		reserved = append(reserved, candidates[i].Name)
	}
	s.addresses = append(s.addresses, candidates...)
	if err != nil {
		return s, reserved, err
	}
	s.line, err = r.queue(ctx, claim, s.class.class)
	return s, reserved, err
}

// named is the address the claim names (spec.addressName) as the cache
// shows it, nil when it names none or there is none: what its wait says.
func (r *Reconciler) named(ctx context.Context, claim *v1alpha1.IPAddressClaim) (*v1alpha1.IPAddress, error) {
	if claim.Spec.AddressName == "" {
		return nil, nil
	}
	var a v1alpha1.IPAddress
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: claim.Spec.AddressName}, &a); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &a, nil
}

// candidates lists the Available addresses the claim could match: the one
// it pre-binds by name, or the smallest free one of its class per family it
// wants. Each is reserved, so the other workers of this process pass on to
// the next instead of racing for it. A family whose kept address is still
// being detached gets none; detaching names that address.
func (r *Reconciler) candidates(ctx context.Context, claim *v1alpha1.IPAddressClaim, class *v1alpha1.IPAddressClass, detaching map[v1alpha1.IPFamily]string) ([]v1alpha1.IPAddress, error) {
	if claim.Spec.AddressName != "" {
		var a v1alpha1.IPAddress
		err := r.Client.Get(ctx, types.NamespacedName{Name: claim.Spec.AddressName}, &a)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		named := r.assumed.overlay([]v1alpha1.IPAddress{a}, free)
		switch {
		case len(named) == 0:
			return nil, nil
		case !r.assumed.reserve(a.Name):
			return nil, errBusy
		}
		return named, nil
	}
	// A claim whose status reports every family needs no candidates; if
	// those addresses turn out to be gone it goes Lost, and the next pass
	// lists candidates again.
	if class == nil || len(binding.UnreportedFamilies(claim)) == 0 {
		return nil, nil
	}
	var out []v1alpha1.IPAddress
	for _, f := range claim.Spec.Family.Families() {
		kept, err := r.keptInNamespace(ctx, claim, class, f)
		if errors.Is(err, errDetaching) {
			detaching[f] = kept.Name // the family waits for its own address
			continue
		}
		if kept != nil || err != nil {
			if kept != nil {
				out = append(out, *kept)
			}
			if err != nil {
				return out, err
			}
			continue
		}
		a, busy, err := r.smallestFree(ctx, class.Name, f)
		switch {
		case err != nil:
			return out, err
		case a != nil:
			out = append(out, *a)
		case busy:
			// Only in-flight candidates: one may fail and be free again.
			return out, errBusy
		}
	}
	return out, nil
}

// bookPeek is how many of a pool's smallest free addresses a pass tries
// from the book before it lists the pool: more than the workers that may
// hold one in flight.
const bookPeek = 64

// smallestFree reserves the smallest free address of family f of class:
// from the book of free addresses, each confirmed against the cache, else
// (the book lags or names only in-flight ones) from a read-only, uncopied
// list of the pool. busy reports that an address was passed over only
// because another worker holds it.
func (r *Reconciler) smallestFree(ctx context.Context, class string, f v1alpha1.IPFamily) (*v1alpha1.IPAddress, bool, error) {
	key := index.PoolKey(class, f, v1alpha1.AddressAvailable)
	if r.freeBook != nil {
		for _, name := range r.freeBook.First(key, bookPeek) {
			var a v1alpha1.IPAddress
			if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &a); client.IgnoreNotFound(err) != nil {
				return nil, false, err
			} else if err != nil {
				continue
			}
			if got, _ := r.assumed.reserveSmallest([]v1alpha1.IPAddress{a}, free); got != nil {
				return got, false, nil
			}
		}
	}
	var list v1alpha1.IPAddressList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy, client.MatchingFields{index.AddressPool: key}); err != nil {
		return nil, false, err
	}
	a, busy := r.assumed.reserveSmallest(list.Items, free)
	return a, busy, nil
}

// keptInNamespace is, in a class that keeps Released addresses in their
// namespace, the one of family f the claim takes before anything else
// (rebindable, releasedFirst), reserved for this pass; nil when there is
// none. Only in-flight ones: errBusy, since an Available address must not
// be taken while the namespace still has one of its own; one of the
// claim's name still attached, and none of its name free: that one, with
// errDetaching, whatever else the namespace keeps.
func (r *Reconciler) keptInNamespace(ctx context.Context, claim *v1alpha1.IPAddressClaim, class *v1alpha1.IPAddressClass, f v1alpha1.IPFamily) (*v1alpha1.IPAddress, error) {
	if !class.Spec.KeepReleasedInNamespace {
		return nil, nil
	}
	var list v1alpha1.IPAddressList
	if err := r.Client.List(ctx, &list, client.MatchingFields{index.AddressPool: index.PoolKey(class.Name, f, v1alpha1.AddressReleased)}); err != nil {
		return nil, err
	}
	kept := r.assumed.overlay(list.Items, func(a *v1alpha1.IPAddress) bool {
		return rebindable(a, claim, class, f) && !r.claimedElsewhere(ctx, a, claim)
	})
	slices.SortFunc(kept, releasedFirst(claim))
	if len(kept) == 0 || kept[0].Spec.ClaimRef.Name != claim.Name {
		// Its own, still attached to its former Service, comes before
		// another claim's: taking that one would change the address of
		// the Service naming this claim, and leave its own to the next.
		for i := range list.Items {
			if detaching(&list.Items[i], claim, class, f) {
				return &list.Items[i], errDetaching
			}
		}
	}
	for i := range kept {
		if r.assumed.reserve(kept[i].Name) {
			return &kept[i], nil
		}
	}
	if len(kept) > 0 {
		return nil, errBusy
	}
	return nil, nil
}

// claimedElsewhere reports whether kept address a, Released, belongs to
// another claim than claim: the claim its claimRef names is there, not
// being deleted, and either that very incarnation — it has just taken the
// address back (its phase lags the bind by a pass, and this binder's own
// write shows it so at once) — or a claim of that name re-created in the
// address's class still wanting its family (and naming no address of its
// own, which would make it never take a kept one), which takes it back first
// (releasedFirst) and must not find it gone to whichever claim of the
// namespace ran first. A read that
// fails counts as claimed: nothing is taken on a guess.
func (r *Reconciler) claimedElsewhere(ctx context.Context, a *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim) bool {
	ref := a.Spec.ClaimRef
	if ref.Name == claim.Name {
		return false
	}
	var c v1alpha1.IPAddressClaim
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &c)
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		return true
	}
	return c.DeletionTimestamp == nil && (c.UID == ref.UID ||
		c.Spec.AddressName == "" && binding.ClassName(&c) == a.Spec.ClassName && slices.Contains(binding.UnreportedFamilies(&c), binding.Family(a)))
}

// bind writes an address's claimRef, preconditioned on the resource version
// the pass read, and remembers the write. The write also clears the
// address's field-tracking record (package untrack): a driver's address
// comes with its creator's, and the address's every later write would
// carry it.
func (r *Reconciler) bind(ctx context.Context, a *v1alpha1.IPAddress) error {
	untrack.OnUpdate(&a.ObjectMeta)
	if err := r.Client.Update(ctx, a); err != nil {
		return fmt.Errorf("writing the claimRef of %s: %w", a.Name, err)
	}
	r.assumed.assume(a)
	return nil
}

// execute carries out a plan in the design's write order. Any failed write
// ends the pass with an error; the next pass re-derives everything.
func (r *Reconciler) execute(ctx context.Context, claim *v1alpha1.IPAddressClaim, p plan) error {
	log := logf.FromContext(ctx)
	if p.addFinalizer || p.provisioner != nil {
		err := lock.Patch(ctx, r.Client, claim, func() {
			if p.addFinalizer {
				controllerutil.AddFinalizer(claim, v1alpha1.FinalizerClaimProtection)
			}
			if p.provisioner != nil {
				metav1.SetMetaDataAnnotation(&claim.ObjectMeta, v1alpha1.AnnotationProvisioner, *p.provisioner)
			}
		})
		if err != nil {
			return fmt.Errorf("protecting and stamping the claim: %w", err)
		}
		r.versions.Wrote(client.ObjectKeyFromObject(claim), claim.ResourceVersion)
	}
	for _, a := range p.bind {
		if err := r.bind(ctx, a); err != nil {
			return err
		}
		log.V(1).Info("wrote claimRef", "address", a.Name, "claimRef", a.Spec.ClaimRef)
	}
	for _, a := range p.release {
		if err := r.Client.Status().Update(ctx, a); err != nil {
			return fmt.Errorf("releasing %s: %w", a.Name, err)
		}
	}
	for _, a := range p.remove {
		if err := r.Client.Delete(ctx, a, client.Preconditions{UID: &a.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s: %w", a.Name, err)
		}
		r.assumed.forget(a.Name)
	}
	if p.status != nil {
		updated := claim.DeepCopy()
		updated.Status = *p.status
		if err := r.Client.Status().Update(ctx, updated); err != nil {
			return fmt.Errorf("writing the claim status: %w", err)
		}
		r.versions.Wrote(client.ObjectKeyFromObject(updated), updated.ResourceVersion)
		if p.boundNow && claim.Status.Phase != v1alpha1.ClaimLost {
			// A Lost claim bound again is no first binding.
			metrics.ObserveTimeToBound(updated.Status.ClassName, r.Now().Sub(claim.CreationTimestamp.Time))
		}
		claim = updated
	}
	if p.removeFinalizer {
		if err := lock.SetFinalizer(ctx, r.Client, claim, v1alpha1.FinalizerClaimProtection, false); err != nil {
			return fmt.Errorf("removing the claim's finalizer: %w", err)
		}
	}
	for _, e := range p.events {
		r.Recorder.Record(e)
	}
	return nil
}
