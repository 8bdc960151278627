package recorder

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// actions is an events.EventRecorder that keeps the action and note of
// each event.
type actions []string

func (a *actions) Eventf(_ runtime.Object, _ runtime.Object, _, _, action, note string, args ...any) {
	*a = append(*a, action+" "+fmt.Sprintf(note, args...))
}

// The events API merges an event into an earlier one of the same object,
// reason and action for minutes, keeping the earlier note: events of one
// reason with different messages get different actions, repeats of one
// message the same.
func TestAnotherMessageIsNotMerged(t *testing.T) {
	var got actions
	r := New(&got)
	obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u1"}}
	r.Record(Normal(obj, "Associated", "192.0.2.1 is attached to Service web"))
	r.Record(Normal(obj, "Associated", "2001:db8::1 is attached to Service web"))
	r.Record(Normal(obj, "Associated", "2001:db8::1 is attached to Service web"))
	want := []string{
		"Associated-7a214f38 192.0.2.1 is attached to Service web",
		"Associated-bbb25d4d 2001:db8::1 is attached to Service web",
		"Associated-bbb25d4d 2001:db8::1 is attached to Service web",
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded\n%q\nwant\n%q", got, want)
	}
}

// A persisting warning is told again once its window has passed, before
// the API server's event TTL has removed the first.
func TestOnceLapses(t *testing.T) {
	var got actions
	now := time.Unix(0, 0)
	r := New(&got)
	r.now = func() time.Time { return now }
	obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u1"}}
	warn := WarningOnce(obj, "ClaimInUse", "attached to Service b")
	r.Record(warn)
	now = now.Add(onceWindow - time.Second)
	r.Record(warn)
	now = now.Add(2 * time.Second)
	r.Record(warn)
	if len(got) != 2 {
		t.Errorf("recorded %q, want the warning twice", got)
	}
}

// A message longer than the events API takes is cut at a character
// boundary, not refused with the event lost.
func TestLongMessageIsCut(t *testing.T) {
	for _, tc := range []struct {
		message string
		want    int // bytes of the note
	}{
		{strings.Repeat("a", maxNote), maxNote},
		{strings.Repeat("a", maxNote+1), maxNote},
		{"a" + strings.Repeat("€", maxNote), maxNote - 2}, // 3-byte runes from byte 1: the cut falls mid-rune and moves back two bytes
	} {
		got := note(tc.message)
		if len(got) != tc.want || !utf8.ValidString(got) {
			t.Errorf("note of %d bytes: %d bytes (valid UTF-8: %v), want %d", len(tc.message), len(got), utf8.ValidString(got), tc.want)
		}
		if len(tc.message) > maxNote && !strings.HasSuffix(got, " …") {
			t.Errorf("note of %d bytes is not marked as cut: %q", len(tc.message), got[len(got)-8:])
		}
	}
}
