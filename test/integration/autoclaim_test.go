package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/core"
	metallbiad "github.com/cozystack/address-controller/internal/driver/metallb"
)

// Contract §10: auto-claim. The core creates a claim for a LoadBalancer
// Service that names none, owned by the Service, and annotates the Service
// with it.
//
// IPAddressClasses are cluster-wide and the auto-claim class mark is read
// across all of them, so these tests never run in parallel, and every class
// a test marks is unmarked when it ends (the harness also deletes the
// test's classes).

const (
	// tenantManager and concurrentManager are the field managers of the
	// tests' own Service writes: the admin client's default one is derived
	// from the test binary's user agent, which the in-process manager
	// shares unless told otherwise.
	tenantManager     = "it-tenant"
	concurrentManager = "it-concurrent"

	// quiet is how long a Service that must not be auto-claimed is watched.
	quiet = 3 * time.Second
	// gcWait bounds a cascade through kube-controller-manager's garbage
	// collector and the claim's reclaim.
	gcWait = 30 * time.Second
)

// --- classes ---

func autoClaimClass(c *v1alpha1.IPAddressClass) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[v1alpha1.AnnotationAutoClaimClass] = "true"
}

// createAutoClaimClass creates a class marked is-auto-claim-class and
// unmarks it when the test ends, so that no other test sees the mark.
func (e *env) createAutoClaimClass(name string, mods ...func(*v1alpha1.IPAddressClass)) *v1alpha1.IPAddressClass {
	e.t.Helper()
	c := e.createClass(name, append(mods, autoClaimClass)...)
	e.t.Cleanup(func() { e.unmarkAutoClaimClass(name) })
	return c
}

func (e *env) unmarkAutoClaimClass(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha1.AnnotationAutoClaimClass)
	err := k8s.Patch(ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch)))
	if client.IgnoreNotFound(err) != nil {
		e.t.Errorf("unmarking auto-claim class %s: %v", name, err)
	}
}

// markedAutoClaimClasses lists every class in the cluster marked
// is-auto-claim-class.
func (e *env) markedAutoClaimClasses(g Gomega) []string {
	var list v1alpha1.IPAddressClassList
	g.Expect(k8s.List(e.ctx, &list)).To(Succeed())
	var marked []string
	for _, c := range list.Items {
		if c.Annotations[v1alpha1.AnnotationAutoClaimClass] == "true" {
			marked = append(marked, c.Name)
		}
	}
	return marked
}

// requireNoAutoClaimClass fails the test unless no class in the cluster is
// marked is-auto-claim-class: a test relying on that would prove nothing.
func (e *env) requireNoAutoClaimClass() {
	e.t.Helper()
	e.g.Expect(e.markedAutoClaimClasses(e.g)).To(BeEmpty(), "a class marked %s is left in the cluster", v1alpha1.AnnotationAutoClaimClass)
}

// --- Services ---

// newService is a LoadBalancer Service that qualifies for auto-claim
// unless mods say otherwise.
func (e *env) newService(name string, mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

// createService creates the Service as the tenant and returns it as stored.
func (e *env) createService(name string, mods ...func(*corev1.Service)) *corev1.Service {
	e.t.Helper()
	s := e.newService(name, mods...)
	e.g.Expect(k8s.Create(e.ctx, s, client.FieldOwner(tenantManager))).To(Succeed(), "creating Service %s", name)
	return s
}

func (e *env) getService(g Gomega, name string) *corev1.Service {
	var s corev1.Service
	g.Expect(k8s.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &s)).To(Succeed())
	return &s
}

func svcAnnotation(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

// svcClass names the class on the Service.
func svcClass(class string) func(*corev1.Service) {
	return svcAnnotation(v1alpha1.AnnotationIPAddressClass, class)
}

func svcFamilies(policy corev1.IPFamilyPolicy, families ...corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &policy
		s.Spec.IPFamilies = families
	}
}

// serviceEvents lists the events with reason regarding the test's Service name.
func (e *env) serviceEvents(g Gomega, name, reason string) []eventsv1.Event {
	var out []eventsv1.Event
	for _, ev := range e.events(g, name, reason) {
		if ev.Regarding.Kind == "Service" && ev.Regarding.Namespace == e.ns {
			out = append(out, ev)
		}
	}
	return out
}

// expectAutoClaimed asserts the Service name has been auto-claimed: a claim
// named after it, of class and family, whose only owner and controller is
// the Service, named by the Service's annotation, and an AutoClaimed event.
func (e *env) expectAutoClaimed(g Gomega, name, class string, fam v1alpha1.IPFamily) *v1alpha1.IPAddressClaim {
	c := e.expectClaimedAndAnnotated(g, name, class, fam)
	e.expectAutoClaimedEvent(g, name)
	return c
}

