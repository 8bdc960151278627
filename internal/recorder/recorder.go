package recorder

import (
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// seriesWindow is how long the events API's broadcaster merges an event
// into an earlier one of the same object, reason and action: it keeps the
// earlier note and only counts the later. Its own window is 6 minutes.
const seriesWindow = 7 * time.Minute

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

// recorded is the last message recorded for an object and reason, under
// which action, and when.
type recorded struct {
	message, action string
	at              time.Time
}

// Recorder records events through the events.k8s.io API.
type Recorder struct {
	events events.EventRecorder
	now    func() time.Time
	mu     sync.Mutex
	last   map[key]recorded
}

// New wraps an events.k8s.io recorder.
func New(r events.EventRecorder) *Recorder {
	return &Recorder{events: r, now: time.Now, last: map[key]recorded{}}
}

// Record records e, unless e.Once and it repeats the last message recorded
// for the same object and reason.
func (r *Recorder) Record(e Event) {
	action, ok := r.remember(e)
	if !ok {
		return
	}
	r.events.Eventf(e.Regarding, nil, e.Type, e.Reason, action, "%s", e.Message)
}

// remember notes e as recorded and says under which action, or that e is a
// Once event repeating itself. The action is the reason, unless another
// message of the same object and reason was recorded within the
// broadcaster's series window: that one would swallow e's message (a
// dual-stack claim's second address attached, a pool refused for a new
// reason), so e's action then carries a digest of its message. A repeat
// keeps the action of the message it repeats.
func (r *Recorder) remember(e Event) (string, bool) {
	k := key{uid: e.Regarding.GetUID(), reason: e.Reason}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.last[k]
	if e.Once && seen && prev.message == e.Message {
		return "", false
	}
	for _, reason := range e.Ends {
		if ended, ok := r.last[key{uid: k.uid, reason: reason}]; ok {
			// Forgotten for Once; the broadcaster may still merge.
			r.last[key{uid: k.uid, reason: reason}] = recorded{action: ended.action, at: ended.at}
		}
	}
	action := e.Reason
	switch {
	case !seen || now.Sub(prev.at) > seriesWindow:
	case prev.message == e.Message:
		action = prev.action
	default:
		h := fnv.New32a()
		h.Write([]byte(e.Message))
		action = fmt.Sprintf("%s-%08x", e.Reason, h.Sum32())
	}
	if len(r.last) >= maxRemembered {
		r.last = map[key]recorded{}
	}
	r.last[k] = recorded{message: e.Message, action: action, at: now}
	return action, true
}
