package autoclaim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/metrics"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/retry"
)

// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;patch
// +kubebuilder:rbac:groups="",resources=services/finalizers,verbs=update
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler gives qualifying LoadBalancer Services a claim (§10).
type Reconciler struct {
	Client   client.Client
	Recorder *recorder.Recorder
	// SourceAnnotations are the load-balancer backends' annotations by
	// which a Service chooses its own address source (a pool, a pinned
	// address, a sharing key): a Service carrying one is not auto-claimed.
	SourceAnnotations []string

	// missing remembers since when each Service has named a claim its
	// namespace does not have (tellMissing); nil until the first.
	mu      sync.Mutex
	missing map[types.NamespacedName]missingClaim
	// now is the clock; nil means time.Now.
	now func() time.Time
}

// missingClaim: the claim a Service names and does not find, since when.
type missingClaim struct {
	claim string
	since time.Time
}

// SetupWithManager registers the auto-claim controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("autoclaim").
		For(&corev1.Service{}).
		Watches(&v1alpha1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(namesake)).
		Watches(&v1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.markConcerns), builder.WithPredicates(markMoved)).
		WithOptions(retry.Options(workers)).
		Complete(r)
}

// namesake: a claim appearing or going changes what its namesake Service gets.
func namesake(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

// markMoved passes the class events auto-claim reads: a class created or
// deleted, its auto-claim mark set or cleared, its deletion begun. A
// class's status changes with every bind (its counts), and each event
// would queue every unclaimed LoadBalancer Service of the cluster again.
var markMoved = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, after := e.ObjectOld, e.ObjectNew
		return before.GetAnnotations()[v1alpha1.AnnotationAutoClaimClass] != after.GetAnnotations()[v1alpha1.AnnotationAutoClaimClass] ||
			(before.GetDeletionTimestamp() == nil) != (after.GetDeletionTimestamp() == nil)
	},
}

// markConcerns: a class change (an auto-claim mark moving) concerns the
// LoadBalancer Services that name no claim, and those whose own claim holds
// no address yet, which follows the mark (follow). A claim's key is its
// namesake Service's: every claim still waiting for an address is looked
// at, the few that are no Service's own at no cost but a read.
func (r *Reconciler) markConcerns(ctx context.Context, _ client.Object) []reconcile.Request {
	reqs := index.Requests(ctx, r.Client, &corev1.ServiceList{}, client.MatchingFields{index.ServiceUnclaimed: index.Unclaimed})
	var classes v1alpha1.IPAddressClassList
	if err := r.Client.List(ctx, &classes, client.UnsafeDisableDeepCopy); err != nil {
		return reqs
	}
	for i := range classes.Items {
		reqs = append(reqs, index.WaitingOnClass(ctx, r.Client, classes.Items[i].Name)...)
	}
	return reqs
}

// Reconcile gathers a snapshot, decides, and writes.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var svc corev1.Service
	if err := r.Client.Get(ctx, req.NamespacedName, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			r.found(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	s := snapshot{service: &svc, sources: r.SourceAnnotations}
	var claim v1alpha1.IPAddressClaim
	switch err := r.Client.Get(ctx, req.NamespacedName, &claim); {
	case err == nil:
		s.claim = &claim
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, err
	}
	follows := svc.Annotations[v1alpha1.AnnotationIPAddressClaim] == svc.Name && waitingOwn(s)
	if !follows && (outOfScope(&svc) || ignored(&svc, s)) {
		// Most Services: nothing to claim and nothing created for them.
		// One naming a claim its namespace lacks is told so, and so is one
		// naming another claim than its own.
		if outOfScope(&svc) {
			for _, e := range decide(s).events {
				r.Recorder.Record(e)
			}
		}
		again, err := r.tellMissing(ctx, &svc, s.claim)
		return reconcile.Result{RequeueAfter: again}, err
	}
	var classes v1alpha1.IPAddressClassList
	if err := r.Client.List(ctx, &classes); err != nil {
		return reconcile.Result{}, err
	}
	s.classes = classes.Items
	p := decide(s)
	if p.retarget != nil || (p.remove != nil && !optsOut(&svc)) {
		// The claim's status lags its driver's first address: one that
		// carries the claim's UID already fixes its class, and keeps the
		// claim with its Service unless the Service opts out.
		var addrs v1alpha1.IPAddressList
		if err := index.AddressesNaming(ctx, r.Client, &addrs, s.claim.Namespace, s.claim.Name, client.UnsafeDisableDeepCopy); err != nil {
			return reconcile.Result{}, err
		}
		if slices.ContainsFunc(addrs.Items, func(a v1alpha1.IPAddress) bool { return a.Spec.ClaimRef.UID == s.claim.UID }) {
			if p.retarget != nil {
				return reconcile.Result{}, nil
			}
			p = plan{annotate: svc.Name}
		}
	}
	err := r.execute(ctx, &svc, s.claim, p)
	if apierrors.IsAlreadyExists(err) {
		// A namesake claim appeared under us: decide again.
		return retry.Again()
	}
	// A conflict (the Service or the claim changed under us) is decided
	// again; a refusal the Service's owner was told of is retried quietly.
	return retry.End(err)
}

// tellMissing warns a live LoadBalancer Service that names a claim its
// namespace does not have — a typo, or its own auto-claim gone (the
// Service re-created from a copy that kept the annotation) — once the claim
// has been missing for namedGrace; own is the claim named after the
// Service, if any. It returns when to look again. A claim that appears
// wakes a Service of its name (namesake); one of another name is found
// when the grace is over.
func (r *Reconciler) tellMissing(ctx context.Context, svc *corev1.Service, own *v1alpha1.IPAddressClaim) (time.Duration, error) {
	key, name := client.ObjectKeyFromObject(svc), svc.Annotations[v1alpha1.AnnotationIPAddressClaim]
	if name == "" || svc.DeletionTimestamp != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || name == svc.Name && own != nil {
		r.found(key)
		return 0, nil
	}
	if name != svc.Name {
		// The claims' own informer: a metadata-only read would start a
		// second one, caching every claim again.
		switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: name}, &v1alpha1.IPAddressClaim{}); {
		case err == nil:
			r.found(key)
			return 0, nil
		case !apierrors.IsNotFound(err):
			return 0, err
		}
	}
	if wait := r.missingFor(key, name); wait > 0 {
		return wait, nil
	}
	r.Recorder.Record(namesMissing(svc, name))
	return 0, nil
}