func (e *env) expectAutoClaimedEvent(g Gomega, name string) {
	evs := e.serviceEvents(g, name, v1alpha1.ReasonAutoClaimed)
	g.Expect(evs).NotTo(BeEmpty(), "Service %s: %s event", name, v1alpha1.ReasonAutoClaimed)
	g.Expect(evs[0].Type).To(Equal(corev1.EventTypeNormal))
}

// expectClaimedAndAnnotated is expectAutoClaimed less the event.
func (e *env) expectClaimedAndAnnotated(g Gomega, name, class string, fam v1alpha1.IPFamily) *v1alpha1.IPAddressClaim {
	svc := e.getService(g, name)
	c := e.getClaim(g, name)
	g.Expect(c.Spec.ClassName).To(Equal(class), "claim %s: spec.className", name)
	g.Expect(c.Spec.Family).To(Equal(fam), "claim %s: spec.family", name)
	g.Expect(c.OwnerReferences).To(HaveLen(1), "claim %s: ownerReferences", name)
	ref := c.OwnerReferences[0]
	g.Expect(ref.APIVersion).To(Equal("v1"))
	g.Expect(ref.Kind).To(Equal("Service"))
	g.Expect(ref.Name).To(Equal(name))
	g.Expect(ref.UID).To(Equal(svc.UID))
	g.Expect(ref.Controller).To(Equal(ptr.To(true)), "claim %s: the Service must be its controller", name)
	g.Expect(svc.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationIPAddressClaim, name), "Service %s: claim annotation", name)
	return c
}

// autoClaimed waits until the Service has been auto-claimed (see
// expectAutoClaimed) and returns the claim.
func (e *env) autoClaimed(name, class string, fam v1alpha1.IPFamily) *v1alpha1.IPAddressClaim {
	e.t.Helper()
	var c *v1alpha1.IPAddressClaim
	e.eventually(func(g Gomega) { c = e.expectAutoClaimed(g, name, class, fam) },
		"Service %s should be auto-claimed with class %s, family %s", name, class, fam)
	return c
}

// expectNotClaimed asserts that no claim named after the Service exists,
// that no claim in the namespace names the Service as an owner, and that
// the Service's claim annotation is still annotation ("" = absent).
func (e *env) expectNotClaimed(g Gomega, name, annotation string) {
	svc := e.getService(g, name)
	var c v1alpha1.IPAddressClaim
	err := k8s.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &c)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no claim %s expected, got err=%v", name, err)
	var claims v1alpha1.IPAddressClaimList
	g.Expect(k8s.List(e.ctx, &claims, client.InNamespace(e.ns))).To(Succeed())
	for _, c := range claims.Items {
		for _, ref := range c.OwnerReferences {
			g.Expect(ref.UID).NotTo(Equal(svc.UID), "claim %s is owned by Service %s", c.Name, name)
		}
	}
	if annotation == "" {
		g.Expect(svc.Annotations).NotTo(HaveKey(v1alpha1.AnnotationIPAddressClaim), "Service %s must not be annotated", name)
	} else {
		g.Expect(svc.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationIPAddressClaim, annotation), "Service %s: annotation changed", name)
	}
}

// --- tests ---

