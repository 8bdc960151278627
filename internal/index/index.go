package index

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/quota"
)

// Index names.
const (
	// AddressClaim: IPAddress by the bucket of the claim its claimRef
	// names, ClaimBucket(namespace, name); AddressesNaming lists a claim's
	// addresses through it.
	AddressClaim = "spec.claimRef"
	// AddressPool: an Available or Released IPAddress by PoolKey(class,
	// family, phase); no other phase is filed, nor an address being
	// deleted: nothing binds or recycles one (a foreign finalizer can keep
	// it for long), and a driver counting it as free would wait on it.
	AddressPool = "pool"
	// AddressNamespace: IPAddress by the namespace its claimRef names.
	AddressNamespace = "claimNamespace"
	// ClaimWaiting: IPAddressClaim by WaitingKey(class, family) for every
	// family it still waits on, when it pre-binds no specific address.
	ClaimWaiting = "waiting"
	// ClaimAddressName: IPAddressClaim by spec.addressName.
	ClaimAddressName = "spec.addressName"
	// ClaimUnresolved: IPAddressClaim whose class failed to resolve, key Unresolved.
	ClaimUnresolved = "unresolved"
	// ClaimNamedWait: IPAddressClaim waiting for the address it names
	// (spec.addressName), by the class it named or resolved to: a change
	// of the class, its deletion above all, concerns it too.
	ClaimNamedWait = "namedWait"
	// ServiceUnclaimed: a LoadBalancer Service that names no claim, key Unclaimed.
	ServiceUnclaimed = "unclaimed"
)

// The IPAddress CRD's selectable fields: the API server selects on them
// (a read past the cache); the cache's own indexes are above.
const (
	SelectableClassName      = "spec.className"
	SelectableClaimNamespace = "spec.claimRef.namespace"
	SelectableClaimName      = "spec.claimRef.name"
)

// Unclaimed is the only key of ServiceUnclaimed.
const Unclaimed = "true"

// Unresolved is the only key of ClaimUnresolved.
const Unresolved = "true"

// ClaimKey is the AddressClaim key of a claim.
func ClaimKey(namespace, name string) string { return namespace + "/" + name }

// PoolKey is the AddressPool key.
func PoolKey(class string, family v1alpha1.IPFamily, phase v1alpha1.AddressPhase) string {
	return class + "/" + string(family) + "/" + string(phase)
}

// WaitingKey is the ClaimWaiting key.
func WaitingKey(class string, family v1alpha1.IPFamily) string { return class + "/" + string(family) }

// Setup registers the named indexes with the indexer, or every index when
// none is named: each index costs memory per object cached, so a binary
// registers only those it queries.
func Setup(ctx context.Context, i client.FieldIndexer, names ...string) error {
	for _, x := range []struct {
		obj client.Object
		key string
		fn  client.IndexerFunc
	}{
		{&v1alpha1.IPAddress{}, AddressClaim, addressClaim},
		{&v1alpha1.IPAddress{}, AddressPool, addressPool},
		{&v1alpha1.IPAddress{}, AddressNamespace, addressNamespace},
		{&v1alpha1.IPAddressClaim{}, ClaimWaiting, claimWaiting},
		{&v1alpha1.IPAddressClaim{}, ClaimAddressName, claimAddressName},
		{&v1alpha1.IPAddressClaim{}, ClaimUnresolved, claimUnresolved},
		{&v1alpha1.IPAddressClaim{}, ClaimNamedWait, claimNamedWait},
		{&corev1.Service{}, ServiceUnclaimed, serviceUnclaimed},
	} {
		if len(names) > 0 && !slices.Contains(names, x.key) {
			continue
		}
		if err := i.IndexField(ctx, x.obj, x.key, x.fn); err != nil {
			return err
		}
	}
	return nil
}

var addressClaim = Bucketed(claimRefKey)

func claimRefKey(o client.Object) []string {
	if ref := o.(*v1alpha1.IPAddress).Spec.ClaimRef; ref != nil {
		return []string{ClaimKey(ref.Namespace, ref.Name)}
	}
	return nil
}

