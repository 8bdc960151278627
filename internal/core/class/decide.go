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

// decide protects a live class and releases a deleted one only when
// addresses (the names of its IPAddress objects, sorted) is empty.
func decide(class *v1alpha1.IPAddressClass, addresses []string) plan {
	has := controllerutil.ContainsFinalizer(class, v1alpha1.FinalizerClassProtection)
	switch {
	case class.DeletionTimestamp == nil:
		return plan{addFinalizer: !has}
	case !has:
		return plan{}
	case len(addresses) == 0:
		return plan{removeFinalizer: true}
	}
	named := addresses
	more := ""
	if len(named) > maxNamed {
		named, more = named[:maxNamed], fmt.Sprintf(" and %d more", len(addresses)-maxNamed)
	}
	return plan{inUse: fmt.Sprintf("class is being deleted; waiting for %d IPAddress object(s) of it to go: %s%s",
		len(addresses), strings.Join(named, ", "), more)}
}