// Every exclusion of §10's qualification leaves the Service alone, although
// a class is marked and named on it; a qualifying control Service next to
// them is auto-claimed, so the manager did see them.
func TestAutoClaim_10_QualificationExclusions(t *testing.T) {
	e := newEnv(t)
	class := e.class("auto")
	e.createAutoClaimClass(class)

	cases := []struct {
		name string
		mods []func(*corev1.Service)
		// after runs once the Service exists, before the manager starts.
		after func(*corev1.Service)
		// annotation is the claim annotation the Service keeps ("" = none).
		annotation string
		// told: an AutoClaimSkipped warning says why it is left out.
		told bool
	}{
		{name: "being-deleted",
			mods: []func(*corev1.Service){func(s *corev1.Service) { s.Finalizers = []string{"example.com/hold"} }},
			after: func(s *corev1.Service) {
				e.delete(s)
				e.eventually(func(g Gomega) { g.Expect(e.getService(g, s.Name).DeletionTimestamp).NotTo(BeNil()) })
			}},
		{name: "cluster-ip", mods: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }}},
		{name: "node-port", mods: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }}},
		{name: "names-a-claim", mods: []func(*corev1.Service){svcAnnotation(v1alpha1.AnnotationIPAddressClaim, "tenant-claim")}, annotation: "tenant-claim"},
		{name: "auto-claim-false", mods: []func(*corev1.Service){svcAnnotation(v1alpha1.AnnotationAutoClaim, "false")}},
		{name: "auto-claim-false-capitalized", mods: []func(*corev1.Service){svcAnnotation(v1alpha1.AnnotationAutoClaim, "False")}},
		{name: "auto-claim-no", mods: []func(*corev1.Service){svcAnnotation(v1alpha1.AnnotationAutoClaim, "no")}, told: true},
		{name: "load-balancer-class", mods: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other-lb") }}},
		{name: "load-balancer-ip", mods: []func(*corev1.Service){func(s *corev1.Service) { s.Spec.LoadBalancerIP = e.v4(200) }}},
		{name: "metallb-io-ips", mods: []func(*corev1.Service){svcAnnotation("metallb.io/loadBalancerIPs", e.v4(201))}},
		{name: "metallb-io-pool", mods: []func(*corev1.Service){svcAnnotation("metallb.io/address-pool", "pool")}},
		{name: "metallb-io-shared", mods: []func(*corev1.Service){svcAnnotation("metallb.io/allow-shared-ip", "key")}},
		{name: "metallb-universe-ips", mods: []func(*corev1.Service){svcAnnotation("metallb.universe.tf/loadBalancerIPs", e.v4(202))}},
		{name: "metallb-universe-pool", mods: []func(*corev1.Service){svcAnnotation("metallb.universe.tf/address-pool", "pool")}},
		{name: "metallb-universe-shared", mods: []func(*corev1.Service){svcAnnotation("metallb.universe.tf/allow-shared-ip", "key")}},
		{name: "backend-label", mods: []func(*corev1.Service){func(s *corev1.Service) { s.Labels = map[string]string{metallbiad.LabelAddress: "ip-x"} }}},
		{name: "has-ingress", told: true,
			after: func(s *corev1.Service) {
				e.eventually(func(g Gomega) {
					g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
					s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: e.v4(203)}}
					g.Expect(k8s.Status().Update(e.ctx, s, client.FieldOwner(tenantManager))).To(Succeed())
				})
			}},
	}
	for _, tc := range cases {
		s := e.createService(tc.name, append([]func(*corev1.Service){svcClass(class)}, tc.mods...)...)
		if tc.after != nil {
			tc.after(s)
		}
	}
	e.createService("control", svcClass(class))

	startManager(t)
	e.autoClaimed("control", class, v1alpha1.IPv4)

	// Every case is watched until quietUntil at least, the first for the
	// whole span: they all existed before the manager started.
	quietUntil := time.Now().Add(quiet)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := max(time.Until(quietUntil), 250*time.Millisecond)
			NewWithT(t).Consistently(func(g Gomega) { e.expectNotClaimed(g, tc.name, tc.annotation) }).
				WithTimeout(d).WithPolling(poll).Should(Succeed())
		})
	}
	// Of them, the one left out only for the address it has is told that
	// the class it names is not applied, and the one whose opt-out says
	// neither true nor false is told that; the others chose their
	// exclusion.
	e.eventually(func(g Gomega) {
		evs := e.serviceEvents(g, "has-ingress", v1alpha1.ReasonAutoClaimSkipped)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal("Warning"))
		g.Expect(evs[0].Note).To(ContainSubstring(e.v4(203)))
		evs = e.serviceEvents(g, "auto-claim-no", v1alpha1.ReasonAutoClaimSkipped)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Note).To(ContainSubstring(`is "no"`))
	}, "AutoClaimSkipped on the Service that has an address, and on the unclear opt-out")
	for _, tc := range cases {
		if !tc.told {
			e.g.Expect(e.serviceEvents(e.g, tc.name, v1alpha1.ReasonAutoClaimSkipped)).To(BeEmpty(), "Service %s", tc.name)
		}
	}
}

// The ip-address-class annotation alone opts a Service in, with a class
// that is not marked; and it wins over a marked class.
func TestAutoClaim_10_ClassFromAnnotation(t *testing.T) {
	e := newEnv(t)
	e.requireNoAutoClaimClass()
	named := e.class("named")
	e.createClass(named)
	startManager(t)

	e.createService("web", svcClass(named))
	e.autoClaimed("web", named, v1alpha1.IPv4)

	marked := e.class("marked")
	e.createAutoClaimClass(marked)
	e.createService("pinned", svcClass(named))
	e.createService("plain")
	e.autoClaimed("pinned", named, v1alpha1.IPv4)
	e.autoClaimed("plain", marked, v1alpha1.IPv4)
}

// An auto-claim the API server refuses (here a quota on the namespace's
// count of claims) is reported on the Service with the refusal's message;
// the Service is not left silent.
func TestAutoClaim_10_RefusedCreateIsReported(t *testing.T) {
	e := newEnv(t)
	e.requireNoAutoClaimClass()
	named := e.class("named")
	e.createClass(named)
	e.createQuota("claims", map[corev1.ResourceName]int64{"count/ipaddressclaims.local.sdn.cozystack.io": 0})
	startManager(t)

	e.createService("web", svcClass(named))
	e.eventually(func(g Gomega) {
		evs := e.events(g, "web", v1alpha1.ReasonAutoClaimRefused)
		g.Expect(evs).NotTo(BeEmpty())
		g.Expect(evs[0].Type).To(Equal("Warning"))
		g.Expect(evs[0].Note).To(ContainSubstring("quota"))
	})
}

