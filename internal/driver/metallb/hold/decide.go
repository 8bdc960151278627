package hold

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/recorder"
)

// snapshot is everything one pass decides on.
type snapshot struct {
	address *v1alpha1.IPAddress
	ip      netip.Addr
	class   metallb.Class
	// covering is the pool in MetalLB's books that contains ip; empty when
	// none does. It, not the class, is the pool a placeholder names.
	covering string
	// namespace is where placeholders live.
	namespace string
	// claim is the live claim the address is bound to (claimRef with its
	// UID, not being deleted); nil when there is none.
	claim *v1alpha1.IPAddressClaim
	// siblings are the addresses bound to claim, this one included.
	siblings []*v1alpha1.IPAddress
	// candidates are the Services in the claim's namespace naming it.
	candidates []*corev1.Service
	// holders are the Services MetalLB assigned the address to.
	holders []*corev1.Service
	// requesters are the Services asking MetalLB for the address (a pin
	// of it), the driver's pins included.
	requesters []*corev1.Service
	// pinned are the Services carrying the driver's pin of the address.
	pinned []*corev1.Service
	// placeholders are the placeholders of every address this pass may
	// hand off: this one's, its siblings', and those of every address of a
	// pinned Service's marker. reserved tells which of those addresses the
	// driver still holds (stillReserved).
	placeholders map[netip.Addr]*corev1.Service
	reserved     map[netip.Addr]bool
	now          time.Time
}

// plan is what one pass writes, in order.
type plan struct {
	addFinalizer, removeFinalizer bool
	// create, update and remove are Service writes: placeholders and pins.
	create, remove []*corev1.Service
	update         []edit
	// status is the address status to write; nil when unchanged.
	// recordFirst: the holding record gains a Service, so the status is
	// written before the Services.
	status      *v1alpha1.IPAddressStatus
	recordFirst bool
	events      []recorder.Event
}

// edit is a Service write: from, as the pass saw it, becomes to. It is
// sent as a patch of their difference, so the fields the driver's cache
// leaves out of both are never written.
type edit struct{ from, to *corev1.Service }

// edit plans from to become to.
func (p *plan) edit(from, to *corev1.Service) { p.update = append(p.update, edit{from: from, to: to}) }

// ours reports whether the driver holds address a, of class (nil when the
// class is gone): a class of the driver's provisioner, or — its class
// deleted — an address still carrying the driver's teardown finalizer.
func ours(a *v1alpha1.IPAddress, class *v1alpha1.IPAddressClass) bool {
	if class == nil {
		return controllerutil.ContainsFinalizer(a, metallb.FinalizerTeardown)
	}
	return class.Spec.Provisioner == metallb.Provisioner
}

// decide is one pass over an address of the driver's class.
func decide(s snapshot) plan {
	var p plan
	if leaving(s.address) {
		teardown(s, &p)
		keepShares(s, nil, &p)
		tellTeardown(s, &p)
		return p
	}
	// No finalizer can be added to an object being deleted.
	p.addFinalizer = s.address.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(s.address, metallb.FinalizerTeardown)
	w := workload(s, &p)
	if w != nil {
		attach(s, w, &p)
	} else {
		keepOnPlaceholder(s, &p)
	}
	keepShares(s, w, &p)
	status(s, w, &p)
	return p
}

// keepShares drops the edits of Services holding the address while MetalLB
// shares it with a Service the driver did not pin: an edit of the
// placeholder or a pinned Service (its key, port or backend) could end its
// share and leave the address to the stranger. Nothing that holds the
// address is touched until the Conflict is resolved.
func keepShares(s snapshot, w *corev1.Service, p *plan) {
	if sharedWithStranger(s, w) {
		p.update = slices.DeleteFunc(p.update, func(e edit) bool { return metallb.Holds(e.from, s.ip) })
	}
}

// sharedWithStranger reports whether a Service the driver does not
// authorize holds the address.
func sharedWithStranger(s snapshot, w *corev1.Service) bool {
	return slices.ContainsFunc(unauthorized(s, w), func(o offender) bool { return o.verb == "hold" })
}

// leaving reports whether address a is on its way out: deleted, and let go
// by the core. The core keeps its protection finalizer on an address a live
// claim holds (§5.1), and until it lets go the address stays that claim's:
// the driver keeps it attached or held, and watches it for conflicts, as
// if nobody had asked for its deletion. Tearing it down earlier would take
// the IP from the claim's Service while the claim still reports it Bound.
func leaving(a *v1alpha1.IPAddress) bool {
	return a.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(a, v1alpha1.FinalizerAddressProtection)
}

// teardown (§7.4): take the address back from every Service the driver
// pinned it to, release its placeholder, then let the address go. Taking it
// back is a detach (hold): MetalLB keeps an address on its only holder when
// the pin goes, so the placeholder shares it first and the Service's pin is
// withdrawn only then; once MetalLB has dropped it from the Service the
// placeholder goes too, and nothing is left in MetalLB's books.
func teardown(s snapshot, p *plan) {
	if !controllerutil.ContainsFinalizer(s.address, metallb.FinalizerTeardown) {
		return
	}
	if len(s.pinned) > 0 {
		keepOnPlaceholder(s, p)
		return
	}
	if ph := s.placeholders[s.ip]; ph != nil {
		p.remove = append(p.remove, ph)
	}
	p.removeFinalizer = true
}

