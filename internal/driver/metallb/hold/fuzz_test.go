package hold

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/core/webhook"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/driver/metallb/metallbtest"
	"github.com/cozystack/address-controller/internal/fuzzbytes"
)

// fuzzBytes hands out fuzzed bytes, zeros once they run out.
type fuzzBytes = fuzzbytes.Bytes

const (
	phNamespace = "metallb-iad-system"
	elsewhereIP = "198.51.100.7" // another claim's address
)

// fuzzWorld is what the API server holds for one pass: the address, its
// claim's other address, the tenant Services and the placeholders, in any
// state — markers copied, keys changed — but for MetalLB's books, which
// only ever give an address to Services that can share it.
type fuzzWorld struct {
	address, sibling *v1alpha1.IPAddress
	claimLive        bool
	class            metallb.Class
	covering         string
	services         []*corev1.Service // tenant Services, then placeholders
	otherReserved    bool
}

// fuzzService builds tenant Service i from three bytes: namespace, type,
// the claim it names, deletion, age (s0); the driver's pin, withdrawn pin,
// a copied marker, a pin of its own or of another claim's address, its
// sharing key, the handoff finalizer, what MetalLB assigned it (s1); its
// ports, traffic policy, families and MetalLB requests by other means (s2).
func fuzzService(i int, ip, sib string, s0, s1, s2 byte) *corev1.Service {
	namespace := ns
	if s0&1 != 0 {
		namespace = "other"
	}
	mods := []func(*corev1.Service){}
	if s0>>1&3 == 3 {
		mods = append(mods, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP })
	}
	switch s0 >> 3 & 3 {
	case 1, 2:
		mods = append(mods, naming("web"))
	case 3:
		mods = append(mods, naming("db"))
	}
	if s0&32 != 0 {
		mods = append(mods, terminating)
	}
	if s0&64 != 0 {
		mods = append(mods, later)
	}
	switch s1 & 7 {
	case 1:
		mods = append(mods, pinnedBy(ip))
	case 2:
		mods = append(mods, pinnedBy(metallb.FormatIPs(metallb.ParseIPs(ip+","+sib))))
	case 3:
		mods = append(mods, withdrawn(ip))
	case 4: // a copied marker alone
		mods = append(mods, annotated(metallb.AnnotationPinned, ip))
	case 5: // a copied pin and marker, under its own key
		mods = append(mods, annotated(metallb.AnnotationLoadBalancerIPs, ip, metallb.AnnotationPinned, ip, metallb.AnnotationAllowSharedIP, "theirs"))
	case 6: // a pin of its own
		mods = append(mods, annotated(metallb.AnnotationLoadBalancerIPs, ip))
	case 7:
		mods = append(mods, pinnedBy(elsewhereIP))
	}
	switch s1 >> 3 & 3 {
	case 1:
		mods = append(mods, func(s *corev1.Service) { delete(s.Annotations, metallb.AnnotationAllowSharedIP) })
	case 2:
		mods = append(mods, annotated(metallb.AnnotationAllowSharedIP, "theirs"))
	case 3:
		mods = append(mods, annotated(metallb.AnnotationAllowSharedIP, sharingKeyPrefix+"old"))
	}
	if s1&32 != 0 {
		mods = append(mods, func(s *corev1.Service) {
			if !controllerutil.RemoveFinalizer(s, metallb.FinalizerHandoff) {
				controllerutil.AddFinalizer(s, metallb.FinalizerHandoff)
			}
		})
	}
	switch s1 >> 6 {
	case 1:
		mods = append(mods, holding(ip))
	case 2:
		mods = append(mods, holding(sib))
	case 3:
		mods = append(mods, holding(ip, sib))
	}
	mods = append(mods, onPort([]int32{80, 443, 65535, 65534}[s2&3]))
	if s2&4 != 0 {
		mods = append(mods, func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.Selector = map[string]string{"app": []string{"x", "y"}[s2>>3&1]}
		})
	}
	if f := [][]corev1.IPFamily{nil, {corev1.IPv4Protocol}, {corev1.IPv6Protocol}, {corev1.IPv4Protocol, corev1.IPv6Protocol}}[s2>>4&3]; f != nil {
		mods = append(mods, func(s *corev1.Service) { s.Spec.IPFamilies = f })
	}
	if s2&64 != 0 {
		mods = append(mods, func(s *corev1.Service) { s.Spec.LoadBalancerIP = ip })
	}
	if s2&128 != 0 {
		mods = append(mods, annotated(metallb.LegacyLoadBalancerIPs, ip))
	}
	return svc(namespace, []string{"a", "b", "c", "d"}[i], mods...)
}

