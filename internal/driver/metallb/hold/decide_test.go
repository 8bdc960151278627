package hold

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/driver/metallb/metallbtest"
	"github.com/cozystack/address-controller/internal/fakeapi"
)

const (
	ns      = "tenant"
	claimID = types.UID("c1")
	key     = sharingKeyPrefix + "c1"
	v4      = "203.0.113.1"
	v6      = "2001:db8::1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// --- builders ---

func addr(ip string, phase v1alpha1.AddressPhase, mods ...func(*v1alpha1.IPAddress)) *v1alpha1.IPAddress {
	name, _ := v1alpha1.IPAddressName(ip)
	a := &v1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Finalizers: []string{metallb.FinalizerTeardown}},
		Spec: v1alpha1.IPAddressSpec{Address: ip, ClassName: "public",
			ClaimRef: &v1alpha1.ClaimReference{Namespace: ns, Name: "web", UID: claimID}},
	}
	if phase != "" {
		binding.SetPhase(&a.Status, phase, "", now.Add(-time.Hour))
	}
	for _, m := range mods {
		m(a)
	}
	return a
}

func deleting(a *v1alpha1.IPAddress) { a.DeletionTimestamp = &metav1.Time{Time: now} }

func svc(namespace, name string, mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "/" + name),
			CreationTimestamp: metav1.Time{Time: now.Add(-time.Minute)}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func holding(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

func annotated(kv ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			s.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func naming(claim string) func(*corev1.Service) {
	return annotated(v1alpha1.AnnotationIPAddressClaim, claim)
}

// pinnedBy is a workload carrying the driver's pin of ips.
func pinnedBy(ips string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		*s = *pin(s, ips, key)
	}
}

// withdrawn is a workload whose pin the driver withdrew.
func withdrawn(ips string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		*s = *withdraw(pin(s, ips, key))
	}
}

func ph(ip, sharing string, mods ...func(*corev1.Service)) *corev1.Service {
	a := addr(ip, "")
	s := placeholder(a, netip.MustParseAddr(ip), "public", "metallb-iad-system", sharing, svc(ns, "peer"))
	s.UID = types.UID("ph-" + a.Name)
	for _, m := range mods {
		m(s)
	}
	return s
}

var inPool = metallbtest.Class("203.0.113.0/24", "2001:db8::/64")

type world struct {
	address *v1alpha1.IPAddress
	claim   bool
	// family is the claim's (default IPv4); reported, the IPs its status
	// reports.
	family       v1alpha1.IPFamily
	reported     []string
	siblings     []*v1alpha1.IPAddress
	services     []*corev1.Service
	placeholders []*corev1.Service
	class        *metallb.Class
	// covering names the pool in MetalLB's books containing the address
	// when it is not the class's.
	covering string
	// strangers are Services the holding record does not name, whatever
	// markers they carry.
	strangers []*corev1.Service
}

// snapshotOf is the snapshot the reconciler gathers from the world: the
// real gather over a fake API server holding the world's objects, the
// class judged as the world says (a ClassBook of its own).
func snapshotOf(t *testing.T, w world) snapshot {
	t.Helper()
	objs := []client.Object{w.address}
	for _, a := range w.siblings {
		objs = append(objs, a)
	}
	for _, x := range slices.Concat(w.services, w.placeholders, w.strangers) {
		objs = append(objs, x)
	}
	if w.claim {
		c := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: claimID}, Spec: v1alpha1.IPAddressClaimSpec{Family: w.family}}
		for _, ip := range w.reported {
			name, _ := v1alpha1.IPAddressName(ip)
			c.Status.Addresses = append(c.Status.Addresses, v1alpha1.ClaimedAddress{Name: name, Address: ip})
		}
		objs = append(objs, c)
	}
	book := judged{class: inPool}
	if w.class != nil {
		book.class = *w.class
	}
	if ip := netip.MustParseAddr(w.address.Spec.Address); book.class.Ranges != nil && book.class.Ranges.Contains(ip) {
		book.covering = book.class.PoolName
	}
	if w.covering != "" {
		book.covering = w.covering
	}
	return gather(t, objs, w.address, book)
}

// gather runs the reconciler's gather for address over a fake API server
// holding objs (copied; an object being deleted keeps a finalizer, as the
// API server would otherwise have removed it).
func gather(t *testing.T, objs []client.Object, address *v1alpha1.IPAddress, book ClassBook) snapshot {
	t.Helper()
	for i, o := range objs {
		objs[i] = o.DeepCopyObject().(client.Object)
		objs[i].SetResourceVersion("")
		if objs[i].GetDeletionTimestamp() != nil && len(objs[i].GetFinalizers()) == 0 {
			objs[i].SetFinalizers([]string{"example.com/keep"})
		}
	}
	api := fakeapi.New(t, objs, metallb.SetupIndexes)
	r := &Reconciler{Client: api, Classes: book, Namespace: "metallb-iad-system", Now: func() time.Time { return now }}
	s, held, err := r.gather(context.Background(), current(t, api, address.DeepCopy()))
	if err != nil || !held {
		t.Fatalf("gather: held %v, %v", held, err)
	}
	return s
}

// judged is a ClassBook that judges every class as the world says.
type judged struct {
	class    metallb.Class
	covering string
}

func (j judged) Class(context.Context, string) (metallb.Class, *v1alpha1.IPAddressClass, error) {
	return j.class, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: j.class.Name}, Spec: v1alpha1.IPAddressClassSpec{Provisioner: metallb.Provisioner}}, nil
}

func (j judged) Covering(context.Context, netip.Addr) (string, error) { return j.covering, nil }

func (judged) ForClass(context.Context, client.Object, func(context.Context, string) []reconcile.Request) []reconcile.Request {
	return nil
}

func (judged) ForPool(context.Context, client.Object, func(context.Context, string) []reconcile.Request) []reconcile.Request {
	return nil
}

// --- summary ---

func describe(x *corev1.Service) string {
	var parts []string
	for _, k := range []string{metallb.AnnotationLoadBalancerIPs, metallb.AnnotationPinned, metallb.AnnotationAllowSharedIP} {
		if v, ok := x.Annotations[k]; ok {
			parts = append(parts, strings.TrimPrefix(k[strings.LastIndex(k, "/")+1:], "allow-")+"="+v)
		}
	}
	if len(x.Finalizers) > 0 {
		parts = append(parts, "finalizer")
	}
	if len(parts) == 0 {
		parts = []string{"-"}
	}
	return x.Namespace + "/" + x.Name + " " + strings.Join(parts, " ")
}