// missingFor notes that Service key names claim, which is missing, and
// returns how much of namedGrace is left.
func (r *Reconciler) missingFor(key types.NamespacedName, claim string) time.Duration {
	now := time.Now()
	if r.now != nil {
		now = r.now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.missing[key]
	if !ok || m.claim != claim {
		if r.missing == nil {
			r.missing = map[types.NamespacedName]missingClaim{}
		}
		m = missingClaim{claim: claim, since: now}
		r.missing[key] = m
	}
	return max(namedGrace-now.Sub(m.since), 0)
}

// found forgets Service key's missing claim.
func (r *Reconciler) found(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.missing, key)
}

// execute creates the claim, records the events, then patches the one
// annotation onto the Service: a merge patch of that key alone, preconditioned on the version
// read, so no concurrent edit of the Service is ever overwritten and a
// Service that changed (say, got an address) is judged again.
func (r *Reconciler) execute(ctx context.Context, svc *corev1.Service, claim *v1alpha1.IPAddressClaim, p plan) error {
	if p.create != nil {
		if err := r.Client.Create(ctx, p.create); err != nil {
			if refused(err) {
				// A quota that is full, a namespace being deleted: the
				// Service's owner learns why it has no claim; the pass is
				// retried with backoff.
				r.Recorder.Record(recorder.WarningOnce(svc, v1alpha1.ReasonAutoClaimRefused,
					"the API server refused IPAddressClaim %s: %s", p.create.Name, err.Error()))
				err = retry.Told(err)
			}
			return fmt.Errorf("creating the claim: %w", err)
		}
		metrics.AutoClaimCreated(p.create.Spec.ClassName)
	}
	if p.retarget != nil && claim != nil {
		// Conditional on the version read: a claim that changed meanwhile
		// (bound, say) is judged again.
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"spec":{"className":%q,"family":%q}}`,
			claim.ResourceVersion, p.retarget.ClassName, p.retarget.Family))
		if err := r.Client.Patch(ctx, claim.DeepCopy(), patch); err != nil {
			return fmt.Errorf("re-targeting the claim: %w", err)
		}
	}
	if p.remove != nil {
		if err := r.Client.Delete(ctx, p.remove, client.Preconditions{UID: &p.remove.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the claim: %w", err)
		}
	}
	// Recorded before the patch: a claim that exists is the transition, and
	// a retried patch finds the claim there and records nothing again.
	for _, e := range p.events {
		r.Recorder.Record(e)
	}
	if p.annotate != "" {
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"annotations":{%q:%q}}}`,
			svc.ResourceVersion, v1alpha1.AnnotationIPAddressClaim, p.annotate))
		if err := r.Client.Patch(ctx, svc.DeepCopy(), patch); err != nil {
			if refused(err) {
				r.Recorder.Record(recorder.WarningOnce(svc, v1alpha1.ReasonAutoClaimRefused,
					"the API server refused the annotation %s: %s on this Service: %s", v1alpha1.AnnotationIPAddressClaim, p.annotate, err.Error()))
				err = retry.Told(err)
			}
			return fmt.Errorf("annotating the Service: %w", err)
		}
	}
	return nil
}

// refused says whether the API server refused a claim create for a reason
// the Service's owner should see (admission, a quota, the namespace), not
// a conflict or an outage a retry gets past unseen.
func refused(err error) bool {
	return retry.Refusal(err) || apierrors.IsBadRequest(err)
}
