package chaos

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
)

// The invariants the ledger counts violations of.
const (
	// DoubleBound: one IP in the status of two live claims.
	DoubleBound = "ip-in-two-live-claims"
	// TwoOfAFamily: a claim reporting two addresses of one family.
	TwoOfAFamily = "two-addresses-of-one-family"
	// AddressChanged: a Bound claim's address of a family changed while
	// the claim lived.
	AddressChanged = "bound-address-changed"
	// Unheld: a driver address, once held, held by no Service while it
	// is not being deleted.
	Unheld = "reserved-address-unheld"
	// AttachedLost: a Service naming a Bound claim, once given the
	// claim's address, lost it while it still named the claim.
	AttachedLost = "attached-service-lost-its-address"
	// Stranger: a Service outside the driver's namespace holding a driver
	// address that it does not name the claim of and that the address's
	// holding record does not name either (a handoff under way), or
	// holding a pool address no IPAddress records.
	Stranger = "address-held-by-a-stranger"
)

// Invariants lists them all, in the order the figures print them.
var Invariants = []string{DoubleBound, TwoOfAFamily, AddressChanged, Unheld, AttachedLost, Stranger}

// Ledger follows the claims, the driver's addresses and the Services as
// their watch events arrive, and counts every instant that breaks an
// invariant. It judges events in the order it is given them, so the caller
// must give them in the order they happened: the resource versions of one
// etcd are such an order across kinds.
type Ledger struct {
	// Namespace is the driver's, where placeholders live.
	Namespace string
	// Driven reports whether an address's class is the driver's.
	Driven func(class string) bool
	// Pools are the driver's pools: no Service outside Namespace holds an
	// address of them that no IPAddress records.
	Pools []netip.Prefix
	// Trace, if set, gets every change judged, one line each.
	Trace io.Writer

	claims    map[types.UID]*claimState
	addresses map[netip.Addr]*v1alpha1.IPAddress
	services  map[string]*corev1.Service // by namespace/name
	// held are the driver addresses some Service has held, and the
	// Services that held each last.
	held map[netip.Addr][]string
	// given are the Services given their claim's address: key → claim key.
	given map[string]string
	// strangers are the Services holding an address they may not hold
	// now, by "key ip": a violation counts once while it lasts.
	strangers map[string]bool
	// history is each Service's and claim's last states, for the notes.
	history map[string][]string

	// Events counts the events judged; Blind, those within a watch's
	// blind spot (Gap), which count no violation.
	Events     int
	Blind      int
	blind      int
	Violations map[string]int
	// Notes describe the first violations of each invariant.
	Notes []string
}

type claimState struct {
	key     string // namespace/name
	phase   v1alpha1.ClaimPhase
	deleted bool
	// bound is the address of each family the claim was first seen Bound to.
	bound map[v1alpha1.IPFamily]string
	// ips are the addresses its status reports now.
	ips []string
}

// NewLedger returns an empty ledger.
func NewLedger(namespace string, driven func(class string) bool) *Ledger {
	return &Ledger{
		Namespace: namespace, Driven: driven,
		claims: map[types.UID]*claimState{}, addresses: map[netip.Addr]*v1alpha1.IPAddress{},
		services: map[string]*corev1.Service{}, held: map[netip.Addr][]string{}, given: map[string]string{}, strangers: map[string]bool{}, history: map[string][]string{},
		Violations: map[string]int{},
	}
}

const maxNotes = 5

// remember keeps an object's last states, each with the time it was seen,
// so that a violation's history lines up with the processes' logs.
func (l *Ledger) remember(key, state string) {
	state = time.Now().Format("15:04:05.000") + " " + state
	if l.Trace != nil {
		fmt.Fprintf(l.Trace, "%s %s\n", key, state)
	}
	l.history[key] = append(l.history[key], state)
	if h := l.history[key]; len(h) > 12 {
		l.history[key] = h[len(h)-12:]
	}
}

// Gap starts (or ends) a blind spot: a watch broke (the API server
// restarted) and what changed meanwhile is known only as its end state,
// reported in no order. No instant within is judged; the state after it is.
func (l *Ledger) Gap(start bool) {
	if start {
		l.blind++
		return
	}
	if l.blind--; l.blind == 0 {
		l.judgeClaims()
		l.judgeServices()
	}
}

func (l *Ledger) violate(invariant, format string, args ...any) {
	if l.blind > 0 {
		return
	}
	l.Violations[invariant]++
	if l.Violations[invariant] <= maxNotes {
		l.Notes = append(l.Notes, invariant+": "+fmt.Sprintf(format, args...))
	}
}

// count counts an event judged.
func (l *Ledger) count() {
	l.Events++
	if l.blind > 0 {
		l.Blind++
	}
}

