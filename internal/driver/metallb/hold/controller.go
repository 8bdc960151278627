package hold

// Design:
//
// The binding record is the core's (IPAddress.spec.claimRef); this
// reconciler reads it and never writes it. What it writes:
//   - the driver's teardown finalizer on the address (usually set at
//     creation by the provisioner);
//   - placeholder Services in the driver's namespace, one per address,
//     named after it and owned by it;
//   - on a tenant's Service: metallb.io/loadBalancerIPs and
//     allow-shared-ip, the pinned marker recording exactly the pin written,
//     and the handoff finalizer — and it removes only a pin whose marker
//     still matches;
//   - the address's phase only into and out of Conflict and Lost, its
//     driver conditions (Conflict, Held), status.associatedTo and
//     status.holding.
//
// The holding record (status.holding, which only drivers may write) is
// what the driver knows of its own pins: the workload it pinned the address
// to, the Services it pinned it to before and has not let go of yet (from),
// and since when a handoff runs. Which Services the driver pinned is read
// from the record, by UID, never from the Services' annotations — a marker
// anyone copies onto a Service makes it neither the driver's to edit nor
// authorized to hold the address. States and transitions, each a pure
// function of the record, the claim's Services and MetalLB's books
// (Service status):
//
//	placeholder ──attach──► handoff(to w) ──w holds──► attached(w)
//	attached(w) ──move──► handoff(to w', from w) ──w' holds, w let go──► attached(w')
//	attached(w) ──detach/teardown──► handoff(from w) ──w let go──► placeholder
//
// Invariants: at every instant MetalLB has the address on the placeholder
// or on a recorded Service; a Service is recorded before its pin is
// written (so a crash between the two leaves a recorded Service without a
// pin, which the next pass pins or lets go) and leaves the record only once
// it carries neither the marker nor the handoff finalizer. A dual-stack
// workload is pinned with both of its claim's addresses by one pass, so
// that pass waits until the other address's record names it too: each
// address's record is its own pass's to write. Conflict is a
// holder the record does not name; Lost is no pool covering the address.
// An address held before the record existed is read once through the
// marker and recorded by that pass.
//
// Write order of a handoff, so that MetalLB never has the address
// unassigned nor assigned to a third Service: the placeholder first allows
// sharing under its claim's key (a new placeholder has none: MetalLB
// reprocesses every Service when an allocation's key changes, so keys are
// given while the placeholder alone holds the address, at the first
// attach); the side taking the address is pinned under the same key;
// only when MetalLB reports the address on the taking side does the
// giving side let go (placeholder deleted, or pin withdrawn, and the
// Service released once MetalLB has taken it back). A placeholder's key
// never changes while another Service may hold the address: MetalLB would
// take the address from the placeholder. A Service the driver pinned
// carries the handoff finalizer, so even its deletion waits until the
// placeholder shares the address.
// Each step is decided from the cache alone and writes one side, so a
// restart between any two writes resumes where it stopped.
//
// Four rules keep a handoff from stalling or taking an address from its
// holder:
//   - a Service the driver still pins another claim's address to is no
//     candidate for this claim until that address is back on its
//     placeholder (re-pointing a Service steals nothing);
//   - a move from a Service that cannot share the address with the new
//     one (a port in common, another backend) goes through the
//     placeholder, as a detach followed by an attach;
//   - after a MetalLB restart MetalLB may hand the address back to a
//     Service whose pin was withdrawn and refuse the placeholder: that
//     Service then shares it again under the placeholder's key, and lets
//     go again once the placeholder holds it;
//   - a Service's sharing key covers every address it holds, so it is let
//     go of only once each address of its marker is back on its
//     placeholder: a pass over one address never undoes what the pass
//     over another needs.
// Teardown starts once the core has let the address go (its protection
// finalizer removed), not at the deletion request: the core keeps a deleted
// address bound to a live claim, and until then it stays attached.
// A Conflict is declared on what the API server shows, not the cache:
// each kind is watched apart, and a Service may lag the address. So is
// every step that lets go of a holder, and it waits while the cache's
// address, claim or the claim's other addresses are older than the API
// server's (a leader woken past its lease acts beside its successor).
// An address that is gone (removed by force) has its pin, marker and
// handoff finalizer taken off every Service still carrying them.

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/cachetrim"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/lock"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/retry"
)

