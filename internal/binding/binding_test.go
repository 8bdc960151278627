package binding

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// TestSetPhaseDatesEveryPhaseChange: the Bound condition's lastTransitionTime
// is the release time of §5 step 7, so it must move on every core-owned
// phase change — also between two False phases — and only then.
func TestSetPhaseDatesEveryPhaseChange(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var st v1alpha1.IPAddressStatus
	steps := []struct {
		name     string
		phase    v1alpha1.AddressPhase
		message  string
		at       time.Time
		changed  bool
		datedAt  time.Time
		statusOf string
	}{
		{"5-5 a new address becomes Available", v1alpha1.AddressAvailable, "free", t0, true, t0, "False"},
		{"same phase and message: no write", v1alpha1.AddressAvailable, "free", t0.Add(time.Minute), false, t0, "False"},
		{"same phase, new message: written, not re-dated", v1alpha1.AddressAvailable, "still free", t0.Add(2 * time.Minute), true, t0, "False"},
		{"5-6 Bound is dated", v1alpha1.AddressBound, "bound", t0.Add(time.Hour), true, t0.Add(time.Hour), "True"},
		{"6-1 Released is dated", v1alpha1.AddressReleased, "released", t0.Add(2 * time.Hour), true, t0.Add(2 * time.Hour), "False"},
		{"5-5 Released to Available (both False) is dated too", v1alpha1.AddressAvailable, "free", t0.Add(3 * time.Hour), true, t0.Add(3 * time.Hour), "False"},
	}
	for _, s := range steps {
		changed := SetPhase(&st, s.phase, s.message, s.at)
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionBound)
		switch {
		case changed != s.changed:
			t.Errorf("%s: changed = %v, want %v", s.name, changed, s.changed)
		case st.Phase != s.phase || c.Reason != string(s.phase) || string(c.Status) != s.statusOf:
			t.Errorf("%s: phase %s, condition %s/%s", s.name, st.Phase, c.Status, c.Reason)
		case !c.LastTransitionTime.Time.Equal(s.datedAt):
			t.Errorf("%s: dated %v, want %v", s.name, c.LastTransitionTime.Time, s.datedAt)
		}
	}
}

func TestUnreportedFamilies(t *testing.T) {
	claim := func(f v1alpha1.IPFamily, reported ...string) *v1alpha1.IPAddressClaim {
		c := &v1alpha1.IPAddressClaim{Spec: v1alpha1.IPAddressClaimSpec{Family: f}}
		for _, ip := range reported {
			c.Status.Addresses = append(c.Status.Addresses, v1alpha1.ClaimedAddress{Address: ip})
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		claim *v1alpha1.IPAddressClaim
		want  string
	}{
		{"an empty family means IPv4", claim(""), "[IPv4]"},
		{"a reported IPv4 covers IPv4", claim(v1alpha1.IPv4, "203.0.113.7"), "[]"},
		{"Dual with IPv4 reported misses IPv6", claim(v1alpha1.Dual, "203.0.113.7"), "[IPv6]"},
		{"Dual with both reported misses nothing", claim(v1alpha1.Dual, "2001:db8::7", "203.0.113.7"), "[]"},
		{"an address of an unrequested family covers nothing", claim(v1alpha1.IPv4, "2001:db8::7"), "[IPv4]"},
	} {
		if got := fmt.Sprint(UnreportedFamilies(tc.claim)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestPreBoundIn: only a pre-binding the core would accept (contract §4
// step 4) stands for a family; the core refuses the rest, so a driver that
// counted them would never provision the family.
func TestPreBoundIn(t *testing.T) {
	claim := &v1alpha1.IPAddressClaim{Spec: v1alpha1.IPAddressClaimSpec{Family: v1alpha1.IPv4}}
	claim.Namespace, claim.Name, claim.UID = "tenant", "web", "uid-web"
	addr := func(ip, class, uid string, phase v1alpha1.AddressPhase) *v1alpha1.IPAddress {
		return &v1alpha1.IPAddress{
			Spec:   v1alpha1.IPAddressSpec{Address: ip, ClassName: class, ClaimRef: &v1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: types.UID(uid)}},
			Status: v1alpha1.IPAddressStatus{Phase: phase},
		}
	}
	for _, tc := range []struct {
		name string
		addr *v1alpha1.IPAddress
		want bool
	}{
		{"4-4 of the class and a requested family", addr("203.0.113.7", "public", "", ""), true},
		{"4-4 of another class: refused", addr("203.0.113.7", "private", "", ""), false},
		{"4-4 of a family the claim does not request: refused", addr("2001:db8::7", "public", "", ""), false},
		{"4-3 bound with a UID: not a pre-binding", addr("203.0.113.7", "public", "uid-web", ""), false},
		{"6 Released before it was accepted: waits for an admin", addr("203.0.113.7", "public", "", v1alpha1.AddressReleased), false},
	} {
		if got := PreBoundIn(tc.addr, claim, "public"); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAnnotatedClasses(t *testing.T) {
	class := func(name, value string, deleting bool) v1alpha1.IPAddressClass {
		c := v1alpha1.IPAddressClass{}
		c.Name = name
		if value != "" {
			c.Annotations = map[string]string{v1alpha1.AnnotationDefaultClass: value}
		}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{}
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		classes []v1alpha1.IPAddressClass
		want    []string
	}{
		{"1 none annotated", []v1alpha1.IPAddressClass{class("a", "", false)}, nil},
		{"2 only the exact value true counts", []v1alpha1.IPAddressClass{class("a", "True", false), class("b", "true", false)}, []string{"b"}},
		{"3 a class being deleted does not count", []v1alpha1.IPAddressClass{class("a", "true", true), class("b", "true", false)}, []string{"b"}},
		{"4 several, sorted by name", []v1alpha1.IPAddressClass{class("c", "true", false), class("a", "true", false)}, []string{"a", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AnnotatedClasses(tc.classes, v1alpha1.AnnotationDefaultClass); !slices.Equal(got, tc.want) {
				t.Errorf("AnnotatedClasses = %v, want %v", got, tc.want)
			}
		})
	}
}

// CorePhase reads back what SetPhase wrote, whatever phase a driver has
// put on top since.
func TestCorePhase(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		set   v1alpha1.AddressPhase // "" leaves the status without a Bound condition
		after v1alpha1.AddressPhase
		want  v1alpha1.AddressPhase
	}{
		{"1 nothing recorded: Pending", "", v1alpha1.AddressLost, v1alpha1.AddressPending},
		{"2 Bound under Conflict", v1alpha1.AddressBound, v1alpha1.AddressConflict, v1alpha1.AddressBound},
		{"3 Available under Lost", v1alpha1.AddressAvailable, v1alpha1.AddressLost, v1alpha1.AddressAvailable},
		{"4 Released under Conflict", v1alpha1.AddressReleased, v1alpha1.AddressConflict, v1alpha1.AddressReleased},
		{"5 Pending stays Pending", v1alpha1.AddressPending, v1alpha1.AddressLost, v1alpha1.AddressPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st v1alpha1.IPAddressStatus
			if tc.set != "" {
				SetPhase(&st, tc.set, "", now)
			}
			st.Phase = tc.after
			if got := CorePhase(&st); got != tc.want {
				t.Errorf("CorePhase = %s, want %s", got, tc.want)
			}
		})
	}
}