// fuzzPlaceholder is the placeholder of ip in one of its states (three
// bits: none, or under the claim's key, none, another claim's; holding
// ip; moved off port 65535).
func fuzzPlaceholder(ip string, bits byte) *corev1.Service {
	if bits&3 == 0 {
		return nil
	}
	var mods []func(*corev1.Service)
	if bits&4 != 0 {
		mods = append(mods, holding(ip))
	}
	if bits&8 != 0 {
		mods = append(mods, func(s *corev1.Service) { s.Spec.Ports[0].Port = 65534 })
	}
	return ph(ip, []string{"", key, "", sharingKeyPrefix + "old"}[bits&3], mods...)
}

func fuzzWorldOf(b fuzzBytes) fuzzWorld {
	b0, b1, b2 := b.Next(), b.Next(), b.Next()
	ip, sib := v4, v6
	if b0&1 != 0 {
		ip, sib = v6, v4
	}
	phases := []v1alpha1.AddressPhase{v1alpha1.AddressPending, v1alpha1.AddressAvailable, v1alpha1.AddressBound, v1alpha1.AddressReleased,
		v1alpha1.AddressConflict, v1alpha1.AddressLost, v1alpha1.AddressBound, ""}
	a := addr(ip, v1alpha1.AddressBound)
	switch phase := phases[b0>>1&7]; phase {
	case v1alpha1.AddressConflict, v1alpha1.AddressLost:
		a.Status.Phase = phase // over the core's Bound
	case "":
		a.Status = v1alpha1.IPAddressStatus{}
	default:
		a = addr(ip, phase)
	}
	if b0&16 != 0 {
		deleting(a)
	}
	if b0&32 != 0 {
		noFinalizer(a)
	}
	switch b0 >> 6 {
	case 2:
		a.Spec.ClaimRef.UID = "" // pre-bound
	case 3:
		unbound(a)
	}
	w := fuzzWorld{address: a, claimLive: b1&1 != 0 && b1&2 == 0, otherReserved: b1&128 != 0}
	if b1&4 != 0 {
		w.sibling = addr(sib, []v1alpha1.AddressPhase{v1alpha1.AddressBound, v1alpha1.AddressPending}[b1>>3&1])
		if b1&16 != 0 {
			deleting(w.sibling)
		}
	}
	unparsed := metallb.Class{Name: "public", Refusal: `spec.parameters: json: unknown field "note"`}
	switch b1 >> 5 & 3 {
	case 0:
		w.class, w.covering = inPool, "public"
	case 1:
		w.class = metallbtest.Class("198.51.100.0/24")
	case 2:
		w.class = metallb.Class{Name: "public", PoolName: "public", Refusal: "IPAddressPool metallb-system/public not found"}
	case 3:
		w.class, w.covering = unparsed, "public"
	}

	for i := range int(b.Next() % 5) {
		w.services = append(w.services, fuzzService(i, ip, sib, b.Next(), b.Next(), b.Next()))
	}
	// The record and associatedTo name tenant Services by index.
	ref := func(i byte) *v1alpha1.HeldReference {
		if len(w.services) == 0 {
			return &v1alpha1.HeldReference{Kind: "Service", Namespace: ns, Name: "gone", UID: "gone"}
		}
		return heldRef(w.services[int(i)%len(w.services)])
	}
	if b2&1 != 0 {
		r := ref(b2 >> 3)
		a.Status.AssociatedTo = &v1alpha1.WorkloadReference{Kind: "Service", Namespace: r.Namespace, Name: r.Name}
	}
	if kind := b2 >> 1 & 3; kind != 0 {
		h := &v1alpha1.Holding{Since: &metav1.Time{Time: now.Add(-time.Minute)}}
		if kind&1 != 0 {
			h.Workload = ref(b2 >> 3)
		}
		if kind&2 != 0 {
			if from := ref(b2 >> 5); h.Workload == nil || from.UID != h.Workload.UID {
				h.From = append(h.From, *from)
			}
		}
		if b2&128 != 0 && h.Workload != nil {
			h.Workload.UID = "an-earlier-service-of-that-name"
		}
		a.Status.Holding = h
	}
	pbits := b.Next()
	if p := fuzzPlaceholder(ip, pbits&15); p != nil {
		w.services = append(w.services, p)
	}
	if p := fuzzPlaceholder(sib, pbits>>4); p != nil && w.sibling != nil {
		w.services = append(w.services, p)
	}
	// The driver's conditions, as an earlier pass left them (whatever the
	// phase), and a pool elsewhere no more.
	if c := b.Next(); c != 0 {
		if c&1 != 0 {
			binding.SetCondition(&a.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionTrue,
				Reason: metallb.ReasonUnauthorizedHolder}, now.Add(-time.Minute))
		}
		if c&2 != 0 {
			binding.SetCondition(&a.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionInBackend, Status: metav1.ConditionFalse,
				Reason: metallb.ReasonNotInPool}, now.Add(-time.Minute))
		}
		if c&4 != 0 {
			w.covering = ""
		}
	}
	// MetalLB's books: the holders of an address can share it. A Service
	// that could not share with an earlier holder does not hold it.
	for _, x := range []string{ip, sib} {
		var holders []*corev1.Service
		for _, svc := range w.services {
			if !metallb.Holds(svc, netip.MustParseAddr(x)) {
				continue
			}
			if slices.ContainsFunc(holders, func(h *corev1.Service) bool { return !compatible(h, svc) }) {
				svc.Status.LoadBalancer.Ingress = slices.DeleteFunc(svc.Status.LoadBalancer.Ingress,
					func(in corev1.LoadBalancerIngress) bool { return in.IP == x })
				continue
			}
			holders = append(holders, svc)
		}
	}
	return w
}