// Addresses are read past the cache (get) before a step that lets go of a
// holder, and before an address's pins are taken off as gone.
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses/status,verbs=update
// A claim is read past the cache (get) before a step that lets go of a
// holder, as its addresses are.
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=list;watch
// +kubebuilder:rbac:groups=metallb.io,resources=ipaddresspools,verbs=list;watch
// Tenants' Services are only ever patched; placeholders are created and
// deleted in the driver's own namespace alone (a Role there).
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",namespace=metallb-iad-system,resources=services,verbs=create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ClassBook is where a pass reads the driver's judgement of a class and
// the pool covering an address, and maps class and pool events to the
// addresses they concern: *metallb.Classes.
type ClassBook interface {
	Class(ctx context.Context, name string) (metallb.Class, *v1alpha1.IPAddressClass, error)
	Covering(ctx context.Context, ip netip.Addr) (string, error)
	ForClass(ctx context.Context, class client.Object, each func(context.Context, string) []reconcile.Request) []reconcile.Request
	ForPool(ctx context.Context, pool client.Object, each func(context.Context, string) []reconcile.Request) []reconcile.Request
}

// Reconciler holds the driver's addresses in MetalLB's books.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache: whether a Service in the way of a
	// placeholder is a stranger or the placeholder the cache has yet to show.
	APIReader client.Reader
	// Cache, when set, is walked for a class's addresses (ofClass).
	Cache   client.Reader
	Classes ClassBook
	// Owners filters out the events of addresses of other provisioners'
	// classes; nil passes all.
	Owners   *metallb.ClassOwners
	Recorder *recorder.Recorder
	// Namespace is where placeholders live.
	Namespace string
	Now       func() time.Time

	// unreadLogged is when each unread pool was last logged.
	unreadLogged sync.Map
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("metallb-iad-hold").
		For(&v1alpha1.IPAddress{}, builder.WithPredicates(r.Owners.Relevant())).
		Watches(&v1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.forSiblings), builder.WithPredicates(r.Owners.Relevant(), siblingChanged)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.forService)).
		Watches(&v1alpha1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(r.forClaim), builder.WithPredicates(index.ClaimLifecycle)).
		Watches(&v1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.Classes.ForClass(ctx, o, r.ofClass)
		}), builder.WithPredicates(metallb.SpecChanged)).
		Watches(metallb.NewPool(), handler.EnqueueRequestsFromMapFunc(r.forPool), builder.WithPredicates(metallb.SpecChanged)).
		WithOptions(retry.Options(workers)).
		Complete(r)
}

// forSiblings wakes the other addresses of an address's claim when its
// phase or its holding record changes. A dual-stack Service is attached
// only once every family's address is associable, every family's
// placeholder shares the address under the claim's key, and every
// family's record names the Service; the pass that finds the last address
// associable is that address's, and each placeholder takes the key and
// each record the Service in a pass of its own address: without this, a
// sibling that judged the claim incomplete a moment before would never
// look again.
func (r *Reconciler) forSiblings(ctx context.Context, o client.Object) []reconcile.Request {
	ref := o.(*v1alpha1.IPAddress).Spec.ClaimRef
	if ref == nil {
		return nil
	}
	return slices.DeleteFunc(index.AddressesOfClaim(ctx, r.Client, ref.Namespace, ref.Name), func(req reconcile.Request) bool {
		return req.Name == o.GetName()
	})
}

// siblingChanged passes an address's creation and any change of its phase
// or of the Services its holding record names.
var siblingChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, after := e.ObjectOld.(*v1alpha1.IPAddress), e.ObjectNew.(*v1alpha1.IPAddress)
		return before.Status.Phase != after.Status.Phase ||
			gains(before.Status.Holding, after.Status.Holding) || gains(after.Status.Holding, before.Status.Holding)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func addressRequest(ip netip.Addr) reconcile.Request {
	name, _ := v1alpha1.IPAddressName(ip.String())
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
}