// tellTeardown keeps the holding record of an address whose teardown waits
// for MetalLB to take it back from the Services the driver pinned it to,
// as a detach does: a teardown MetalLB does not complete (its controller
// down) is then told like any stalled handoff, and looked at again at the
// patience's end. The pass that lets the address go writes nothing more.
func tellTeardown(s snapshot, p *plan) {
	if p.removeFinalizer || !controllerutil.ContainsFinalizer(s.address, metallb.FinalizerTeardown) {
		return
	}
	h := holdingAfter(s, nil, p)
	p.events = append(p.events, stalled(s, nil, h)...)
	if !equality.Semantic.DeepEqual(s.address.Status.Holding, h) {
		st := s.address.Status.DeepCopy()
		st.Holding = h
		p.status = st
		p.recordFirst = gains(s.address.Status.Holding, h)
	}
}

// associable reports whether the address may be attached to a workload:
// bound to a live claim and accepted by the core.
func associable(a *v1alpha1.IPAddress) bool {
	return !leaving(a) && (a.Status.Phase == v1alpha1.AddressBound || a.Status.Phase == v1alpha1.AddressConflict)
}

// workload is the Service the claim's addresses are attached to (§7.5):
// one LoadBalancer Service naming the claim, preferring the one the driver
// pinned this address to, else the oldest. Every other one is told it gets
// nothing. A Service the driver still pins another claim's addresses to is
// no candidate until that claim's addresses are back on their
// placeholders: pinning it now would take them from it mid-handoff.
func workload(s snapshot, p *plan) *corev1.Service {
	if s.claim == nil || !slices.ContainsFunc(claimed(s), func(a *v1alpha1.IPAddress) bool { return a.Name == s.address.Name }) {
		return nil // no claim, or not its address of the family
	}
	cands := attachable(s, p)
	if len(cands) == 0 {
		return nil
	}
	for _, other := range cands[1:] {
		p.events = append(p.events, recorder.WarningOnce(other, metallb.ReasonClaimInUse,
			"IPAddressClaim %s is attached to Service %s; a claim serves one Service at a time", s.claim.Name, cands[0].Name))
	}
	if !pinnable(cands[0]) {
		p.events = append(p.events, recorder.WarningOnce(cands[0], metallb.ReasonClaimInUse,
			"Service pins addresses itself; the addresses of IPAddressClaim %s are not attached", s.claim.Name))
		return nil
	}
	if !carries(cands[0], s.ip) {
		// MetalLB refuses a pin of a family the Service does not have: the
		// address stays on its placeholder, the others are attached.
		p.events = append(p.events, recorder.WarningOnce(cands[0], metallb.ReasonFamilyNotAttached,
			"Service has no %s family; %s of IPAddressClaim %s is not attached and stays reserved", family(s.ip), s.ip, s.claim.Name))
		return nil
	}
	if missing := unclaimedFamilies(s.claim, cands[0]); len(missing) > 0 {
		// MetalLB assigns pinned addresses only when they cover every
		// family of the Service: a pin of fewer would be refused, and
		// would take from the Service what it holds.
		p.events = append(p.events, recorder.WarningOnce(cands[0], metallb.ReasonFamilyNotAttached,
			"Service has the %s family and IPAddressClaim %s claims no address of it; MetalLB assigns pinned addresses only when they cover every family of the Service, so the claim's addresses are not attached and stay reserved (claim Dual, or make the Service SingleStack)",
			strings.Join(missing, " and "), s.claim.Name))
		return nil
	}
	if !coversFamilies(s, cands[0]) {
		// A family the claim requests is not bound yet: the Service waits,
		// told why when the claim says its wait is no brief one.
		p.events = append(p.events, familyWaits(s, cands[0])...)
		return nil
	}
	return cands[0]
}

// waitsLong are the reasons of a claim's Bound condition that say the
// address it lacks does not come soon: its quota, its class or pool full
// or refused, an address Lost.
var waitsLong = []string{v1alpha1.ReasonQuotaExceeded, v1alpha1.ReasonClassExhausted, v1alpha1.ReasonPoolRefused, v1alpha1.ReasonLost}

// familyWaits tells a Service waiting for a family of its claim that is
// not bound, when the claim's own condition says it will not be soon; its
// tenant reads the Service, and the claim's addresses already bound stay
// on their placeholders meanwhile.
func familyWaits(s snapshot, svc *corev1.Service) []recorder.Event {
	cond := meta.FindStatusCondition(s.claim.Status.Conditions, v1alpha1.ConditionBound)
	if cond == nil || cond.Status == metav1.ConditionTrue || !slices.Contains(waitsLong, cond.Reason) {
		return nil
	}
	var missing []string
	for _, f := range svc.Spec.IPFamilies {
		if !slices.ContainsFunc(claimed(s), func(a *v1alpha1.IPAddress) bool { return binding.Family(a) == v1alpha1.IPFamily(f) }) {
			missing = append(missing, string(f))
		}
	}
	return []recorder.Event{recorder.WarningOnce(svc, metallb.ReasonFamilyNotAttached,
		"IPAddressClaim %s has no %s address bound (%s: %s); its addresses are attached to this Service once every family of it is",
		s.claim.Name, strings.Join(missing, " and "), cond.Reason, cond.Message)}
}

