package autoclaim

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/recorder"
)

// snapshot is everything one pass decides on.
type snapshot struct {
	service *corev1.Service
	classes []v1alpha1.IPAddressClass
	// claim is the claim named after the Service in its namespace, if any.
	claim *v1alpha1.IPAddressClaim
	// sources are the backends' annotations by which a Service chooses its
	// own address source (configuration: the core knows no backend).
	sources []string
}

// plan is what one pass writes: the claim to create (or the claim to
// delete), then the annotation.
type plan struct {
	create *v1alpha1.IPAddressClaim
	remove *v1alpha1.IPAddressClaim
	// retarget is what the Service's own claim, holding no address yet,
	// is to ask for instead: a class and a family.
	retarget *v1alpha1.IPAddressClaimSpec
	// annotate names the claim to write into the Service's annotation.
	annotate string
	events   []recorder.Event
}

// decide runs contract §10 over s. A claim the core created for the
// Service ends annotated on it or deleted, never held for nobody: MetalLB
// may assign the Service an address between the claim's creation and the
// annotation (the patch then conflicts, and the Service no longer
// qualifies), and the Service may be changed to choose its address itself.
func decide(s snapshot) plan {
	svc := s.service
	if names := svc.Annotations[v1alpha1.AnnotationIPAddressClaim]; names == svc.Name && waitingOwn(s) {
		return follow(s)
	}
	if outOfScope(svc) {
		return plan{events: strayOwn(s)}
	}
	if s.claim != nil && controlledBy(s.claim, svc) {
		if s.claim.DeletionTimestamp != nil {
			return plan{} // withdrawn already: its deletion is under way
		}
		if why := excluded(svc, ownSources(s)); why != "" && why != hasAddress {
			if len(s.claim.Status.Addresses) > 0 && !optsOut(svc) {
				// Its addresses are the Service's until the Service goes or
				// opts out: turned ClusterIP, say, it keeps them reserved
				// for when it is a LoadBalancer again.
				return plan{annotate: svc.Name}
			}
			return plan{remove: s.claim, events: []recorder.Event{recorder.Normal(svc, v1alpha1.ReasonAutoClaimWithdrawn,
				"deleted IPAddressClaim %s, created for this Service, which no longer qualifies for auto-claim: %s", s.claim.Name, why)}}
		}
		return plan{annotate: svc.Name}
	}
	if why := excluded(svc, s.sources); why != "" {
		return plan{events: skipped(svc, why)}
	}
	class, ok, rec := autoClaimClass(svc, s.classes)
	if !ok {
		if rec != nil {
			return plan{events: []recorder.Event{*rec}}
		}
		return plan{}
	}
	if s.claim == nil {
		events := []recorder.Event{recorder.Normal(svc, v1alpha1.ReasonAutoClaimed,
			"created IPAddressClaim %s of class %q (%s) for this Service", svc.Name, class, family(svc))}
		if !slices.ContainsFunc(s.classes, func(c v1alpha1.IPAddressClass) bool { return c.Name == class }) {
			// Named on the Service, and not there: the claim waits for it
			// (ClassNotFound), and follows the annotation once corrected.
			events = append(events, recorder.WarningOnce(svc, v1alpha1.ReasonClassNotFound,
				"IPAddressClass %s, which annotation %s names, does not exist: IPAddressClaim %s waits for it; correct the annotation and the claim follows it",
				class, v1alpha1.AnnotationIPAddressClass, svc.Name))
		}
		return plan{create: newClaim(svc, class), annotate: svc.Name, events: events}
	}
	if leaving(s.claim, svc) {
		return plan{} // its going wakes the Service (namesake)
	}
	return plan{events: []recorder.Event{recorder.WarningOnce(svc, v1alpha1.ReasonClaimNotAdopted,
		"IPAddressClaim %s exists and is not controlled by this Service; it is not adopted. Name it with the %s annotation to use it",
		svc.Name, v1alpha1.AnnotationIPAddressClaim)}}
}