// A Service's ip-address-class annotation corrected after its auto-claim
// was made (a class that does not exist left the claim waiting for good):
// the claim, holding no address yet, follows it and binds.
func TestAutoClaim_10_ClaimFollowsACorrectedClass(t *testing.T) {
	e := newEnv(t)
	e.requireNoAutoClaimClass()
	named := e.class("named")
	e.createClass(named)
	addr := e.createAddress(e.v4(1), named)
	startManager(t)

	e.createService("web", svcClass(named+"-typo"))
	e.autoClaimed("web", named+"-typo", v1alpha1.IPv4)
	e.eventually(func(g Gomega) {
		evs := e.serviceEvents(g, "web", v1alpha1.ReasonClassNotFound)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal("Warning"))
	}, "the Service is told the class it names does not exist")
	svc := e.getService(e.g, "web")
	e.update(svc, func() { svc.Annotations[v1alpha1.AnnotationIPAddressClass] = named })
	e.claimBoundTo("web", addr.Name)
	e.g.Expect(e.getClaim(e.g, "web").Spec.ClassName).To(Equal(named))
}

// The auto-claim mark moved to another class while a Service's claim
// waits in the first (it has no address to give): the claim, holding no
// address yet, follows the mark and binds in the new class.
func TestAutoClaim_10_ClaimFollowsAMovedMark(t *testing.T) {
	e := newEnv(t)
	e.requireNoAutoClaimClass()
	first := e.class("first")
	e.createAutoClaimClass(first)
	startManager(t)

	e.createService("web")
	e.autoClaimed("web", first, v1alpha1.IPv4)
	e.eventually(func(g Gomega) { g.Expect(e.getClaim(g, "web").Status.Phase).To(Equal(v1alpha1.ClaimPending)) })

	e.unmarkAutoClaimClass(first)
	second := e.class("second")
	e.createAutoClaimClass(second)
	addr := e.createAddress(e.v4(1), second)
	e.claimBoundTo("web", addr.Name)
	e.g.Expect(e.getClaim(e.g, "web").Spec.ClassName).To(Equal(second))
}

// A Service re-pointed at another claim while its auto-claim holds an
// address: the auto-claim is kept, with its address, and the Service is
// told that the address stays reserved until the claim is deleted.
func TestAutoClaim_10_OwnClaimNotNamedIsTold(t *testing.T) {
	e := newEnv(t)
	e.requireNoAutoClaimClass()
	class := e.class("named")
	e.createClass(class)
	e.createAddress(e.v4(1), class)
	addr := e.createAddress(e.v4(2), class)
	e.createClaim("mine", class)
	startManager(t)
	e.claimBoundTo("mine", nameOf(e.v4(1)))

	e.createService("shop", svcClass(class))
	e.autoClaimed("shop", class, v1alpha1.IPv4)
	e.claimBoundTo("shop", addr.Name)
	svc := e.getService(e.g, "shop")
	e.update(svc, func() { svc.Annotations[v1alpha1.AnnotationIPAddressClaim] = "mine" })
	e.eventually(func(g Gomega) {
		evs := e.serviceEvents(g, "shop", v1alpha1.ReasonAutoClaimNotNamed)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Note).To(ContainSubstring(e.v4(2)))
	}, "told that its own claim keeps the address")
	e.claimBoundTo("shop", addr.Name)
}

// A LoadBalancer Service naming a claim its namespace does not have is
// told so (ClaimNotFound), once the claim has been missing for a grace
// period; a Service whose claim exists, or arrives within the grace, is
// not.
func TestAutoClaim_ServiceNamingAMissingClaimIsTold(t *testing.T) {
	e := newEnv(t)
	class := e.class("any")
	e.createClass(class)
	e.createClaim("real", class)
	startManager(t)

	e.createService("ok", svcAnnotation(v1alpha1.AnnotationIPAddressClaim, "real"))
	e.createService("late", svcAnnotation(v1alpha1.AnnotationIPAddressClaim, "later"))
	e.createService("typo", svcAnnotation(v1alpha1.AnnotationIPAddressClaim, "no-such-claim"))
	e.createClaim("later", class)
	e.eventuallyWithin(3*eventually, func(g Gomega) {
		evs := e.serviceEvents(g, "typo", v1alpha1.ReasonClaimNotFound)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal("Warning"))
		g.Expect(evs[0].Note).To(ContainSubstring("IPAddressClaim no-such-claim"))
	}, "the Service naming a claim that does not exist is told")
	for _, name := range []string{"ok", "late"} {
		e.g.Expect(e.serviceEvents(e.g, name, v1alpha1.ReasonClaimNotFound)).To(BeEmpty(), "Service %s", name)
	}
}

