package autoclaim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

func newService(mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "svc-uid", Annotations: map[string]string{}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func annotated(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Annotations[k] = v }
}

func autoClass(name string) v1alpha1.IPAddressClass {
	return v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1alpha1.AnnotationAutoClaimClass: "true"}}}
}

type outcome struct {
	create   string // "<class> <family> owned-by=<uid>"
	annotate string
	remove   string
	retarget string
	events   []string
}

func summarize(p plan) outcome {
	o := outcome{annotate: p.annotate}
	if r := p.retarget; r != nil {
		o.retarget = r.ClassName + " " + string(r.Family)
	}
	if p.remove != nil {
		o.remove = p.remove.Name
	}
	if c := p.create; c != nil {
		o.create = c.Spec.ClassName + " " + string(c.Spec.Family) + " owned-by=" + string(metav1.GetControllerOf(c).UID)
	}
	for _, e := range p.events {
		o.events = append(o.events, e.Type+" "+e.Reason)
	}
	return o
}

// The warning says which address the Service has and how to get one of
// the class it named.
func TestSkippedClassMessage(t *testing.T) {
	svc := newService(annotated(v1alpha1.AnnotationIPAddressClass, "private"), func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}, {Hostname: "lb.example"}}
	})
	events := skippedClass(svc, hasAddress)
	const want = `local.sdn.cozystack.io/ip-address-class "private" is not applied: the Service already has an address (198.51.100.7), ` +
		`and auto-claim never moves a Service off one it has; to take an address of class "private", create an IPAddressClaim of that class ` +
		`and name it with the local.sdn.cozystack.io/ip-address-claim annotation`
	if len(events) != 1 || events[0].Message != want || !events[0].Once {
		t.Errorf("events %+v, want one WarningOnce %q", events, want)
	}
}