// Claim takes a claim's new state; gone when it was deleted.
func (l *Ledger) Claim(c *v1alpha1.IPAddressClaim, gone bool) {
	l.count()
	l.remember(c.Namespace+"/"+c.Name, fmt.Sprintf("rv=%s gone=%v deleting=%v phase=%s addresses=%v", c.ResourceVersion, gone,
		c.DeletionTimestamp != nil, c.Status.Phase, c.Status.Addresses))
	if gone {
		delete(l.claims, c.UID)
		return
	}
	st := l.claims[c.UID]
	if st == nil {
		st = &claimState{key: c.Namespace + "/" + c.Name, bound: map[v1alpha1.IPFamily]string{}}
		l.claims[c.UID] = st
	}
	st.phase, st.deleted = c.Status.Phase, c.DeletionTimestamp != nil
	st.ips = nil
	families := map[v1alpha1.IPFamily]int{}
	for _, a := range c.Status.Addresses {
		st.ips = append(st.ips, a.Address)
		f := v1alpha1.FamilyOf(a.Address)
		if families[f]++; families[f] == 2 {
			l.violate(TwoOfAFamily, "claim %s reports %v", st.key, c.Status.Addresses)
		}
	}
	if !st.deleted && st.phase == v1alpha1.ClaimBound {
		seen := map[v1alpha1.IPFamily]bool{}
		for _, a := range c.Status.Addresses {
			f := v1alpha1.FamilyOf(a.Address)
			if seen[f] {
				continue // a second of the family: TwoOfAFamily's
			}
			seen[f] = true
			if first, ok := st.bound[f]; ok && first != a.Address {
				l.violate(AddressChanged, "claim %s was bound to %s, now %s", st.key, first, a.Address)
			}
			st.bound[f] = a.Address
		}
	}
	l.judgeClaims()
	l.judgeServices()
}

// judgeClaims: no IP in the status of two live claims.
func (l *Ledger) judgeClaims() {
	owner := map[string]string{}
	for _, st := range l.sortedClaims() {
		if st.deleted {
			continue
		}
		for _, ip := range st.ips {
			if other, ok := owner[ip]; ok && other != st.key {
				l.violate(DoubleBound, "%s is reported by claims %s and %s", ip, other, st.key)
			}
			owner[ip] = st.key
		}
	}
}

