package chaos

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

const phNS = "metallb-iad-system"

// step is one watch event given to the ledger.
type step func(*Ledger)

func claim(name string, phase v1alpha1.ClaimPhase, ips ...string) step {
	return func(l *Ledger) {
		c := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name, UID: types.UID("c-" + name)}}
		c.Status.Phase = phase
		for _, ip := range ips {
			n, _ := v1alpha1.IPAddressName(ip)
			c.Status.Addresses = append(c.Status.Addresses, v1alpha1.ClaimedAddress{Name: n, Address: ip})
		}
		l.Claim(c, false)
	}
}

func gap(start bool) step { return func(l *Ledger) { l.Gap(start) } }

func claimGone(name string) step {
	return func(l *Ledger) {
		l.Claim(&v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name, UID: types.UID("c-" + name)}}, true)
	}
}

func address(ip, claim string, mods ...func(*v1alpha1.IPAddress)) step {
	return func(l *Ledger) {
		n, _ := v1alpha1.IPAddressName(ip)
		a := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: v1alpha1.IPAddressSpec{Address: ip, ClassName: "lb", ClaimRef: &v1alpha1.ClaimReference{Namespace: "t", Name: claim}}}
		for _, m := range mods {
			m(a)
		}
		l.Address(a, false)
	}
}

func deleting(a *v1alpha1.IPAddress) { a.DeletionTimestamp = &metav1.Time{} }

func recordedOn(svc string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.Holding = &v1alpha1.Holding{From: []v1alpha1.HeldReference{{Kind: "Service", Namespace: "t", Name: svc, UID: types.UID("s-t/" + svc)}}}
	}
}

// service is namespace/name naming claim (empty: none), holding ips.
func service(ns, name, claim string, ips ...string) step {
	return serviceWith(nil, ns, name, claim, ips...)
}

// serviceDeleting is service once its deletion began.
func serviceDeleting(ns, name, claim string, ips ...string) step {
	return serviceWith(func(s *corev1.Service) { s.DeletionTimestamp = &metav1.Time{} }, ns, name, claim, ips...)
}

func serviceWith(mod func(*corev1.Service), ns, name, claim string, ips ...string) step {
	return func(l *Ledger) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("s-" + ns + "/" + name)}}
		if mod != nil {
			mod(svc)
		}
		if claim != "" {
			svc.Annotations = map[string]string{v1alpha1.AnnotationIPAddressClaim: claim}
		}
		for _, ip := range ips {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		l.Service(svc, false)
	}
}

func serviceGone(ns, name string) step {
	return func(l *Ledger) {
		l.Service(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("s-" + ns + "/" + name)}}, true)
	}
}

const ip1, ip2, ip6 = "100.64.0.1", "100.64.0.2", "2001:db8::1"

// ph is the placeholder of ip, holding it or not.
func ph(ip string, holds bool) step {
	n, _ := v1alpha1.IPAddressName(ip)
	if holds {
		return service(phNS, n, "", ip)
	}
	return service(phNS, n, "")
}

// attached: web claims ip1, its placeholder holds it, then Service web
// takes it over.
var attached = []step{claim("web", v1alpha1.ClaimBound, ip1), address(ip1, "web"), ph(ip1, true),
	service("t", "web", "web", ip1), ph(ip1, false)}

// The cases follow the invariants in their order; each lists the events
// and the violations they must count (none for a history that keeps every
// promise).
func TestLedger(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
		want  map[string]int
	}{
		{"a hitless attach breaks nothing", attached, nil},
		{"0 a blind spot (a watch broke) counts nothing within", []step{address(ip1, "web"), ph(ip1, true), gap(true), ph(ip1, false),
			ph(ip1, true), gap(false)}, nil},
		{"0 ...but the state after it is judged", []step{address(ip1, "web"), ph(ip1, true), gap(true), ph(ip1, false), gap(false)},
			map[string]int{Unheld: 1}},
		{"1 an IP in two live claims", []step{claim("a", v1alpha1.ClaimBound, ip1), claim("b", v1alpha1.ClaimBound, ip1)},
			map[string]int{DoubleBound: 1}},
		{"1 ...but not once the first claim is gone", []step{claim("a", v1alpha1.ClaimBound, ip1), claimGone("a"), claim("b", v1alpha1.ClaimBound, ip1)}, nil},
		{"2 two addresses of one family", []step{claim("a", v1alpha1.ClaimBound, ip1, ip2)}, map[string]int{TwoOfAFamily: 1}},
		{"2 a Dual claim has one of each", []step{claim("a", v1alpha1.ClaimBound, ip1, ip6)}, nil},
		{"3 a Bound claim's address changes", []step{claim("a", v1alpha1.ClaimBound, ip1), claim("a", v1alpha1.ClaimBound, ip2)},
			map[string]int{AddressChanged: 1}},
		{"3 a claim re-created under its name is another claim", []step{claim("a", v1alpha1.ClaimBound, ip1), claimGone("a"),
			claim("a", v1alpha1.ClaimBound, ip2)}, nil},
		{"4 a reserved address held by nobody", []step{address(ip1, "web"), ph(ip1, true), ph(ip1, false)}, map[string]int{Unheld: 1}},
		{"4 ...but never held yet is no gap", []step{address(ip1, "web"), ph(ip1, false)}, nil},
		{"4 ...nor once its deletion began", []step{address(ip1, "web"), ph(ip1, true), address(ip1, "web", deleting), ph(ip1, false)}, nil},
		{"5 an attached Service loses its address while naming its claim", append(append([]step{}, attached...), service("t", "web", "web")),
			map[string]int{AttachedLost: 1, Unheld: 1}},
		{"5 ...but not once its deletion began", append(append([]step{}, attached...), serviceDeleting("t", "web", "web", ip1), ph(ip1, true),
			serviceDeleting("t", "web", "web")), nil},
		{"5 a detach: the Service stops naming the claim first", append(append([]step{}, attached...),
			address(ip1, "web", recordedOn("web")), service("t", "web", "", ip1), ph(ip1, true), service("t", "web", "")), nil},
		{"6 a stranger holds a reserved address", []step{address(ip1, "web"), ph(ip1, true), service("t", "thief", "", ip1)},
			map[string]int{Stranger: 1}},
		{"6 a stranger is counted once while it holds the address", []step{address(ip1, "web"), ph(ip1, true), service("t", "thief", "", ip1),
			service("t", "other", ""), service("t", "thief", "", ip1)}, map[string]int{Stranger: 1}},
		{"6 ...a Service naming another claim is a stranger too", []step{address(ip1, "web"), ph(ip1, true), service("t", "db", "db", ip1)},
			map[string]int{Stranger: 1}},
		{"6 ...and so is a Service holding a pool address no IPAddress records", []step{service("t", "thief", "", "100.64.0.9")},
			map[string]int{Stranger: 1}},
		{"6 ...but not a placeholder (its address is being created or torn down)", []step{ph("100.64.0.9", true)}, nil},
		{"6 a moved Service the record names keeps the address while the new one takes it", append(append([]step{}, attached...),
			address(ip1, "web", recordedOn("web")), service("t", "web", "other", ip1), service("t", "new", "web", ip1), serviceGone("t", "web")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLedger(phNS, func(class string) bool { return class == "lb" })
			l.Pools = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24")}
			for _, s := range tc.steps {
				s(l)
			}
			for _, inv := range Invariants {
				if l.Violations[inv] != tc.want[inv] {
					t.Errorf("%s: %d violations, want %d; notes: %q", inv, l.Violations[inv], tc.want[inv], l.Notes)
				}
			}
		})
	}
}
