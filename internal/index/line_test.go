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