func (l *Ledger) sortedClaims() []*claimState {
	out := make([]*claimState, 0, len(l.claims))
	for _, st := range l.claims {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// Address takes an address's new state; gone when it was deleted.
func (l *Ledger) Address(a *v1alpha1.IPAddress, gone bool) {
	l.count()
	ip, err := netip.ParseAddr(a.Spec.Address)
	if err != nil || !l.Driven(a.Spec.ClassName) {
		return
	}
	var holding []string
	for _, r := range recordedRefs(a) {
		holding = append(holding, r.Namespace+"/"+r.Name)
	}
	l.remember(a.Name, fmt.Sprintf("rv=%s gone=%v deleting=%v phase=%s claimRef=%v associatedTo=%v holding=%v", a.ResourceVersion, gone,
		a.DeletionTimestamp != nil, a.Status.Phase, a.Spec.ClaimRef, a.Status.AssociatedTo, holding))
	if gone {
		delete(l.addresses, ip)
		delete(l.held, ip)
		return
	}
	l.addresses[ip] = a
	l.judgeServices()
}

// Service takes a Service's new state; gone when it was deleted.
func (l *Ledger) Service(svc *corev1.Service, gone bool) {
	l.count()
	key := svc.Namespace + "/" + svc.Name
	l.remember(key, fmt.Sprintf("rv=%s gone=%v deleting=%v claim=%q ingress=%v pins=%q pinned=%q key=%q finalizers=%v", svc.ResourceVersion, gone,
		svc.DeletionTimestamp != nil, claimKey(svc), metallb.IngressIPs(svc), svc.Annotations["metallb.io/loadBalancerIPs"], svc.Annotations["metallb.drivers.local.sdn.cozystack.io/pinned"],
		svc.Annotations["metallb.io/allow-shared-ip"], svc.Finalizers))
	before := l.services[key]
	if gone {
		delete(l.services, key)
	} else {
		l.services[key] = svc
	}
	if before != nil {
		l.judgeAttached(key, before, svc, gone)
	}
	l.judgeServices()
}

// judgeAttached: a Service that was given its claim's address and still
// names the claim (Bound) keeps the address. A Service whose deletion
// began has let go of the claim: it may lose the address.
func (l *Ledger) judgeAttached(key string, before, after *corev1.Service, gone bool) {
	claim, given := l.given[key]
	names := !gone && after.DeletionTimestamp == nil && claimKey(after) == claim && l.boundClaim(claim)
	if given && names && len(metallb.IngressIPs(after)) < len(metallb.IngressIPs(before)) {
		var others []string
		for k, svc := range l.services {
			if k != key && claimKey(svc) == claim {
				others = append(others, k+": "+strings.Join(l.history[k], "\n    "))
			}
		}
		l.violate(AttachedLost, "Service %s names Bound claim %s and went from %v to %v\n  Service: %s\n  claim: %s\n  other Services naming it: %s",
			key, claim, metallb.IngressIPs(before), metallb.IngressIPs(after), strings.Join(l.history[key], "\n    "), strings.Join(l.history[claim], "\n    "),
			strings.Join(others, "\n  "))
	}
	if !names {
		delete(l.given, key)
	}
}

func (l *Ledger) boundClaim(key string) bool {
	for _, st := range l.claims {
		if st.key == key && !st.deleted && st.phase == v1alpha1.ClaimBound {
			return true
		}
	}
	return false
}

// judgeServices: every driver address once held is held while it lives;
// nobody holds one who is neither its placeholder, a Service naming its
// claim, nor one its holding record names; and it marks the Services
// given their claim's address.
func (l *Ledger) judgeServices() {
	strangers := map[string]bool{}
	stranger := func(key string, ip netip.Addr, format string, args ...any) {
		k := key + " " + ip.String()
		if strangers[k] = true; !l.strangers[k] { // once while it lasts
			l.violate(Stranger, format, args...)
		}
	}
	defer func() { l.strangers = strangers }()
	holders := map[netip.Addr][]*corev1.Service{}
	for _, svc := range l.services {
		for _, ip := range metallb.IngressIPs(svc) {
			if _, ok := l.addresses[ip]; ok {
				holders[ip] = append(holders[ip], svc)
			} else if svc.Namespace != l.Namespace && slices.ContainsFunc(l.Pools, func(p netip.Prefix) bool { return p.Contains(ip) }) {
				stranger(svc.Namespace+"/"+svc.Name, ip, "%s is held by %s/%s and recorded by no IPAddress", ip, svc.Namespace, svc.Name)
			}
		}
	}
	for ip, a := range l.addresses {
		hs := holders[ip]
		switch {
		case len(hs) > 0:
			l.held[ip] = l.held[ip][:0]
			for _, svc := range hs {
				l.held[ip] = append(l.held[ip], svc.Namespace+"/"+svc.Name)
			}
		case l.held[ip] != nil && a.DeletionTimestamp == nil && l.blind == 0:
			var last []string
			for _, k := range l.held[ip] {
				last = append(last, k+": "+strings.Join(l.history[k], "\n    "))
			}
			l.violate(Unheld, "%s (%s) is held by nobody\n  address: %s\n  last held by: %s", ip, a.Name,
				strings.Join(l.history[a.Name], "\n    "), strings.Join(last, "\n  "))
			delete(l.held, ip) // once per gap
		}
		for _, svc := range hs {
			key := svc.Namespace + "/" + svc.Name
			switch {
			case svc.Namespace == l.Namespace:
			case a.Spec.ClaimRef != nil && claimKey(svc) == a.Spec.ClaimRef.Namespace+"/"+a.Spec.ClaimRef.Name:
				if svc.DeletionTimestamp == nil && l.boundClaim(claimKey(svc)) {
					l.given[key] = claimKey(svc)
				}
			case recorded(a, svc):
			default:
				stranger(key, ip, "%s (%s) is held by %s, which names %q\n  address: %s\n  Service: %s", ip, a.Name, key, claimKey(svc),
					strings.Join(l.history[a.Name], "\n    "), strings.Join(l.history[key], "\n    "))
			}
		}
	}
}

// recorded reports whether the address's holding record names svc.
func recorded(a *v1alpha1.IPAddress, svc *corev1.Service) bool {
	return slices.ContainsFunc(recordedRefs(a), func(r v1alpha1.HeldReference) bool { return r.UID == svc.UID })
}

// recordedRefs are the Services the address's holding record names.
func recordedRefs(a *v1alpha1.IPAddress) []v1alpha1.HeldReference {
	h := a.Status.Holding
	if h == nil {
		return nil
	}
	refs := slices.Clone(h.From)
	if h.Workload != nil {
		refs = append(refs, *h.Workload)
	}
	return refs
}

func claimKey(svc *corev1.Service) string {
	if name := svc.Annotations[v1alpha1.AnnotationIPAddressClaim]; name != "" {
		return svc.Namespace + "/" + name
	}
	return ""
}
