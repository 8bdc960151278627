package binding

import (
	"math"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

func TestCountAddresses(t *testing.T) {
	addr := func(ip string, phase v1alpha1.AddressPhase) v1alpha1.IPAddress {
		return v1alpha1.IPAddress{Spec: v1alpha1.IPAddressSpec{Address: ip}, Status: v1alpha1.IPAddressStatus{Phase: phase}}
	}
	got := CountAddresses([]v1alpha1.IPAddress{
		addr("192.0.2.1", v1alpha1.AddressAvailable), addr("192.0.2.2", v1alpha1.AddressBound), addr("192.0.2.3", v1alpha1.AddressConflict),
		addr("192.0.2.4", v1alpha1.AddressReleased), addr("2001:db8::1", v1alpha1.AddressPending), addr("2001:db8::2", ""),
	})
	want := []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 4, Bound: 2, Released: 1, Available: 1}, {Family: v1alpha1.IPv6, Total: 2, Bound: 1}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("counts %+v, want %+v", got, want)
	}
}

// TestExhaustionConditions: the driver's count of its range where it
// reports one, else the core's count of the addresses.
func TestExhaustionConditions(t *testing.T) {
	class := func(capacity []v1alpha1.FamilyCapacity, addresses []v1alpha1.FamilyAddresses) *v1alpha1.IPAddressClass {
		return &v1alpha1.IPAddressClass{Status: v1alpha1.IPAddressClassStatus{Capacity: capacity, Addresses: addresses}}
	}
	for _, tc := range []struct {
		name                    string
		class                   *v1alpha1.IPAddressClass
		exhausted, nearly       metav1.ConditionStatus
		exhaustedMsg, nearlyMsg string
	}{
		{"1 nothing known: neither, and it says nothing is counted", class(nil, nil), metav1.ConditionFalse, metav1.ConditionFalse,
			"what the class has left is not counted: the class has no address yet and no driver counts a range of it",
			"what the class has left is not counted: the class has no address yet and no driver counts a range of it"},
		{"1b a class its driver refuses counts nothing, whatever its addresses: not said to have addresses left",
			&v1alpha1.IPAddressClass{Status: v1alpha1.IPAddressClassStatus{
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse}},
				Addresses:  []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 3, Bound: 3}}}},
			metav1.ConditionFalse, metav1.ConditionFalse,
			"what the class has left is not counted: its driver does not accept the class (its Ready condition says why)", ""},
		{"1d ...nor one whose driver has not said yet whether it accepts it",
			&v1alpha1.IPAddressClass{Status: v1alpha1.IPAddressClassStatus{
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown}}}},
			metav1.ConditionFalse, metav1.ConditionFalse,
			"what the class has left is not counted: its driver has not said yet whether it accepts the class", ""},
		{"1c a family counted with room, the other not: the message names the one counted",
			class(nil, []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv6, Total: 4, Bound: 1, Available: 3}}),
			metav1.ConditionFalse, metav1.ConditionFalse, "IPv6 has addresses left", "IPv6 has at least 10% of its addresses left"},
		{"2 static addresses all taken", class(nil, []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 2, Bound: 2}}),
			metav1.ConditionTrue, metav1.ConditionTrue, "no IPv4 address is left to bind or provision", "IPv4: none left (threshold 10%)"},
		{"3 a pool below the threshold", class([]v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv6, Total: 256, Allocated: 250, Available: 6}}, nil),
			metav1.ConditionFalse, metav1.ConditionTrue, "", "IPv6: 6 of 256 left (threshold 10%)"},
		{"4 the driver's count wins over the addresses'", class([]v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Total: 16, Available: 8}},
			[]v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 8, Bound: 8}}), metav1.ConditionFalse, metav1.ConditionFalse, "IPv4 has addresses left", ""},
		{"5 a driver's range all provisioned, one address recycled to Available: not exhausted",
			class([]v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Total: 4, Allocated: 4}},
				[]v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 4, Bound: 3, Available: 1}}),
			metav1.ConditionFalse, metav1.ConditionFalse, "", ""},
		{"5b a driver serving the class (Ready) that counts no range, all its addresses Bound: it provisions on demand, nothing is known",
			&v1alpha1.IPAddressClass{Status: v1alpha1.IPAddressClassStatus{
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}},
				Addresses:  []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 3, Bound: 3}}}},
			metav1.ConditionFalse, metav1.ConditionFalse, "what the class has left is not counted: its driver provisions on demand and counts no range", ""},
		{"5c ...but one counting a range of the other family only has none of this one: its addresses decide",
			&v1alpha1.IPAddressClass{Status: v1alpha1.IPAddressClassStatus{
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}},
				Capacity:   []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Total: 16, Available: 8}},
				Addresses:  []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv6, Total: 2, Bound: 2}}}},
			metav1.ConditionTrue, metav1.ConditionTrue, "no IPv6 address is left to bind or provision", ""},
		{"6 a /64 the driver counts capped at the largest int64, some bound: far from the threshold",
			class([]v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv6, Total: math.MaxInt64, Allocated: 3, Available: math.MaxInt64}},
				[]v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv6, Total: 3, Bound: 3}}),
			metav1.ConditionFalse, metav1.ConditionFalse, "", ""},
		{"7 ...and one of them recycled to Available: the sum saturates instead of wrapping",
			class([]v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv6, Total: math.MaxInt64, Allocated: 3, Available: math.MaxInt64}},
				[]v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv6, Total: 3, Bound: 2, Available: 1}}),
			metav1.ConditionFalse, metav1.ConditionFalse, "", ""},
		{"8 a /71, whose size times a hundred overflows, nearly all left",
			class([]v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv6, Total: 1 << 57, Allocated: 1, Available: 1<<57 - 1}}, nil),
			metav1.ConditionFalse, metav1.ConditionFalse, "", ""},
		{"9 ...and nearly all allocated",
			class([]v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv6, Total: 1 << 57, Allocated: 1<<57 - 5, Available: 5}}, nil),
			metav1.ConditionFalse, metav1.ConditionTrue, "", "IPv6: 5 of 144115188075855872 left (threshold 10%)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, nearly := ExhaustionConditions(tc.class, 10)
			if ex.Status != tc.exhausted || nearly.Status != tc.nearly {
				t.Fatalf("Exhausted=%s NearlyExhausted=%s, want %s %s", ex.Status, nearly.Status, tc.exhausted, tc.nearly)
			}
			if tc.exhaustedMsg != "" && ex.Message != tc.exhaustedMsg {
				t.Errorf("Exhausted message %q, want %q", ex.Message, tc.exhaustedMsg)
			}
			if tc.nearlyMsg != "" && nearly.Message != tc.nearlyMsg {
				t.Errorf("NearlyExhausted message %q, want %q", nearly.Message, tc.nearlyMsg)
			}
		})
	}
}

// A driver's count capped at the largest int64 plus the class's Available
// addresses stays there: wrapped negative, every claim in line behind
// another would be told the class is exhausted.
func TestLeftSaturates(t *testing.T) {
	class := &v1alpha1.IPAddressClass{Status: v1alpha1.IPAddressClassStatus{
		Capacity:  []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv6, Total: math.MaxInt64, Available: math.MaxInt64}},
		Addresses: []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv6, Total: 3, Bound: 2, Available: 1}},
	}}
	if left, total, _ := Left(class, v1alpha1.IPv6); left != math.MaxInt64 || total != math.MaxInt64 {
		t.Errorf("Left = %d of %d, want both %d", left, total, int64(math.MaxInt64))
	}
}
