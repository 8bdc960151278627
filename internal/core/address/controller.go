package address

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/lastwrite"
	"github.com/cozystack/address-controller/internal/lock"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/retry"
)

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=list;watch;update;patch;delete
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses/status,verbs=update
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// cacheLag is how long to wait when the cache disagrees with the API server.
const cacheLag = time.Second

// Reconciler keeps addresses' core-owned phases (§5).
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache: a claim's absence is confirmed with
	// it before an address is reclaimed, so a lagging cache never reclaims
	// an address from under a live claim.
	APIReader client.Reader
	Recorder  *recorder.Recorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	once     sync.Once
	versions *lastwrite.Versions
}

// init readies the reconciler's memory: at setup, or at the first
// Reconcile of one a test runs without a manager.
func (r *Reconciler) init() {
	r.once.Do(func() {
		r.versions = lastwrite.New()
		if r.Now == nil {
			r.Now = time.Now
		}
	})
}

// SetupWithManager registers the address controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.init()
	return ctrl.NewControllerManagedBy(mgr).
		Named("ipaddress").
		For(&v1alpha1.IPAddress{}).
		Watches(&v1alpha1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(r.addressesOfClaim), builder.WithPredicates(index.ClaimLifecycle)).
		Watches(&v1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.releasedOfClass), builder.WithPredicates(index.SpecChanged)).
		WithOptions(retry.Options(workers)).
		Complete(r)
}

func (r *Reconciler) addressesOfClaim(ctx context.Context, o client.Object) []reconcile.Request {
	return index.AddressesOfClaim(ctx, r.Client, o.GetNamespace(), o.GetName())
}

// releasedOfClass: a class's releaseDelay may have changed. Only its spec
// (index.SpecChanged): a class's status is written as its counts move, and
// a class may keep tens of thousands of Released addresses.
func (r *Reconciler) releasedOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, f := range v1alpha1.Dual.Families() {
		reqs = append(reqs, r.list(ctx, client.MatchingFields{index.AddressPool: index.PoolKey(o.GetName(), f, v1alpha1.AddressReleased)})...)
	}
	return reqs
}

func (r *Reconciler) list(ctx context.Context, sel client.MatchingFields) []reconcile.Request {
	return index.Requests(ctx, r.Client, &v1alpha1.IPAddressList{}, sel)
}

// Reconcile gathers a snapshot, decides, and carries out the plan.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.init()
	var a v1alpha1.IPAddress
	if err := r.Client.Get(ctx, req.NamespacedName, &a); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.versions.Stale(req.NamespacedName, a.ResourceVersion) {
		return retry.Again()
	}
	s := snapshot{address: &a, now: r.Now()}
	if ref := a.Spec.ClaimRef; ref != nil {
		claim, err := r.claim(ctx, r.Client, ref)
		if err != nil {
			return reconcile.Result{}, err
		}
		s.claim = claim
	}
	var class v1alpha1.IPAddressClass
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: a.Spec.ClassName}, &class); {
	case err == nil:
		s.class = &class
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, err
	}
	p := decide(s)
	if p.claimGone {
		stale, err := r.cacheIsBehind(ctx, &a, s.claim)
		if err != nil || stale {
			return reconcile.Result{RequeueAfter: cacheLag}, err
		}
	}
	if err := r.execute(ctx, &a, p); err != nil {
		if apierrors.IsConflict(err) {
			logf.FromContext(ctx).V(1).Info("retrying after a conflict", "reason", err.Error())
			return retry.Again()
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: p.requeueAfter}, nil
}

func (r *Reconciler) claim(ctx context.Context, reader client.Reader, ref *v1alpha1.ClaimReference) (*v1alpha1.IPAddressClaim, error) {
	var c v1alpha1.IPAddressClaim
	err := reader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &c)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// cacheIsBehind re-reads the claim from the API server and reports whether
// it differs from what the cache said in a way that matters: the claim is
// there with the UID the address names (or the address names no UID).
func (r *Reconciler) cacheIsBehind(ctx context.Context, a *v1alpha1.IPAddress, cached *v1alpha1.IPAddressClaim) (bool, error) {
	ref := a.Spec.ClaimRef
	if ref == nil {
		return false, nil
	}
	live, err := r.claim(ctx, r.APIReader, ref)
	if err != nil || live == nil {
		return false, err
	}
	if cached != nil && cached.UID == live.UID {
		return false, nil
	}
	return ref.UID == "" || live.UID == ref.UID, nil
}

func (r *Reconciler) execute(ctx context.Context, a *v1alpha1.IPAddress, p plan) error {
	key := client.ObjectKeyFromObject(a)
	if p.addFinalizer || p.removeFinalizer {
		if err := lock.SetFinalizer(ctx, r.Client, a, v1alpha1.FinalizerAddressProtection, p.addFinalizer); err != nil {
			return fmt.Errorf("updating the protection finalizer: %w", err)
		}
		r.versions.Wrote(key, a.ResourceVersion)
	}
	if p.status != nil {
		a.Status = *p.status
		if err := r.Client.Status().Update(ctx, a); err != nil {
			return fmt.Errorf("writing the phase: %w", err)
		}
		r.versions.Wrote(key, a.ResourceVersion)
	}
	if p.clearClaimRef {
		a.Spec.ClaimRef = nil
		if err := r.Client.Update(ctx, a); err != nil {
			return fmt.Errorf("clearing the claimRef: %w", err)
		}
		r.versions.Wrote(key, a.ResourceVersion)
	}
	if p.remove {
		err := r.Client.Delete(ctx, a, client.Preconditions{UID: &a.UID, ResourceVersion: &a.ResourceVersion})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the address: %w", err)
		}
	}
	for _, e := range p.events {
		r.Recorder.Record(e)
	}
	return nil
}