// gatherFrom is the snapshot the reconciler's real gather reads from a
// fake API server holding the world (snapshotOf): the claim when it is
// live, the world's Services and placeholders, and — when the world says
// so — the other addresses its Services' markers name, still reserved.
func gatherFrom(t *testing.T, w fuzzWorld) snapshot {
	t.Helper()
	objs := []client.Object{w.address}
	if w.sibling != nil {
		objs = append(objs, w.sibling)
	}
	if w.claimLive {
		objs = append(objs, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: claimID}})
	}
	known := map[string]bool{w.address.Name: true}
	if w.sibling != nil {
		known[w.sibling.Name] = true
	}
	for _, x := range w.services {
		objs = append(objs, x)
		for _, ip := range marker(x) {
			if name, _ := v1alpha1.IPAddressName(ip.String()); w.otherReserved && !known[name] {
				known[name] = true
				objs = append(objs, addr(ip.String(), v1alpha1.AddressBound))
			}
		}
	}
	return gather(t, objs, w.address, judged{class: w.class, covering: w.covering})
}

// driverAnnotations are the annotations the driver writes on a tenant's
// Service.
var driverAnnotations = []string{metallb.AnnotationLoadBalancerIPs, metallb.AnnotationPinned, metallb.AnnotationAllowSharedIP}

