package recorder

import (
	"fmt"
	"hash/fnv"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// onceWindow is how long a Once event's repeat stays suppressed: shorter
// than the API server's event TTL (an hour by default), so that a
// condition that persists is told again after its event expired.
const onceWindow = 30 * time.Minute

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

// recorded is the last message of a Once event recorded for an object and
// reason, and when.
type recorded struct {
	message string
	at      time.Time
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
// for the same object and reason within onceWindow.
//
// The event's action is its reason and a digest of its message. The
// events API merges an event into an earlier one of the same object,
// reason and action for several minutes and keeps only the earlier note;
// with the message in the action, only repeats of one message merge (as
// a count), and a new message — a dual-stack claim's second address
// attached, a pool refused for another reason — is an event of its own.
func (r *Recorder) Record(e Event) {
	if !r.remember(e) {
		return
	}
	r.events.Eventf(e.Regarding, nil, e.Type, e.Reason, action(e.Reason, e.Message), "%s", note(e.Message))
}

// maxNote is the longest note the events API accepts; it refuses a longer
// one for good, and the event would be lost.
const maxNote = 1024

// note is message cut to maxNote bytes at a character boundary, marked as
// cut: a message that quotes another component's (an admission refusal)
// or lists many objects can be longer.
func note(message string) string {
	if len(message) <= maxNote {
		return message
	}
	const more = " …"
	cut := maxNote - len(more)
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut] + more
}

// action is the action an event of reason and message is recorded under.
func action(reason, message string) string {
	h := fnv.New32a()
	h.Write([]byte(message))
	return fmt.Sprintf("%s-%08x", reason, h.Sum32())
}

// remember notes e and reports whether to record it: false for a Once
// event repeating the last message of its object and reason within
// onceWindow. Events that end reasons (Ends) forget them.
func (r *Recorder) remember(e Event) bool {
	uid := e.Regarding.GetUID()
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, reason := range e.Ends {
		delete(r.last, key{uid: uid, reason: reason})
	}
	if !e.Once {
		return true
	}
	k := key{uid: uid, reason: e.Reason}
	if prev, ok := r.last[k]; ok && prev.message == e.Message && now.Sub(prev.at) < onceWindow {
		return false
	}
	if len(r.last) >= maxRemembered {
		r.last = map[key]recorded{}
	}
	r.last[k] = recorded{message: e.Message, at: now}
	return true
}