// With no class annotation, the single marked class is used; the claim is
// then an ordinary one and binds a pre-provisioned address of the class.
func TestAutoClaim_10_SingleAutoClaimClass(t *testing.T) {
	e := newEnv(t)
	auto := e.class("auto")
	e.createAutoClaimClass(auto)
	e.createClass(e.class("other"))
	e.createClass(e.class("default"), asDefault)
	addr := e.createAddress(e.v4(1), auto)
	startManager(t)

	e.createService("web")
	e.autoClaimed("web", auto, v1alpha1.IPv4)
	e.claimBoundTo("web", addr.Name)
}

// With no class marked and none named, nothing happens — a default class
// is not an auto-claim class.
func TestAutoClaim_10_NoAutoClaimClass(t *testing.T) {
	e := newEnv(t)
	e.requireNoAutoClaimClass()
	e.createClass(e.class("a"))
	e.createClass(e.class("default"), asDefault)
	startManager(t)

	e.createService("web")
	e.consistently(quiet, func(g Gomega) {
		e.expectNotClaimed(g, "web", "")
		g.Expect(e.serviceEvents(g, "web", v1alpha1.ReasonMultipleAutoClaimClasses)).To(BeEmpty())
	}, "with no auto-claim class, a Service naming none is left alone")
}

// Several marked classes: a warning on the Service, nothing claimed. A
// Service that names its class is not ambiguous.
func TestAutoClaim_10_MultipleAutoClaimClasses(t *testing.T) {
	e := newEnv(t)
	a, b := e.class("a"), e.class("b")
	e.createAutoClaimClass(a)
	e.createAutoClaimClass(b)
	startManager(t)

	e.createService("web")
	e.createService("named", svcClass(b))
	e.eventually(func(g Gomega) {
		evs := e.serviceEvents(g, "web", v1alpha1.ReasonMultipleAutoClaimClasses)
		g.Expect(evs).NotTo(BeEmpty())
		g.Expect(evs[0].Type).To(Equal(corev1.EventTypeWarning))
	}, "a %s warning on the Service", v1alpha1.ReasonMultipleAutoClaimClasses)
	e.autoClaimed("named", b, v1alpha1.IPv4)
	e.consistently(quiet, func(g Gomega) { e.expectNotClaimed(g, "web", "") },
		"with several auto-claim classes nothing is claimed")
}

// A claim of the Service's name that the Service does not control is never
// adopted: a warning, no owner reference added, no annotation.
func TestAutoClaim_10_NotAdopted(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "owner"}}
	e.create(owner)
	e.createClaim("tenants", class)
	e.createClaim("controlled", class, ownedBy(owner))
	before := map[string]*v1alpha1.IPAddressClaim{"tenants": e.getClaim(e.g, "tenants"), "controlled": e.getClaim(e.g, "controlled")}

	for name := range before {
		e.createService(name, svcClass(class))
	}
	for name := range before {
		e.eventually(func(g Gomega) {
			evs := e.serviceEvents(g, name, v1alpha1.ReasonClaimNotAdopted)
			g.Expect(evs).NotTo(BeEmpty())
			g.Expect(evs[0].Type).To(Equal(corev1.EventTypeWarning))
		}, "a %s warning on Service %s", v1alpha1.ReasonClaimNotAdopted, name)
	}
	e.consistently(quiet, func(g Gomega) {
		for name, was := range before {
			c := e.getClaim(g, name)
			g.Expect(c.UID).To(Equal(was.UID), "claim %s was replaced", name)
			g.Expect(c.OwnerReferences).To(Equal(was.OwnerReferences), "claim %s: ownerReferences changed", name)
			g.Expect(c.Spec).To(Equal(was.Spec), "claim %s: spec changed", name)
			g.Expect(e.getService(g, name).Annotations).NotTo(HaveKey(v1alpha1.AnnotationIPAddressClaim), "Service %s must not be annotated", name)
		}
	}, "a claim the Service does not control is left as it is")
}

// A claim a tenant creates with a Service as its controller (the Service's
// UID is readable to anyone who may view it) is not the core's: the core
// neither names it on that Service (which the tenant may not edit; the
// Service holds an address already) nor deletes it when the Service opts
// out. Only the core writes its mark (the webhook strips it from anyone
// else's create: TestDropForeignStamp).
func TestAutoClaim_10_ForgedControllerIsNotTheCore(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	startManager(t)

	e.createService("opted-out", svcClass(class), svcAnnotation(v1alpha1.AnnotationAutoClaim, "false"))
	e.createService("addressed", svcClass(class))
	addressed := e.getService(e.g, "addressed")
	addressed.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: e.v4(9)}}
	e.g.Expect(k8s.Status().Update(e.ctx, addressed)).To(Succeed())
	claims := map[string]types.UID{}
	for _, name := range []string{"opted-out", "addressed"} {
		svc := e.getService(e.g, name)
		c := e.createClaim(name, class, func(c *v1alpha1.IPAddressClaim) {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true)}}
		})
		claims[name] = c.UID
	}
	e.consistently(quiet, func(g Gomega) {
		for name, uid := range claims {
			c := e.getClaim(g, name)
			g.Expect(c.UID).To(Equal(uid))
			g.Expect(c.DeletionTimestamp).To(BeNil(), "the core withdrew claim %s, which it never created", name)
			g.Expect(e.getService(g, name).Annotations).NotTo(HaveKey(v1alpha1.AnnotationIPAddressClaim), "the core named claim %s on its Service", name)
		}
	})
}

