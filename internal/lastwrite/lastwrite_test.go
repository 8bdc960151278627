package lastwrite

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestStale(t *testing.T) {
	key := types.NamespacedName{Name: "a"}
	for _, tc := range []struct {
		name   string
		cached string
		after  time.Duration
		want   bool
	}{
		{"1 a cache older than the write is stale", "9", 0, true},
		{"2 a cache that caught up is not", "10", 0, false},
		{"3 an unparsable version compares as not older", "x", 0, false},
		{"4 a write older than TTL no longer counts", "9", TTL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			v := New()
			v.now = func() time.Time { return now }
			v.Wrote(key, "10")
			now = now.Add(tc.after)
			if got := v.Stale(key, tc.cached); got != tc.want {
				t.Errorf("Stale(%s) = %v, want %v", tc.cached, got, tc.want)
			}
			if !tc.want && v.Stale(key, "9") {
				t.Error("an answer of not stale did not end the memory")
			}
		})
	}
}

// Objects that are deleted are never asked about again: their entries go
// once expired, when the memory grows.
func TestWroteForgetsExpiredEntries(t *testing.T) {
	now := time.Unix(1000, 0)
	v := New()
	v.now = func() time.Time { return now }
	for i := range 10 * prunePast {
		v.Wrote(types.NamespacedName{Name: fmt.Sprint(i)}, "1")
		now = now.Add(TTL / prunePast)
	}
	if n := len(v.written); n > 2*prunePast {
		t.Errorf("%d entries remembered; at most %d are younger than TTL", n, prunePast)
	}
}

// After a burst the memory does not wait to grow again to forget it: the
// first write a TTL later does.
func TestWroteForgetsABurstOnceItExpired(t *testing.T) {
	now := time.Unix(1000, 0)
	v := New()
	v.now = func() time.Time { return now }
	for i := range 5 * prunePast {
		v.Wrote(types.NamespacedName{Name: fmt.Sprint(i)}, "1")
	}
	now = now.Add(TTL)
	v.Wrote(types.NamespacedName{Name: "after"}, "2")
	if n := len(v.written); n != 1 {
		t.Errorf("%d entries remembered a TTL after the burst, want 1", n)
	}
}