type outcome struct {
	addFinalizer, removeFinalizer bool
	create, update, remove        []string
	phase                         v1alpha1.AddressPhase
	associatedTo                  string
	conditions                    []string
	events                        []string
}

func summarize(a *v1alpha1.IPAddress, p plan) outcome {
	o := outcome{addFinalizer: p.addFinalizer, removeFinalizer: p.removeFinalizer}
	for _, x := range p.create {
		o.create = append(o.create, describe(x))
	}
	for _, x := range p.update {
		o.update = append(o.update, describe(x.to))
	}
	for _, x := range p.remove {
		o.remove = append(o.remove, x.Namespace+"/"+x.Name)
	}
	st := a.Status
	if p.status != nil {
		st = *p.status
	}
	o.phase = st.Phase
	if st.AssociatedTo != nil {
		o.associatedTo = st.AssociatedTo.Namespace + "/" + st.AssociatedTo.Name
	}
	for _, t := range []string{v1alpha1.ConditionConflict, v1alpha1.ConditionInBackend} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
			o.conditions = append(o.conditions, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))
		}
	}
	for _, e := range p.events {
		o.events = append(o.events, fmt.Sprintf("%s %s %s", e.Type, e.Reason, client.ObjectKeyFromObject(e.Regarding)))
	}
	return o
}

func phase(p v1alpha1.AddressPhase, conds ...metav1.Condition) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.Phase = p
		for _, c := range conds {
			binding.SetCondition(&a.Status.Conditions, c, now.Add(-time.Minute))
		}
	}
}

func associated(name string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.AssociatedTo = &v1alpha1.WorkloadReference{Kind: "Service", Namespace: ns, Name: name}
	}
}

func noFinalizer(a *v1alpha1.IPAddress) { a.Finalizers = nil }

// ownedBy: the placeholder's owner is the address incarnation uid.
func ownedBy(uid types.UID) func(*corev1.Service) {
	return func(s *corev1.Service) { s.OwnerReferences[0].UID = uid }
}

// coreFinalizer: the core's protection, which keeps an address being
// deleted in the API server once the driver's finalizer is gone.
func coreFinalizer(a *v1alpha1.IPAddress) {
	a.Finalizers = append(a.Finalizers, v1alpha1.FinalizerAddressProtection)
}

// recordedOn: the address's holding record names Service name as its workload.
func recordedOn(name string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.Holding = &v1alpha1.Holding{Workload: &v1alpha1.HeldReference{Kind: "Service", Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
	}
}

// handingOffFrom: the holding record keeps Service name, which the driver
// pinned the address to before and has not let go of yet.
func handingOffFrom(name string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.Holding.From = append(a.Status.Holding.From, v1alpha1.HeldReference{Kind: "Service", Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)})
		a.Status.Holding.Since = &metav1.Time{Time: now.Add(-time.Second)}
	}
}

func unbound(a *v1alpha1.IPAddress) { a.Spec.ClaimRef = nil }

func terminating(s *corev1.Service) { s.DeletionTimestamp = &metav1.Time{Time: now} }

func later(s *corev1.Service) { s.CreationTimestamp = metav1.Time{Time: now} }

func onPort(port int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Port: port, Protocol: corev1.ProtocolTCP}}
	}
}

func singleStack(f corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{f} }
}

func dualStack(s *corev1.Service) {
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
}