// forService wakes the addresses a Service concerns: the one it is the
// placeholder of (or whose placeholder's name it takes), those of the claim
// it names, those the driver pinned to it, those it asks MetalLB for, and
// those MetalLB assigned to it.
// The map runs on the old and the new object of an update alike.
func (r *Reconciler) forService(ctx context.Context, o client.Object) []reconcile.Request {
	svc := o.(*corev1.Service)
	var reqs []reconcile.Request
	if svc.Namespace == r.Namespace {
		// Its placeholder, or — unlabelled — a Service in the way of one.
		name := svc.Name
		if l := svc.Labels[metallb.LabelAddress]; l != "" {
			name = l
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	if claim := svc.Annotations[v1alpha1.AnnotationIPAddressClaim]; claim != "" {
		reqs = append(reqs, index.AddressesOfClaim(ctx, r.Client, svc.Namespace, claim)...)
	}
	ips := append(marker(svc), metallb.IngressIPs(svc)...)
	for _, ip := range append(ips, metallb.RequestedIPs(svc)...) {
		reqs = append(reqs, addressRequest(ip))
	}
	return reqs
}

func (r *Reconciler) forClaim(ctx context.Context, o client.Object) []reconcile.Request {
	return index.AddressesOfClaim(ctx, r.Client, o.GetNamespace(), o.GetName())
}

// walker is what every address is walked in: the cache itself, in place
// (a list would rebuild every address whole), or the client in tests run
// without one.
func (r *Reconciler) walker() client.Reader {
	if r.Cache != nil {
		return r.Cache
	}
	return r.Client
}

// ofClass walks the cache for the addresses of class: a class or a pool
// changes seldom, and an index by class would cost an entry for every
// address of every class, a /16 of another's among them.
func (r *Reconciler) ofClass(ctx context.Context, class string) []reconcile.Request {
	var reqs []reconcile.Request
	_ = cachetrim.Each(ctx, r.walker(), &v1alpha1.IPAddress{}, &v1alpha1.IPAddressList{}, func(a *v1alpha1.IPAddress) {
		if a.Spec.ClassName == class {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: a.Name}})
		}
	})
	return reqs
}

func (r *Reconciler) forPool(ctx context.Context, o client.Object) []reconcile.Request {
	return append(r.Classes.ForPool(ctx, o, r.ofClass), r.lostOnes(ctx)...)
}

// lostOnes are the driver's Lost addresses, whatever pool their classes
// name: any pool that comes to cover one restores it (lost), so a pool
// created, deleted or edited under another name must wake them too. Pool
// spec events are rare, and Lost addresses few.
func (r *Reconciler) lostOnes(ctx context.Context) []reconcile.Request {
	var reqs []reconcile.Request
	_ = cachetrim.Each(ctx, r.walker(), &v1alpha1.IPAddress{}, &v1alpha1.IPAddressList{}, func(a *v1alpha1.IPAddress) {
		if a.Status.Phase == v1alpha1.AddressLost && controllerutil.ContainsFinalizer(a, metallb.FinalizerTeardown) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: a.Name}})
		}
	})
	return reqs
}

// Reconcile gathers a snapshot, decides, and carries out the plan.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var a v1alpha1.IPAddress
	if err := r.Client.Get(ctx, req.NamespacedName, &a); err != nil {
		if apierrors.IsNotFound(err) {
			return retry.End(r.releaseOrphans(ctx, req.Name))
		}
		return reconcile.Result{}, err
	}
	s, ours, err := r.gather(ctx, &a)
	if unread := (*metallb.PoolUnreadError)(nil); errors.As(err, &unread) {
		// Nothing is decided while a pool is unknown. Logged once per
		// pool, not at every retry of each of its addresses (up to a
		// /16); the pool's fix wakes the addresses of the classes naming
		// it, and a look again each minute is the backstop for the rest.
		r.unreadPool(ctx, unread)
		return reconcile.Result{RequeueAfter: unreadPoolRecheck}, nil
	}
	if err != nil || !ours {
		return reconcile.Result{}, err
	}
	p := decide(s)
	switch {
	case unsure(&a, p):
		// Each kind is watched apart, so the cache may show the address
		// newer than a Service — or, right after a leader wakes, older:
		// what cannot be undone is decided on what the API server shows.
		err = r.refresh(ctx, &s)
		p = decide(s)
	case len(p.create) > 0:
		// A placeholder made for an address the API server no longer has
		// (a lagging cache) would take the address from its next
		// incarnation when garbage collection deletes it.
		err = r.alive(ctx, &a, false)
	}
	switch {
	case errors.Is(err, errStale):
		return retry.Again()
	case err != nil:
		return reconcile.Result{}, err
	}
	err = r.execute(ctx, &a, p)
	if apierrors.IsAlreadyExists(err) {
		// Either the cache has yet to show the placeholder just created, or
		// a Service not the driver's has its name: say so then, and look
		// again with backoff until someone moves it.
		if r.squatted(ctx, a.Name) {
			r.Recorder.Record(recorder.WarningOnce(&a, metallb.ReasonPlaceholderTaken,
				"Service %s/%s exists and is not this address's placeholder (no label %s=%s); the driver cannot hold %s until it is renamed or deleted",
				r.Namespace, a.Name, metallb.LabelAddress, a.Name, a.Spec.Address))
		}
		return retry.Again()
	}
	return settled(&a, p, s.now, err)
}