// The table mirrors contract §10.
func TestDecide(t *testing.T) {
	public := []v1alpha1.IPAddressClass{autoClass("public"), {ObjectMeta: metav1.ObjectMeta{Name: "private"}}}
	created := outcome{create: "public IPv4 owned-by=svc-uid", annotate: "web", events: []string{"Normal AutoClaimed"}}
	tests := []struct {
		name    string
		svc     *corev1.Service
		classes []v1alpha1.IPAddressClass
		claim   *v1alpha1.IPAddressClaim
		want    outcome
	}{
		{"10-1 a plain LoadBalancer Service gets a claim of the auto-claim class, then the annotation", newService(), public, nil, created},
		{"10-1 not a LoadBalancer", newService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), public, nil, outcome{}},
		{"10-1 being deleted", newService(func(s *corev1.Service) { s.DeletionTimestamp = &metav1.Time{} }), public, nil, outcome{}},
		{"10-1 names a claim already", newService(annotated(v1alpha1.AnnotationIPAddressClaim, "mine")), public, nil, outcome{}},
		{"10-1 opted out with auto-claim: false", newService(annotated(v1alpha1.AnnotationAutoClaim, "false")), public, nil, outcome{}},
		{"10-1 auto-claim: true is no opt-out", newService(annotated(v1alpha1.AnnotationAutoClaim, "true")), public, nil, created},
		{"10-3 a class named that does not exist: claimed all the same, and told", newService(annotated(v1alpha1.AnnotationIPAddressClass, "typo")), public, nil,
			outcome{create: "typo IPv4 owned-by=svc-uid", annotate: "web", events: []string{"Normal AutoClaimed", "Warning ClassNotFound"}}},
		{"10-1 ...in any case", newService(annotated(v1alpha1.AnnotationAutoClaim, "TRUE")), public, nil, created},
		{"10-1 auto-claim: False opts out too", newService(annotated(v1alpha1.AnnotationAutoClaim, "False")), public, nil, outcome{}},
		{"10-1 auto-claim saying neither true nor false: not claimed, and told", newService(annotated(v1alpha1.AnnotationAutoClaim, "no")), public, nil,
			outcome{events: []string{"Warning AutoClaimSkipped"}}},
		{"10-5 its own claim holds an address and the Service's auto-claim says neither: kept, and named", newService(annotated(v1alpha1.AnnotationAutoClaim, "off")), public,
			holdsAddress(newClaim(newService(), "public"), "192.0.2.9"), outcome{annotate: "web"}},
		{"10-1 another implementation's loadBalancerClass", newService(func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("other.example.com/lb") }), public, nil, outcome{}},
		{"10-1 asks for a loadBalancerIP", newService(func(s *corev1.Service) { s.Spec.LoadBalancerIP = "203.0.113.7" }), public, nil, outcome{}},
		{"10-2 already has an address", newService(func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
		}), public, nil, outcome{}},
		{"10-2 already has an address and names a class: told that the class is not applied", newService(annotated(v1alpha1.AnnotationIPAddressClass, "private"), func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
		}), public, nil, outcome{events: []string{"Warning AutoClaimSkipped"}}},
		{"10-2 names a class and opted out: nothing said", newService(annotated(v1alpha1.AnnotationIPAddressClass, "private"), annotated(v1alpha1.AnnotationAutoClaim, "false"), func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
		}), public, nil, outcome{}},
		{"10-3 the ip-address-class annotation wins and opts in alone", newService(annotated(v1alpha1.AnnotationIPAddressClass, "private")),
			[]v1alpha1.IPAddressClass{{ObjectMeta: metav1.ObjectMeta{Name: "private"}}}, nil,
			outcome{create: "private IPv4 owned-by=svc-uid", annotate: "web", events: []string{"Normal AutoClaimed"}}},
		{"10-3 a named class being deleted: a warning, nothing claimed (the claim would outlive the class, Pending)", newService(annotated(v1alpha1.AnnotationIPAddressClass, "private")),
			[]v1alpha1.IPAddressClass{{ObjectMeta: metav1.ObjectMeta{Name: "private", DeletionTimestamp: &metav1.Time{}}}}, nil,
			outcome{events: []string{"Warning AutoClaimRefused"}}},
		{"10-3 no class marked: the Service is left alone", newService(), []v1alpha1.IPAddressClass{{ObjectMeta: metav1.ObjectMeta{Name: "private"}}}, nil, outcome{}},
		{"10-3 several classes marked: a warning, nothing claimed", newService(), []v1alpha1.IPAddressClass{autoClass("a"), autoClass("b")}, nil,
			outcome{events: []string{"Warning MultipleAutoClaimClasses"}}},
		{"10-4 RequireDualStack claims Dual", newService(func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		}), public, nil, outcome{create: "public Dual owned-by=svc-uid", annotate: "web", events: []string{"Normal AutoClaimed"}}},
		{"10-4 PreferDualStack claims its primary family", newService(func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		}), public, nil, created},
		{"10-4 an IPv6-only Service claims IPv6", newService(func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }), public, nil,
			outcome{create: "public IPv6 owned-by=svc-uid", annotate: "web", events: []string{"Normal AutoClaimed"}}},
		{"10-5 its own claim exists (a crash before the annotation): annotate only", newService(), public,
			newClaim(newService(), "public"), outcome{annotate: "web"}},
		{"10-5 its own claim exists and MetalLB assigned the Service an address before the annotation: annotate still", newService(func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.9"}}
		}), public, newClaim(newService(), "public"), outcome{annotate: "web"}},
		{"10-5 its own claim exists and the Service opted out since: the claim is deleted", newService(annotated(v1alpha1.AnnotationAutoClaim, "false")), public,
			newClaim(newService(), "public"), outcome{remove: "web", events: []string{"Normal AutoClaimWithdrawn"}}},
		{"10-5 its own claim exists and the Service pins an address itself since: the claim is deleted", newService(annotated("metallb.io/loadBalancerIPs", "192.0.2.9")), public,
			newClaim(newService(), "public"), outcome{remove: "web", events: []string{"Normal AutoClaimWithdrawn"}}},
		{"10-5 its own claim holds an address and the Service lost its annotation, keeping its driver's pin: annotate again, nothing deleted",
			newService(annotated("metallb.io/loadBalancerIPs", "192.0.2.9")), public,
			holdsAddress(newClaim(newService(), "public"), "192.0.2.9"), outcome{annotate: "web"}},
		{"10-5 its own claim holds an address and the Service, its annotation removed, turned ClusterIP: the claim stays, named again",
			newService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), public,
			holdsAddress(newClaim(newService(), "public"), "192.0.2.9"), outcome{annotate: "web"}},
		{"10-5 ...or set a loadBalancerClass: the same",
			newService(func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("other.example.com/lb") }), public,
			holdsAddress(newClaim(newService(), "public"), "192.0.2.9"), outcome{annotate: "web"}},
		{"10-5 ...but not holding an address yet, it is withdrawn",
			newService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), public,
			newClaim(newService(), "public"), outcome{remove: "web", events: []string{"Normal AutoClaimWithdrawn"}}},
		{"10-5 its own claim holds an address and the Service opted out: the claim is deleted", newService(annotated(v1alpha1.AnnotationAutoClaim, "false")), public,
			holdsAddress(newClaim(newService(), "public"), "192.0.2.9"), outcome{remove: "web", events: []string{"Normal AutoClaimWithdrawn"}}},
		{"10-5 its own claim, withdrawn already and still being deleted: nothing more, no second event", newService(annotated("metallb.io/loadBalancerIPs", "192.0.2.9")), public,
			withdrawing(newClaim(newService(), "public")), outcome{}},
		{"10-5 its own claim exists and the Service names another claim: nothing", newService(annotated(v1alpha1.AnnotationIPAddressClaim, "mine")), public,
			newClaim(newService(), "public"), outcome{}},
		{"10-5 its own claim holds an address and the Service names another claim: told, nothing deleted", newService(annotated(v1alpha1.AnnotationIPAddressClaim, "mine")), public,
			holdsAddress(newClaim(newService(), "public"), "192.0.2.9"), outcome{events: []string{"Warning AutoClaimNotNamed"}}},
		{"10-5 a namesake claim it does not control, the Service holding an address: nothing", newService(func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.9"}}
		}), public, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"}}, outcome{}},
		{"10-5 a namesake claim it does not control is never adopted", newService(), public,
			&v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"}}, outcome{events: []string{"Warning ClaimNotAdopted"}}},
		{"10-5 a claim the Service controls that the core did not create (no mark) is not named on the Service", newService(func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.9"}}
		}), public, forged(newClaim(newService(), "public")), outcome{}},
		{"10-5 ...nor deleted when the Service opts out", newService(annotated(v1alpha1.AnnotationAutoClaim, "false")), public,
			forged(holdsAddress(newClaim(newService(), "public"), "192.0.2.9")), outcome{}},
		{"10-5 ...nor adopted", newService(), public, forged(newClaim(newService(), "public")), outcome{events: []string{"Warning ClaimNotAdopted"}}},
		{"10-5 the Service's own claim, holding no address yet, follows the class its annotation names now",
			newService(annotated(v1alpha1.AnnotationIPAddressClaim, "web"), annotated(v1alpha1.AnnotationIPAddressClass, "private")), public,
			newClaim(newService(), "public"), outcome{retarget: "private IPv4", events: []string{"Normal AutoClaimed"}}},
		{"10-5 ...or the auto-claim mark moved to another class",
			newService(annotated(v1alpha1.AnnotationIPAddressClaim, "web")), public, newClaim(newService(), "typo"),
			outcome{retarget: "public IPv4", events: []string{"Normal AutoClaimed"}}},
		{"10-5 ...or the Service made dual-stack: the claim asks for both families",
			newService(annotated(v1alpha1.AnnotationIPAddressClaim, "web"), func(s *corev1.Service) {
				s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
			}), public, newClaim(newService(), "public"),
			outcome{retarget: "public Dual", events: []string{"Normal AutoClaimed"}}},
		{"10-5 ...but not once it holds an address",
			newService(annotated(v1alpha1.AnnotationIPAddressClaim, "web"), annotated(v1alpha1.AnnotationIPAddressClass, "private")), public,
			holdsAddress(newClaim(newService(), "public"), "192.0.2.9"), outcome{}},
		{"10-5 ...nor a claim the core did not create",
			newService(annotated(v1alpha1.AnnotationIPAddressClaim, "web"), annotated(v1alpha1.AnnotationIPAddressClass, "private")), public,
			forged(newClaim(newService(), "public")), outcome{}},
		{"10-5 the claim of an earlier Service of the name, deleted and created again, is on its way out: no warning, the Service waits",
			newService(func(s *corev1.Service) { s.UID = "svc-uid-2" }), public, newClaim(newService(), "public"), outcome{}},
		{"10-5 a namesake claim being deleted: no warning, the Service waits", newService(), public,
			withdrawing(&v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"}}), outcome{}},
	}
	for _, k := range sources {
		tests = append(tests, struct {
			name    string
			svc     *corev1.Service
			classes []v1alpha1.IPAddressClass
			claim   *v1alpha1.IPAddressClaim
			want    outcome
		}{"10-1 carries " + k, newService(annotated(k, "x")), public, nil, outcome{}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(decide(snapshot{service: tc.svc, classes: tc.classes, claim: tc.claim, sources: sources}))
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("plan differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTransformServiceKeepsWhatDecideReads: the trimmed cache copy decides
// exactly as the whole Service would.
func TestTransformServiceKeepsWhatDecideReads(t *testing.T) {
	full := newService(annotated("metallb.io/address-pool", "p"), annotated("kubectl.kubernetes.io/last-applied-configuration", "{}"), func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Port: 80}}
		s.Spec.Selector = map[string]string{"app": "web"}
		s.Labels = map[string]string{"app": "web"}
	})
	obj, err := TransformService(sources)(full)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := obj.(*corev1.Service)
	if len(trimmed.Spec.Ports) != 0 || trimmed.Labels != nil || len(trimmed.Annotations) != 1 {
		t.Errorf("kept more than auto-claim reads: %+v", trimmed)
	}
	if excluded(trimmed, sources) != excluded(full, sources) || family(trimmed) != family(full) {
		t.Errorf("trimmed copy decides differently: %q vs %q", excluded(trimmed, sources), excluded(full, sources))
	}
}

// sources stand for a backend's address-source annotations: the core is
// told them, as cmd/manager is by its flag.
var sources = []string{"metallb.io/loadBalancerIPs", "metallb.io/address-pool", "metallb.io/allow-shared-ip",
	"metallb.universe.tf/loadBalancerIPs", "example.net/pool", "example.net/shared-with"}

// forged is c without the core's mark: a claim someone else created with
// the Service as its controller.
func forged(c *v1alpha1.IPAddressClaim) *v1alpha1.IPAddressClaim {
	delete(c.Annotations, v1alpha1.AnnotationAutoClaimedFor)
	return c
}

func withdrawing(c *v1alpha1.IPAddressClaim) *v1alpha1.IPAddressClaim {
	c.DeletionTimestamp = &metav1.Time{}
	return c
}

// holdsAddress: the claim reports ip bound.
func holdsAddress(c *v1alpha1.IPAddressClaim, ip string) *v1alpha1.IPAddressClaim {
	name, _ := v1alpha1.IPAddressName(ip)
	c.Status.Phase = v1alpha1.ClaimBound
	c.Status.Addresses = []v1alpha1.ClaimedAddress{{Name: name, Address: ip}}
	return c
}

// Only the class events auto-claim reads wake every unclaimed Service: a
// class's counts change with every bind.
func TestMarkMoved(t *testing.T) {
	class := func(mark string, deleting bool, bound int64) *v1alpha1.IPAddressClass {
		c := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
		if mark != "" {
			c.Annotations = map[string]string{v1alpha1.AnnotationAutoClaimClass: mark}
		}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{}
		}
		c.Status.Addresses = []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Bound: bound}}
		return c
	}
	for _, tc := range []struct {
		name          string
		before, after *v1alpha1.IPAddressClass
		want          bool
	}{
		{"1 counts only", class("true", false, 1), class("true", false, 2), false},
		{"2 marked", class("", false, 1), class("true", false, 1), true},
		{"3 unmarked", class("true", false, 1), class("false", false, 1), true},
		{"4 deletion begun", class("true", false, 1), class("true", true, 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := markMoved.Update(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after}); got != tc.want {
				t.Errorf("markMoved = %v, want %v", got, tc.want)
			}
		})
	}
	if !markMoved.Create(event.CreateEvent{Object: class("", false, 0)}) || !markMoved.Delete(event.DeleteEvent{Object: class("", false, 0)}) {
		t.Error("5 a class created or deleted is passed")
	}
}

