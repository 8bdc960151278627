package quota

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

func rq(hard map[corev1.ResourceName]int64, charges Charges) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{}}}
	for k, v := range hard {
		q.Spec.Hard[k] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	if charges != nil {
		q.Annotations = map[string]string{ChargesAnnotation: charges.String()}
	}
	return q
}

func addr(ip, class, ns, claim string, uid types.UID) v1alpha1.IPAddress {
	name, _ := v1alpha1.IPAddressName(ip)
	a := v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.IPAddressSpec{Address: ip, ClassName: class}}
	if claim != "" {
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: ns, Name: claim, UID: uid}
	}
	return a
}

var (
	public = ClassKey("public")
	v4     = []v1alpha1.IPFamily{v1alpha1.IPv4}
	dual   = []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6}
)

// TestUsage: what counts — every address naming the namespace, whatever
// its phase (a Released one is still the namespace's), each unsettled
// charge, a Dual claim as two.
func TestUsage(t *testing.T) {
	addrs := []v1alpha1.IPAddress{
		addr("192.0.2.1", "public", "t", "a", "ua"),    // bound
		addr("192.0.2.2", "public", "t", "gone", "ug"), // released, retained
		addr("192.0.2.3", "public", "t", "b", ""),      // pre-bound: being provisioned
		addr("192.0.2.4", "private", "t", "c", "uc"),   // another class
		addr("192.0.2.5", "public", "other", "d", "ud"),
		addr("192.0.2.6", "public", "", "", ""), // Available
	}
	charges := Charges{
		"ua": {Claim: "a", Class: "public", Families: v4},   // settled
		"ue": {Claim: "e", Class: "public", Families: dual}, // waiting: two
	}
	got := Usage(rq(map[corev1.ResourceName]int64{public: 10, AllClasses: 10}, nil), addrs, charges)
	for k, want := range map[corev1.ResourceName]int64{public: 5, AllClasses: 6} {
		if n := got[k]; n.Value() != want {
			t.Errorf("%s = %d, want %d", k, n.Value(), want)
		}
	}
}

// TestDecide: a claim is charged only when every limit of its class has
// room for the families no address names yet, and never twice.
func TestDecide(t *testing.T) {
	full := []v1alpha1.IPAddress{addr("192.0.2.1", "public", "t", "a", "ua"), addr("192.0.2.2", "public", "t", "b", "ub")}
	for _, tc := range []struct {
		name      string
		hard      map[corev1.ResourceName]int64
		charges   Charges
		addresses []v1alpha1.IPAddress
		req       Request
		charged   []v1alpha1.IPFamily
		refused   bool
	}{
		{"1 room: charged", map[corev1.ResourceName]int64{public: 3}, nil, full, Request{"c", "uc", "public", v4}, v4, false},
		{"2 the last place", map[corev1.ResourceName]int64{public: 2}, nil, full[:1], Request{"c", "uc", "public", v4}, v4, false},
		{"3 no room: refused", map[corev1.ResourceName]int64{public: 2}, nil, full, Request{"c", "uc", "public", v4}, nil, true},
		{"4 a Dual claim needs two places", map[corev1.ResourceName]int64{public: 3}, nil, full, Request{"c", "uc", "public", dual}, nil, true},
		{"5 the all-classes key counts every class", map[corev1.ResourceName]int64{AllClasses: 2}, nil, full, Request{"c", "uc", "private", v4}, nil, true},
		{"6 another class's key does not limit", map[corev1.ResourceName]int64{ClassKey("private"): 0}, nil, full, Request{"c", "uc", "public", v4}, nil, false},
		{"7 already charged: nothing", map[corev1.ResourceName]int64{public: 3}, Charges{"uc": {Claim: "c", Class: "public", Families: v4}}, full, Request{"c", "uc", "public", v4}, nil, false},
		{"8 a waiting charge holds its place", map[corev1.ResourceName]int64{public: 3}, Charges{"ux": {Claim: "x", Class: "public", Families: v4}}, full, Request{"c", "uc", "public", v4}, nil, true},
		{"9 a family an address names needs no charge", map[corev1.ResourceName]int64{public: 2}, nil, full, Request{"a", "ua", "public", v4}, nil, false},
		{"10 an address of another class pre-bound to the claim is refused by the binder: charged all the same", map[corev1.ResourceName]int64{public: 3}, nil,
			append(slices.Clone(full), addr("192.0.2.9", "private", "t", "c", "")), Request{"c", "uc", "public", v4}, v4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := rq(tc.hard, tc.charges)
			d := Decide(q, tc.req, ChargesOf(q), tc.addresses)
			if (d.Refusal != "") != tc.refused {
				t.Fatalf("refusal %q, want refused %v", d.Refusal, tc.refused)
			}
			if got := fmt.Sprint(d.Charges[tc.req.UID].Families); tc.charged != nil && got != fmt.Sprint(tc.charged) {
				t.Errorf("charged %s, want %v", got, tc.charged)
			}
			if tc.charged == nil && d.Charges != nil {
				t.Errorf("charges written: %v", d.Charges)
			}
		})
	}
}