// notServed says why MetalLB would not give svc an address (it is not a
// LoadBalancer Service, or another implementation's), empty if it would.
// Placeholders carry no load-balancer class either: the driver needs a
// MetalLB that serves Services without one.
func notServed(svc *corev1.Service) string {
	switch {
	case svc.Spec.Type != corev1.ServiceTypeLoadBalancer:
		return fmt.Sprintf("is of type %s, not LoadBalancer", svc.Spec.Type)
	case svc.Spec.LoadBalancerClass != nil:
		return fmt.Sprintf("sets spec.loadBalancerClass %q", *svc.Spec.LoadBalancerClass)
	}
	return ""
}

// attachable are the LoadBalancer Services naming the claim that the
// address may go to, the claim's current one (pinned with any of its
// addresses) first, then by age.
func attachable(s snapshot, p *plan) []*corev1.Service {
	var cands []*corev1.Service
	for _, svc := range s.candidates {
		if svc.DeletionTimestamp != nil {
			continue
		}
		if why := notServed(svc); why != "" {
			// An auto-claim's own Service turned ClusterIP keeps its
			// reserved addresses for when it is a LoadBalancer again, as
			// documented: nothing to warn about.
			if !metav1.IsControlledBy(s.claim, svc) {
				p.events = append(p.events, recorder.WarningOnce(svc, metallb.ReasonNotAttachable,
					"Service %s, so MetalLB does not serve it; the addresses of IPAddressClaim %s are not attached to it", why, s.claim.Name))
			}
			continue
		}
		if other := othersPinned(s, svc); len(other) > 0 {
			p.events = append(p.events, recorder.WarningOnce(svc, metallb.ReasonClaimInUse,
				"Service still holds %s of another claim; the addresses of IPAddressClaim %s are attached once they are back on their placeholders",
				metallb.FormatIPs(other), s.claim.Name))
			continue
		}
		cands = append(cands, svc)
	}
	// The claim's workload is one for all its addresses: the Service the
	// driver pinned any of them to comes first, so that the pass over one
	// family never picks another Service than the pass over the other (a
	// pin of both on a second Service would take the first's address).
	ips := []netip.Addr{s.ip}
	for _, sib := range s.siblings {
		if ip, err := netip.ParseAddr(sib.Spec.Address); err == nil {
			ips = append(ips, ip)
		}
	}
	pinnedAny := func(svc *corev1.Service) bool {
		return slices.ContainsFunc(ips, func(ip netip.Addr) bool { return pinnedWith(svc, ip) })
	}
	slices.SortFunc(cands, func(a, b *corev1.Service) int {
		if pa, pb := pinnedAny(a), pinnedAny(b); pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return cands
}

// unclaimedFamilies are the families of svc that claim requests no
// address of.
func unclaimedFamilies(claim *v1alpha1.IPAddressClaim, svc *corev1.Service) []string {
	var missing []string
	for _, f := range svc.Spec.IPFamilies {
		if !slices.Contains(claim.Spec.Family.Families(), v1alpha1.IPFamily(f)) {
			missing = append(missing, string(f))
		}
	}
	return missing
}

// coversFamilies reports whether the claim has an associable address of
// every family of svc: only then does MetalLB take the pin.
func coversFamilies(s snapshot, svc *corev1.Service) bool {
	for _, f := range svc.Spec.IPFamilies {
		if !slices.ContainsFunc(claimed(s), func(a *v1alpha1.IPAddress) bool { return binding.Family(a) == v1alpha1.IPFamily(f) }) {
			return false
		}
	}
	return true
}

// stillReserved reports whether the driver still holds address a: it is
// not being deleted, or its teardown (which takes it back from its
// Services first) has yet to finish.
func stillReserved(a *v1alpha1.IPAddress) bool {
	return a.DeletionTimestamp == nil || controllerutil.ContainsFinalizer(a, metallb.FinalizerTeardown)
}

// othersPinned are the addresses the driver's marker on svc names that are
// not the claim's.
func othersPinned(s snapshot, svc *corev1.Service) []netip.Addr {
	var other []netip.Addr
	for _, ip := range marker(svc) {
		if !slices.ContainsFunc(s.siblings, func(a *v1alpha1.IPAddress) bool { return a.Spec.Address == ip.String() }) {
			other = append(other, ip)
		}
	}
	return other
}

// carries reports whether svc can carry ip: its spec.ipFamilies (which the
// API server fills in) name ip's family; a Service without them, any.
func carries(svc *corev1.Service, ip netip.Addr) bool {
	return len(svc.Spec.IPFamilies) == 0 || slices.Contains(svc.Spec.IPFamilies, family(ip))
}

func family(ip netip.Addr) corev1.IPFamily {
	if ip.Is6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// pinFor is the pin workload w carries: the claim's address of each family
// w has (claimed).
func pinFor(s snapshot, w *corev1.Service) string {
	var ips []netip.Addr
	for _, a := range claimed(s) {
		if ip, err := netip.ParseAddr(a.Spec.Address); err == nil && carries(w, ip) {
			ips = append(ips, ip)
		}
	}
	return metallb.FormatIPs(ips)
}

// claimed are the claim's associable addresses, one per family: the one
// its status reports, else the smallest name — the one the core keeps
// when two binders (two leaders for a moment) bound a family twice. The
// other is the core's to release; attached, it would make the pin one
// MetalLB refuses, and the workload would lose what it holds.
func claimed(s snapshot) []*v1alpha1.IPAddress {
	best := map[v1alpha1.IPFamily]*v1alpha1.IPAddress{}
	reported := func(a *v1alpha1.IPAddress) bool {
		return s.claim != nil && slices.ContainsFunc(s.claim.Status.Addresses, func(c v1alpha1.ClaimedAddress) bool { return c.Name == a.Name })
	}
	for _, a := range s.siblings {
		if !associable(a) {
			continue
		}
		f := binding.Family(a)
		if b := best[f]; b == nil || reported(a) && !reported(b) || reported(a) == reported(b) && a.Name < b.Name {
			best[f] = a
		}
	}
	out := make([]*v1alpha1.IPAddress, 0, len(best))
	for _, a := range best {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *v1alpha1.IPAddress) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// attach moves the address onto workload w without a gap: the placeholder
// first allows sharing under the claim's key, then w is pinned under the
// same key, and only once MetalLB assigned the address to w does the
// placeholder go — and with it any Service the driver pinned before. A
// move from a Service that cannot share the address with w (a port in
// common, another backend) goes through the placeholder: the old Service
// hands it back first, as in a detach, and w is pinned once it has.
func attach(s snapshot, w *corev1.Service, p *plan) {
	key, pins := sharingKey(s.claim.UID), pinFor(s, w)
	ph := s.placeholders[s.ip]
	if previous := exclusive(s, w, key); len(previous) > 0 && !metallb.Holds(w, s.ip) {
		back := s
		back.pinned = previous
		keepOnPlaceholder(back, p)
		return
	}
	if metallb.Holds(w, s.ip) {
		if ph != nil {
			p.remove = append(p.remove, ph)
		}
		for _, old := range s.pinned {
			if old.UID != w.UID && safeToUnpin(s, old, w) {
				p.unpin(old)
			}
		}
		if !pinnedAs(w, pins, key) && readyToPin(s, w, pins, key) {
			p.edit(w, pin(w, pins, key))
		}
		return
	}
	if ph != nil && metallb.Holds(ph, s.ip) && !shares(ph, w, key) {
		p.edit(ph, updatedPlaceholder(ph, placeholder(s.address, s.ip, s.pool(), s.namespace, key, w)))
		if pinnedAs(w, pins, key) {
			// w, already pinned, took a port of the placeholder's (or
			// changed its backend) and MetalLB refused it; a placeholder's
			// new port does not make MetalLB look at w again. Its pin is
			// withdrawn, and written anew once the placeholder shares.
			p.edit(w, withdraw(w))
		}
		return
	}
	if !pinnedAs(w, pins, key) && readyToPin(s, w, pins, key) {
		p.edit(w, pin(w, pins, key))
		return
	}
	if ph == nil && !pinnedAs(w, pins, key) {
		// w does not hold the address and cannot be pinned to it yet: it
		// lost it (its families changed, so its pin must change too) and
		// waits for a sibling's record. The placeholder holds it meanwhile,
		// sharing it under the claim's key so that w joins it once pinned.
		// (A w pinned as it should be is MetalLB's to assign.)
		p.create = append(p.create, placeholder(s.address, s.ip, s.pool(), s.namespace, key, w))
	}
}

// exclusive are the Services the driver pinned the address to, other than
// w, that hold it and cannot share it with w under key.
func exclusive(s snapshot, w *corev1.Service, key string) []*corev1.Service {
	var out []*corev1.Service
	for _, svc := range s.pinned {
		if svc.UID != w.UID && metallb.Holds(svc, s.ip) && !shares(svc, w, key) {
			out = append(out, svc)
		}
	}
	return out
}

// readyToPin reports whether every address of pins can go to w: its
// placeholder does not hold it, or allows w to share it; and, a sibling's,
// its holding record names w already. One pass pins every family at once,
// and only this address's record is written before the pin: a sibling's
// record is its own pass's to write, and a write it cannot make (the
// core's webhook down) would leave w holding that address unrecorded — a
// stranger once its tenant moves it to another claim.
func readyToPin(s snapshot, w *corev1.Service, pins, key string) bool {
	for _, ip := range metallb.ParseIPs(pins) {
		if ph := s.placeholders[ip]; ph != nil && metallb.Holds(ph, ip) && !shares(ph, w, key) {
			return false
		}
		if ip != s.ip && !recordedBySibling(s, ip, w) {
			return false
		}
	}
	return true
}

// recordedBySibling reports whether the claim's address of ip has a holding
// record naming w.
func recordedBySibling(s snapshot, ip netip.Addr, w *corev1.Service) bool {
	for _, sib := range s.siblings {
		if sib.Spec.Address == ip.String() {
			return slices.ContainsFunc(recordedRefs(sib.Status.Holding), func(r v1alpha1.HeldReference) bool { return r.UID == w.UID })
		}
	}
	return false
}

// keepOnPlaceholder keeps the address on its placeholder. A Service the driver pinned
// earlier keeps the address until the placeholder shares it; only then is
// the pin withdrawn. The placeholder keeps its claim's key (placeholderKey)
// and changes it only while it alone holds the address.
func keepOnPlaceholder(s snapshot, p *plan) {
	ph := s.placeholders[s.ip]
	if len(s.pinned) == 0 {
		restOnPlaceholder(s, ph, p)
		return
	}
	var active []*corev1.Service
	for _, o := range s.pinned {
		if metallb.DriverPinned(o) != nil {
			active = append(active, o)
		}
	}
	if len(active) == 0 {
		takeBack(s, ph, p) // every pin is withdrawn: MetalLB is taking the address back
		return
	}
	shareBack(s, ph, active[0], p)
}

// restOnPlaceholder: no Service the driver pinned holds the address; the
// placeholder is created, or brought up to date while it alone holds it.
// At rest it keeps the sharing key it has, and a new one gets none: MetalLB
// reprocesses every Service whenever an allocation's key changes, and
// rewrites each one's status as it does, so a key on every new placeholder
// would cost a pass over all of them per address provisioned. attach gives
// the placeholder its claim's key first, while it alone holds the address.
// The key of a claim an address no longer serves is dropped at rest once
// the address is recycled (Available, or bound to another claim): its
// former tenant, whose Service carried that key, could otherwise share the
// address with the placeholder from wherever no policy stops them, and
// the new holder could never attach. A Released address keeps it: it is
// still its namespace's. That costs MetalLB one pass per recycle, not per
// address provisioned.
func restOnPlaceholder(s snapshot, ph *corev1.Service, p *plan) {
	key := ""
	if ph != nil {
		key = metallb.SharingKey(ph)
	}
	if key != "" && recycled(s.address, key) {
		key = ""
	}
	want := placeholder(s.address, s.ip, s.pool(), s.namespace, key, nil)
	switch {
	case ph == nil:
		p.create = append(p.create, want)
	case !samePlaceholder(ph, want) && soleHolder(s, ph):
		p.edit(ph, updatedPlaceholder(ph, want))
	}
}

// recycled reports whether sharing key is no longer address a's to keep:
// a is Available, or bound to a claim whose key it is not.
func recycled(a *v1alpha1.IPAddress, key string) bool {
	switch ref := a.Spec.ClaimRef; {
	case a.Status.Phase == v1alpha1.AddressAvailable:
		return true
	case a.Status.Phase == v1alpha1.AddressReleased || ref == nil || ref.UID == "":
		return false
	default:
		return key != sharingKey(ref.UID)
	}
}

// takeBack: every pin is withdrawn and MetalLB is moving the address back
// to the placeholder; each pinned Service is unpinned once that is safe.
func takeBack(s snapshot, ph *corev1.Service, p *plan) {
	if ph == nil {
		p.create = append(p.create, placeholder(s.address, s.ip, s.pool(), s.namespace, placeholderKey(s, nil), nil))
	}
	if o := refusedFor(s, ph); o != nil {
		// MetalLB gave o the address back and refused the placeholder
		// (it restarted between the withdrawal and the move, and took
		// the Services in another order): o shares it again under the
		// placeholder's key, and lets go again once the placeholder
		// holds it too.
		if metallb.SharingKey(o) != metallb.SharingKey(ph) {
			p.edit(o, reshared(o, metallb.SharingKey(ph)))
		}
		return
	}
	for _, o := range s.pinned {
		if safeToUnpin(s, o, nil) {
			p.unpin(o)
		}
	}
}

// shareBack: old, a Service the driver pinned, still carries its pin; the
// placeholder first shares the address with it under the claim's key, and
// only then are the pins withdrawn.
func shareBack(s snapshot, ph, old *corev1.Service, p *plan) {
	key := placeholderKey(s, ph)
	if key == "" {
		key = metallb.SharingKey(old)
	}
	if metallb.SharingKey(old) != key {
		// The placeholder never takes up another key: a Service the driver
		// pinned under the claim's key and whose key was changed since
		// gets the claim's back, and shares the address under it.
		p.edit(old, reshared(old, key))
		return
	}
	want := placeholder(s.address, s.ip, s.pool(), s.namespace, key, old)
	switch {
	case ph == nil:
		p.create = append(p.create, want)
	case !shares(ph, old, key):
		p.edit(ph, updatedPlaceholder(ph, want))
	default:
		for _, o := range s.pinned {
			if safeToUnpin(s, o, nil) {
				p.unpin(o)
			}
		}
	}
}

// refusedFor is the Service the driver withdrew its pin from that still
// holds the address while placeholder ph does not: MetalLB refused ph, or
// is about to give it its share. nil when there is none, or no ph yet.
func refusedFor(s snapshot, ph *corev1.Service) *corev1.Service {
	if ph == nil || metallb.Holds(ph, s.ip) || metallb.SharingKey(ph) == "" {
		return nil
	}
	for _, o := range s.pinned {
		if metallb.Holds(o, s.ip) {
			return o
		}
	}
	return nil
}

// unpin plans the next step of taking the driver's pin off old, if any.
func (p *plan) unpin(old *corev1.Service) {
	if svc := unpinStep(old); svc != nil {
		p.edit(old, svc)
	}
}

// placeholderKey is the sharing key a placeholder shares the address
// under while it takes it back from a Service: its claim's, which the
// Service was pinned under. MetalLB refuses to change the key of an
// address another Service holds — and it may hold it in its own books
// before its status says so — which would take the address from the
// placeholder. An address bound to no claim keeps the key it has.
func placeholderKey(s snapshot, ph *corev1.Service) string {
	if ref := s.address.Spec.ClaimRef; ref != nil && ref.UID != "" {
		return sharingKey(ref.UID)
	}
	if ph != nil {
		return metallb.SharingKey(ph)
	}
	return ""
}

// soleHolder reports whether no Service but the placeholder holds the address.
func soleHolder(s snapshot, ph *corev1.Service) bool {
	for _, h := range s.holders {
		if h.UID != ph.UID {
			return false
		}
	}
	return true
}

// safeToUnpin reports whether letting go of old frees none of the
// addresses the driver pinned to it: each one old still holds is held by
// its placeholder too, or by the workload it is moving to (heldByWorkload),
// or is no longer reserved. Every address of the marker counts, the pin
// withdrawn or not: the sharing key is one per Service, so a pass over one
// address that withdrew it while another address is not yet back on its
// placeholder would take that one from the placeholder's share — and the
// other address's pass would give it back, for ever. So would a pass that
// moved one family of a dual-stack Service's claim to a single-stack one:
// MetalLB drops both families of a Service whose pin goes.
func safeToUnpin(s snapshot, old, w *corev1.Service) bool {
	for _, ip := range marker(old) {
		if !metallb.Holds(old, ip) || !s.reserved[ip] || heldByWorkload(s, old, w, ip) {
			continue
		}
		if ph := s.placeholders[ip]; ph == nil || !metallb.Holds(ph, ip) {
			return false
		}
	}
	return true
}

// heldByWorkload reports whether ip, which old holds, is held as well by
// the workload its address moves to: w for this pass's own address, the
// Service a sibling's holding record names as its workload for another.
func heldByWorkload(s snapshot, old, w *corev1.Service, ip netip.Addr) bool {
	if ip == s.ip {
		return w != nil && w.UID != old.UID && metallb.Holds(w, ip)
	}
	for _, sib := range s.siblings {
		if sib.Spec.Address != ip.String() || sib.Status.Holding == nil || sib.Status.Holding.Workload == nil {
			continue
		}
		for _, c := range s.candidates {
			if c.UID == sib.Status.Holding.Workload.UID && c.UID != old.UID && metallb.Holds(c, ip) {
				return true
			}
		}
	}
	return false
}

// status computes the driver's share of the address status (§7.6):
// Lost while the pool cannot hold the address, Conflict while a Service
// holds it without authorization, the core's phase back once neither
// holds, and associatedTo.
func status(s snapshot, w *corev1.Service, p *plan) {
	a := s.address
	st := a.Status.DeepCopy()
	offenders := unauthorized(s, w)
	lostReason, lostMessage := lost(s)
	switch {
	case lostReason != "":
		binding.SetCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionInBackend, Status: metav1.ConditionFalse, Reason: lostReason, Message: lostMessage}, s.now)
		if st.Phase != v1alpha1.AddressLost {
			p.events = append(p.events, recorder.WarningOnce(a, v1alpha1.ReasonLost, "%s", lostMessage))
		}
		st.Phase = v1alpha1.AddressLost
	case len(offenders) > 0:
		msg := offenceMessage(offenders, s.ip)
		binding.SetCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionTrue, Reason: metallb.ReasonUnauthorizedHolder, Message: msg}, s.now)
		p.events = append(p.events, recorder.WarningOnce(a, metallb.ReasonUnauthorizedHolder, "%s", msg))
		for _, o := range offenders {
			p.events = append(p.events, recorder.WarningOnce(o.svc, metallb.ReasonAddressReserved,
				"%s is reserved by IPAddress %s; this Service is not authorized to %s it", s.ip, a.Name, o.verb))
		}
		st.Phase = v1alpha1.AddressConflict
	default:
		restore(s, st, p)
	}
	st.AssociatedTo = associatedTo(s, w)
	p.events = append(p.events, association(s, a.Status.AssociatedTo, st.AssociatedTo)...)
	st.Holding = holdingAfter(s, w, p)
	p.events = append(p.events, stalled(s, w, st.Holding)...)
	p.recordFirst = gains(a.Status.Holding, st.Holding)
	if !equality.Semantic.DeepEqual(a.Status, *st) {
		p.status = st
	}
}

