package recordertest

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"
)

// ExpectWarning fails t unless the next Event rec holds is a Warning of
// reason whose text contains each of want.
func ExpectWarning(t testing.TB, rec *events.FakeRecorder, reason string, want ...string) {
	t.Helper()
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Warning "+reason) {
			t.Errorf("event %q, want a Warning %s", e, reason)
		}
		for _, w := range want {
			if !strings.Contains(e, w) {
				t.Errorf("event %q does not say %q", e, w)
			}
		}
	default:
		t.Errorf("no %s event", reason)
	}
}
