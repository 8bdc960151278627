package class

import (
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// maxNamed bounds how many addresses a ClassInUse event names.
const maxNamed = 10

// plan is what one pass writes.
type plan struct {
	addFinalizer    bool
	removeFinalizer bool
	// inUse is the ClassInUse message; empty when there is none to record.
	inUse string
}

// decide protects a live class and releases a deleted one only when it has
// no address left: count of them, addresses their names (sorted) when
// there are at most maxNamed. More are told by order of magnitude: an
// exact count would make every address that goes a new event, thousands
// while a large class drains.
func decide(class *v1alpha1.IPAddressClass, addresses []string, count int) plan {
	has := controllerutil.ContainsFinalizer(class, v1alpha1.FinalizerClassProtection)
	count = max(count, len(addresses))
	switch {
	case class.DeletionTimestamp == nil:
		return plan{addFinalizer: !has}
	case !has:
		return plan{}
	case count == 0:
		return plan{removeFinalizer: true}
	case count > maxNamed:
		return plan{inUse: fmt.Sprintf("class is being deleted; waiting for %s IPAddress objects of it to go "+
			"(kubectl get ipaddresses.local.sdn.cozystack.io --field-selector spec.className=%s)", magnitude(count), class.Name)}
	}
	return plan{inUse: fmt.Sprintf("class is being deleted; waiting for %d IPAddress object(s) of it to go: %s",
		count, strings.Join(addresses, ", "))}
}

// magnitude is n by its order of magnitude: "10 or more", "100 or more"…
func magnitude(n int) string {
	m := 1
	for m <= n/10 {
		m *= 10
	}
	return fmt.Sprintf("%d or more", m)
}