// The table mirrors contract §7: obligations 2 (provisioned addresses
// carry the driver's finalizer), 4 (teardown), 5 (association) and 6
// (Conflict and Lost); each name starts with its obligation.
func TestDecide(t *testing.T) {
	const (
		a4    = "ip-203-0-113-1"
		ph4   = "metallb-iad-system/" + a4
		hold4 = ph4 + " loadBalancerIPs=" + v4
		dual  = v4 + "," + v6
		pinW  = "loadBalancerIPs=" + v4 + " pinned=" + v4 + " shared-ip=" + key + " finalizer"
	)
	conflict := metav1.Condition{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionTrue, Reason: metallb.ReasonUnauthorizedHolder}
	lost := metav1.Condition{Type: v1alpha1.ConditionInBackend, Status: metav1.ConditionFalse, Reason: metallb.ReasonNotInPool}
	gone := metallb.Class{Name: "public", PoolName: "public", Refusal: "IPAddressPool metallb-system/public not found"}
	elsewhere := metallbtest.Class("198.51.100.0/24")
	tests := []struct {
		name string
		w    world
		want outcome
	}{
		{name: "7-2 an address of the class without the teardown finalizer gets it, and a placeholder",
			w:    world{address: addr(v4, v1alpha1.AddressAvailable, noFinalizer, unbound)},
			want: outcome{addFinalizer: true, create: []string{hold4}, phase: v1alpha1.AddressAvailable}},
		{name: "7-4 teardown first gives the address a placeholder sharing the workload's key",
			w: world{address: addr(v4, v1alpha1.AddressBound, deleting, recordedOn("a")),
				services: []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4))}},
			want: outcome{create: []string{hold4 + " shared-ip=" + key}, phase: v1alpha1.AddressBound}},
		{name: "7-4 teardown withdraws the pin once the placeholder shares the address",
			w: world{address: addr(v4, v1alpha1.AddressBound, deleting, recordedOn("a")),
				services:     []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a pinned=" + v4 + " finalizer"}, phase: v1alpha1.AddressBound}},
		{name: "7-4 teardown releases the Service once MetalLB took the address back",
			w: world{address: addr(v4, v1alpha1.AddressBound, deleting, recordedOn("a")),
				services:     []*corev1.Service{svc(ns, "a", withdrawn(v4))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a -"}, phase: v1alpha1.AddressBound}},
		{name: "7-4 a MetalLB restart gave a withdrawn Service the address back and refused the placeholder: the Service shares it again",
			w: world{address: addr(v4, v1alpha1.AddressBound, deleting, recordedOn("a")),
				services:     []*corev1.Service{svc(ns, "a", withdrawn(v4), holding(v4))},
				placeholders: []*corev1.Service{ph(v4, key)}},
			want: outcome{update: []string{"tenant/a pinned=" + v4 + " shared-ip=" + key + " finalizer"}, phase: v1alpha1.AddressBound}},
		{name: "7-4 sharing again, the Service keeps its key until the placeholder holds the address too",
			w: world{address: addr(v4, v1alpha1.AddressBound, deleting, recordedOn("a")),
				services:     []*corev1.Service{svc(ns, "a", withdrawn(v4), annotated(metallb.AnnotationAllowSharedIP, key), holding(v4))},
				placeholders: []*corev1.Service{ph(v4, key)}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-4 once the placeholder shares the address again, the Service's key is withdrawn again",
			w: world{address: addr(v4, v1alpha1.AddressBound, deleting, recordedOn("a")),
				services:     []*corev1.Service{svc(ns, "a", withdrawn(v4), annotated(metallb.AnnotationAllowSharedIP, key), holding(v4))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a pinned=" + v4 + " finalizer"}, phase: v1alpha1.AddressBound}},
		{name: "7-4 a Dual teardown keeps the Service's key while its other address is not yet back on its placeholder",
			w: world{address: addr(v6, v1alpha1.AddressBound, deleting, recordedOn("a")), siblings: []*v1alpha1.IPAddress{addr(v4, v1alpha1.AddressBound, deleting)},
				services:     []*corev1.Service{svc(ns, "a", withdrawn(dual), annotated(metallb.AnnotationAllowSharedIP, key), holding(v4, v6))},
				placeholders: []*corev1.Service{ph(v6, key, holding(v6)), ph(v4, key)}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-4 ...and withdraws it once both are",
			w: world{address: addr(v6, v1alpha1.AddressBound, deleting, recordedOn("a")), siblings: []*v1alpha1.IPAddress{addr(v4, v1alpha1.AddressBound, deleting)},
				services:     []*corev1.Service{svc(ns, "a", withdrawn(dual), annotated(metallb.AnnotationAllowSharedIP, key), holding(v4, v6))},
				placeholders: []*corev1.Service{ph(v6, key, holding(v6)), ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a pinned=" + dual + " finalizer"}, phase: v1alpha1.AddressBound}},
		{name: "7-4 teardown deletes the placeholder",
			w:    world{address: addr(v4, v1alpha1.AddressReleased, deleting), placeholders: []*corev1.Service{ph(v4, "", holding(v4))}},
			want: outcome{remove: []string{ph4}, removeFinalizer: true, phase: v1alpha1.AddressReleased}},
		{name: "7-4 an address without the driver's finalizer is let go untouched",
			w:    world{address: addr(v4, v1alpha1.AddressBound, deleting, noFinalizer), placeholders: []*corev1.Service{ph(v4, "", holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "5-1 an address deleted while a live claim holds it (the core keeps its protection) stays attached: nothing is torn down",
			w: world{address: addr(v4, v1alpha1.AddressBound, deleting, coreFinalizer, associated("a")), claim: true,
				services: []*corev1.Service{svc(ns, "a", naming("web"), pinnedBy(v4), holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "5-1 ...and a Service naming its claim is still attached to it",
			w: world{address: addr(v4, v1alpha1.AddressBound, deleting, coreFinalizer), claim: true,
				services: []*corev1.Service{svc(ns, "a", naming("web"))}, placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a " + pinW}, phase: v1alpha1.AddressBound}},
		{name: "5-1 ...and one without the driver's finalizer does not get it (an object being deleted takes no new finalizer)",
			w:    world{address: addr(v4, v1alpha1.AddressBound, deleting, noFinalizer, coreFinalizer), claim: true, placeholders: []*corev1.Service{ph(v4, "", holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-5 an address attached to nothing is held by a placeholder pinned to it, sharing with nobody",
			w:    world{address: addr(v4, v1alpha1.AddressBound), claim: true},
			want: outcome{create: []string{hold4}, phase: v1alpha1.AddressBound}},
		{name: "7-5 a placeholder a stale pass made for an earlier incarnation of the address (its owner gone) is adopted, so garbage collection leaves it",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				placeholders: []*corev1.Service{ph(v4, key, holding(v4), ownedBy("uid-of-an-earlier-incarnation"))}},
			want: outcome{update: []string{hold4 + " shared-ip=" + key}, phase: v1alpha1.AddressBound}},
		{name: "7-5 an address the core has not accepted yet is held, not attached",
			w:    world{address: addr(v4, v1alpha1.AddressPending), claim: true, services: []*corev1.Service{svc(ns, "a", naming("web"))}},
			want: outcome{create: []string{hold4}, phase: v1alpha1.AddressPending}},
		{name: "7-5 attach: the placeholder holding the address first allows sharing under the claim's key",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services: []*corev1.Service{svc(ns, "a", naming("web"))}, placeholders: []*corev1.Service{ph(v4, "", holding(v4))}},
			want: outcome{update: []string{hold4 + " shared-ip=" + key}, phase: v1alpha1.AddressBound}},
		{name: "7-5 attach: then the workload is pinned under the same key",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services: []*corev1.Service{svc(ns, "a", naming("web"))}, placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a " + pinW}, phase: v1alpha1.AddressBound}},
		{name: "7-5 attach: once the workload holds the address the placeholder goes and associatedTo names it",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services:     []*corev1.Service{svc(ns, "a", naming("web"), pinnedBy(v4), holding(v4))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{remove: []string{ph4}, phase: v1alpha1.AddressBound, associatedTo: "tenant/a", events: []string{"Normal Associated tenant/web"}}},
		{name: "7-5 a dual-stack workload is pinned only once both placeholders share",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, siblings: []*v1alpha1.IPAddress{addr(v6, v1alpha1.AddressBound)},
				services:     []*corev1.Service{svc(ns, "a", naming("web"))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4)), ph(v6, "", holding(v6))}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-5 a dual-stack workload is not pinned while its IPv6 address's record does not name it (that pass records it first)",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, family: v1alpha1.Dual, siblings: []*v1alpha1.IPAddress{addr(v6, v1alpha1.AddressBound)},
				services:     []*corev1.Service{svc(ns, "a", naming("web"), dualStack)},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4)), ph(v6, key, holding(v6))}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-5 ...and is pinned with both addresses once it does",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, family: v1alpha1.Dual, siblings: []*v1alpha1.IPAddress{addr(v6, v1alpha1.AddressBound, recordedOn("a"))},
				services:     []*corev1.Service{svc(ns, "a", naming("web"), dualStack)},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4)), ph(v6, key, holding(v6))}},
			want: outcome{update: []string{"tenant/a loadBalancerIPs=" + dual + " pinned=" + dual + " shared-ip=" + key + " finalizer"}, phase: v1alpha1.AddressBound}},
		{name: "7-5 attach: a workload pinned, then given the placeholder's port, is refused by MetalLB: the placeholder moves off the port and the pin is withdrawn, to be written anew",
			w: world{address: addr(v4, v1alpha1.AddressBound, recordedOn("a")), claim: true,
				services:     []*corev1.Service{svc(ns, "a", naming("web"), onPort(65535), pinnedBy(v4))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{hold4 + " shared-ip=" + key, "tenant/a pinned=" + v4 + " finalizer"}, phase: v1alpha1.AddressBound}},
		{name: "7-5 a single-stack Service holding a Dual claim's IPv4 address made dual-stack lost it: a placeholder holds it, sharing under the key, until the Service can be pinned with both",
			w: world{address: addr(v4, v1alpha1.AddressBound, recordedOn("a")), claim: true, family: v1alpha1.Dual, siblings: []*v1alpha1.IPAddress{addr(v6, v1alpha1.AddressBound)},
				services:     []*corev1.Service{svc(ns, "a", naming("web"), dualStack, pinnedBy(v4))},
				placeholders: []*corev1.Service{ph(v6, "", holding(v6))}},
			want: outcome{create: []string{hold4 + " shared-ip=" + key}, phase: v1alpha1.AddressBound}},
		{name: "7-5 a single-stack IPv4 Service naming a Dual claim is pinned with the IPv4 address alone",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, siblings: []*v1alpha1.IPAddress{addr(v6, v1alpha1.AddressBound)},
				services:     []*corev1.Service{svc(ns, "a", naming("web"), singleStack(corev1.IPv4Protocol))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4)), ph(v6, key, holding(v6))}},
			want: outcome{update: []string{"tenant/a " + pinW}, phase: v1alpha1.AddressBound}},
		{name: "7-5 the IPv6 address of a Dual claim named by a single-stack IPv4 Service stays on its placeholder, with a warning",
			w: world{address: addr(v6, v1alpha1.AddressBound), claim: true, siblings: []*v1alpha1.IPAddress{addr(v4, v1alpha1.AddressBound)},
				services:     []*corev1.Service{svc(ns, "a", naming("web"), singleStack(corev1.IPv4Protocol), pinnedBy(v4), holding(v4))},
				placeholders: []*corev1.Service{ph(v6, key, holding(v6))}},
			want: outcome{phase: v1alpha1.AddressBound, events: []string{"Warning FamilyNotAttached tenant/a"}}},
		{name: "7-5 a claim serves one Service: its IPv6 address's pass keeps to the Service its IPv4 address is pinned to, not an older dual-stack one naming the claim too",
			w: world{address: addr(v6, v1alpha1.AddressBound, recordedOn("a")), claim: true, siblings: []*v1alpha1.IPAddress{addr(v4, v1alpha1.AddressBound, recordedOn("a"))},
				services: []*corev1.Service{svc(ns, "a", naming("web"), singleStack(corev1.IPv4Protocol), pinnedBy(v4), holding(v4), later),
					svc(ns, "b", naming("web"), dualStack)},
				placeholders: []*corev1.Service{ph(v6, key, holding(v6))}},
			want: outcome{phase: v1alpha1.AddressBound, events: []string{"Warning ClaimInUse tenant/b", "Warning FamilyNotAttached tenant/a"}}},
		{name: "7-5 a dual-stack Service naming an IPv4 claim is not pinned (MetalLB would refuse the pin), with a warning",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, family: v1alpha1.IPv4,
				services:     []*corev1.Service{svc(ns, "a", naming("web"), dualStack)},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound, events: []string{"Warning FamilyNotAttached tenant/a"}}},
		{name: "7-5 a dual-stack Service naming a Dual claim is not pinned while its IPv6 address is still Pending",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, family: v1alpha1.Dual,
				siblings:     []*v1alpha1.IPAddress{addr(v6, v1alpha1.AddressPending)},
				services:     []*corev1.Service{svc(ns, "a", naming("web"), dualStack)},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-5 a family bound twice (two binders for a moment): the workload is pinned with the address the claim reports",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, reported: []string{v4},
				siblings:     []*v1alpha1.IPAddress{addr("203.0.113.0", v1alpha1.AddressBound)},
				services:     []*corev1.Service{svc(ns, "a", naming("web"))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a " + pinW}, phase: v1alpha1.AddressBound}},
		{name: "7-5 ...and the other stays on its placeholder",
			w: world{address: addr("203.0.113.0", v1alpha1.AddressBound), claim: true, reported: []string{v4},
				siblings:     []*v1alpha1.IPAddress{addr(v4, v1alpha1.AddressBound)},
				services:     []*corev1.Service{svc(ns, "a", naming("web"))},
				placeholders: []*corev1.Service{ph("203.0.113.0", key, holding("203.0.113.0"))}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-5 a Service re-pointed from another claim while it holds that claim's address gets nothing; the holder keeps this one",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("t")), claim: true,
				services: []*corev1.Service{svc(ns, "t", naming("web"), later, pinnedBy(v4), holding(v4)),
					svc(ns, "s", naming("web"), pinnedBy("198.51.100.7"), holding("198.51.100.7"))}},
			want: outcome{phase: v1alpha1.AddressBound, associatedTo: "tenant/t", events: []string{"Warning ClaimInUse tenant/s"}}},
		{name: "7-5 the Service this address is pinned to is preferred over an older one pinned elsewhere",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("t")), claim: true,
				services: []*corev1.Service{svc(ns, "t", naming("web"), later, pinnedBy(v4), holding(v4)), svc(ns, "u", naming("web"))}},
			want: outcome{phase: v1alpha1.AddressBound, associatedTo: "tenant/t", events: []string{"Warning ClaimInUse tenant/u"}}},
		{name: "7-5 a second Service naming the claim gets a warning and no pin",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services: []*corev1.Service{svc(ns, "a", naming("web"), pinnedBy(v4), holding(v4)), svc(ns, "b", naming("web"), later)}},
			want: outcome{phase: v1alpha1.AddressBound, associatedTo: "tenant/a", events: []string{"Warning ClaimInUse tenant/b"}}},
		{name: "7-5 a Service that pins addresses itself is not attached",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services:     []*corev1.Service{svc(ns, "a", naming("web"), annotated(metallb.AnnotationLoadBalancerIPs, "198.51.100.9"))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound, events: []string{"Warning ClaimInUse tenant/a"}}},
		{name: "7-5 a ClusterIP Service naming the claim is not attached, and is told why",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services:     []*corev1.Service{svc(ns, "a", naming("web"), func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP })},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound, events: []string{"Warning NotAttachable tenant/a"}}},
		{name: "7-5 a Service of another load-balancer class naming the claim is not attached, and is told why; an older one MetalLB serves is",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services: []*corev1.Service{svc(ns, "a", naming("web"), func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/lb") }),
					svc(ns, "b", naming("web"), later)},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/b " + pinW}, phase: v1alpha1.AddressBound, events: []string{"Warning NotAttachable tenant/a"}}},
		{name: "7-5 detach: a placeholder sharing the workload's key comes first",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services: []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4))}},
			want: outcome{create: []string{hold4 + " shared-ip=" + key}, phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-5 detach: nothing is withdrawn before the placeholder holds the address",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services:     []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4))},
				placeholders: []*corev1.Service{ph(v4, key)}},
			want: outcome{phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-5 detach: the pin is withdrawn once the placeholder shares the address",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services:     []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a pinned=" + v4 + " finalizer"}, phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-5 detach: a deleted workload hands the address over before its finalizer goes",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services:     []*corev1.Service{svc(ns, "a", naming("web"), pinnedBy(v4), holding(v4), terminating)},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a pinned=" + v4 + " finalizer"}, phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-5 detach: a withdrawn Service is released once MetalLB took the address back",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services:     []*corev1.Service{svc(ns, "a", withdrawn(v4))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a -"}, phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-5 detach: the placeholder keeps its claim's key once it alone holds the address",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound, events: []string{"Normal Disassociated tenant/web"}}},
		{name: "7-5 at rest a placeholder keeps its claim's key: a key change would make MetalLB reprocess every Service",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-5 at rest a placeholder drops a key no live claim of the address owns: its former tenant knows it",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				placeholders: []*corev1.Service{ph(v4, sharingKeyPrefix+"old", holding(v4))}},
			want: outcome{update: []string{"metallb-iad-system/ip-203-0-113-1 loadBalancerIPs=203.0.113.1"}, phase: v1alpha1.AddressBound}},
		{name: "7-5 ...and so does the placeholder of a recycled address, Available again",
			w: world{address: addr(v4, v1alpha1.AddressAvailable, unbound),
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"metallb-iad-system/ip-203-0-113-1 loadBalancerIPs=203.0.113.1"}, phase: v1alpha1.AddressAvailable}},
		{name: "7-5 ...while a Released one keeps its claim's key: it is still its namespace's",
			w: world{address: addr(v4, v1alpha1.AddressReleased),
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressReleased}},
		{name: "7-5 attach: a placeholder with an earlier claim's key takes its claim's first, while it alone holds the address",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services: []*corev1.Service{svc(ns, "a", naming("web"))}, placeholders: []*corev1.Service{ph(v4, sharingKeyPrefix+"old", holding(v4))}},
			want: outcome{update: []string{hold4 + " shared-ip=" + key}, phase: v1alpha1.AddressBound}},
		{name: "7-5 a placeholder keeps its key while another Service holds the address",
			w: world{address: addr(v4, v1alpha1.AddressReleased, unbound),
				services:     []*corev1.Service{svc(ns, "x", holding(v4))},
				placeholders: []*corev1.Service{ph(v4, sharingKeyPrefix+"old", holding(v4))}},
			want: outcome{phase: v1alpha1.AddressConflict, conditions: []string{"Conflict=True UnauthorizedHolder"},
				events: []string{"Warning UnauthorizedHolder /" + a4, "Warning AddressReserved tenant/x"}}},
		{name: "7-5 a Dual claim moved to a single-stack Service: the old dual-stack one keeps its pin while its IPv6 address is not back on its placeholder",
			w: world{address: addr(v4, v1alpha1.AddressBound, recordedOn("b"), handingOffFrom("a"), associated("b")), claim: true, family: v1alpha1.Dual, siblings: []*v1alpha1.IPAddress{addr(v6, v1alpha1.AddressBound, recordedOn("a"))},
				services: []*corev1.Service{svc(ns, "a", dualStack, pinnedBy(dual), holding(v4, v6)),
					svc(ns, "b", naming("web"), singleStack(corev1.IPv4Protocol), pinnedBy(v4), holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound, associatedTo: "tenant/b"}},
		{name: "7-5 ...and lets go once it is, its IPv4 address held by the new one",
			w: world{address: addr(v6, v1alpha1.AddressBound, recordedOn("a")), claim: true, family: v1alpha1.Dual, siblings: []*v1alpha1.IPAddress{addr(v4, v1alpha1.AddressBound, recordedOn("b"))},
				services: []*corev1.Service{svc(ns, "a", dualStack, pinnedBy(dual), holding(v4, v6)),
					svc(ns, "b", naming("web"), singleStack(corev1.IPv4Protocol), pinnedBy(v4), holding(v4))},
				placeholders: []*corev1.Service{ph(v6, key, holding(v6))}},
			want: outcome{update: []string{"tenant/a pinned=" + dual + " finalizer"}, phase: v1alpha1.AddressBound, events: []string{"Warning FamilyNotAttached tenant/b"}}},
		{name: "7-5 detach of a dual-stack workload waits for both placeholders",
			w: world{address: addr(v4, v1alpha1.AddressBound, recordedOn("a")), claim: true, siblings: []*v1alpha1.IPAddress{addr(v6, v1alpha1.AddressBound)},
				services:     []*corev1.Service{svc(ns, "a", pinnedBy(dual), holding(v4, v6))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4)), ph(v6, key)}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-5 detach after reclaim: a Released address leaves its workload",
			w: world{address: addr(v4, v1alpha1.AddressReleased, associated("a")),
				services:     []*corev1.Service{svc(ns, "a", naming("web"), pinnedBy(v4), holding(v4))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a pinned=" + v4 + " finalizer"}, phase: v1alpha1.AddressReleased, associatedTo: "tenant/a"}},
		{name: "7-5 move: the new workload is pinned while the old one still holds the address, when they can share it",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services: []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4)), svc(ns, "b", naming("web"), onPort(443))}},
			want: outcome{update: []string{"tenant/b " + pinW}, phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-5 move between Services on one port: the old one hands the address back to a placeholder first",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services: []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4)), svc(ns, "b", naming("web"))}},
			want: outcome{create: []string{hold4 + " shared-ip=" + key}, phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-5 move between Services on one port: then the old one's pin is withdrawn",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services:     []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4)), svc(ns, "b", naming("web"))},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{update: []string{"tenant/a pinned=" + v4 + " finalizer"}, phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-5 move: once the new workload holds the address the old one lets go",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services: []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4)), svc(ns, "b", naming("web"), pinnedBy(v4), holding(v4))}},
			want: outcome{update: []string{"tenant/a pinned=" + v4 + " finalizer"}, phase: v1alpha1.AddressBound, associatedTo: "tenant/b",
				events: []string{"Normal Associated tenant/web"}}},
		{name: "7-6 a Service holding the address without authorization puts it in Conflict, with events on both",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services: []*corev1.Service{svc(ns, "x", holding(v4))}, placeholders: []*corev1.Service{ph(v4, "", holding(v4))}},
			want: outcome{phase: v1alpha1.AddressConflict, conditions: []string{"Conflict=True UnauthorizedHolder"},
				events: []string{"Warning UnauthorizedHolder /" + a4, "Warning AddressReserved tenant/x"}}},
		{name: "7-6 a Service elsewhere pinning the address with a copy of the driver's marker and its own key is a Conflict, named, and never edited",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, placeholders: []*corev1.Service{ph(v4, key, holding(v4))},
				strangers: []*corev1.Service{svc("other", "forged", annotated(metallb.AnnotationLoadBalancerIPs, v4, metallb.AnnotationPinned, v4, metallb.AnnotationAllowSharedIP, "theirs"))}},
			want: outcome{phase: v1alpha1.AddressConflict, conditions: []string{"Conflict=True UnauthorizedHolder"},
				events: []string{"Warning UnauthorizedHolder /" + a4, "Warning AddressReserved other/forged"}}},
		{name: "7-6 ...and the placeholder keeps the claim's key while a stranger holds the address too",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, placeholders: []*corev1.Service{ph(v4, key, holding(v4))},
				strangers: []*corev1.Service{svc("other", "forged", holding(v4), annotated(metallb.AnnotationLoadBalancerIPs, v4, metallb.AnnotationPinned, v4, metallb.AnnotationAllowSharedIP, key))}},
			want: outcome{phase: v1alpha1.AddressConflict, conditions: []string{"Conflict=True UnauthorizedHolder"},
				events: []string{"Warning UnauthorizedHolder /" + a4, "Warning AddressReserved other/forged"}}},
		{name: "7-6 a Service the driver pinned whose sharing key was changed gets the claim's key back; the placeholder never takes up another",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services:     []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4), annotated(metallb.AnnotationAllowSharedIP, "theirs"))},
				placeholders: []*corev1.Service{ph(v4, key)}},
			want: outcome{update: []string{"tenant/a loadBalancerIPs=" + v4 + " pinned=" + v4 + " shared-ip=" + key + " finalizer"},
				phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-6 the Conflict clears back to the phase the core last recorded",
			w: world{address: addr(v4, v1alpha1.AddressBound, phase(v1alpha1.AddressConflict, conflict)), claim: true,
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound, conditions: []string{"Conflict=False ConflictResolved"},
				events: []string{"Normal ConflictResolved /" + a4}}},
		{name: "7-6 an address its pool no longer covers is Lost",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, class: &elsewhere,
				placeholders: []*corev1.Service{ph(v4, key)}},
			want: outcome{phase: v1alpha1.AddressLost, conditions: []string{"InBackend=False NotInPool"}, events: []string{"Warning Lost /" + a4}}},
		{name: "7-6 an address whose pool is gone is Lost",
			w: world{address: addr(v4, v1alpha1.AddressReleased, unbound), class: &gone,
				placeholders: []*corev1.Service{ph(v4, "")}},
			want: outcome{phase: v1alpha1.AddressLost, conditions: []string{"InBackend=False PoolNotFound"}, events: []string{"Warning Lost /" + a4}}},
		{name: "7-6 Lost clears back to the phase the core last recorded",
			w: world{address: addr(v4, v1alpha1.AddressReleased, unbound, phase(v1alpha1.AddressLost, lost)),
				placeholders: []*corev1.Service{ph(v4, "", holding(v4))}},
			want: outcome{phase: v1alpha1.AddressReleased, conditions: []string{"InBackend=True InPool"}, events: []string{"Normal InPool /" + a4}}},
		{name: "7-6 a class whose parameters do not parse takes nothing: the workload keeps its pin, the address stays Bound",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true, covering: "public",
				class:    &metallb.Class{Name: "public", Refusal: `spec.parameters: json: unknown field "note"`},
				services: []*corev1.Service{svc(ns, "a", naming("web"), pinnedBy(v4), holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound, associatedTo: "tenant/a"}},
		{name: "7-6 a class naming a pool that does not exist takes nothing while a pool covers the address",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, covering: "public",
				class:        &metallb.Class{Name: "public", PoolName: "pubilc", Refusal: "IPAddressPool metallb-system/pubilc not found"},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-6 a class removed by force takes nothing while a pool covers the address",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, covering: "public",
				class:        &metallb.Class{Name: "public", Refusal: "IPAddressClass public not found"},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			want: outcome{phase: v1alpha1.AddressBound}},
		{name: "7-6 an address in no pool at all is Lost, whatever the class",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				class:        &metallb.Class{Name: "public", Refusal: "IPAddressClass public not found"},
				placeholders: []*corev1.Service{ph(v4, key)}},
			want: outcome{phase: v1alpha1.AddressLost, conditions: []string{"InBackend=False NotInPool"}, events: []string{"Warning Lost /" + a4}}},
		{name: "7-6 Lost outranks Conflict",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, class: &elsewhere,
				services: []*corev1.Service{svc(ns, "x", holding(v4))}, placeholders: []*corev1.Service{ph(v4, "")}},
			want: outcome{phase: v1alpha1.AddressLost, conditions: []string{"InBackend=False NotInPool"}, events: []string{"Warning Lost /" + a4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(tc.w.address, decide(snapshotOf(t, tc.w)))
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestOurs(t *testing.T) {
	withFinalizer := &v1alpha1.IPAddress{}
	withFinalizer.Finalizers = []string{metallb.FinalizerTeardown}
	class := func(provisioner string) *v1alpha1.IPAddressClass {
		return &v1alpha1.IPAddressClass{Spec: v1alpha1.IPAddressClassSpec{Provisioner: provisioner}}
	}
	for _, tc := range []struct {
		name    string
		address *v1alpha1.IPAddress
		class   *v1alpha1.IPAddressClass
		want    bool
	}{
		{"1 a class of the driver", &v1alpha1.IPAddress{}, class(metallb.Provisioner), true},
		{"2 another driver's class, whatever the finalizers", withFinalizer, class("static.example.com"), false},
		{"3 class gone, the teardown finalizer left: still the driver's to let go", withFinalizer, nil, true},
		{"4 class gone, no finalizer: nothing to hold", &v1alpha1.IPAddress{}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ours(tc.address, tc.class); got != tc.want {
				t.Errorf("ours = %v, want %v", got, tc.want)
			}
		})
	}
}

// The holding record each pass writes: the Service the driver pinned the
// address to, those it has not let go of yet, since when a handoff runs —
// and whether it must be written before the Services (a Service about to
// be pinned is recorded first).
func TestHoldingRecord(t *testing.T) {
	ref := func(name string) string { return ns + "/" + name }
	record := func(h *v1alpha1.Holding) (workload string, from []string, since bool) {
		if h == nil {
			return "", nil, false
		}
		if h.Workload != nil {
			workload = h.Workload.Namespace + "/" + h.Workload.Name
		}
		for _, f := range h.From {
			from = append(from, f.Namespace+"/"+f.Name)
		}
		return workload, from, h.Since != nil
	}
	for _, tc := range []struct {
		name        string
		w           world
		workload    string
		from        []string
		since       bool
		recordFirst bool
	}{
		{name: "1 held by the placeholder alone: an empty record",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, placeholders: []*corev1.Service{ph(v4, key, holding(v4))}}},
		{name: "2 attach: the workload is recorded before it is pinned, and the handoff dated",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services: []*corev1.Service{svc(ns, "a", naming("web"))}, placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			workload: ref("a"), since: true, recordFirst: true},
		{name: "3 attached: the workload alone, no handoff",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a"), recordedOn("a")), claim: true,
				services: []*corev1.Service{svc(ns, "a", naming("web"), pinnedBy(v4), holding(v4))}},
			workload: ref("a")},
		{name: "4 detach: the Service stays recorded while it lets go",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a"), recordedOn("a")), claim: true,
				services: []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4))}, placeholders: []*corev1.Service{ph(v4, key, holding(v4))}},
			from: []string{ref("a")}, since: true},
		{name: "5 detach done: the released Service leaves the record",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true,
				services: []*corev1.Service{svc(ns, "a", withdrawn(v4))}, placeholders: []*corev1.Service{ph(v4, key, holding(v4))}}},
		{name: "6 move: the new workload recorded, the old one still there until it lets go",
			w: world{address: addr(v4, v1alpha1.AddressBound, associated("a")), claim: true,
				services: []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4)), svc(ns, "b", naming("web"), onPort(443))}},
			workload: ref("b"), from: []string{ref("a")}, since: true, recordFirst: true},
		{name: "7 dual stack: each address records the workload before either pass pins it with both",
			w: world{address: addr(v4, v1alpha1.AddressBound), claim: true, family: v1alpha1.Dual, siblings: []*v1alpha1.IPAddress{addr(v6, v1alpha1.AddressBound)},
				services:     []*corev1.Service{svc(ns, "a", naming("web"), dualStack)},
				placeholders: []*corev1.Service{ph(v4, key, holding(v4)), ph(v6, key, holding(v6))}},
			workload: ref("a"), since: true, recordFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshotOf(t, tc.w)
			p := decide(s)
			st := s.address.Status
			if p.status != nil {
				st = *p.status
			}
			workload, from, since := record(st.Holding)
			if workload != tc.workload || !slices.Equal(from, tc.from) || since != tc.since || p.recordFirst != tc.recordFirst {
				t.Errorf("record = workload %q from %v since %v, first %v; want %q %v %v, first %v",
					workload, from, since, p.recordFirst, tc.workload, tc.from, tc.since, tc.recordFirst)
			}
		})
	}
}

