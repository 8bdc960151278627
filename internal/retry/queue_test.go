package retry

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The depth of each controller's queue is exported, read when scraped; a
// queue started again under the same name replaces the first.
func TestQueueDepth(t *testing.T) {
	depth := func(controller string) float64 {
		t.Helper()
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != QueueDepthMetric {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == controller {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
	}
	q := NewQueue("test-depth", RateLimiter())
	q.Add(req("a"))
	q.Add(req("b"))
	q.Add(req("a"))
	if got := depth("test-depth"); got != 2 {
		t.Errorf("1 two keys queued, one twice: depth %v, want 2", got)
	}
	item, _ := q.Get()
	q.Done(item)
	if got := depth("test-depth"); got != 1 {
		t.Errorf("2 one key taken: depth %v, want 1", got)
	}
	q.ShutDown()
	q2 := NewQueue("test-depth", RateLimiter())
	defer q2.ShutDown()
	if got := depth("test-depth"); got != 0 {
		t.Errorf("3 a new queue of that name: depth %v, want 0", got)
	}
}
