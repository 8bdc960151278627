package metrics

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestObserveQuota: a key taken out of a quota loses its series; the
// others keep theirs.
func TestObserveQuota(t *testing.T) {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "q"}}
	rq.Spec.Hard = corev1.ResourceList{"a": one, "b": one}
	ObserveQuota(rq, corev1.ResourceList{"a": one, "b": one})
	delete(rq.Spec.Hard, "b")
	ObserveQuota(rq, corev1.ResourceList{"a": one})
	for _, c := range []struct {
		key  string
		want bool
	}{{"a", true}, {"b", false}} {
		// DeleteLabelValues reports whether the series was there.
		if got := quotaUsed.DeleteLabelValues("t", "q", c.key); got != c.want {
			t.Errorf("used series of key %s: %v, want %v", c.key, got, c.want)
		}
		if got := quotaHard.DeleteLabelValues("t", "q", c.key); got != c.want {
			t.Errorf("hard series of key %s: %v, want %v", c.key, got, c.want)
		}
	}
	ForgetQuota("t", "q")
}