// spec.family follows the Service: Dual only for RequireDualStack, else
// the Service's first family. The control plane's Service CIDRs are
// dual-stack.
func TestAutoClaim_10_FamilyDerivation(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)

	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	cases := []struct {
		name     string
		mods     []func(*corev1.Service)
		families []corev1.IPFamily // as the API server stores them
		want     v1alpha1.IPFamily
	}{
		{name: "defaulted", families: []corev1.IPFamily{v4}, want: v1alpha1.IPv4},
		{name: "single-v4", mods: []func(*corev1.Service){svcFamilies(corev1.IPFamilyPolicySingleStack, v4)}, families: []corev1.IPFamily{v4}, want: v1alpha1.IPv4},
		{name: "single-v6", mods: []func(*corev1.Service){svcFamilies(corev1.IPFamilyPolicySingleStack, v6)}, families: []corev1.IPFamily{v6}, want: v1alpha1.IPv6},
		{name: "prefer-dual", mods: []func(*corev1.Service){svcFamilies(corev1.IPFamilyPolicyPreferDualStack)}, families: []corev1.IPFamily{v4, v6}, want: v1alpha1.IPv4},
		{name: "prefer-dual-v6-first", mods: []func(*corev1.Service){svcFamilies(corev1.IPFamilyPolicyPreferDualStack, v6, v4)}, families: []corev1.IPFamily{v6, v4}, want: v1alpha1.IPv6},
		{name: "require-dual", mods: []func(*corev1.Service){svcFamilies(corev1.IPFamilyPolicyRequireDualStack)}, families: []corev1.IPFamily{v4, v6}, want: v1alpha1.Dual},
		{name: "require-dual-v6-first", mods: []func(*corev1.Service){svcFamilies(corev1.IPFamilyPolicyRequireDualStack, v6, v4)}, families: []corev1.IPFamily{v6, v4}, want: v1alpha1.Dual},
	}
	startManager(t)
	for _, tc := range cases {
		s := e.createService(tc.name, append([]func(*corev1.Service){svcClass(class)}, tc.mods...)...)
		e.g.Expect(s.Spec.IPFamilies).To(Equal(tc.families), "Service %s: the API server's ipFamilies", tc.name)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Eventually(func(g Gomega) { e.expectAutoClaimed(g, tc.name, class, tc.want) }).
				WithTimeout(eventually).WithPolling(poll).Should(Succeed())
		})
	}
}

// An auto-claim holding its address stays with its Service while the
// Service lives: turned ClusterIP with its annotation removed in the same
// edit, the Service keeps its claim (named on it again) and the address.
func TestAutoClaim_10_BoundClaimOutlivesTypeChange(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	addr := e.createAddress(e.v4(1), class)
	startManager(t)
	svc := e.createService("web", svcClass(class))
	e.autoClaimed("web", class, v1alpha1.IPv4)
	e.claimBoundTo("web", addr.Name)
	e.update(svc, func() {
		delete(svc.Annotations, v1alpha1.AnnotationIPAddressClaim)
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.Ports[0].NodePort = 0
	})
	e.consistently(3*time.Second, func(g Gomega) {
		c := e.getClaim(g, "web")
		g.Expect(c.DeletionTimestamp).To(BeNil(), "the claim is not withdrawn")
		g.Expect(e.getAddress(g, addr.Name).Spec.ClaimRef).NotTo(BeNil())
	})
	e.eventually(func(g Gomega) {
		g.Expect(e.getService(g, "web").Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationIPAddressClaim, "web"))
	}, "the claim is named on the Service again")
}

// A Service made dual-stack while its claim holds no address yet gets a
// Dual claim: the claim's one address would never be attached to it.
func TestAutoClaim_10_PendingClaimFollowsTheServiceFamily(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class) // no address: the claim waits
	startManager(t)
	svc := e.createService("web", svcClass(class))
	e.autoClaimed("web", class, v1alpha1.IPv4)
	e.update(svc, func() {
		svcFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)(svc)
	})
	e.eventually(func(g Gomega) { e.expectAutoClaimed(g, "web", class, v1alpha1.Dual) })
}

// Deleting the Service garbage-collects its claim, and the claim takes its
// address with it although the class and the address say Retain.
func TestAutoClaim_10_ServiceDeletionCollectsClaimAndAddresses(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.g.Expect(e.createClass(class).Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimRetain))
	addr := e.createAddress(e.v4(1), class)
	spare := e.createAddress(e.v4(2), class)
	e.g.Expect(addr.Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimRetain))
	startManager(t)
	e.addressPhase(spare.Name, v1alpha1.AddressAvailable)

	svc := e.createService("web", svcClass(class))
	claim := e.autoClaimed("web", class, v1alpha1.IPv4)
	e.claimBoundTo("web", addr.Name)

	e.delete(svc)
	e.eventuallyWithin(gcWait, func(g Gomega) {
		e.gone(g, svc)
		e.gone(g, claim)
		e.gone(g, addr)
	}, "the Service, its claim and the claim's address should be gone")
	e.addressPhase(spare.Name, v1alpha1.AddressAvailable)
}

