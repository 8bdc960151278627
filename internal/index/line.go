package index

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// NewLine is the waiting line of every class and family: the claims under
// WaitingKey(class, family), oldest first. Freed addresses go to the front
// of the line, whoever serves them — the core matching Available addresses,
// or a driver provisioning new ones. A claim its namespace's quota holds
// back waits in no line: it could not take an address.
func NewLine() *Book {
	return NewOrderedBook(func(o client.Object) []string { return LineKeys(o.(*v1alpha1.IPAddressClaim)) },
		func(o client.Object) string { return LineEntry(o.(*v1alpha1.IPAddressClaim)) })
}

// LineKeys are the lines a claim stands in: its waiting keys, unless its
// quota holds it back.
func LineKeys(c *v1alpha1.IPAddressClaim) []string {
	if HeldByQuota(c) {
		return nil
	}
	return WaitingKeys(c)
}

// LineEntry files a claim in the line: entries sort by creation second,
// then namespace/name.
func LineEntry(c *v1alpha1.IPAddressClaim) string {
	return fmt.Sprintf("%020d/%s", c.CreationTimestamp.Unix(), ClaimKey(c.Namespace, c.Name))
}

// LineClaim is the ClaimKey of the claim a line entry files.
func LineClaim(entry string) string {
	_, key, _ := strings.Cut(entry, "/")
	return key
}

// HeldByQuota reports whether the claim's last pass found no room for it
// in its namespace's quota.
func HeldByQuota(c *v1alpha1.IPAddressClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound)
	return cond != nil && cond.Reason == v1alpha1.ReasonQuotaExceeded
}