// skipped tells a Service left out for a reason it may not have meant: an
// auto-claim annotation that says neither true nor false (unclear), or
// the address it has (skippedClass); nil for any other reason.
func skipped(svc *corev1.Service, why string) []recorder.Event {
	if why == unclear {
		return []recorder.Event{recorder.WarningOnce(svc, v1alpha1.ReasonAutoClaimSkipped,
			"annotation %s is %q, which is neither \"true\" nor \"false\": the Service is not auto-claimed; write \"false\" to opt out, or remove it",
			v1alpha1.AnnotationAutoClaim, svc.Annotations[v1alpha1.AnnotationAutoClaim])}
	}
	return skippedClass(svc, why)
}

// skippedClass tells a Service that names a class and does not qualify
// only because it has an address — MetalLB's, from a pool that assigns by
// itself, reached first — that the class it asked for is not applied (§10:
// a Service with an address is never moved to a new one), and how to get
// one of it.
func skippedClass(svc *corev1.Service, why string) []recorder.Event {
	class := svc.Annotations[v1alpha1.AnnotationIPAddressClass]
	if why != hasAddress || class == "" {
		return nil
	}
	var ips []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			ips = append(ips, in.IP)
		}
	}
	return []recorder.Event{recorder.WarningOnce(svc, v1alpha1.ReasonAutoClaimSkipped,
		"%s %q is not applied: the Service already has an address (%s), and auto-claim never moves a Service off one it has; "+
			"to take an address of class %q, create an IPAddressClaim of that class and name it with the %s annotation",
		v1alpha1.AnnotationIPAddressClass, class, strings.Join(ips, ", "), class, v1alpha1.AnnotationIPAddressClaim)}
}

// strayOwn tells a Service that names another claim than the one the core
// created for it, which holds addresses: they stay reserved for the
// Service, and counted against its namespace's quota, until that claim is
// deleted or named again — auto-claim never deletes a claim that holds
// addresses for a Service that has not gone or opted out, and the tenant
// may be trying the other claim for a while.
func strayOwn(s snapshot) []recorder.Event {
	svc, c := s.service, s.claim
	names := svc.Annotations[v1alpha1.AnnotationIPAddressClaim]
	if svc.DeletionTimestamp != nil || names == "" || names == svc.Name || c == nil || !controlledBy(c, svc) ||
		c.DeletionTimestamp != nil || len(c.Status.Addresses) == 0 {
		return nil
	}
	ips := make([]string, len(c.Status.Addresses))
	for i, a := range c.Status.Addresses {
		ips[i] = a.Address
	}
	return []recorder.Event{recorder.WarningOnce(svc, v1alpha1.ReasonAutoClaimNotNamed,
		"IPAddressClaim %s, created for this Service, holds %s for it while the Service names IPAddressClaim %s: "+
			"those addresses stay reserved, and count against the namespace's quota, until the claim is deleted (which releases them) or named again",
		c.Name, strings.Join(ips, " and "), names)}
}

// namedGrace is how long a Service may name a claim its namespace does not
// have before it is told: a Service and its claim applied together arrive
// in either order.
const namedGrace = 10 * time.Second

// namesMissing is the warning on a LoadBalancer Service naming claim, which
// its namespace does not have: no address comes from a claim that does not
// exist, and auto-claim leaves alone a Service that names one.
func namesMissing(svc *corev1.Service, claim string) recorder.Event {
	return recorder.WarningOnce(svc, v1alpha1.ReasonClaimNotFound,
		"IPAddressClaim %s, which annotation %s names, does not exist in namespace %s: the Service gets no address from it; "+
			"create the claim, or remove the annotation (where auto-claim applies, the Service then gets a claim of its own)",
		claim, v1alpha1.AnnotationIPAddressClaim, svc.Namespace)
}

// ignored says whether a Service in scope is one auto-claim has nothing
// to do for: it does not qualify, nothing was created for it, and it is
// not to be told that the class it names is not applied (skippedClass).
func ignored(svc *corev1.Service, s snapshot) bool {
	why := excluded(svc, s.sources)
	return why != "" && (s.claim == nil || !controlledBy(s.claim, svc)) && len(skipped(svc, why)) == 0
}

