package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	metallbiad "github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/test/metallb"
)

// teardown runs at the end of every test, after every manager of the test
// has stopped (they were started after newEnv, so their cleanups run
// first): it logs the test's objects if the test failed, then removes them.
func (e *env) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if e.t.Failed() {
		e.dump(ctx)
	}
	if err := e.cleanup(ctx); err != nil {
		e.t.Errorf("cleanup: %v", err)
	}
}

// cleanup removes everything the test created, stripping finalizers: its
// Services, its addresses' placeholders and its pools in MetalLB's
// namespace, its claims, addresses and classes, and its namespace.
func (e *env) cleanup(ctx context.Context) error {
	var errs []error
	var svcs corev1.ServiceList
	errs = append(errs, k8s.List(ctx, &svcs, client.InNamespace(e.ns)))
	for i := range svcs.Items {
		errs = append(errs, forceDelete(ctx, &svcs.Items[i]))
	}
	addrs := e.ownAddresses(ctx)
	for i := range addrs {
		placeholder := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: driverNamespace, Name: addrs[i].Name}}
		errs = append(errs, client.IgnoreNotFound(k8s.Delete(ctx, placeholder)))
	}
	pools := &unstructured.UnstructuredList{}
	pools.SetGroupVersionKind(metallbiad.PoolGVK)
	errs = append(errs, client.IgnoreNotFound(k8s.List(ctx, pools, client.InNamespace(metallb.Namespace))))
	for i := range pools.Items {
		if e.ownsClass(pools.Items[i].GetName()) {
			errs = append(errs, client.IgnoreNotFound(k8s.Delete(ctx, &pools.Items[i])))
		}
	}
	var claims v1alpha1.IPAddressClaimList
	errs = append(errs, k8s.List(ctx, &claims, client.InNamespace(e.ns)))
	for i := range claims.Items {
		errs = append(errs, forceDelete(ctx, &claims.Items[i]))
	}
	for i := range addrs {
		errs = append(errs, forceDelete(ctx, &addrs[i]))
	}
	var classes v1alpha1.IPAddressClassList
	errs = append(errs, k8s.List(ctx, &classes))
	for i := range classes.Items {
		if e.ownsClass(classes.Items[i].Name) {
			errs = append(errs, forceDelete(ctx, &classes.Items[i]))
		}
	}
	errs = append(errs, client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})))
	return errors.Join(errs...)
}

// ownAddresses are the addresses of the test's classes or bound into its
// namespace, by name.
func (e *env) ownAddresses(ctx context.Context) []v1alpha1.IPAddress {
	var list v1alpha1.IPAddressList
	if err := k8s.List(ctx, &list); err != nil {
		e.t.Errorf("listing addresses: %v", err)
		return nil
	}
	own := slices.DeleteFunc(list.Items, func(a v1alpha1.IPAddress) bool {
		return !e.ownsClass(a.Spec.ClassName) && (a.Spec.ClaimRef == nil || a.Spec.ClaimRef.Namespace != e.ns)
	})
	slices.SortFunc(own, func(x, y v1alpha1.IPAddress) int { return strings.Compare(x.Name, y.Name) })
	return own
}

// dump logs what a failure is read from: the test's claims with their
// conditions, its addresses, the Services of its namespace and of the
// driver's, the events of its namespace and the tail of MetalLB's log.
func (e *env) dump(ctx context.Context) {
	var b strings.Builder
	var claims v1alpha1.IPAddressClaimList
	if err := k8s.List(ctx, &claims, client.InNamespace(e.ns)); err == nil {
		for _, c := range claims.Items {
			fmt.Fprintf(&b, "claim %s uid=%s phase=%s class=%s/%s family=%s addresses=%v deleting=%v finalizers=%v annotations=%v owners=%+v\n",
				c.Name, c.UID, c.Status.Phase, c.Spec.ClassName, c.Status.ClassName, c.Spec.Family, names(c.Status.Addresses),
				c.DeletionTimestamp != nil, c.Finalizers, c.Annotations, c.OwnerReferences)
			for _, cond := range c.Status.Conditions {
				fmt.Fprintf(&b, "    %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
	}
	for _, a := range e.ownAddresses(ctx) {
		fmt.Fprintf(&b, "address %s class=%s phase=%s claimRef=%+v associatedTo=%+v deleting=%v finalizers=%v\n",
			a.Name, a.Spec.ClassName, a.Status.Phase, a.Spec.ClaimRef, a.Status.AssociatedTo, a.DeletionTimestamp != nil, a.Finalizers)
	}
	for _, ns := range []string{e.ns, driverNamespace} {
		var svcs corev1.ServiceList
		if err := k8s.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
			continue
		}
		for _, s := range svcs.Items {
			fmt.Fprintf(&b, "service %s/%s uid=%s type=%s families=%v policy=%v ingress=%v annotations=%v finalizers=%v deleting=%v\n",
				s.Namespace, s.Name, s.UID, s.Spec.Type, s.Spec.IPFamilies, ptr.Deref(s.Spec.IPFamilyPolicy, ""),
				s.Status.LoadBalancer.Ingress, s.Annotations, s.Finalizers, s.DeletionTimestamp != nil)
		}
	}
	var events eventsv1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(e.ns)); err == nil {
		for _, ev := range events.Items {
			fmt.Fprintf(&b, "event %s %s/%s %s: %s\n", ev.Type, ev.Regarding.Kind, ev.Regarding.Name, ev.Reason, ev.Note)
		}
	}
	if log, err := os.ReadFile(metallbLog); err == nil && len(log) > 4000 {
		b.WriteString("MetalLB log tail:\n" + string(log[len(log)-4000:]))
	}
	e.t.Logf("state at failure:\n%s", b.String())
}