// handoffPatience is how long a handoff may run before the address says
// it waits: MetalLB moves an address within seconds, so minutes mean it
// does not assign the taking side (its controller down, a pool's
// serviceAllocation leaving that Service out). Meanwhile a Service being
// let go of keeps the handoff finalizer, and its deletion waits.
const handoffPatience = 2 * time.Minute

// stalled is the warning for a handoff under way (h, the holding record
// after the pass) for longer than handoffPatience; none while a stranger
// shares the address, which the Conflict already tells. Its message names
// what does not change while the handoff lasts, so it is recorded once.
func stalled(s snapshot, w *corev1.Service, h *v1alpha1.Holding) []recorder.Event {
	if h == nil || h.Since == nil || s.now.Sub(h.Since.Time) < handoffPatience || sharedWithStranger(s, w) {
		return nil
	}
	var parts []string
	if h.Workload != nil {
		parts = append(parts, "to Service "+h.Workload.Namespace+"/"+h.Workload.Name)
	}
	for _, f := range h.From {
		parts = append(parts, "from Service "+f.Namespace+"/"+f.Name)
	}
	msg := fmt.Sprintf("moving %s (%s) has waited since %s for MetalLB to assign it on the taking side: "+
		"see that Service's or placeholder's events (MetalLB's AllocationFailed) and whether MetalLB's controller runs",
		s.ip, strings.Join(parts, ", "), h.Since.UTC().Format(time.RFC3339))
	if len(h.From) > 0 {
		msg += fmt.Sprintf("; until then a Service let go of keeps the finalizer %s, and its deletion waits", metallb.FinalizerHandoff)
	}
	if leaving(s.address) {
		msg += fmt.Sprintf("; so does this address's, which keeps the finalizer %s until it is back on its placeholder", metallb.FinalizerTeardown)
	}
	return []recorder.Event{recorder.WarningOnce(s.address, metallb.ReasonHandoffStalled, "%s", msg)}
}

