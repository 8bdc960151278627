package claim

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/lock"
	"github.com/cozystack/address-controller/internal/quota"
)

// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=get;list;watch;patch

// charge charges the families the claim has no address for yet to every
// ResourceQuota of its namespace that limits its class, before a pass may
// match an address for them (or a driver provision one). It returns why the
// claim does not fit, or "". A charge the cache already shows is not
// written again; one that is decided on the API server's quota and
// addresses, and written on the quota's version, so charges are serialized
// per quota (package quota).
func (r *Reconciler) charge(ctx context.Context, s *snapshot) (string, error) {
	claim, class := s.claim, s.class.class
	if claim.DeletionTimestamp != nil {
		return "", nil
	}
	req := quota.Request{Claim: claim.Name, UID: claim.UID, Families: needsRoom(s)}
	if class != nil {
		req.Class = class.Name
	}
	var quotas corev1.ResourceQuotaList
	if err := r.Client.List(ctx, &quotas, client.InNamespace(claim.Namespace)); err != nil {
		return "", err
	}
	// Each quota charged with what the claim no longer asks for (another
	// class, a family it now takes back or no longer wants; everything while
	// its class is unresolved) has that dropped, even when nothing new is
	// charged.
	var todo []types.NamespacedName
	for i := range quotas.Items {
		rq := &quotas.Items[i]
		charges := quota.ChargesOf(rq)
		stale := quota.Stale(charges, claim.UID, req.Class, req.Families) != nil
		if !stale && (class == nil || len(quota.Keys(rq, class.Name)) == 0 || !slices.ContainsFunc(req.Families, func(f v1alpha1.IPFamily) bool { return !charges.Holds(claim.UID, class.Name, f) })) {
			continue
		}
		todo = append(todo, client.ObjectKeyFromObject(rq))
	}
	if class == nil || len(req.Families) == 0 {
		for _, key := range todo {
			if _, err := r.chargeOne(ctx, key, req, false); err != nil {
				return "", err
			}
		}
		return "", nil
	}
	// Every quota is judged before any is charged: a charge written to one
	// quota while another refuses would hold a place the claim cannot use.
	for _, key := range todo {
		if refusal, err := r.chargeOne(ctx, key, req, true); refusal != "" || err != nil {
			return r.refused(ctx, quotas.Items, nil, req, refusal, err)
		}
	}
	for i, key := range todo {
		if refusal, err := r.chargeOne(ctx, key, req, false); refusal != "" || err != nil {
			return r.refused(ctx, quotas.Items, todo[:i], req, refusal, err)
		}
	}
	return "", nil
}

// refused gives back what the claim holds in its namespace's other quotas
// when one refuses it: a place charged earlier — before this quota limited
// its class, or by this pass, which lost a race for the refusing one — is
// one it cannot use, and a claim of another class could. thisPass are the
// quotas this pass charged, which the cache may not show yet.
func (r *Reconciler) refused(ctx context.Context, quotas []corev1.ResourceQuota, thisPass []types.NamespacedName, req quota.Request, refusal string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	holding := slices.Clone(thisPass)
	for i := range quotas {
		if key := client.ObjectKeyFromObject(&quotas[i]); !slices.Contains(holding, key) && charged(&quotas[i], req.UID) {
			holding = append(holding, key)
		}
	}
	none := quota.Request{Claim: req.Claim, UID: req.UID, Class: req.Class}
	for _, key := range holding {
		if _, err := r.chargeOne(ctx, key, none, false); err != nil {
			return "", err
		}
	}
	return refusal, nil
}

// needsRoom are the families of the claim that need room in its quotas: a
// family it holds, or is pre-bound to, is counted already; so is one it
// takes back from its namespace (keepReleasedInNamespace), whether that
// address is free to take now or still being detached from its former
// Service, and one whose address it names still names its earlier
// incarnation (ownNamed). None while its class is unresolved.
func needsRoom(s *snapshot) []v1alpha1.IPFamily {
	claim, class := s.claim, s.class.class
	if class == nil {
		return nil
	}
	named := map[v1alpha1.IPFamily]bool{}
	for i := range s.addresses {
		a := &s.addresses[i]
		if f := binding.Family(a); binding.Holds(a, claim) || binding.PreBoundIn(a, claim, class.Name) || rebindable(a, claim, class, f) || ownNamed(a, claim) {
			named[f] = true
		}
	}
	for f := range s.detaching {
		named[f] = true
	}
	return binding.MissingFamilies(claim, named)
}

// ownNamed: the address the claim names (spec.addressName) still names a
// claim of its namespace and name — an earlier incarnation's, the claim
// restored from a backup. It counts in the quota already, and the claim
// waits for an administrator to clear its claimRef, not for room.
func ownNamed(a *v1alpha1.IPAddress, claim *v1alpha1.IPAddressClaim) bool {
	ref := a.Spec.ClaimRef
	return claim.Spec.AddressName == a.Name && ref != nil && ref.Namespace == claim.Namespace && ref.Name == claim.Name
}

// chargeOne charges req to one quota, read with the namespace's addresses
// from the API server. With dryRun it charges nothing and only says whether
// the quota refuses (dropping, when it does, what the claim was charged and
// no longer asks for). A conflict (another charge came first) ends the pass; the next one
// decides again.
func (r *Reconciler) chargeOne(ctx context.Context, key types.NamespacedName, req quota.Request, dryRun bool) (string, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	var rq corev1.ResourceQuota
	if err := reader.Get(ctx, key, &rq); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	var addrs v1alpha1.IPAddressList
	if err := reader.List(ctx, &addrs, client.MatchingFields{index.SelectableClaimNamespace: key.Namespace}); err != nil {
		return "", err
	}
	d := quota.Decide(&rq, req, quota.ChargesOf(&rq), addrs.Items)
	if d.Charges == nil || dryRun && d.Refusal == "" {
		return d.Refusal, nil
	}
	if err := lock.Patch(ctx, r.Client, &rq, func() {
		metav1.SetMetaDataAnnotation(&rq.ObjectMeta, quota.ChargesAnnotation, d.Charges.String())
	}); err != nil {
		return "", fmt.Errorf("charging ResourceQuota %s: %w", key, err)
	}
	return d.Refusal, nil
}

// waitingInNamespace: a quota's room changed (an address of the namespace
// went, a charge was dropped, a limit was raised); the claims of its
// namespace that wait may fit now.
func (r *Reconciler) waitingInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var claims v1alpha1.IPAddressClaimList
	if err := r.Client.List(ctx, &claims, client.UnsafeDisableDeepCopy, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range claims.Items {
		if c := &claims.Items[i]; c.Status.Phase != v1alpha1.ClaimBound {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

// charged says whether rq holds a charge of the claim uid.
func charged(rq *corev1.ResourceQuota, uid types.UID) bool {
	_, ok := quota.ChargesOf(rq)[uid]
	return ok
}
