package metallb

import (
	"context"
	"fmt"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/cachetrim"
)

// ClassOwners says, from the cache's IPAddressClasses, whether a class is
// the driver's. The cache and the event filters ask it about every
// address: a hosting provider's /16 of a static class would otherwise be
// held whole, and each of its events handled, by a driver that never acts
// on any of them. A class the cache has not shown yet is neither the
// driver's nor another's.
type ClassOwners struct {
	store atomic.Pointer[toolscache.Store]
}

// Watch reads classes from c's informer from now on. Until it is called,
// every class is unknown.
func (o *ClassOwners) Watch(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, &v1alpha1.IPAddressClass{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	s, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok {
		return fmt.Errorf("the informer of IPAddressClasses has no store")
	}
	store := s.GetStore()
	o.store.Store(&store)
	return nil
}

// provisioner is the provisioner of class name, and whether the cache
// holds that class.
func (o *ClassOwners) provisioner(name string) (string, bool) {
	if o == nil {
		return "", false
	}
	s := o.store.Load()
	if s == nil {
		return "", false
	}
	obj, ok, err := (*s).GetByKey(name)
	if err != nil || !ok {
		return "", false
	}
	class, ok := obj.(*v1alpha1.IPAddressClass)
	if !ok {
		return "", false
	}
	return class.Spec.Provisioner, true
}

// Ours reports whether class name is known to be the driver's.
func (o *ClassOwners) Ours(name string) bool {
	p, ok := o.provisioner(name)
	return ok && p == Provisioner
}

// Foreign reports whether class name is known to be another
// provisioner's.
func (o *ClassOwners) Foreign(name string) bool {
	p, ok := o.provisioner(name)
	return ok && p != Provisioner
}

// Others is true of an address the driver neither holds (no teardown
// finalizer) nor could (its class is another provisioner's): nothing of it
// but its IP and names matters to the driver.
func (o *ClassOwners) Others(a *v1alpha1.IPAddress) bool {
	return o.Foreign(a.Spec.ClassName) && !controllerutil.ContainsFinalizer(a, FinalizerTeardown)
}

// Relevant passes the creations and updates of the addresses that are not
// Others; deletions always pass (what the driver left behind for a name is
// cleaned when it goes).
func (o *ClassOwners) Relevant() predicate.Funcs {
	keep := func(obj client.Object) bool {
		a, ok := obj.(*v1alpha1.IPAddress)
		return !ok || !o.Others(a)
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return keep(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return keep(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(e event.GenericEvent) bool { return keep(e.Object) },
	}
}

// TransformAddress is the cache transform of addresses. An address that
// the driver holds (its teardown finalizer) or whose class is the driver's
// is kept whole, its strings shared. Any other is kept in outline, without
// conditions, status records, labels, annotations or UID: of a class not
// in the cache yet, its name, resource version, deletion, finalizers, spec
// and phase — what the driver reads of an address that may turn out its
// own (the claim it names, whether it is Available); of another
// provisioner's class, only what says its IP is taken.
//
// An outline has no UID, which no object read from the API server lacks
// (Outlined). An address outlined because its class was not in the cache
// yet is read from the API server by the pass that finds it the driver's,
// and kept whole from its next event on.
func (o *ClassOwners) TransformAddress(obj any) (any, error) {
	a, ok := obj.(*v1alpha1.IPAddress)
	if !ok || o.Ours(a.Spec.ClassName) || controllerutil.ContainsFinalizer(a, FinalizerTeardown) {
		return cachetrim.Transform(obj)
	}
	out := &v1alpha1.IPAddress{
		TypeMeta: a.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: a.Name, ResourceVersion: a.ResourceVersion,
			DeletionTimestamp: a.DeletionTimestamp, Finalizers: a.Finalizers,
		},
		Spec:   a.Spec,
		Status: v1alpha1.IPAddressStatus{Phase: a.Status.Phase},
	}
	if o.Foreign(a.Spec.ClassName) {
		out.Spec = v1alpha1.IPAddressSpec{Address: a.Spec.Address, ClassName: a.Spec.ClassName}
	}
	return cachetrim.Transform(out)
}

// TransformClaim is the cache transform of claims: TransformClaim's, and a
// claim of another provisioner's class keeps neither its UID nor its
// addresses — the driver looks a claim up only for an address of its own,
// which a claim of another class never holds.
func (o *ClassOwners) TransformClaim(obj any) (any, error) {
	out, err := TransformClaim(obj)
	if c, ok := out.(*v1alpha1.IPAddressClaim); ok && err == nil &&
		c.Annotations[v1alpha1.AnnotationProvisioner] != Provisioner && o.Foreign(binding.ClassName(c)) {
		c.UID, c.Status.Addresses = "", nil
	}
	return out, err
}

// Outlined reports whether a is a cache's outline (TransformAddress), not a
// whole address.
func Outlined(a *v1alpha1.IPAddress) bool { return a.UID == "" }