// ClaimBucket is the AddressClaim key of the claim namespace/name.
func ClaimBucket(namespace, name string) string { return Bucket(ClaimKey(namespace, name)) }

// AddressesNaming lists into list the addresses whose claimRef names the
// claim namespace/name, from its AddressClaim bucket (ListBucketed).
func AddressesNaming(ctx context.Context, c client.Reader, list *v1alpha1.IPAddressList, namespace, name string, opts ...client.ListOption) error {
	return ListBucketed(ctx, c, list, AddressClaim, claimRefKey, ClaimKey(namespace, name), opts...)
}

func addressNamespace(o client.Object) []string {
	if ref := o.(*v1alpha1.IPAddress).Spec.ClaimRef; ref != nil {
		return []string{ref.Namespace}
	}
	return nil
}

// addressPool files only the phases anyone asks a pool for: a free address
// (Available) and one a namespace may keep (Released). The rest — at a /16
// nearly every address, Bound — would cost an index entry each for no
// reader.
func addressPool(o client.Object) []string {
	a := o.(*v1alpha1.IPAddress)
	if a.Status.Phase != v1alpha1.AddressAvailable && a.Status.Phase != v1alpha1.AddressReleased || a.DeletionTimestamp != nil {
		return nil
	}
	return []string{PoolKey(a.Spec.ClassName, binding.Family(a), a.Status.Phase)}
}

func claimWaiting(o client.Object) []string { return WaitingKeys(o.(*v1alpha1.IPAddressClaim)) }

// WaitingKeys are the ClaimWaiting keys of a claim: a live claim that a pass
// left Pending or Lost is keyed by each family it has no address for yet,
// under the class it named or resolved to. A claim no pass has seen yet is
// not waiting: its first pass is still to come.
func WaitingKeys(c *v1alpha1.IPAddressClaim) []string {
	class := binding.ClassName(c)
	waiting := c.Status.Phase == v1alpha1.ClaimPending || c.Status.Phase == v1alpha1.ClaimLost
	if !waiting || c.DeletionTimestamp != nil || c.Spec.AddressName != "" || class == "" {
		return nil
	}
	var keys []string
	for _, f := range binding.UnreportedFamilies(c) {
		keys = append(keys, WaitingKey(class, f))
	}
	return keys
}

func claimAddressName(o client.Object) []string {
	if n := o.(*v1alpha1.IPAddressClaim).Spec.AddressName; n != "" {
		return []string{n}
	}
	return nil
}

func claimNamedWait(o client.Object) []string {
	c := o.(*v1alpha1.IPAddressClaim)
	class := binding.ClassName(c)
	waiting := c.Status.Phase == v1alpha1.ClaimPending || c.Status.Phase == v1alpha1.ClaimLost
	if !waiting || c.DeletionTimestamp != nil || c.Spec.AddressName == "" || class == "" {
		return nil
	}
	return []string{class}
}

func claimUnresolved(o client.Object) []string {
	c := o.(*v1alpha1.IPAddressClaim)
	if c.DeletionTimestamp == nil && meta.IsStatusConditionPresentAndEqual(c.Status.Conditions, v1alpha1.ConditionClassResolved, metav1.ConditionFalse) {
		return []string{Unresolved}
	}
	return nil
}

func serviceUnclaimed(o client.Object) []string {
	svc := o.(*corev1.Service)
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Annotations[v1alpha1.AnnotationIPAddressClaim] == "" {
		return []string{Unclaimed}
	}
	return nil
}

// Requests lists the objects matching opts from the cache and returns a
// reconcile request for each: the common body of a watch's map function.
// A failed list maps to nothing; the next event maps again.
func Requests(ctx context.Context, c client.Reader, list client.ObjectList, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o.(client.Object))})
		return nil
	})
	return reqs
}