// settled ends a pass that carried out p on a: a lost race is run again,
// and so, quietly, is a refusal the pass told on the address or the
// Service; a handoff still under way is looked at again when it has run
// too long, to be told (stalled), even if nothing moves meanwhile.
func settled(a *v1alpha1.IPAddress, p plan, now time.Time, err error) (reconcile.Result, error) {
	if err != nil {
		return retry.End(err)
	}
	h := a.Status.Holding
	if p.status != nil {
		h = p.status.Holding
	}
	if after := handoffRecheck(h, now); after > 0 {
		return reconcile.Result{RequeueAfter: after}, nil
	}
	return reconcile.Result{}, nil
}

// refresh reads every Service of the snapshot, and every Service the
// holding record names, again from the API server, and recasts each role
// from what it shows.
func (r *Reconciler) refresh(ctx context.Context, s *snapshot) error {
	if r.APIReader == nil {
		return nil
	}
	// The address first: a cache older than the API server's address
	// (another incarnation of the name, or an older version) is waited
	// for, not acted on.
	if err := r.alive(ctx, s.address, true); err != nil {
		return err
	}
	if err := r.claimCurrent(ctx, s); err != nil {
		return err
	}
	svcs, err := r.liveServices(ctx, s)
	if err != nil {
		return err
	}
	s.holders = slices.DeleteFunc(slices.Clone(svcs), func(svc *corev1.Service) bool { return !metallb.Holds(svc, s.ip) })
	s.requesters = slices.DeleteFunc(slices.Clone(svcs), func(svc *corev1.Service) bool { return !slices.Contains(metallb.RequestedIPs(svc), s.ip) })
	s.candidates = slices.DeleteFunc(slices.Clone(svcs), func(svc *corev1.Service) bool {
		return s.claim == nil || svc.Namespace != s.claim.Namespace || svc.Annotations[v1alpha1.AnnotationIPAddressClaim] != s.claim.Name
	})
	if s.pinned, err = pinnedOf(s.address, s.ip, func(key types.NamespacedName) (*corev1.Service, error) {
		i := slices.IndexFunc(svcs, func(svc *corev1.Service) bool { return client.ObjectKeyFromObject(svc) == key })
		if i < 0 {
			return nil, nil
		}
		return svcs[i], nil
	}, func() ([]*corev1.Service, error) {
		return slices.DeleteFunc(slices.Clone(svcs), func(svc *corev1.Service) bool { return !pinnedWith(svc, s.ip) }), nil
	}); err != nil {
		return err
	}
	return r.refreshPlaceholders(ctx, s)
}

// alive returns errStale unless the API server has the incarnation of
// address a the cache shows — and, if exact, a's very version.
func (r *Reconciler) alive(ctx context.Context, a *v1alpha1.IPAddress, exact bool) error {
	if r.APIReader == nil {
		return nil
	}
	var live v1alpha1.IPAddress
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(a), &live); client.IgnoreNotFound(err) != nil {
		return err
	}
	if live.UID != a.UID || exact && live.ResourceVersion != a.ResourceVersion {
		return errStale
	}
	return nil
}