// TestDecideRetargeted: a claim whose class changed while it waited is
// charged for its new class as if it had no charge, and its charge of the
// old class is dropped whether or not the new one fits — neither skipping
// the new class's limit nor keeping the old class's room.
func TestDecideRetargeted(t *testing.T) {
	private := ClassKey("private")
	old := Charges{"uc": {Claim: "c", Class: "private", Families: v4}, "ux": {Claim: "x", Class: "public", Families: v4}}
	for _, tc := range []struct {
		name    string
		hard    map[corev1.ResourceName]int64
		refused bool
		want    string // the claim's charge after the decision
	}{
		{"1 no room in the new class: refused, the old charge dropped", map[corev1.ResourceName]int64{public: 1, private: 5}, true, "{  []}"},
		{"2 room in the new class: charged for it, the old charge replaced", map[corev1.ResourceName]int64{public: 2, private: 5}, false, "{c public [IPv4]}"},
		{"3 the all-classes key does not count the claim twice", map[corev1.ResourceName]int64{AllClasses: 2}, false, "{c public [IPv4]}"},
		{"4 a quota that does not limit the new class drops the old charge", map[corev1.ResourceName]int64{private: 5}, false, "{  []}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := rq(tc.hard, old)
			d := Decide(q, Request{"c", "uc", "public", v4}, ChargesOf(q), nil)
			if (d.Refusal != "") != tc.refused {
				t.Fatalf("refusal %q, want refused %v", d.Refusal, tc.refused)
			}
			if d.Charges == nil {
				t.Fatal("the record is unchanged; want the old charge gone")
			}
			if got := fmt.Sprint(d.Charges["uc"]); got != tc.want {
				t.Errorf("the claim's charge is %s, want %s", got, tc.want)
			}
			if d.Charges["ux"].Class != "public" {
				t.Errorf("another claim's charge went: %v", d.Charges)
			}
		})
	}
	if !old.Holds("uc", "private", v1alpha1.IPv4) || old.Holds("uc", "public", v1alpha1.IPv4) {
		t.Error("Holds must answer for the charged class only")
	}
}

// TestDecideRefusalNamesEverything: the refusal a tenant reads names the
// quota, the key, the namespace and the numbers.
func TestDecideRefusalNamesEverything(t *testing.T) {
	q := rq(map[corev1.ResourceName]int64{public: 1}, nil)
	d := Decide(q, Request{"c", "uc", "public", v4}, nil, []v1alpha1.IPAddress{addr("192.0.2.1", "public", "t", "a", "ua")})
	want := "exceeded quota: ResourceQuota q limits public.ipaddressclass.local.sdn.cozystack.io/addresses in namespace t to 1; 1 are in use and the claim needs 1 more"
	if d.Refusal != want {
		t.Errorf("refusal\n  %q\nwant\n  %q", d.Refusal, want)
	}
}

// TestRefusalCountsReleased: a quota full of Released addresses says so,
// counting those of the key refused only — at the binder and at admission.
func TestRefusalCountsReleased(t *testing.T) {
	q := rq(map[corev1.ResourceName]int64{public: 2}, nil)
	kept := addr("192.0.2.1", "public", "t", "old", "uo")
	kept.Status.Phase = v1alpha1.AddressReleased
	other := addr("192.0.2.9", "private", "t", "gone", "ug")
	other.Status.Phase = v1alpha1.AddressReleased
	addrs := []v1alpha1.IPAddress{kept, other, addr("192.0.2.2", "public", "t", "a", "ua")}
	want := "exceeded quota: ResourceQuota q limits public.ipaddressclass.local.sdn.cozystack.io/addresses in namespace t to 2; " +
		"2 are in use and the claim needs 1 more; 1 of those in use is Released, still the namespace's until recycled or deleted"
	if d := Decide(q, Request{"c", "uc", "public", v4}, nil, addrs); d.Refusal != want {
		t.Errorf("binder's refusal\n  %q\nwant\n  %q", d.Refusal, want)
	}
	if got := Admit([]corev1.ResourceQuota{*q}, "c", "public", v4, false, addrs); got != want {
		t.Errorf("admission's refusal\n  %q\nwant\n  %q", got, want)
	}
}

