package index

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// A line entry sorts by creation second, then namespace/name, and names
// its claim.
func TestLineEntry(t *testing.T) {
	at := func(sec int64, ns, name string) *v1alpha1.IPAddressClaim {
		return &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Unix(sec, 0)}}
	}
	older, same, later := LineEntry(at(99, "b", "z")), LineEntry(at(100, "a", "z")), LineEntry(at(100, "b", "a"))
	if older >= same || same >= later {
		t.Errorf("order: %q %q %q", older, same, later)
	}
	if got := LineClaim(later); got != "b/a" {
		t.Errorf("LineClaim(%q) = %q, want b/a", later, got)
	}
}

// A claim stands in the lines of the families it waits for, and in none
// while its quota holds it back: the matcher hears it leave.
func TestLineKeys(t *testing.T) {
	waiting := func(reason string) *v1alpha1.IPAddressClaim {
		return &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "c"},
			Spec: v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv4},
			Status: v1alpha1.IPAddressClaimStatus{Phase: v1alpha1.ClaimPending,
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionBound, Status: metav1.ConditionFalse, Reason: reason}}}}
	}
	if got := LineKeys(waiting(v1alpha1.ReasonWaitingForProvisioning)); len(got) != 1 || got[0] != "public/IPv4" {
		t.Errorf("a waiting claim stands in %v, want [public/IPv4]", got)
	}
	if got := LineKeys(waiting(v1alpha1.ReasonQuotaExceeded)); got != nil {
		t.Errorf("a claim its quota holds back stands in %v, want none", got)
	}
}