// handoffRecheck is when to look at a after this pass so that a handoff
// still under way at handoffPatience is told (stalled); zero when none
// runs or it has been told.
func handoffRecheck(h *v1alpha1.Holding, now time.Time) time.Duration {
	if h == nil || h.Since == nil {
		return 0
	}
	if left := handoffPatience - now.Sub(h.Since.Time); left > 0 {
		return left + time.Second
	}
	return 0
}

// lost says why MetalLB can no longer hold the address: no pool in its
// books contains the IP any more — the pool was deleted, or shrunk past it.
// The class only names the pool in the message: a class whose parameters
// do not parse, that names a pool that does not exist, or that is gone,
// takes nothing from MetalLB while a pool still covers the address.
func lost(s snapshot) (reason, message string) {
	c := s.class
	switch {
	case s.covering != "":
		return "", ""
	case c.PoolName != "" && !c.PoolFound:
		return metallb.ReasonPoolNotFound, fmt.Sprintf("%s, and no other IPAddressPool contains %s", c.Refusal, s.ip)
	case c.PoolName != "":
		return metallb.ReasonNotInPool, fmt.Sprintf("%s is no longer in IPAddressPool %s", s.ip, c.PoolName)
	}
	return metallb.ReasonNotInPool, fmt.Sprintf("%s is in no IPAddressPool", s.ip)
}