// Without its controller reference the claim is an ordinary one: it
// outlives the Service, keeps its address, and the core does not put the
// reference back.
func TestAutoClaim_10_OwnerReferenceRemovedKeepsClaim(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)
	addr := e.createAddress(e.v4(1), class)
	startManager(t)

	svc := e.createService("web", svcClass(class))
	claim := e.autoClaimed("web", class, v1alpha1.IPv4)
	e.claimBoundTo("web", addr.Name)

	e.update(claim, func() { claim.OwnerReferences = nil })
	e.consistently(quiet, func(g Gomega) {
		g.Expect(e.getClaim(g, "web").OwnerReferences).To(BeEmpty())
		g.Expect(e.getService(g, "web").Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationIPAddressClaim, "web"))
	}, "the core never restores the controller reference")

	e.delete(svc)
	e.eventually(func(g Gomega) { e.gone(g, svc) })
	e.consistently(quiet, func(g Gomega) {
		c := e.getClaim(g, "web")
		g.Expect(c.UID).To(Equal(claim.UID))
		g.Expect(c.DeletionTimestamp).To(BeNil())
		g.Expect(c.OwnerReferences).To(BeEmpty())
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
		a := e.getAddress(g, addr.Name)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressBound))
		g.Expect(a.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: e.ns, Name: "web", UID: claim.UID}))
	}, "a claim without its controller reference outlives the Service")
}

// serviceWrites records the manager's write requests to one Service and
// lands a tenant's edit on it just before the first of them reaches the API
// server: the edit a write built from the core's (trimmed, possibly stale)
// cached copy would clobber.
type serviceWrites struct {
	path       string // the Service's URL path
	concurrent func() error

	once          sync.Once
	mu            sync.Mutex
	writes        []serviceWrite
	concurrentErr error
}

type serviceWrite struct {
	method, path, contentType string
	body                      []byte
}

func (w *serviceWrites) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet || !strings.HasPrefix(req.URL.Path, w.path) {
			return rt.RoundTrip(req)
		}
		var body []byte
		if req.Body != nil {
			b, err := io.ReadAll(req.Body)
			_ = req.Body.Close()
			if err != nil {
				return nil, err
			}
			body = b
			req = req.Clone(req.Context())
			req.Body = io.NopCloser(bytes.NewReader(b))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		}
		w.once.Do(func() {
			err := w.concurrent()
			w.mu.Lock()
			w.concurrentErr = err
			w.mu.Unlock()
		})
		w.mu.Lock()
		w.writes = append(w.writes, serviceWrite{method: req.Method, path: req.URL.Path, contentType: req.Header.Get("Content-Type"), body: body})
		w.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (w *serviceWrites) get() ([]serviceWrite, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes), w.concurrentErr
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// patchedFields is what a write of the Service changes beyond optimistic
// concurrency preconditions, or an error if it is not a patch.
func patchedFields(w serviceWrite) (any, error) {
	if w.method != http.MethodPatch {
		return nil, fmt.Errorf("%s %s: a write of a whole Service rewrites every field", w.method, w.path)
	}
	ct, _, err := mime.ParseMediaType(w.contentType)
	if err != nil {
		return nil, fmt.Errorf("PATCH %s: content type %q: %w", w.path, w.contentType, err)
	}
	switch ct {
	case string(types.JSONPatchType):
		var ops []map[string]any
		if err := json.Unmarshal(w.body, &ops); err != nil {
			return nil, fmt.Errorf("PATCH %s: %w", w.path, err)
		}
		kept := []map[string]any{}
		for _, op := range ops {
			if op["op"] != "test" {
				kept = append(kept, op)
			}
		}
		return kept, nil
	case string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.ApplyYAMLPatchType):
		var obj map[string]any
		if err := json.Unmarshal(w.body, &obj); err != nil {
			return nil, fmt.Errorf("PATCH %s (%s): %w", w.path, ct, err)
		}
		if ct == string(types.ApplyYAMLPatchType) {
			delete(obj, "apiVersion")
			delete(obj, "kind")
		}
		if md, ok := obj["metadata"].(map[string]any); ok {
			for _, k := range []string{"resourceVersion", "uid"} {
				delete(md, k)
			}
			if ct == string(types.ApplyYAMLPatchType) {
				delete(md, "name")
				delete(md, "namespace")
			}
		}
		return obj, nil
	default:
		return nil, fmt.Errorf("PATCH %s: unexpected content type %q", w.path, ct)
	}
}