// withoutDriverFields is svc without what the driver may write on it.
func withoutDriverFields(svc *corev1.Service, placeholder bool) *corev1.Service {
	out := svc.DeepCopy()
	keys := driverAnnotations
	if placeholder {
		keys = placeholderAnnotations
		out.Spec.Ports, out.Spec.ExternalTrafficPolicy, out.Spec.Selector, out.Spec.HealthCheckNodePort = nil, "", nil, 0
		out.OwnerReferences = nil
	}
	for _, k := range keys {
		delete(out.Annotations, k)
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	controllerutil.RemoveFinalizer(out, metallb.FinalizerHandoff)
	if len(out.Finalizers) == 0 {
		out.Finalizers = nil
	}
	return out
}

// compatible reports whether MetalLB lets x and y hold one address
// together: one non-empty key, no port in common, one backend.
func compatible(x, y *corev1.Service) bool {
	k := metallb.SharingKey(x)
	return k != "" && metallb.SharingKey(y) == k && shares(x, y, k)
}

func sharingOf(svc *corev1.Service) string {
	ports := make([]string, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		ports = append(ports, string(p.Protocol)+"/"+strconv.Itoa(int(p.Port)))
	}
	return metallb.SharingKey(svc) + "|" + strings.Join(ports, ",") + "|" + backend(svc)
}

var (
	driverUser = authenticationv1.UserInfo{Username: "driver"}
	principals = webhook.Principals{Core: []string{"core"}, Drivers: []string{"driver"}}
)

// FuzzDecide runs the hold reconciler over fuzzed worlds: an address in
// any phase, with or without a holding record, its claim, and Services in
// every state, markers copied or not. A pass edits only the address's
// placeholder, the Services its record names and the claim's own Service,
// and on those only the driver's fields; it pins only the claim's Service,
// recording it first, with the claim's addresses; it writes only the
// driver's share of the address status; and it never deletes the
// placeholder nor releases a Service while it alone may hold the address.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x04, 0x01, 0x00, 1, 0x08, 0x00, 0x00, 0x05})                                     // attach: a Service naming the claim, the placeholder holding
	f.Add([]byte{0x04, 0x01, 0x03, 1, 0x08, 0x41, 0x00, 0x05})                                     // attached and recorded
	f.Add([]byte{0x04, 0x01, 0x03, 2, 0x00, 0x41, 0x00, 0x08, 0x00, 0x01, 0x00})                   // move: the recorded Service no longer names the claim, another does, on another port
	f.Add([]byte{0x14, 0x01, 0x03, 1, 0x00, 0x41, 0x00, 0x05})                                     // teardown of a recorded Service
	f.Add([]byte{0x04, 0x05, 0x01, 2, 0x08, 0x42, 0x30, 0x01, 0x45, 0x00, 0x55})                   // dual stack attached before records existed; a copy of the pin elsewhere
	f.Add([]byte{0x04, 0x01, 0x03, 1, 0x08, 0x51, 0x00, 0x01})                                     // the pinned Service's key was changed
	f.Add([]byte{0xc6, 0x80, 0x01, 3, 0x01, 0x45, 0x00, 0x00, 0x46, 0x40, 0x09, 0x87, 0x00, 0x07}) // unbound, strangers
	f.Add([]byte("$100\bY10X"))                                                                    // a stranger shares with the workload under its old key: no re-pin
	f.Add([]byte("\xc60100970X00007"))                                                             // a stranger shares with the placeholder: no re-shaping it
	f.Fuzz(func(t *testing.T, data []byte) {
		w := fuzzWorldOf(data)
		s := gatherFrom(t, w)
		a := s.address
		// The Services as the pass saw them (the API server's versions).
		saw := map[types.UID]*corev1.Service{}
		for _, x := range slices.Concat(s.holders, s.requesters, s.pinned, s.candidates, slices.Collect(maps.Values(s.placeholders))) {
			saw[x.UID] = x
		}
		seen := map[types.UID]*corev1.Service{}
		for uid, x := range saw {
			seen[uid] = x.DeepCopy()
		}
		before := a.DeepCopy()
		p := decide(s)
		if !equality.Semantic.DeepEqual(before, a) {
			t.Fatalf("decide changed the address")
		}
		for _, x := range saw {
			if !equality.Semantic.DeepEqual(seen[x.UID], x) {
				t.Fatalf("decide changed Service %s/%s", x.Namespace, x.Name)
			}
		}

		phSvc := s.placeholders[s.ip]
		isPh := func(x *corev1.Service) bool { return phSvc != nil && x.UID == phSvc.UID }
		in := func(list []*corev1.Service, x *corev1.Service) bool {
			return slices.ContainsFunc(list, func(o *corev1.Service) bool { return o.UID == x.UID })
		}
		// The claim's own Service is the workload the pass attaches to.
		wl := workload(s, &plan{})
		own := func(x *corev1.Service) bool { return wl != nil && x.UID == wl.UID }
		after := map[types.UID]*corev1.Service{}
		for _, x := range w.services {
			after[x.UID] = x
		}

		// What is written, and to whom.
		if len(p.create) > 1 || len(p.create) == 1 && phSvc != nil {
			t.Fatalf("creates %d placeholders, one existing: %v", len(p.create), phSvc != nil)
		}
		for _, c := range p.create {
			if c.Namespace != phNamespace || c.Name != a.Name || c.Labels[metallb.LabelAddress] != a.Name ||
				c.Annotations[metallb.AnnotationLoadBalancerIPs] != s.ip.String() || len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != a.UID {
				t.Fatalf("created %s/%s, not the address's placeholder: %+v", c.Namespace, c.Name, c.ObjectMeta)
			}
			after[c.UID] = c
		}
		for _, x := range p.remove {
			if !isPh(x) {
				t.Fatalf("deletes %s/%s, not the address's placeholder", x.Namespace, x.Name)
			}
			delete(after, x.UID)
		}
		edited := map[types.UID]bool{}
		for _, e := range p.update {
			from, to := e.from, e.to
			switch {
			case edited[from.UID]:
				t.Fatalf("edits %s/%s twice", from.Namespace, from.Name)
			case !isPh(from) && !in(s.pinned, from) && !own(from):
				t.Fatalf("edits %s/%s, which is neither the placeholder, recorded (%+v), nor the claim's workload (%v)",
					from.Namespace, from.Name, a.Status.Holding, wl != nil)
			case !equality.Semantic.DeepEqual(from, seen[from.UID]):
				t.Fatalf("the edit of %s/%s is based on another version than the pass saw", from.Namespace, from.Name)
			case !equality.Semantic.DeepEqual(withoutDriverFields(from, isPh(from)), withoutDriverFields(to, isPh(from))):
				t.Fatalf("edits %s/%s beyond the driver's fields", from.Namespace, from.Name)
			}
			edited[from.UID] = true
			after[from.UID] = to
			pins, was := to.Annotations[metallb.AnnotationLoadBalancerIPs], from.Annotations[metallb.AnnotationLoadBalancerIPs]
			if isPh(from) || pins == was {
				continue
			}
			if pins != "" && !own(from) {
				t.Fatalf("pins %s on %s/%s, not the claim's Service", pins, from.Namespace, from.Name)
			}
			if was != "" && was != from.Annotations[metallb.AnnotationPinned] {
				t.Fatalf("takes the pin %s, which is not the driver's, off %s/%s", was, from.Namespace, from.Name)
			}
			for _, pin := range metallb.ParseIPs(pins) {
				if !slices.ContainsFunc(s.siblings, func(x *v1alpha1.IPAddress) bool { return x.Spec.Address == pin.String() && associable(x) }) {
					t.Fatalf("pins %s, not an associable address of the claim, on %s/%s", pin, from.Namespace, from.Name)
				}
			}
		}

		// The address's status: the driver's share only, and the record.
		st := a.Status
		if p.status != nil {
			st = *p.status
			written := a.DeepCopy()
			written.Status = st
			if errs := webhook.ValidateAddressStatusUpdate(a, written, driverUser, principals, field.NewPath("status")); len(errs) != 0 {
				t.Fatalf("the status write is refused admission: %v", errs)
			}
			driverPhase := func(ph v1alpha1.AddressPhase) bool {
				return ph == v1alpha1.AddressConflict || ph == v1alpha1.AddressLost
			}
			if o, n := a.Status.Phase, st.Phase; o != n && !driverPhase(n) && n != binding.CorePhase(&a.Status) {
				t.Fatalf("phase %s becomes %s, not the core's last (%s)", o, n, binding.CorePhase(&a.Status))
			}
		}
		recorded := map[types.UID]bool{}
		for _, r := range recordedRefs(st.Holding) {
			recorded[r.UID] = true
			if p.status == nil {
				continue // not written by this pass
			}
			if svc := after[r.UID]; svc == nil || !in(s.pinned, svc) && !own(svc) {
				t.Fatalf("the record names %s/%s, neither pinned by the driver nor the claim's workload", r.Namespace, r.Name)
			}
		}
		wasRecorded := map[types.UID]bool{}
		for _, r := range recordedRefs(a.Status.Holding) {
			wasRecorded[r.UID] = true
		}
		for _, e := range p.update {
			pins := e.to.Annotations[metallb.AnnotationLoadBalancerIPs]
			newPin := metallb.DriverPinned(e.to) != nil && (pins != e.from.Annotations[metallb.AnnotationLoadBalancerIPs] ||
				pins != e.from.Annotations[metallb.AnnotationPinned])
			if !isPh(e.from) && newPin {
				switch {
				case !recorded[e.from.UID]:
					t.Fatalf("pins %s/%s without recording it", e.from.Namespace, e.from.Name)
				case !wasRecorded[e.from.UID] && !p.recordFirst:
					t.Fatalf("pins %s/%s before the record naming it is written", e.from.Namespace, e.from.Name)
				}
			}
		}

		// No gap: while the address lives, the placeholder goes only once
		// another Service of the driver's holds it, and a Service leaves
		// the driver's hold only once it holds none of its addresses.
		authorized := func(x *corev1.Service) bool { return isPh(x) || in(s.pinned, x) || own(x) }
		if a.DeletionTimestamp == nil {
			for _, x := range p.remove {
				if metallb.Holds(x, s.ip) && !slices.ContainsFunc(s.holders, func(h *corev1.Service) bool {
					return h.UID != x.UID && authorized(h) && after[h.UID] != nil
				}) {
					t.Fatalf("deletes the placeholder while no other Service of the driver holds %s", s.ip)
				}
			}
		}
		for _, e := range p.update {
			if !isPh(e.from) && stillHeld(e.from, s.ip) && !stillHeld(e.to, s.ip) {
				for _, held := range marker(e.from) {
					if metallb.Holds(e.from, held) {
						t.Fatalf("releases %s/%s while it holds %s", e.from.Namespace, e.from.Name, held)
					}
				}
			}
		}

		// Sharing. MetalLB refuses a Service an address another holds and
		// cannot share, and while nobody holds it whichever Service of the
		// driver's gets it is authorized: asking is harmless. A Service
		// let go loses its share on purpose, and one of the driver's that
		// keeps the address when the placeholder or the workload loses its
		// share hands it on later. What loses the address is an edit of
		// the placeholder or the workload that breaks the share it has
		// with a Service the driver does not authorize: MetalLB takes the
		// address from the edited side and leaves it to that Service.
		//
		// decide leaves every Service holding the address alone while a
		// stranger shares it (sharedWithStranger).
		for _, e := range p.update {
			if !isPh(e.from) && !own(e.from) || !metallb.Holds(e.from, s.ip) || !slices.Contains(metallb.RequestedIPs(e.to), s.ip) {
				continue
			}
			for _, h := range s.holders {
				if y := after[h.UID]; h.UID != e.from.UID && y != nil && !authorized(h) && compatible(e.from, h) && !compatible(e.to, y) {
					t.Fatalf("breaks the share of %s between %s/%s (%s, was %s) and the unauthorized %s/%s (%s)", s.ip,
						e.to.Namespace, e.to.Name, sharingOf(e.to), sharingOf(e.from), y.Namespace, y.Name, sharingOf(y))
				}
			}
		}
	})
}