// AddressesOfClaim are requests for the addresses whose claimRef names the
// claim namespace/name.
func AddressesOfClaim(ctx context.Context, c client.Reader, namespace, name string) []reconcile.Request {
	var list v1alpha1.IPAddressList
	if err := AddressesNaming(ctx, c, &list, namespace, name, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// WaitingOnClass are requests for the claims of class still waiting for an
// address, of either family.
func WaitingOnClass(ctx context.Context, c client.Reader, class string) []reconcile.Request {
	var reqs []reconcile.Request
	for _, f := range v1alpha1.Dual.Families() {
		reqs = append(reqs, Requests(ctx, c, &v1alpha1.IPAddressClaimList{}, client.MatchingFields{ClaimWaiting: WaitingKey(class, f)})...)
	}
	return reqs
}

// NamingOnClass are requests for the claims of class waiting for the
// address they name (ClaimNamedWait).
func NamingOnClass(ctx context.Context, c client.Reader, class string) []reconcile.Request {
	return Requests(ctx, c, &v1alpha1.IPAddressClaimList{}, client.MatchingFields{ClaimNamedWait: class})
}

// ClaimLifecycle passes the claim events its addresses depend on: a claim
// appearing (its UID), starting to be deleted, and going — also when a
// watch that re-lists delivers a deletion and a namesake's creation as one
// update. Status and metadata updates, most claim events, would only
// re-run passes, often on a cache that has yet to deliver the
// reconciler's own last write.
var ClaimLifecycle = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() || Replaced(e)
	},
}

// SpecChanged passes the events of an object (a class, a pool) that change
// what is decided from it: its creation and deletion, the start of its
// deletion, a new generation (its spec), and a namesake replacing it during
// a watch gap (both may be at generation 1). Its status, rewritten as its
// counts move, passes not: each write would wake everything mapped from it.
var SpecChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, ClaimLifecycle)

// QuotaLimitsAddresses passes the events of the ResourceQuotas that limit
// addresses (quota.Ours), or did before an update: a limit taken out frees
// the claims it held back, and its series go. An update passes only when
// it changes what addresses depend on (quota.SameForAddresses), its
// deletion begins, or a namesake replaced it: the API server rewrites a
// quota that also limits pods at every pod it admits, and each such write
// would wake every waiting claim of the namespace.
var QuotaLimitsAddresses = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return limitsAddresses(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		if !limitsAddresses(e.ObjectOld) && !limitsAddresses(e.ObjectNew) {
			return false
		}
		old, okOld := e.ObjectOld.(*corev1.ResourceQuota)
		now, okNew := e.ObjectNew.(*corev1.ResourceQuota)
		return !okOld || !okNew || !quota.SameForAddresses(old, now) || ClaimLifecycle.Update(e)
	},
	DeleteFunc:  func(e event.DeleteEvent) bool { return limitsAddresses(e.Object) },
	GenericFunc: func(e event.GenericEvent) bool { return limitsAddresses(e.Object) },
}

func limitsAddresses(o client.Object) bool {
	rq, ok := o.(*corev1.ResourceQuota)
	return ok && quota.Ours(rq)
}

// Replaced says whether an update event stands for an object deleted and
// created again under its name: after a watch gap, the informer's re-list
// delivers the two as one update, old and new of different UIDs.
func Replaced(e event.UpdateEvent) bool {
	return e.ObjectOld.GetUID() != e.ObjectNew.GetUID()
}

// WatchNamespaces registers the cache's metadata informer of namespaces
// (NamespaceLeaving) before the manager starts, so that it is synced with
// the others before the first pass rather than started, and waited for,
// by it.
func WatchNamespaces(ctx context.Context, c cache.Cache) error {
	_, err := c.GetInformer(ctx, namespaceMeta())
	return err
}

func namespaceMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
}

// NamespaceLeaving reports whether namespace name is being deleted, from
// the cache's metadata of namespaces: its claims are about to be deleted
// with it, and nothing is to be bound, charged, taken back or provisioned
// for them — an address given now would outlive the namespace, Released
// under Retain. A namespace the cache does not show (not seen yet) or a
// failed read says no: the pass goes on as for any claim.
func NamespaceLeaving(ctx context.Context, c client.Reader, name string) bool {
	ns := namespaceMeta()
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return false
	}
	return ns.DeletionTimestamp != nil
}