// claimCurrent returns errStale unless the cache shows the address's claim
// as the API server has it — there or not, at the same version — and the
// claim's addresses at theirs. A leader woken from a pause past its lease
// acts for a moment beside its successor, and its claims may lag its
// addresses and Services: a pass that does not find the claim (or a
// sibling) detaches the claim's Service while the successor, which finds
// it, deletes the placeholder — and MetalLB then holds the address for
// nobody (found by make chaos).
func (r *Reconciler) claimCurrent(ctx context.Context, s *snapshot) error {
	ref := s.address.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil
	}
	var live v1alpha1.IPAddressClaim
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &live)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	bound := err == nil && live.UID == ref.UID && live.DeletionTimestamp == nil
	switch {
	case bound != (s.claim != nil), bound && live.ResourceVersion != s.claim.ResourceVersion:
		return errStale
	case !bound:
		return nil
	}
	var addrs v1alpha1.IPAddressList
	if err := r.APIReader.List(ctx, &addrs, client.MatchingFields{index.SelectableClaimNamespace: ref.Namespace, index.SelectableClaimName: ref.Name}); err != nil {
		return err
	}
	versions := map[string]string{}
	for i := range addrs.Items {
		if a := &addrs.Items[i]; binding.Holds(a, &live) {
			versions[a.Name] = a.ResourceVersion
		}
	}
	if len(versions) != len(s.siblings) {
		return errStale
	}
	for _, sib := range s.siblings {
		if v, ok := versions[sib.Name]; !ok || v != sib.ResourceVersion {
			return errStale
		}
	}
	return nil
}

// liveServices reads from the API server every Service the snapshot knows
// of and every one the holding record names; those gone are left out.
func (r *Reconciler) liveServices(ctx context.Context, s *snapshot) ([]*corev1.Service, error) {
	known := map[types.NamespacedName]bool{}
	for _, list := range [][]*corev1.Service{s.holders, s.requesters, s.pinned, s.candidates} {
		for _, svc := range list {
			known[client.ObjectKeyFromObject(svc)] = true
		}
	}
	for _, ref := range recordedRefs(s.address.Status.Holding) {
		known[types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}] = true
	}
	var svcs []*corev1.Service
	for _, key := range slices.SortedFunc(maps.Keys(known), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
		svc, err := r.live(ctx, key)
		if err != nil {
			return nil, err
		}
		if svc != nil {
			svcs = append(svcs, svc)
		}
	}
	return svcs, nil
}

// refreshPlaceholders replaces each placeholder of the snapshot with the
// API server's, dropping one that is gone or another incarnation.
func (r *Reconciler) refreshPlaceholders(ctx context.Context, s *snapshot) error {
	for ip, ph := range s.placeholders {
		svc, err := r.live(ctx, client.ObjectKeyFromObject(ph))
		switch {
		case err != nil:
			return err
		case svc == nil || svc.UID != ph.UID:
			delete(s.placeholders, ip)
		default:
			s.placeholders[ip] = svc
		}
	}
	return nil
}

// errStale: the cache holds an older address, or claim, than the API server.
var errStale = errors.New("the cache has yet to catch up with the address or its claim")

// live reads a Service from the API server, trimmed as the cache keeps it;
// nil when there is none.
func (r *Reconciler) live(ctx context.Context, key types.NamespacedName) (*corev1.Service, error) {
	var svc corev1.Service
	if err := r.APIReader.Get(ctx, key, &svc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	t, _ := metallb.TransformService(&svc)
	return t.(*corev1.Service), nil
}

// squatted reports whether the Service named like the placeholder of
// address name, read from the API server, is not that placeholder.
func (r *Reconciler) squatted(ctx context.Context, name string) bool {
	if r.APIReader == nil {
		return true
	}
	var svc corev1.Service
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, &svc); err != nil {
		return false
	}
	return svc.Labels[metallb.LabelAddress] != name
}

// releaseOrphans takes the driver's hold of the gone address name off every
// Service it was pinned to — an address removed by force never ran its
// teardown, and its Services must not keep the handoff finalizer (which
// would block their deletion) or a pin for nobody.
func (r *Reconciler) releaseOrphans(ctx context.Context, name string) error {
	svcs, err := r.services(ctx, metallb.ServicePinnedAddress, name)
	if err != nil || len(svcs) == 0 {
		return err
	}
	if r.APIReader != nil {
		// Gone from the cache may be not there yet (a woken leader's cache
		// lags): only what the API server no longer has is let go of.
		err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, &v1alpha1.IPAddress{})
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, svc := range svcs {
		if err := patch(ctx, r.Client, svc, orphan(svc, name)); err != nil {
			if retry.Refusal(err) {
				// As for any pin the driver changes: the Service's owner
				// learns why its pin (and its deletion) waits.
				r.Recorder.Record(recorder.WarningOnce(svc, metallb.ReasonPinRefused,
					"the API server refused the driver's change to this Service for %s, which is gone: %v", name, err))
				return retry.Told(err)
			}
			return err
		}
		r.Recorder.Record(recorder.Normal(svc, metallb.ReasonDisassociated,
			"IPAddress %s is gone; the driver's pin of its address is withdrawn from this Service", name))
	}
	return nil
}

