package pool

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/recorder"
)

func ranges(prefixes ...string) *netipx.IPSet {
	var b netipx.IPSetBuilder
	for _, p := range prefixes {
		b.AddPrefix(netip.MustParsePrefix(p))
	}
	s, _ := b.IPSet()
	return s
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	accepted := metallb.Class{Name: "public", PoolName: "public", PoolFound: true, Ranges: ranges("203.0.113.0/24", "2001:db8::/64")}
	refused := metallb.Class{Name: "public", PoolName: "public", Refusal: "IPAddressPool metallb-system/public not found"}
	used := []netip.Addr{netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2"), netip.MustParseAddr("198.51.100.1")}

	t.Run("an accepted class reports Ready and its capacity per family", func(t *testing.T) {
		class := &v1alpha1.IPAddressClass{}
		p := decide(class, accepted, counts(accepted, used), now)
		if !p.readyChanged || refusedNow(p) || !meta.IsStatusConditionTrue(p.status.Conditions, v1alpha1.ConditionReady) {
			t.Fatalf("want Ready=True as a change, got %+v", p)
		}
		want := []v1alpha1.FamilyCapacity{
			{Family: v1alpha1.IPv4, Total: 256, Allocated: 2, Available: 254},
			{Family: v1alpha1.IPv6, Total: math.MaxInt64, Allocated: 0, Available: math.MaxInt64},
		}
		if diff := cmp.Diff(want, p.status.Capacity); diff != "" {
			t.Errorf("capacity (-want +got):\n%s", diff)
		}
	})
	t.Run("a refused class reports Ready=False with the reason, once", func(t *testing.T) {
		class := &v1alpha1.IPAddressClass{}
		p := decide(class, refused, counts(refused, used), now)
		c := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionReady)
		if !refusedNow(p) || c.Reason != metallb.ReasonPoolRefused || c.Message != refused.Refusal || p.status.Capacity != nil {
			t.Fatalf("want a refusal without capacity, got %+v", p.status)
		}
		class.Status = p.status
		if again := decide(class, refused, counts(refused, used), now.Add(time.Minute)); again.readyChanged || again.capacityChanged {
			t.Errorf("a second pass changed nothing, got %+v", again)
		}
	})
	t.Run("a class refused over a pool that exists reports no capacity: the pool is not its ledger", func(t *testing.T) {
		taken := accepted
		taken.Refusal = "IPAddressPool metallb-system/public is already named by IPAddressClass older"
		class := &v1alpha1.IPAddressClass{}
		class.Status = decide(class, accepted, counts(accepted, used), now).status
		p := decide(class, taken, counts(taken, used), now)
		if !refusedNow(p) || p.status.Capacity != nil || !p.capacityChanged {
			t.Fatalf("want the refusal to clear the capacity, got %+v", p.status)
		}
	})
	t.Run("a capacity-only change is told apart from a readiness change", func(t *testing.T) {
		class := &v1alpha1.IPAddressClass{}
		class.Status = decide(class, accepted, counts(accepted, used), now).status
		p := decide(class, accepted, counts(accepted, used[:1]), now)
		if p.readyChanged || !p.capacityChanged {
			t.Errorf("want a capacity-only change, got ready=%v capacity=%v", p.readyChanged, p.capacityChanged)
		}
	})
}

// A Ready change is recorded on the class, as a warning when it refuses;
// a capacity-only change is not.
func TestDecideEvent(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	accepted := metallb.Class{Name: "public", PoolName: "public", PoolFound: true, Ranges: ranges("203.0.113.0/24")}
	refused := metallb.Class{Name: "public", PoolName: "public", Refusal: "IPAddressPool metallb-system/public not found"}
	acceptedClass := &v1alpha1.IPAddressClass{}
	acceptedClass.Status = decide(acceptedClass, accepted, counts(accepted, nil), now).status
	cautioned := accepted
	cautioned.Caution = "spec.serviceAllocation.namespaces leaves out metallb-iad-system"
	for _, tc := range []struct {
		name  string
		class *v1alpha1.IPAddressClass
		c     metallb.Class
		used  []netip.Addr
		want  *recorder.Event
	}{
		{"1 accepted for the first time", &v1alpha1.IPAddressClass{}, accepted, nil,
			&recorder.Event{Type: corev1.EventTypeNormal, Reason: metallb.ReasonPoolAccepted, Message: "provisioning from IPAddressPool public"}},
		{"2 refused", acceptedClass, refused, nil, &recorder.Event{Type: corev1.EventTypeWarning, Reason: metallb.ReasonPoolRefused, Message: refused.Refusal}},
		{"3 capacity only", acceptedClass, accepted, []netip.Addr{netip.MustParseAddr("203.0.113.1")}, nil},
		{"4 accepted with a caution: a warning, the caution in the message", acceptedClass, cautioned, nil,
			&recorder.Event{Type: corev1.EventTypeWarning, Reason: metallb.ReasonPoolAccepted, Message: "provisioning from IPAddressPool public; but " + cautioned.Caution}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.class, tc.c, counts(tc.c, tc.used), now).event
			if got != nil {
				got.Regarding = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSchedule(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const interval = 10 * time.Second
	for _, tc := range []struct {
		name        string
		p           plan
		lastWrite   time.Time
		wantWrite   bool
		wantRequeue time.Duration
	}{
		{"1 nothing changed: look again after the interval", plan{}, now, false, interval},
		{"2 Ready changed: write at once", plan{readyChanged: true}, now.Add(-time.Second), true, interval},
		{"3 capacity changed soon after a write: wait the rest", plan{capacityChanged: true}, now.Add(-3 * time.Second), false, 7 * time.Second},
		{"4 capacity changed an interval after a write: write", plan{capacityChanged: true}, now.Add(-interval), true, interval},
		{"5 capacity changed, never written: write", plan{capacityChanged: true}, time.Time{}, true, interval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write, requeue := tc.p.schedule(tc.lastWrite, now, interval)
			if write != tc.wantWrite || requeue != tc.wantRequeue {
				t.Errorf("schedule = %v, %v; want %v, %v", write, requeue, tc.wantWrite, tc.wantRequeue)
			}
		})
	}
}