// A dual-stack claim's workload is pinned with both addresses by one pass,
// which records it on its own address only. The other address's pass then
// finds the workload holding its IP with no record naming it: it records
// the workload before its placeholder goes (found by make chaos: the
// status write failed while the core's webhook was down, the placeholder
// was gone, and once the tenant detached the Service it held the address
// unrecorded — judged a stranger, a Conflict).
func TestRecordsTheWorkloadBeforeItsPlaceholderGoes(t *testing.T) {
	both := v4 + "," + v6
	s := snapshotOf(t, world{address: addr(v6, v1alpha1.AddressBound), claim: true, family: v1alpha1.Dual,
		siblings:     []*v1alpha1.IPAddress{addr(v4, v1alpha1.AddressBound)},
		services:     []*corev1.Service{svc(ns, "a", naming("web"), pinnedBy(both), holding(v4, v6))},
		placeholders: []*corev1.Service{ph(v6, key, holding(v6))}})
	p := decide(s)
	if len(p.remove) != 1 {
		t.Fatalf("the placeholder should go: %+v", summarize(s.address, p))
	}
	if p.status == nil || p.status.Holding == nil || p.status.Holding.Workload == nil || p.status.Holding.Workload.Name != "a" {
		t.Fatalf("the workload is not recorded: %+v", p.status)
	}
	if !p.recordFirst {
		t.Error("the record is written after the placeholder goes")
	}
}