// gather reads the snapshot of one address from the cache; held is false
// for an address the driver does not hold (see ours).
func (r *Reconciler) gather(ctx context.Context, a *v1alpha1.IPAddress) (s snapshot, held bool, err error) {
	ip, perr := netip.ParseAddr(a.Spec.Address)
	if perr != nil {
		return s, false, nil
	}
	class, obj, err := r.Classes.Class(ctx, a.Spec.ClassName)
	if err != nil {
		return s, false, err
	}
	if !ours(a, obj) {
		return s, false, nil
	}
	if metallb.Outlined(a) && r.APIReader != nil {
		// Cached in outline while its class was not known to be the
		// driver's: decide on the whole address.
		var whole v1alpha1.IPAddress
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(a), &whole); err != nil {
			return s, false, client.IgnoreNotFound(err)
		}
		*a = whole
	}
	s = snapshot{address: a, ip: ip, class: class, namespace: r.Namespace, now: r.Now(),
		placeholders: map[netip.Addr]*corev1.Service{}, reserved: map[netip.Addr]bool{}}
	if s.covering, err = r.Classes.Covering(ctx, ip); err != nil {
		return s, false, err
	}
	if err := r.gatherClaim(ctx, &s); err != nil {
		return s, false, err
	}
	if s.holders, err = r.services(ctx, metallb.ServiceIngressIP, ip.String()); err != nil {
		return s, false, err
	}
	if s.requesters, err = r.services(ctx, metallb.ServiceRequestedIP, ip.String()); err != nil {
		return s, false, err
	}
	if s.pinned, err = r.recorded(ctx, a, ip); err != nil {
		return s, false, err
	}
	ips := []netip.Addr{ip}
	for _, sib := range s.siblings {
		if sip, err := netip.ParseAddr(sib.Spec.Address); err == nil {
			ips = append(ips, sip)
		}
	}
	for _, svc := range s.pinned {
		ips = append(ips, marker(svc)...)
	}
	return s, true, r.gatherPlaceholders(ctx, &s, ips)
}

// recorded are the Services the address's holding record names, by UID:
// the Services the driver pinned it to, read from the cache (pinnedOf).
func (r *Reconciler) recorded(ctx context.Context, a *v1alpha1.IPAddress, ip netip.Addr) ([]*corev1.Service, error) {
	return pinnedOf(a, ip, func(key types.NamespacedName) (*corev1.Service, error) {
		var svc corev1.Service
		if err := r.Client.Get(ctx, key, &svc); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return &svc, nil
	}, func() ([]*corev1.Service, error) {
		return r.services(ctx, metallb.ServicePinnedIP, ip.String())
	})
}

// pinnedOf are the Services the address's holding record names, by UID,
// that still carry the driver's hold: those the driver pinned it to. No
// record means its placeholder alone holds it — except for an address
// attached before the record existed (it has associatedTo, which the
// driver writes only once it has pinned a Service): its Service is found
// by the driver's marker (byMarker), once, and recorded by the pass. Only
// the Service associatedTo names counts: a marker is copied as easily as
// read, and a stranger carrying one must not be taken for the driver's
// (it would be given the claim's sharing key).
func pinnedOf(a *v1alpha1.IPAddress, ip netip.Addr, get func(types.NamespacedName) (*corev1.Service, error),
	byMarker func() ([]*corev1.Service, error)) ([]*corev1.Service, error) {
	h := a.Status.Holding
	if h == nil {
		w := a.Status.AssociatedTo
		if w == nil {
			return nil, nil
		}
		marked, err := byMarker()
		return slices.DeleteFunc(marked, func(svc *corev1.Service) bool { return svc.Namespace != w.Namespace || svc.Name != w.Name }), err
	}
	var out []*corev1.Service
	for _, ref := range recordedRefs(h) {
		svc, err := get(types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name})
		if err != nil {
			return nil, err
		}
		if svc != nil && svc.UID == ref.UID && stillHeld(svc, ip) {
			out = append(out, svc)
		}
	}
	return out, nil
}