// pool is the pool a placeholder names: the class's while it covers the
// address, else the one that does, so that a slip in the class's
// parameters never re-points a hold; with no pool covering it, what the
// placeholder named before.
func (s snapshot) pool() string {
	switch {
	case s.class.Ranges != nil && s.class.Ranges.Contains(s.ip):
		return s.class.PoolName
	case s.covering != "":
		return s.covering
	}
	if ph := s.placeholders[s.ip]; ph != nil {
		return ph.Annotations[metallb.AnnotationAddressPool]
	}
	return s.class.PoolName
}

// holdingAfter is the holding record once the plan is carried out: the
// workload if it is (or is being) pinned with the address, and every other
// Service the driver pinned it to and has not let go of yet; Since dates a
// handoff under way and is kept while it lasts. nil while the placeholder
// alone holds the address.
func holdingAfter(s snapshot, w *corev1.Service, p *plan) *v1alpha1.Holding {
	after := map[types.UID]*corev1.Service{}
	for _, svc := range s.pinned {
		after[svc.UID] = svc
	}
	for _, e := range p.update {
		svc := e.to
		if svc.Namespace == s.namespace && svc.Labels[metallb.LabelAddress] != "" {
			continue // a placeholder is no workload
		}
		if _, known := after[svc.UID]; known || pinnedWith(svc, s.ip) {
			if stillHeld(svc, s.ip) {
				after[svc.UID] = svc
			} else {
				delete(after, svc.UID)
			}
		}
	}
	h := &v1alpha1.Holding{}
	switch {
	case w != nil && after[w.UID] != nil:
		h.Workload = heldRef(after[w.UID])
		delete(after, w.UID)
	case w != nil:
		// The workload, recorded before anything is pinned to it: a
		// sibling's pass pins every family at once, and waits for this
		// record (readyToPin).
		h.Workload = heldRef(w)
	}
	for _, svc := range after {
		h.From = append(h.From, *heldRef(svc))
	}
	slices.SortFunc(h.From, func(a, b v1alpha1.HeldReference) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if len(h.From) > 0 || (h.Workload != nil && !metallb.Holds(w, s.ip)) {
		h.Since = &metav1.Time{Time: s.now}
		if old := s.address.Status.Holding; old != nil && old.Since != nil {
			h.Since = old.Since
		}
	}
	if h.Workload == nil && len(h.From) == 0 {
		// The placeholder alone: no record, and no write for it.
		return nil
	}
	return h
}

func heldRef(svc *corev1.Service) *v1alpha1.HeldReference {
	return &v1alpha1.HeldReference{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}
}

// recordedRefs are the Services a holding record names.
func recordedRefs(h *v1alpha1.Holding) []v1alpha1.HeldReference {
	var refs []v1alpha1.HeldReference
	if h == nil {
		return nil
	}
	if h.Workload != nil {
		refs = append(refs, *h.Workload)
	}
	return append(refs, h.From...)
}

// unsure reports whether plan p does what a stale cache must not decide:
// it lets go of a holder — deletes a placeholder, or withdraws a pin or
// the driver's marker — which is safe only while the other side of the
// handoff holds the address; it declares a Conflict (the driver would
// never edit that Service again); or it drops a Service from the holding
// record (the driver would take it for a stranger). Such a plan is decided
// again on the API server's Services: a leader woken from a pause acts on
// a cache as old as the pause until it learns it no longer leads.
func unsure(a *v1alpha1.IPAddress, p plan) bool {
	if len(p.remove) > 0 || slices.ContainsFunc(p.update, lets) {
		return true
	}
	if p.status == nil {
		return false
	}
	return p.status.Phase == v1alpha1.AddressConflict && a.Status.Phase != v1alpha1.AddressConflict ||
		gains(p.status.Holding, a.Status.Holding)
}

// gains reports whether record after names a Service before does not.
func gains(before, after *v1alpha1.Holding) bool {
	known := map[types.UID]bool{}
	for _, r := range recordedRefs(before) {
		known[r.UID] = true
	}
	for _, r := range recordedRefs(after) {
		if !known[r.UID] {
			return true
		}
	}
	return false
}

// restore clears what the driver set once its cause has passed: the
// phase goes back to the one the core last recorded in its Bound condition.
func restore(s snapshot, st *v1alpha1.IPAddressStatus, p *plan) {
	a := s.address
	if meta.IsStatusConditionFalse(st.Conditions, v1alpha1.ConditionInBackend) {
		binding.SetCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionInBackend, Status: metav1.ConditionTrue, Reason: metallb.ReasonInPool, Message: "the pool holds the address again"}, s.now)
		p.events = append(p.events, recorder.Normal(a, metallb.ReasonInPool, "%s is held in MetalLB's books again", s.ip).Ending(v1alpha1.ReasonLost))
	}
	if meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionConflict) {
		binding.SetCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionFalse, Reason: metallb.ReasonConflictResolved, Message: "no unauthorized Service holds the address"}, s.now)
		p.events = append(p.events, recorder.Normal(a, metallb.ReasonConflictResolved, "no unauthorized Service holds %s any more", s.ip).Ending(metallb.ReasonUnauthorizedHolder))
	}
	if st.Phase == v1alpha1.AddressConflict || st.Phase == v1alpha1.AddressLost {
		st.Phase = binding.CorePhase(st)
	}
}