// waitingOwn says whether s's claim is one the core created for the
// Service that holds no address yet: it may still follow the Service.
func waitingOwn(s snapshot) bool {
	c := s.claim
	return c != nil && c.DeletionTimestamp == nil && controlledBy(c, s.service) && s.service.DeletionTimestamp == nil &&
		len(c.Status.Addresses) == 0 && c.Status.Phase != v1alpha1.ClaimBound && c.Status.Phase != v1alpha1.ClaimLost
}

// follow re-targets the Service's own claim, which holds no address yet, at
// the class auto-claim names for the Service now and the family it has
// now: its ip-address-class annotation corrected (a class that does not
// exist left the claim waiting for good), the auto-claim mark moved to
// another class, or the Service made dual-stack (its claim's one address
// would never be attached to it). Once the claim holds an address its
// class and family are fixed, as any claim's.
func follow(s snapshot) plan {
	class, ok, _ := autoClaimClass(s.service, s.classes)
	if !ok {
		return plan{}
	}
	was := s.claim.Spec
	now := v1alpha1.IPAddressClaimSpec{ClassName: class, Family: family(s.service)}
	if now.ClassName == was.ClassName && now.Family == orIPv4(was.Family) {
		return plan{}
	}
	return plan{retarget: &now, events: []recorder.Event{recorder.Normal(s.service, v1alpha1.ReasonAutoClaimed,
		"IPAddressClaim %s, created for this Service and holding no address yet, now asks for %s of class %q instead of %s of class %q",
		s.claim.Name, now.Family, now.ClassName, orIPv4(was.Family), was.ClassName)}}
}

// orIPv4 is f, or IPv4 for a family left empty (its default).
func orIPv4(f v1alpha1.IPFamily) v1alpha1.IPFamily {
	if f == "" {
		return v1alpha1.IPv4
	}
	return f
}

// ownSources are the backends' annotations that, on s's Service, say it
// chose its own address source. None while the claim the core created for
// it holds addresses: those annotations are then its driver's pins of the
// claim's addresses (the Service lost its claim annotation, say), and
// withdrawing the claim for them would delete the addresses the Service
// holds. Opting out still gives the claim up.
func ownSources(s snapshot) []string {
	if s.claim != nil && len(s.claim.Status.Addresses) > 0 {
		return nil
	}
	return s.sources
}

// outOfScope: auto-claim neither creates nor withdraws anything for a
// Service being deleted (its own claim goes with it, by garbage
// collection) or for one that names a claim (it has chosen one).
func outOfScope(svc *corev1.Service) bool {
	return svc.DeletionTimestamp != nil || svc.Annotations[v1alpha1.AnnotationIPAddressClaim] != ""
}

// unclear is why a Service whose auto-claim annotation says neither true
// nor false ("no", "off", "0") does not qualify: a claim it did not
// clearly ask for would take a reserved address and count against its
// quota. Only a clear "false" withdraws a claim (optsOut).
const unclear = "its auto-claim annotation says neither true nor false"

// optsOut says whether the Service opts out of auto-claim: its auto-claim
// annotation is "false", in any case.
func optsOut(svc *corev1.Service) bool {
	return strings.EqualFold(svc.Annotations[v1alpha1.AnnotationAutoClaim], "false")
}

// hasAddress is why a Service that has an address does not qualify; it
// comes last among the reasons, as the only one the Service did not choose.
const hasAddress = "already has an address"