// A claim's events are its tenant's to read: the Service an address left is
// named to the claim only when it is of the claim's namespace (an
// administrator may free an address, and another tenant bind it, while the
// driver still takes it back from its former tenant's Service).
func TestAssociationNamesOnlyTheClaimsNamespace(t *testing.T) {
	claim := &v1alpha1.IPAddressClaim{}
	claim.Namespace, claim.Name = "tenant-b", "db"
	s := snapshot{address: addr(v4, v1alpha1.AddressBound), claim: claim, ip: netip.MustParseAddr(v4)}
	for _, tc := range []struct {
		before *v1alpha1.WorkloadReference
		want   string
	}{
		{&v1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant-a", Name: "frontend"}, v4 + " left a Service of another namespace and stays reserved"},
		{&v1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant-b", Name: "db"}, v4 + " left Service db and stays reserved"},
	} {
		events := association(s, tc.before, nil)
		if len(events) != 1 || events[0].Message != tc.want {
			t.Errorf("before %v: %v, want %q", tc.before, events, tc.want)
		}
	}
}

// A handoff that MetalLB has not completed within handoffPatience is told
// on the address, once (its message does not change while it lasts), and
// the address is looked at again when the patience runs out.
// A teardown waits on MetalLB as a detach does (7-4): its holding record
// names the Services it takes the address back from, so a teardown past
// the patience is told like any stalled handoff; the pass that lets the
// address go writes no record.
func TestStalledTeardown(t *testing.T) {
	takingBack := func(a *v1alpha1.IPAddress) world {
		return world{address: a,
			services:     []*corev1.Service{svc(ns, "a", pinnedBy(v4), holding(v4))},
			placeholders: []*corev1.Service{ph(v4, key, holding(v4))}}
	}
	since := func(d time.Duration) func(*v1alpha1.IPAddress) {
		return func(a *v1alpha1.IPAddress) {
			a.Status.Holding = &v1alpha1.Holding{
				From:  []v1alpha1.HeldReference{{Kind: "Service", Namespace: ns, Name: "a", UID: types.UID(ns + "/a")}},
				Since: &metav1.Time{Time: now.Add(-d)}}
		}
	}
	for _, tc := range []struct {
		name    string
		w       world
		record  string // the holding record written, "" for none
		events  int
		recheck time.Duration
	}{
		{"the teardown begins: the record names the Service it takes the address back from, a look again at the patience's end",
			takingBack(addr(v4, v1alpha1.AddressBound, deleting, recordedOn("a"))), "from tenant/a since 0s", 0, handoffPatience + time.Second},
		{"under way a minute: nothing written, nothing told",
			takingBack(addr(v4, v1alpha1.AddressBound, deleting, since(time.Minute))), "", 0, time.Minute + time.Second},
		{"past the patience: told, the address's own wait named",
			takingBack(addr(v4, v1alpha1.AddressBound, deleting, since(handoffPatience+time.Second))), "", 1, 0},
		{"the address let go: no record written, nothing told",
			world{address: addr(v4, v1alpha1.AddressReleased, deleting, since(handoffPatience+time.Second)),
				placeholders: []*corev1.Service{ph(v4, "", holding(v4))}}, "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshotOf(t, tc.w)
			p := decide(s)
			record := ""
			if p.status != nil {
				h := p.status.Holding
				record = fmt.Sprintf("from %s/%s since %s", h.From[0].Namespace, h.From[0].Name, now.Sub(h.Since.Time))
			}
			if record != tc.record {
				t.Errorf("record %q, want %q", record, tc.record)
			}
			if len(p.events) != tc.events {
				t.Fatalf("events %+v, want %d", p.events, tc.events)
			}
			if got := settledAfter(tc.w.address, p); got != tc.recheck {
				t.Errorf("recheck %v, want %v", got, tc.recheck)
			}
			if tc.events > 0 && !strings.HasSuffix(p.events[0].Message, "; so does this address's, which keeps the finalizer "+metallb.FinalizerTeardown+" until it is back on its placeholder") {
				t.Errorf("event %q does not name the address's wait", p.events[0].Message)
			}
		})
	}
}

// settledAfter is when the reconciler looks at a again after carrying out p.
func settledAfter(a *v1alpha1.IPAddress, p plan) time.Duration {
	res, _ := settled(a, p, now, nil)
	return res.RequeueAfter
}

func TestStalledHandoff(t *testing.T) {
	a := addr(v4, v1alpha1.AddressBound, recordedOn("b"), handingOffFrom("a"))
	for _, tc := range []struct {
		name    string
		since   time.Duration
		events  int
		recheck time.Duration
	}{
		{"under way a minute: nothing yet, a look again at the patience's end", time.Minute, 0, time.Minute + time.Second},
		{"past the patience: told, no look again for it", handoffPatience + time.Second, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := a.Status.Holding.DeepCopy()
			h.Since = &metav1.Time{Time: now.Add(-tc.since)}
			events := stalled(snapshot{address: a, ip: netip.MustParseAddr(v4), now: now}, nil, h)
			if len(events) != tc.events {
				t.Fatalf("events %+v, want %d", events, tc.events)
			}
			if got := handoffRecheck(h, now); got != tc.recheck {
				t.Errorf("recheck %v, want %v", got, tc.recheck)
			}
			if tc.events == 0 {
				return
			}
			want := "moving " + v4 + " (to Service tenant/b, from Service tenant/a) has waited since " + h.Since.UTC().Format(time.RFC3339) +
				" for MetalLB to assign it on the taking side: see that Service's or placeholder's events (MetalLB's AllocationFailed) and whether MetalLB's controller runs" +
				"; until then a Service let go of keeps the finalizer " + metallb.FinalizerHandoff + ", and its deletion waits"
			if e := events[0]; e.Reason != metallb.ReasonHandoffStalled || !e.Once || e.Message != want {
				t.Errorf("event %s once=%v %q, want %q", e.Reason, e.Once, e.Message, want)
			}
		})
	}
	if handoffRecheck(nil, now) != 0 {
		t.Error("no handoff: no look again")
	}
}