// offender is a Service that holds or pins the address without the
// driver's record of it.
type offender struct {
	svc  *corev1.Service
	verb string // "hold" or "pin"
}

// unauthorized are the Services holding the address, or pinning it, that
// are neither its placeholder, its workload, nor a Service the driver's
// record names — whatever markers they carry. Each is named once, as a
// holder when it is both.
func unauthorized(s snapshot, w *corev1.Service) []offender {
	authorized := func(svc *corev1.Service) bool {
		return (w != nil && svc.UID == w.UID) ||
			(svc.Namespace == s.namespace && svc.Labels[metallb.LabelAddress] == s.address.Name) ||
			slices.ContainsFunc(s.pinned, func(o *corev1.Service) bool { return o.UID == svc.UID })
	}
	var out []offender
	seen := map[types.UID]bool{}
	for verb, svcs := range map[string][]*corev1.Service{"hold": s.holders, "pin": s.requesters} {
		for _, svc := range svcs {
			if !authorized(svc) && !seen[svc.UID] && (verb == "hold" || !metallb.Holds(svc, s.ip)) {
				seen[svc.UID] = true
				out = append(out, offender{svc: svc, verb: verb})
			}
		}
	}
	slices.SortFunc(out, func(a, b offender) int {
		return strings.Compare(a.svc.Namespace+"/"+a.svc.Name, b.svc.Namespace+"/"+b.svc.Name)
	})
	return out
}

