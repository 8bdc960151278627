package pool

import (
	"math"
	"math/big"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/allocator"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/recorder"
)

// plan is the status a class should have, and what changed.
type plan struct {
	status v1alpha1.IPAddressClassStatus
	// readyChanged: the Ready condition changed, which is written at once
	// and recorded as an event; capacity alone is written at most once per
	// interval.
	readyChanged, capacityChanged bool
	// event is recorded on the class once the status is written: a Ready
	// change only.
	event *recorder.Event
}

// decide computes a class's status from the driver's judgement of it and
// the taken addresses of its pool.
func decide(class *v1alpha1.IPAddressClass, c metallb.Class, n map[v1alpha1.IPFamily]allocator.Capacity, now time.Time) plan {
	st := class.Status.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: metallb.ReasonPoolAccepted,
		Message: "provisioning from IPAddressPool " + c.PoolName}
	switch {
	case !c.Accepted():
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, metallb.ReasonPoolRefused, c.Refusal
	case c.Caution != "":
		cond.Message += "; but " + c.Caution
	}
	p := plan{readyChanged: binding.SetCondition(&st.Conditions, cond, now)}
	st.Capacity = capacity(n)
	p.capacityChanged = !equality.Semantic.DeepEqual(st.Capacity, class.Status.Capacity)
	p.status = *st
	switch {
	case refusedNow(p):
		e := recorder.Warning(class, metallb.ReasonPoolRefused, "%s", c.Refusal)
		p.event = &e
	case p.readyChanged && c.Caution != "":
		e := recorder.Warning(class, metallb.ReasonPoolAccepted, "%s", cond.Message)
		p.event = &e
	case p.readyChanged:
		e := recorder.Normal(class, metallb.ReasonPoolAccepted, "%s", cond.Message)
		p.event = &e
	}
	return p
}

// schedule says whether the plan is written now, and when the class is
// looked at again: a Ready change at once, a capacity-only change at most
// once per interval after the last write, and at rest every interval.
func (p plan) schedule(lastWrite, now time.Time, interval time.Duration) (write bool, requeue time.Duration) {
	if !p.readyChanged && !p.capacityChanged {
		return false, interval
	}
	if wait := lastWrite.Add(interval).Sub(now); !p.readyChanged && wait > 0 {
		return false, wait
	}
	return true, interval
}

// counts counts the pool per family it has addresses of; nothing for a
// class the driver refuses (see count).
func counts(c metallb.Class, used []netip.Addr) map[v1alpha1.IPFamily]allocator.Capacity {
	out := map[v1alpha1.IPFamily]allocator.Capacity{}
	if c.Ranges == nil || !c.Accepted() {
		return out
	}
	for _, f := range v1alpha1.Dual.Families() {
		if n := allocator.Count(c.Ranges, used, f); n.Total.Sign() != 0 {
			out[f] = n
		}
	}
	return out
}

// capacity is counts as status reports it, IPv4 first.
func capacity(n map[v1alpha1.IPFamily]allocator.Capacity) []v1alpha1.FamilyCapacity {
	var out []v1alpha1.FamilyCapacity
	for _, f := range v1alpha1.Dual.Families() {
		if c, ok := n[f]; ok {
			out = append(out, v1alpha1.FamilyCapacity{Family: f, Total: saturate(c.Total), Allocated: saturate(c.Allocated), Available: saturate(c.Available)})
		}
	}
	return out
}

// saturate is n as an int64, capped at its maximum.
func saturate(n *big.Int) int64 {
	if !n.IsInt64() {
		return math.MaxInt64
	}
	return n.Int64()
}

// refusedNow reports whether the plan turns the class refused.
func refusedNow(p plan) bool {
	return p.readyChanged && meta.IsStatusConditionFalse(p.status.Conditions, v1alpha1.ConditionReady)
}
