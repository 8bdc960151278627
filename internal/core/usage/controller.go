package usage

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/lock"
	"github.com/cozystack/address-controller/internal/metrics"
	"github.com/cozystack/address-controller/internal/quota"
	"github.com/cozystack/address-controller/internal/retry"
)

// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=resourcequotas/status,verbs=update
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclaims,verbs=list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=list;watch

// Reconciler keeps the address usage of ResourceQuotas.
type Reconciler struct {
	Client client.Client
	// APIReader confirms a claim is gone before its charge is dropped: a
	// cache that has yet to show a new claim must not free its place.
	APIReader client.Reader
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("address-usage").
		For(&corev1.ResourceQuota{}, builder.WithPredicates(index.QuotaLimitsAddresses)).
		Watches(&v1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.quotasOfAddress)).
		Watches(&v1alpha1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(r.quotasOfClaim), builder.WithPredicates(index.ClaimLifecycle)).
		WithOptions(retry.Options(workers)).
		Complete(r)
}

func (r *Reconciler) quotasOfAddress(ctx context.Context, o client.Object) []reconcile.Request {
	if ref := o.(*v1alpha1.IPAddress).Spec.ClaimRef; ref != nil {
		return r.quotasIn(ctx, ref.Namespace)
	}
	return nil
}

func (r *Reconciler) quotasOfClaim(ctx context.Context, o client.Object) []reconcile.Request {
	return r.quotasIn(ctx, o.GetNamespace())
}

func (r *Reconciler) quotasIn(ctx context.Context, namespace string) []reconcile.Request {
	var list corev1.ResourceQuotaList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if quota.Ours(&list.Items[i]) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// Reconcile prunes the quota's charges, then writes its usage.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var rq corev1.ResourceQuota
	if err := r.Client.Get(ctx, req.NamespacedName, &rq); err != nil || !quota.Ours(&rq) {
		metrics.ForgetQuota(req.Namespace, req.Name)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var addrs v1alpha1.IPAddressList
	if err := r.Client.List(ctx, &addrs, client.UnsafeDisableDeepCopy, client.MatchingFields{index.AddressNamespace: rq.Namespace}); err != nil {
		return reconcile.Result{}, err
	}
	charges := quota.ChargesOf(&rq)
	live, err := r.liveClaims(ctx, rq.Namespace, charges)
	if err != nil {
		return reconcile.Result{}, err
	}
	pruned := quota.Prune(&rq, charges, addrs.Items, func(uid types.UID) bool { return live[uid] })
	if settledLive(charges, pruned, live) {
		// A live claim's charge dropped as settled by its addresses: the
		// API server's list confirms it. A cache still showing an address
		// the claim has lost (another manager's, lagging) must not free
		// the place the claim was granted in its stead.
		var fresh v1alpha1.IPAddressList
		if err := r.APIReader.List(ctx, &fresh, client.MatchingFields{"spec.claimRef.namespace": rq.Namespace}); err != nil {
			return reconcile.Result{}, err
		}
		pruned = quota.Prune(&rq, charges, fresh.Items, func(uid types.UID) bool { return live[uid] })
	}
	if pruned != nil {
		charges = pruned
		if err := lock.Patch(ctx, r.Client, &rq, func() { setCharges(&rq, pruned) }); err != nil {
			return retry.OnConflict(err)
		}
	}
	used := quota.Usage(&rq, addrs.Items, charges)
	metrics.ObserveQuota(&rq, used)
	return retry.OnConflict(r.writeUsage(ctx, &rq, used))
}

// settledLive reports whether pruned drops the charge of a claim that is
// live: one its addresses settle, rather than one of a claim gone.
func settledLive(charges, pruned quota.Charges, live map[types.UID]bool) bool {
	if pruned == nil {
		return false
	}
	for uid := range charges {
		if _, kept := pruned[uid]; !kept && live[uid] {
			return true
		}
	}
	return false
}

// liveClaims are the UIDs of the claims the charges name that exist: from
// the cache, and for those the cache lacks, from the API server.
func (r *Reconciler) liveClaims(ctx context.Context, namespace string, charges quota.Charges) (map[types.UID]bool, error) {
	live := map[types.UID]bool{}
	var claims v1alpha1.IPAddressClaimList
	if err := r.Client.List(ctx, &claims, client.UnsafeDisableDeepCopy, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for i := range claims.Items {
		live[claims.Items[i].UID] = true
	}
	for uid := range charges {
		if live[uid] || r.APIReader == nil {
			continue
		}
		// A list of its own: the cache's was read uncopied.
		var current v1alpha1.IPAddressClaimList
		if err := r.APIReader.List(ctx, &current, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		for i := range current.Items {
			live[current.Items[i].UID] = true
		}
		break
	}
	return live, nil
}

func setCharges(rq *corev1.ResourceQuota, c quota.Charges) {
	if len(c) == 0 {
		delete(rq.Annotations, quota.ChargesAnnotation)
		return
	}
	metav1.SetMetaDataAnnotation(&rq.ObjectMeta, quota.ChargesAnnotation, c.String())
}

// writeUsage writes used into status.used (and the limits into
// status.hard) for the quota's address keys, when they changed.
func (r *Reconciler) writeUsage(ctx context.Context, rq *corev1.ResourceQuota, used corev1.ResourceList) error {
	st := rq.Status.DeepCopy()
	if st.Used == nil {
		st.Used = corev1.ResourceList{}
	}
	if st.Hard == nil {
		st.Hard = corev1.ResourceList{}
	}
	for k, v := range used {
		st.Used[k] = v
		st.Hard[k] = rq.Spec.Hard[k]
	}
	if equality.Semantic.DeepEqual(*st, rq.Status) {
		return nil
	}
	rq.Status = *st
	return r.Client.Status().Update(ctx, rq)
}