// offenceMessage names each offender and what it does, e.g. "Service
// default/web holds 192.0.2.1 without authorization; Service default/db
// pins it without authorization".
func offenceMessage(offenders []offender, ip netip.Addr) string {
	parts := make([]string, len(offenders))
	for i, o := range offenders {
		what := "it"
		if i == 0 {
			what = ip.String()
		}
		parts[i] = fmt.Sprintf("Service %s/%s %ss %s without authorization", o.svc.Namespace, o.svc.Name, o.verb, what)
	}
	return strings.Join(parts, "; ")
}

// associatedTo is the workload the address is announced for: w once
// MetalLB assigned it the address; nobody while only the placeholder
// holds it; unchanged while a handoff is under way.
func associatedTo(s snapshot, w *corev1.Service) *v1alpha1.WorkloadReference {
	if w != nil && metallb.Holds(w, s.ip) {
		return &v1alpha1.WorkloadReference{Kind: "Service", Namespace: w.Namespace, Name: w.Name}
	}
	if len(s.pinned) == 0 {
		return nil
	}
	return s.address.Status.AssociatedTo
}

// association tells the claim's owner, who cannot read addresses, when an
// address of the claim is attached to a Service or leaves it.
func association(s snapshot, before, after *v1alpha1.WorkloadReference) []recorder.Event {
	var about client.Object = s.address
	if s.claim != nil {
		about = s.claim
	}
	// A claim's events are its tenant's to read: a Service of another
	// namespace (the address's former tenant, when an administrator freed
	// it while it was being taken back) is not named to it.
	service := func(w *v1alpha1.WorkloadReference) string {
		if s.claim != nil && w.Namespace != s.claim.Namespace {
			return "a Service of another namespace"
		}
		return "Service " + w.Name
	}
	switch {
	case after != nil && (before == nil || *before != *after):
		return []recorder.Event{recorder.Normal(about, metallb.ReasonAssociated, "%s is attached to %s", s.ip, service(after))}
	case after == nil && before != nil:
		return []recorder.Event{recorder.Normal(about, metallb.ReasonDisassociated, "%s left %s and stays reserved", s.ip, service(before))}
	}
	return nil
}