// excluded says why a Service does not qualify for auto-claim, or "".
func excluded(svc *corev1.Service, sources []string) string {
	a := svc.Annotations
	switch {
	case svc.Spec.Type != corev1.ServiceTypeLoadBalancer:
		return "not a LoadBalancer"
	case optsOut(svc):
		return "opted out"
	case a[v1alpha1.AnnotationAutoClaim] != "" && !strings.EqualFold(a[v1alpha1.AnnotationAutoClaim], "true"):
		return unclear
	case ptr.Deref(svc.Spec.LoadBalancerClass, "") != "":
		return "another load-balancer implementation's"
	case svc.Spec.LoadBalancerIP != "":
		return "asks for a specific address"
	}
	for _, k := range sources {
		if _, ok := a[k]; ok {
			return "chose its address source with " + k
		}
	}
	if len(svc.Status.LoadBalancer.Ingress) > 0 {
		return hasAddress
	}
	return ""
}

// autoClaimClass is the Service's ip-address-class annotation, else the
// single class marked is-auto-claim-class. None marked: no class and no
// event. Several: no class and a warning. A class being deleted is no
// class either, named or marked: a claim made now would outlive it,
// Pending, and hold its namespace's deletion once the controllers are gone.
func autoClaimClass(svc *corev1.Service, classes []v1alpha1.IPAddressClass) (string, bool, *recorder.Event) {
	if c := svc.Annotations[v1alpha1.AnnotationIPAddressClass]; c != "" {
		if i := slices.IndexFunc(classes, func(k v1alpha1.IPAddressClass) bool { return k.Name == c }); i >= 0 && classes[i].DeletionTimestamp != nil {
			e := recorder.WarningOnce(svc, v1alpha1.ReasonAutoClaimRefused,
				"IPAddressClass %s, which annotation %s names, is being deleted; no claim is created for this Service", c, v1alpha1.AnnotationIPAddressClass)
			return "", false, &e
		}
		return c, true, nil
	}
	marked := binding.AnnotatedClasses(classes, v1alpha1.AnnotationAutoClaimClass)
	switch len(marked) {
	case 0:
		return "", false, nil
	case 1:
		return marked[0], true, nil
	}
	e := recorder.WarningOnce(svc, v1alpha1.ReasonMultipleAutoClaimClasses,
		"%d classes are marked %s (%s); nothing is claimed until one is, or the Service names a class with %s",
		len(marked), v1alpha1.AnnotationAutoClaimClass, strings.Join(marked, ", "), v1alpha1.AnnotationIPAddressClass)
	return "", false, &e
}

// family derives the claim's family from the Service: Dual only when it
// requires dual-stack, else its primary family.
func family(svc *corev1.Service) v1alpha1.IPFamily {
	switch {
	case ptr.Deref(svc.Spec.IPFamilyPolicy, "") == corev1.IPFamilyPolicyRequireDualStack:
		return v1alpha1.Dual
	case len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol:
		return v1alpha1.IPv6
	default:
		return v1alpha1.IPv4
	}
}

func newClaim(svc *corev1.Service, class string) *v1alpha1.IPAddressClaim {
	return &v1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: svc.Name,
			Annotations: map[string]string{v1alpha1.AnnotationAutoClaimedFor: string(svc.UID)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: class, Family: family(svc)},
	}
}

// leaving says whether a namesake claim the Service does not control is on
// its way out: being deleted, or controlled by an earlier Service of the
// name, deleted and created again, which garbage collection deletes. It is
// no one's to adopt, and the Service is claimed for once it is gone.
func leaving(claim *v1alpha1.IPAddressClaim, svc *corev1.Service) bool {
	ref := metav1.GetControllerOf(claim)
	return claim.DeletionTimestamp != nil ||
		ref != nil && ref.APIVersion == "v1" && ref.Kind == "Service" && ref.Name == svc.Name && ref.UID != svc.UID
}

// controlledBy says whether the core created claim for svc: the Service is
// its controller, and the core's mark (which nobody else may write) names
// it. A controller reference alone anyone creating the claim could write:
// the core would then name the claim on a Service its writer may not edit,
// or delete a claim it never created.
func controlledBy(claim *v1alpha1.IPAddressClaim, svc *corev1.Service) bool {
	ref := metav1.GetControllerOf(claim)
	return ref != nil && ref.UID == svc.UID && claim.Annotations[v1alpha1.AnnotationAutoClaimedFor] == string(svc.UID)
}
