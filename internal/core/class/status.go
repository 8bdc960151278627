package class

import (
	"context"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/cachetrim"
	"github.com/cozystack/address-controller/internal/retry"
)

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses/status,verbs=update

// statusInterval bounds how often a class's counts are written: a burst of
// binds would change them at every bind. A change of its Exhausted
// condition is written at once.
const statusInterval = 2 * time.Second

// moves remembers when an address of each class last changed.
type moves struct {
	mu sync.Mutex
	at map[string]time.Time
}

// note records that an address of class changed at now.
func (m *moves) note(class string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[string]time.Time{}
	}
	m.at[class] = now
}

// since is how long ago an address of class last changed; a long time when
// none did since the binary started.
func (m *moves) since(class string, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.at[class]
	if !ok {
		return time.Duration(math.MaxInt64)
	}
	return now.Sub(at)
}

// forget drops a class that is gone.
func (m *moves) forget(class string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.at, class)
}

// written remembers when each class's status was last written.
type written struct {
	mu sync.Mutex
	at map[string]time.Time
}

// status is the class's status with the core's part recomputed: the
// counts of its addresses and the exhaustion conditions.
func status(class *v1alpha1.IPAddressClass, counts []v1alpha1.FamilyAddresses, percent int64, now time.Time) *v1alpha1.IPAddressClassStatus {
	after := class.DeepCopy()
	after.Status.Addresses = counts
	exhausted, nearly := binding.ExhaustionConditions(after, percent)
	binding.SetCondition(&after.Status.Conditions, exhausted, now)
	binding.SetCondition(&after.Status.Conditions, nearly, now)
	return &after.Status
}

// writeStatus writes the class's counts and conditions when they changed:
// at most once per statusInterval, unless Exhausted changed.
func (r *Reconciler) writeStatus(ctx context.Context, class *v1alpha1.IPAddressClass) (reconcile.Result, error) {
	counts, err := r.counts(ctx, class.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := time.Now()
	st := status(class, counts, r.percent(), now)
	// The tally is fed by a handler of its own and may not yet count the
	// change that woke this pass: while the class's addresses move, a look
	// again later catches it up, at the cost of a few map reads. A class
	// whose addresses are still is not looked at again.
	settle := reconcile.Result{}
	if r.tally != nil && r.moved.since(class.Name, now) < statusInterval {
		settle.RequeueAfter = statusInterval
	}
	if equality.Semantic.DeepEqual(*st, class.Status) {
		return settle, nil
	}
	r.last.mu.Lock()
	last := r.last.at[class.Name]
	r.last.mu.Unlock()
	// A change of Exhausted is written at once: judged against the
	// condition stored, not recomputed from a status whose driver's
	// capacity may already have moved it (the driver writes that part).
	before := meta.IsStatusConditionTrue(class.Status.Conditions, v1alpha1.ConditionExhausted)
	if wait := last.Add(statusInterval).Sub(now); wait > 0 && before == meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionExhausted) {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	updated := class.DeepCopy()
	updated.Status = *st
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		// The driver writes its part of the same status: a lost race is
		// run again, not logged.
		return retry.OnConflict(client.IgnoreNotFound(err))
	}
	r.last.mu.Lock()
	if r.last.at == nil {
		r.last.at = map[string]time.Time{}
	}
	r.last.at[class.Name] = now
	r.last.mu.Unlock()
	return settle, nil
}

// tallyKeys file an address under its class and family, and under its
// class, family and phase.
func tallyKeys(o client.Object) []string {
	a := o.(*v1alpha1.IPAddress)
	f := binding.Family(a)
	if f == "" {
		return nil
	}
	return []string{a.Spec.ClassName + "/" + string(f), a.Spec.ClassName + "/" + string(f) + "/" + string(a.Status.Phase)}
}

// counts are the class's addresses per family, from the tally; without
// one, from a walk of every address.
func (r *Reconciler) counts(ctx context.Context, class string) ([]v1alpha1.FamilyAddresses, error) {
	if r.tally == nil {
		var addrs []v1alpha1.IPAddress
		err := cachetrim.Each(ctx, r.reader(), &v1alpha1.IPAddress{}, &v1alpha1.IPAddressList{}, func(a *v1alpha1.IPAddress) {
			if a.Spec.ClassName == class {
				addrs = append(addrs, *a)
			}
		})
		return binding.CountAddresses(addrs), err
	}
	var out []v1alpha1.FamilyAddresses
	for _, f := range []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6} {
		key := class + "/" + string(f)
		total := int64(r.tally.Len(key))
		if total == 0 {
			continue
		}
		n := func(p v1alpha1.AddressPhase) int64 { return int64(r.tally.Len(key + "/" + string(p))) }
		c := v1alpha1.FamilyAddresses{Family: f, Total: total, Available: n(v1alpha1.AddressAvailable), Released: n(v1alpha1.AddressReleased)}
		c.Bound = total - c.Available - c.Released - n("")
		out = append(out, c)
	}
	return out, nil
}

func (r *Reconciler) percent() int64 {
	if r.NearlyExhaustedPercent > 0 {
		return int64(r.NearlyExhaustedPercent)
	}
	return DefaultNearlyExhaustedPercent
}

// DefaultNearlyExhaustedPercent is the share of a family's addresses below
// which a class is NearlyExhausted, unless configured otherwise.
const DefaultNearlyExhaustedPercent = 10