// The core writes a Service only with a patch of its claim annotation: a
// tenant's edit landing between the core's read and its write survives,
// nothing else of the Service changes, and the core's field manager owns
// that one annotation.
func TestAutoClaim_10_PatchesOnlyTheAnnotation(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	e.createClass(class)

	const concurrentKey = "example.com/concurrent"
	before := e.createService("web", svcClass(class),
		svcAnnotation("example.com/owner", "team-a"),
		func(s *corev1.Service) {
			s.Labels = map[string]string{"app": "web", "tier": "frontend"}
			s.Spec.Selector = map[string]string{"app": "web", "tier": "frontend"}
			s.Spec.Ports = []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromString("https")},
			}
		})
	e.g.Expect(before.Annotations).NotTo(HaveKey(v1alpha1.AnnotationIPAddressClaim))

	rec := &serviceWrites{
		path: fmt.Sprintf("/api/v1/namespaces/%s/services/web", e.ns),
		concurrent: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), eventually)
			defer cancel()
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"yes"},"annotations":{%q:"yes"}}}`, concurrentKey, concurrentKey)
			return k8s.Patch(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "web"}},
				client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner(concurrentManager))
		},
	}
	// As cmd/manager identifies itself; the recorder sees the core's writes.
	startManager(t, func(cfg *rest.Config) {
		cfg.UserAgent = core.EventSource
		cfg.Wrap(rec.wrap)
	})
	e.eventually(func(g Gomega) { e.expectClaimedAndAnnotated(g, "web", class, v1alpha1.IPv4) },
		"Service web should be auto-claimed with class %s", class)
	// Give a late second write the chance to show up.
	time.Sleep(time.Second)

	writes, concurrentErr := rec.get()
	e.g.Expect(concurrentErr).NotTo(HaveOccurred(), "the tenant's concurrent edit")
	e.g.Expect(writes).NotTo(BeEmpty(), "the manager's writes of the Service were not seen")
	want := map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationIPAddressClaim: "web"}}}
	for _, w := range writes {
		t.Logf("core wrote: %s %s (%s) %s", w.method, w.path, w.contentType, w.body)
		got, err := patchedFields(w)
		e.g.Expect(err).NotTo(HaveOccurred())
		if ops, ok := got.([]map[string]any); ok {
			for _, op := range ops {
				e.g.Expect(op).To(HaveKeyWithValue("path", "/metadata/annotations/"+strings.ReplaceAll(v1alpha1.AnnotationIPAddressClaim, "/", "~1")))
				e.g.Expect(op).To(HaveKeyWithValue("value", "web"))
			}
			continue
		}
		e.g.Expect(got).To(Equal(want), "a write of the Service must touch only the claim annotation")
	}

	after := e.getService(e.g, "web")
	wantLabels := map[string]string{concurrentKey: "yes"}
	for k, v := range before.Labels {
		wantLabels[k] = v
	}
	wantAnnotations := map[string]string{concurrentKey: "yes", v1alpha1.AnnotationIPAddressClaim: "web"}
	for k, v := range before.Annotations {
		wantAnnotations[k] = v
	}
	e.g.Expect(after.Labels).To(Equal(wantLabels), "labels: the tenant's and the concurrent edit's, nothing else")
	e.g.Expect(after.Annotations).To(Equal(wantAnnotations), "annotations: the tenant's, the concurrent edit's and the claim's")
	e.g.Expect(after.Spec).To(Equal(before.Spec), "the core never changes a Service's spec")
	e.g.Expect(after.Status).To(Equal(before.Status), "the core never changes a Service's status")

	wantFields := map[string]any{"f:metadata": map[string]any{"f:annotations": map[string]any{"f:" + v1alpha1.AnnotationIPAddressClaim: map[string]any{}}}}
	var managers []string
	for _, mf := range after.ManagedFields {
		if mf.Manager == tenantManager || mf.Manager == concurrentManager {
			continue
		}
		managers = append(managers, fmt.Sprintf("%s (%s)", mf.Manager, mf.Operation))
		e.g.Expect(mf.FieldsV1).NotTo(BeNil(), "managedFields of %s", mf.Manager)
		var fields map[string]any
		e.g.Expect(json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
		e.g.Expect(fields).To(Equal(wantFields), "field manager %s (%s, subresource %q) must own only the claim annotation",
			mf.Manager, mf.Operation, mf.Subresource)
	}
	slices.Sort(managers)
	e.g.Expect(managers).NotTo(BeEmpty(), "no field manager but the tests' own owns a field of the Service")
	t.Logf("field managers of the Service besides the tests': %v", managers)

	// The claim was created although its first annotation write lost to
	// the concurrent edit: the Service still hears of it.
	e.eventually(func(g Gomega) { e.expectAutoClaimedEvent(g, "web") },
		"an %s event although the first annotation write conflicted", v1alpha1.ReasonAutoClaimed)
}