// 7-5: a dual-stack Service naming a Dual claim whose IPv6 address is not
// bound, and will not be soon by the claim's own word (its class out of
// addresses, its quota full, its pool refused, an address Lost), is told
// so; a wait the claim calls brief (provisioning) is not told.
func TestFamilyWaits(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   int
	}{
		{v1alpha1.ReasonClassExhausted, 1},
		{v1alpha1.ReasonQuotaExceeded, 1},
		{v1alpha1.ReasonWaitingForProvisioning, 0},
	} {
		claim := &v1alpha1.IPAddressClaim{Spec: v1alpha1.IPAddressClaimSpec{Family: v1alpha1.Dual}}
		claim.Namespace, claim.Name = ns, "web"
		claim.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionBound, Status: metav1.ConditionFalse, Reason: tc.reason, Message: "1st waiting for IPv6"}}
		s := snapshot{address: addr(v4, v1alpha1.AddressBound), claim: claim, siblings: []*v1alpha1.IPAddress{addr(v4, v1alpha1.AddressBound)}}
		events := familyWaits(s, svc(ns, "a", naming("web"), dualStack))
		if len(events) != tc.want {
			t.Errorf("%s: %d events, want %d", tc.reason, len(events), tc.want)
			continue
		}
		if tc.want == 1 && (!strings.Contains(events[0].Message, "no IPv6 address bound ("+tc.reason+": 1st waiting for IPv6)") || events[0].Reason != metallb.ReasonFamilyNotAttached) {
			t.Errorf("%s: %+v", tc.reason, events[0])
		}
	}
}