// TestPrune: settled charges and those of gone claims go; a waiting one
// of a live claim stays.
func TestPrune(t *testing.T) {
	q := rq(map[corev1.ResourceName]int64{public: 5}, nil)
	charges := Charges{
		"ua": {Claim: "a", Class: "public", Families: v4},   // settled
		"ug": {Claim: "g", Class: "public", Families: v4},   // claim gone
		"uw": {Claim: "w", Class: "public", Families: dual}, // half settled, live
	}
	addrs := []v1alpha1.IPAddress{addr("192.0.2.1", "public", "t", "a", "ua"), addr("192.0.2.2", "public", "t", "w", "uw"),
		addr("2001:db8::9", "private", "t", "w", "")} // of another class: settles nothing of w's
	got := Prune(q, charges, addrs, func(uid types.UID) bool { return uid != "ug" })
	if len(got) != 1 || got["uw"].Claim != "w" {
		t.Errorf("pruned to %v, want only w's", got)
	}
	if Prune(q, Charges{"uw": charges["uw"]}, addrs, func(types.UID) bool { return true }) != nil {
		t.Error("nothing to prune should return nil")
	}
}

// TestAdmit: the early refusal at creation, from what a cache shows; a
// family an address already stands for needs no room.
func TestAdmit(t *testing.T) {
	one := []corev1.ResourceQuota{*rq(map[corev1.ResourceName]int64{public: 1}, nil)}
	kept := addr("192.0.2.1", "public", "t", "gone", "ug")
	kept.Status.Phase = v1alpha1.AddressReleased
	held := addr("192.0.2.1", "public", "t", "gone", "ug")
	held.Status.Phase = v1alpha1.AddressLost
	v6 := []v1alpha1.IPFamily{v1alpha1.IPv6}
	for _, tc := range []struct {
		name      string
		claim     string
		class     string
		families  []v1alpha1.IPFamily
		keep      bool
		addresses []v1alpha1.IPAddress
		refused   bool
	}{
		{"1 an empty namespace", "c", "public", v4, false, nil, false},
		{"2 a Dual claim against a limit of 1", "c", "public", dual, false, nil, true},
		{"3 another class's address does not count", "c", "private", v4, false, []v1alpha1.IPAddress{addr("192.0.2.1", "public", "t", "a", "ua")}, false},
		{"4 the limit reached", "c", "public", v4, false, []v1alpha1.IPAddress{addr("192.0.2.1", "public", "t", "a", "ua")}, true},
		{"5 a kept Released address the claim takes back needs no room", "web", "public", v4, true, []v1alpha1.IPAddress{kept}, false},
		{"6 ...only where the class keeps them", "web", "public", v4, false, []v1alpha1.IPAddress{kept}, true},
		{"7 ...and only for its family", "web", "public", v6, true, []v1alpha1.IPAddress{kept}, true},
		{"8 an address pre-bound to the claim's name needs no room", "c", "public", v4, false, []v1alpha1.IPAddress{addr("192.0.2.1", "public", "t", "c", "")}, false},
		{"9 a Released one an earlier claim of the name left does, where the class keeps none", "gone", "public", v4, false, []v1alpha1.IPAddress{kept}, true},
		{"10 so does one an earlier claim of the name still holds (Lost, say): the binder binds the new claim another", "gone", "public", v4, false, []v1alpha1.IPAddress{held}, true},
	} {
		if got := Admit(one, tc.claim, tc.class, tc.families, tc.keep, tc.addresses); (got != "") != tc.refused {
			t.Errorf("%s: Admit = %q, want refused %v", tc.name, got, tc.refused)
		}
	}
}

// TestDecideFamilyChanged: a claim whose family changed while it waited is
// charged for what it asks for now; its charge of the family it dropped
// goes, and does not hold it back.
func TestDecideFamilyChanged(t *testing.T) {
	q := rq(map[corev1.ResourceName]int64{public: 1}, Charges{"uc": {Claim: "c", Class: "public", Families: v4}})
	d := Decide(q, Request{"c", "uc", "public", []v1alpha1.IPFamily{v1alpha1.IPv6}}, ChargesOf(q), nil)
	if d.Refusal != "" {
		t.Fatalf("refused: %s", d.Refusal)
	}
	if got := fmt.Sprint(d.Charges["uc"].Families); got != "[IPv6]" {
		t.Errorf("charged %s, want [IPv6]", got)
	}
}

// TestReleasedPreBindingCoversNothing: a pre-binding released before its
// claim accepted it is no claim's (binding.PreBound): a claim of that name
// created later is charged as any other.
func TestReleasedPreBindingCoversNothing(t *testing.T) {
	released := addr("192.0.2.1", "public", "t", "c", "")
	released.Status.Phase = v1alpha1.AddressReleased
	q := rq(map[corev1.ResourceName]int64{public: 1}, nil)
	if d := Decide(q, Request{"c", "uc", "public", v4}, nil, []v1alpha1.IPAddress{released}); d.Refusal == "" {
		t.Errorf("charged %v past the limit the Released address fills", d.Charges)
	}
}