// gatherClaim finds the live claim the address is bound to, its other
// addresses, and the Services naming it.
func (r *Reconciler) gatherClaim(ctx context.Context, s *snapshot) error {
	ref := s.address.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil
	}
	var claim v1alpha1.IPAddressClaim
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &claim); err != nil {
		return client.IgnoreNotFound(err)
	}
	if claim.UID != ref.UID || claim.DeletionTimestamp != nil {
		return nil
	}
	s.claim = &claim
	var addrs v1alpha1.IPAddressList
	if err := index.AddressesNaming(ctx, r.Client, &addrs, ref.Namespace, ref.Name); err != nil {
		return err
	}
	for i := range addrs.Items {
		a := &addrs.Items[i]
		if !binding.Holds(a, &claim) {
			continue
		}
		if metallb.Outlined(a) && r.APIReader != nil {
			// Cached in outline (its class arrived after it): its holding
			// record, which a dual-stack pin waits on, is read whole.
			var whole v1alpha1.IPAddress
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(a), &whole); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return err
			}
			a = &whole
		}
		s.siblings = append(s.siblings, a)
	}
	var err error
	s.candidates, err = r.services(ctx, metallb.ServiceClaim, index.ClaimKey(ref.Namespace, ref.Name))
	return err
}

func (r *Reconciler) gatherPlaceholders(ctx context.Context, s *snapshot, ips []netip.Addr) error {
	for _, ip := range ips {
		if _, seen := s.reserved[ip]; seen {
			continue
		}
		name, _ := v1alpha1.IPAddressName(ip.String())
		var a v1alpha1.IPAddress
		switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &a); {
		case err == nil:
			s.reserved[ip] = stillReserved(&a)
		case apierrors.IsNotFound(err):
			s.reserved[ip] = false
		default:
			return err
		}
		var ph corev1.Service
		switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, &ph); {
		case err == nil && ph.Labels[metallb.LabelAddress] == name:
			s.placeholders[ip] = &ph
		case err != nil && !apierrors.IsNotFound(err):
			return err
		}
	}
	return nil
}