// The controller looks no further at a Service auto-claim does nothing for,
// but one left out only for the address it has while naming a class is
// looked at: it is told the class is not applied.
func TestIgnored(t *testing.T) {
	withAddress := func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	}
	named := annotated(v1alpha1.AnnotationIPAddressClass, "private")
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want bool
	}{
		{"qualifies", newService(), false},
		{"an address, no class named", newService(withAddress), true},
		{"an address and a class named: told", newService(withAddress, named), false},
		{"opted out, a class named", newService(named, annotated(v1alpha1.AnnotationAutoClaim, "false")), true},
		{"not a LoadBalancer, a class named", newService(named, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), true},
	} {
		if got := ignored(tc.svc, snapshot{service: tc.svc}); got != tc.want {
			t.Errorf("%s: ignored = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A Service naming a missing claim is told once the claim has been missing
// for the grace; naming another claim starts the grace again, and a claim
// found forgets it.
func TestMissingFor(t *testing.T) {
	now := time.Unix(1000, 0)
	r := &Reconciler{now: func() time.Time { return now }}
	key := types.NamespacedName{Namespace: "tenant", Name: "web"}
	if got := r.missingFor(key, "typo"); got != namedGrace {
		t.Errorf("first seen: %v left, want %v", got, namedGrace)
	}
	now = now.Add(4 * time.Second)
	if got := r.missingFor(key, "typo"); got != namedGrace-4*time.Second {
		t.Errorf("4s on: %v left", got)
	}
	if got := r.missingFor(key, "other"); got != namedGrace {
		t.Errorf("another claim named: %v left, want the whole grace", got)
	}
	now = now.Add(namedGrace)
	if got := r.missingFor(key, "other"); got != 0 {
		t.Errorf("past the grace: %v left, want 0", got)
	}
	r.found(key)
	if got := r.missingFor(key, "other"); got != namedGrace {
		t.Errorf("found, then missing again: %v left, want the whole grace", got)
	}
}

func TestNamesMissingMessage(t *testing.T) {
	e := namesMissing(newService(), "typo")
	const want = "IPAddressClaim typo, which annotation local.sdn.cozystack.io/ip-address-claim names, does not exist in namespace tenant: " +
		"the Service gets no address from it; create the claim, or remove the annotation (where auto-claim applies, the Service then gets a claim of its own)"
	if e.Message != want || e.Reason != v1alpha1.ReasonClaimNotFound || !e.Once || e.Type != corev1.EventTypeWarning {
		t.Errorf("event %+v, want a WarningOnce %s %q", e, v1alpha1.ReasonClaimNotFound, want)
	}
}
