package claim

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// A remembered write is forgotten once the informer shows it or a later
// version, never while the informer still shows an older one.
func TestAssumeCaughtUp(t *testing.T) {
	at := func(rv string) *v1alpha1.IPAddress {
		return &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1", ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		informer string
		forgets  bool
	}{{"9", false}, {"10", true}, {"11", true}} {
		c := newAssumeCache()
		c.assume(at("10"))
		c.caughtUp(at(tc.informer))
		if _, kept := c.written["ip-192-0-2-1"]; kept == tc.forgets {
			t.Errorf("informer at %s: kept = %v", tc.informer, kept)
		}
	}
}