func (r *Reconciler) services(ctx context.Context, field, value string) ([]*corev1.Service, error) {
	var list corev1.ServiceList
	if err := metallb.ServicesMatching(ctx, r.Client, &list, field, value); err != nil {
		return nil, err
	}
	out := make([]*corev1.Service, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// patch writes to as a patch of its difference from from, which fails
// when the Service changed since from was read: a write decided on what a
// pass saw lands on exactly that. A Service gone meanwhile needs nothing.
func patch(ctx context.Context, c client.Client, from, to *corev1.Service) error {
	return client.IgnoreNotFound(lock.Diff(ctx, c, from, to))
}

// execute writes the plan in order: the address's finalizer, the Services
// (a pass only plans writes whose preconditions it saw), the address
// status, then the finalizer's removal; events last.
func (r *Reconciler) execute(ctx context.Context, a *v1alpha1.IPAddress, p plan) error {
	logPlan(ctx, a, p)
	if p.addFinalizer {
		if err := lock.SetFinalizer(ctx, r.Client, a, metallb.FinalizerTeardown, true); err != nil {
			return err
		}
	}
	if p.status != nil && p.recordFirst {
		// A Service about to be pinned is recorded before the pin: a crash
		// in between leaves a recorded Service without a pin, which the
		// next pass pins or lets go, never a pin nobody recorded.
		if err := r.writeStatus(ctx, a, p.status); err != nil {
			return err
		}
		p.status = nil
	}
	if err := r.writeServices(ctx, a, p); err != nil {
		return err
	}
	for _, svc := range p.remove {
		// Exactly the placeholder the pass saw: one MetalLB has since
		// given the address again is judged again.
		if err := r.Client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID, ResourceVersion: &svc.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if p.status != nil {
		if err := r.writeStatus(ctx, a, p.status); err != nil {
			return err
		}
	}
	if p.removeFinalizer {
		if err := lock.SetFinalizer(ctx, r.Client, a, metallb.FinalizerTeardown, false); err != nil {
			return err
		}
	}
	for _, e := range p.events {
		r.Recorder.Record(e)
	}
	return nil
}

// writeServices creates the plan's placeholders and edits its Services; a
// refusal is told on the address or the Service it concerns.
func (r *Reconciler) writeServices(ctx context.Context, a *v1alpha1.IPAddress, p plan) error {
	for _, svc := range p.create {
		if err := r.Client.Create(ctx, svc); err != nil {
			if retry.Refusal(err) {
				// Say why MetalLB does not hold the address (a family the
				// cluster's Services lack, the driver's namespace being
				// deleted); the pass is retried with backoff.
				r.Recorder.Record(recorder.WarningOnce(a, metallb.ReasonPlaceholderRefused,
					"the API server refused placeholder Service %s/%s, so MetalLB does not hold %s: %v", svc.Namespace, svc.Name, a.Spec.Address, err))
				return retry.Told(err)
			}
			return err
		}
	}
	for _, e := range p.update {
		if err := patch(ctx, r.Client, e.from, e.to); err != nil {
			if retry.Refusal(err) {
				// An admission policy refusing Service writes (the
				// service-pins policy without its parameters, say): the
				// Service's owner learns why its address does not follow.
				r.Recorder.Record(recorder.WarningOnce(e.from, metallb.ReasonPinRefused,
					"the API server refused the driver's change to this Service for %s (%s): %v", a.Name, a.Spec.Address, err))
				return retry.Told(err)
			}
			return err
		}
	}
	return nil
}

// unreadPoolRecheck is how often an address waiting on a pool that does
// not parse is looked at again, besides the pool's own events.
const unreadPoolRecheck = time.Minute

// unreadPool logs that addresses wait for a pool to parse: once per pool
// every ten minutes, not at every look of each address.
func (r *Reconciler) unreadPool(ctx context.Context, e *metallb.PoolUnreadError) {
	now := time.Now()
	if last, ok := r.unreadLogged.Load(e.Pool); ok && now.Sub(last.(time.Time)) < 10*time.Minute {
		return
	}
	r.unreadLogged.Store(e.Pool, now)
	logf.FromContext(ctx).Error(e, "addresses wait until this pool parses or is deleted; each is looked at again every minute", "pool", e.Pool)
}

// errStaleSchema: the API server dropped the holding record from a status
// write, as it prunes a field its IPAddress CRD does not know.
var errStaleSchema = errors.New("the API server dropped status.holding from the address: its IPAddress CRD is older than this driver; " +
	"apply the CRDs of this release (helm upgrade leaves crds/ as they were)")

// writeStatus writes st as a's status and checks that the holding record
// was kept. Without it the driver could not tell its pins from a
// stranger's; a pin recorded in a record the API server dropped is not
// made (the pass fails, and is retried with backoff) and the address says
// why.
func (r *Reconciler) writeStatus(ctx context.Context, a *v1alpha1.IPAddress, st *v1alpha1.IPAddressStatus) error {
	a.Status = *st
	if err := r.Client.Status().Update(ctx, a); err != nil {
		if retry.Refusal(err) {
			r.Recorder.Record(recorder.WarningOnce(a, metallb.ReasonWriteRefused,
				"the API server refused the driver's status write to this address, so the driver cannot hold or pin it: %v", err))
			return retry.Told(err)
		}
		return err
	}
	if st.Holding != nil && a.Status.Holding == nil {
		r.Recorder.Record(recorder.WarningOnce(a, metallb.ReasonSchemaStale, "%v", errStaleSchema))
		return retry.Told(errStaleSchema)
	}
	return nil
}

// logPlan writes the plan to the debug log (--zap-log-level=debug): what
// the driver did to which Service and why is then readable after the fact.
func logPlan(ctx context.Context, a *v1alpha1.IPAddress, p plan) {
	log := logf.FromContext(ctx).V(1)
	if !log.Enabled() {
		return
	}
	for _, svc := range p.create {
		log.Info("creating placeholder", "address", a.Name, "service", client.ObjectKeyFromObject(svc))
	}
	for _, e := range p.update {
		diff, _ := client.MergeFrom(e.from).Data(e.to)
		log.Info("patching Service", "address", a.Name, "service", client.ObjectKeyFromObject(e.from), "patch", string(diff))
	}
	for _, svc := range p.remove {
		log.Info("deleting placeholder", "address", a.Name, "service", client.ObjectKeyFromObject(svc))
	}
	if p.status != nil {
		log.Info("writing status", "address", a.Name, "phase", p.status.Phase, "associatedTo", p.status.AssociatedTo, "holding", p.status.Holding)
	}
}
