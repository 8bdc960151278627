package binding

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// CountAddresses counts a class's addresses per family, by phase: Bound
// takes every phase of an address bound or being bound (Pending, Bound,
// Conflict, Lost).
func CountAddresses(addrs []v1alpha1.IPAddress) []v1alpha1.FamilyAddresses {
	by := map[v1alpha1.IPFamily]*v1alpha1.FamilyAddresses{}
	for i := range addrs {
		f := Family(&addrs[i])
		if f == "" {
			continue
		}
		c := by[f]
		if c == nil {
			c = &v1alpha1.FamilyAddresses{Family: f}
			by[f] = c
		}
		c.Total++
		switch addrs[i].Status.Phase {
		case v1alpha1.AddressAvailable:
			c.Available++
		case v1alpha1.AddressReleased:
			c.Released++
		case "":
		default:
			c.Bound++
		}
	}
	var out []v1alpha1.FamilyAddresses
	for _, f := range []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6} {
		if c := by[f]; c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// Left is how many addresses of family f class has left to give, of how
// many in all: the class's Available addresses (status.addresses) and,
// where its driver counts its range (status.capacity), what the driver has
// still to provision. The driver counts every address of its range as
// allocated, its class's Available ones too: those are left to bind, a
// recycled one as much as a never-used one. known is false when neither
// count says anything of f, and when a driver serves the class (it reports
// Ready) without counting any range.
func Left(class *v1alpha1.IPAddressClass, f v1alpha1.IPFamily) (left, total int64, known bool) {
	for _, c := range class.Status.Addresses {
		if c.Family == f {
			left, total, known = c.Available, c.Total, true
		}
	}
	if free, size, ok := DriverCapacity(class, f); ok {
		sum := saturatingAdd(left, free)
		return sum, max(size, sum), true
	}
	if len(class.Status.Capacity) == 0 && meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionReady) != nil {
		// A driver serves the class (it reports Ready) and counts no range
		// at all: it provisions on demand, and its Bound addresses say
		// nothing of what it has left. One counting a range of the other
		// family only has none of f to provision.
		return left, total, false
	}
	return left, total, known
}

// saturatingAdd is a+b for counts, capped at the largest int64: a driver
// caps its count of a large IPv6 range there already.
func saturatingAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// below reports whether left is less than percent of total, in 128 bits:
// a /64's count times a hundred overflows an int64.
func below(left, total, percent int64) bool {
	lh, ll := bits.Mul64(uint64(max(left, 0)), 100)
	th, tl := bits.Mul64(uint64(max(total, 0)), uint64(max(percent, 0)))
	return lh < th || (lh == th && ll < tl)
}

// DriverCapacity is a driver's own count of family f of class's range
// (status.capacity): ok is false when the driver reports none.
func DriverCapacity(class *v1alpha1.IPAddressClass, f v1alpha1.IPFamily) (left, total int64, ok bool) {
	for _, c := range class.Status.Capacity {
		if c.Family == f {
			return c.Available, c.Total, true
		}
	}
	return 0, 0, false
}

// Exhausted reports whether class has no address of family f left.
func Exhausted(class *v1alpha1.IPAddressClass, f v1alpha1.IPFamily) bool {
	left, total, known := Left(class, f)
	return known && total > 0 && left == 0
}

// ExhaustionConditions are a class's Exhausted and NearlyExhausted
// conditions: a family with nothing left, or with less than percent of
// its addresses left.
func ExhaustionConditions(class *v1alpha1.IPAddressClass, percent int64) (exhausted, nearly metav1.Condition) {
	var counted, gone, low []string
	for _, f := range []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6} {
		left, total, known := Left(class, f)
		if known && total > 0 {
			counted = append(counted, string(f))
		}
		switch {
		case !known || total == 0:
		case left == 0:
			gone = append(gone, string(f))
		case below(left, total, percent):
			low = append(low, fmt.Sprintf("%s: %d of %d left", f, left, total))
		}
	}
	exhausted, nearly = notExhausted(class, counted, percent)
	if len(gone) > 0 {
		exhausted.Status, exhausted.Reason = metav1.ConditionTrue, "NoAddressLeft"
		exhausted.Message = "no " + strings.Join(gone, " or ") + " address is left to bind or provision"
	}
	if low = slices.Concat(low, prefixed(gone)); len(low) > 0 {
		nearly.Status, nearly.Reason = metav1.ConditionTrue, "BelowThreshold"
		nearly.Message = fmt.Sprintf("%s (threshold %d%%)", strings.Join(low, "; "), percent)
	}
	return exhausted, nearly
}

// notExhausted are the conditions of a class with no family out of
// addresses or low on them, saying which families are counted: a class
// nothing is counted of (its driver refuses it or counts no range, or it
// has no address yet) is not said to have addresses left.
func notExhausted(class *v1alpha1.IPAddressClass, counted []string, percent int64) (exhausted, nearly metav1.Condition) {
	exhausted = metav1.Condition{Type: v1alpha1.ConditionExhausted, Status: metav1.ConditionFalse, Reason: "AddressesLeft"}
	nearly = metav1.Condition{Type: v1alpha1.ConditionNearlyExhausted, Status: metav1.ConditionFalse, Reason: "AddressesLeft"}
	switch families := strings.Join(counted, " and "); len(counted) {
	case 1:
		exhausted.Message = families + " has addresses left"
		nearly.Message = fmt.Sprintf("%s has at least %d%% of its addresses left", families, percent)
	case 2:
		exhausted.Message = families + " have addresses left"
		nearly.Message = fmt.Sprintf("%s have at least %d%% of their addresses left", families, percent)
	default:
		why := "the class has no address yet and no driver counts a range of it"
		switch ready := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionReady); {
		case ready != nil && ready.Status == metav1.ConditionFalse:
			why = "its driver does not accept the class (its Ready condition says why)"
		case ready != nil && ready.Status == metav1.ConditionTrue:
			why = "its driver provisions on demand and counts no range"
		case ready != nil:
			why = "its driver has not said yet whether it accepts the class"
		}
		exhausted.Reason, exhausted.Message = "NotCounted", "what the class has left is not counted: "+why
		nearly.Reason, nearly.Message = exhausted.Reason, exhausted.Message
	}
	return exhausted, nearly
}

func prefixed(families []string) []string {
	out := make([]string, len(families))
	for i, f := range families {
		out[i] = f + ": none left"
	}
	return out
}
