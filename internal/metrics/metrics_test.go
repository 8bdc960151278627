package metrics

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
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

// A class being deleted takes no claims and its status is no longer kept:
// its last Exhausted condition does not keep the alert firing.
func TestRunningExhaustion(t *testing.T) {
	exhausted := &v1alpha1.IPAddressClass{Status: v1alpha1.IPAddressClassStatus{Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionExhausted, Status: metav1.ConditionTrue}}}}
	if got := running(exhausted, v1alpha1.ConditionExhausted); got != 1 {
		t.Errorf("exhausted class: %v, want 1", got)
	}
	if got := running(exhausted, v1alpha1.ConditionNearlyExhausted); got != 0 {
		t.Errorf("no NearlyExhausted condition: %v, want 0", got)
	}
	exhausted.DeletionTimestamp = &metav1.Time{}
	if got := running(exhausted, v1alpha1.ConditionExhausted); got != 0 {
		t.Errorf("class being deleted: %v, want 0", got)
	}
}

// A Lost claim held back by its quota counts among the claims waiting on
// QuotaExceeded (the quota alert joins on it); a Lost one waiting for its
// address to come back does not (it has its own alert), nor a Bound one.
func TestWaits(t *testing.T) {
	for _, tc := range []struct {
		phase  v1alpha1.ClaimPhase
		reason string
		want   bool
	}{
		{v1alpha1.ClaimPending, v1alpha1.ReasonClassExhausted, true},
		{v1alpha1.ClaimLost, v1alpha1.ReasonQuotaExceeded, true},
		{v1alpha1.ClaimLost, v1alpha1.ReasonLost, false},
		{v1alpha1.ClaimBound, v1alpha1.ReasonBound, false},
	} {
		if got := waits(tc.phase, tc.reason); got != tc.want {
			t.Errorf("waits(%s, %s) = %v, want %v", tc.phase, tc.reason, got, tc.want)
		}
	}
}
