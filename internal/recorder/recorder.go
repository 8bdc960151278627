package recorder

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxRemembered bounds the memory of recorded messages; past it the memory
// starts over, which costs at most one repeated event per object.
const maxRemembered = 100_000

// Event is one event a pass decided to record: every reconciler's plan
// carries these, and Record writes them.
type Event struct {
	Regarding client.Object
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type, Reason, Message string
	// Once: the condition persists across passes without a status of its
	// own; a repeat of the last message for the object and reason is
	// suppressed. Otherwise the caller has detected a transition itself.
	Once bool
	// Ends are the reasons of Once events this one ends (a resolution): a
	// later recurrence of the same message is recorded again.
	Ends []string
}

// Ending is e, ending the Once events of reasons on the same object.
func (e Event) Ending(reasons ...string) Event {
	e.Ends = reasons
	return e
}

// Normal is a Normal event on a transition.
func Normal(regarding client.Object, reason, format string, args ...any) Event {
	return Event{Regarding: regarding, Type: corev1.EventTypeNormal, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Warning is a Warning event on a transition.
func Warning(regarding client.Object, reason, format string, args ...any) Event {
	return Event{Regarding: regarding, Type: corev1.EventTypeWarning, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// WarningOnce is a Warning event for a condition that persists.
func WarningOnce(regarding client.Object, reason, format string, args ...any) Event {
	e := Warning(regarding, reason, format, args...)
	e.Once = true
	return e
}

type key struct {
	uid    types.UID
	reason string
}

// Recorder records events through the events.k8s.io API.
type Recorder struct {
	events events.EventRecorder
	mu     sync.Mutex
	last   map[key]string
}

// New wraps an events.k8s.io recorder.
func New(r events.EventRecorder) *Recorder {
	return &Recorder{events: r, last: map[key]string{}}
}

// Record records e, unless e.Once and it repeats the last message recorded
// for the same object and reason.
func (r *Recorder) Record(e Event) {
	if e.Once && !r.first(e) {
		return
	}
	if len(e.Ends) > 0 {
		r.mu.Lock()
		for _, reason := range e.Ends {
			delete(r.last, key{uid: e.Regarding.GetUID(), reason: reason})
		}
		r.mu.Unlock()
	}
	r.events.Eventf(e.Regarding, nil, e.Type, e.Reason, e.Reason, "%s", e.Message)
}

func (r *Recorder) first(e Event) bool {
	k := key{uid: e.Regarding.GetUID(), reason: e.Reason}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last[k] == e.Message {
		return false
	}
	if len(r.last) >= maxRemembered {
		r.last = map[key]string{}
	}
	r.last[k] = e.Message
	return true
}
