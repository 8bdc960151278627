package recorder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

// A persisting warning is recorded once; once a resolution ends it, the
// same warning recurring is recorded again.
func TestOnceEndsWithItsResolution(t *testing.T) {
	fake := events.NewFakeRecorder(10)
	r := New(fake)
	obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u1"}}
	warn := WarningOnce(obj, "Taken", "held by a stranger")
	for _, e := range []Event{warn, warn, Normal(obj, "Resolved", "let go").Ending("Taken"), warn, warn} {
		r.Record(e)
	}
	var got []string
	for len(fake.Events) > 0 {
		got = append(got, <-fake.Events)
	}
	want := []string{"Warning Taken held by a stranger", "Normal Resolved let go", "Warning Taken held by a stranger"}
	if len(got) != len(want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %q, want %q", i, got[i], want[i])
		}
	}
}
