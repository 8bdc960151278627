package recorder

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxRemembered bounds the memory of recorded messages; past it the memory
// starts over, which costs at most one repeated event per object.
const maxRemembered = 100_000

type key struct {
	uid    types.UID
	reason string
}

// Recorder records events; EventOnce suppresses repeats.
type Recorder struct {
	events events.EventRecorder
	mu     sync.Mutex
	last   map[key]string
}

// New wraps an events.k8s.io recorder.
func New(r events.EventRecorder) *Recorder {
	return &Recorder{events: r, last: map[key]string{}}
}

// Event records reason and message on obj of eventType (Normal or Warning):
// for transitions the caller has detected itself.
func (r *Recorder) Event(obj client.Object, eventType, reason, message string) {
	r.events.Eventf(obj, nil, eventType, reason, reason, "%s", message)
}

// EventOnce records like Event unless it repeats the last message recorded
// for the same object and reason: for conditions that persist across passes.
func (r *Recorder) EventOnce(obj client.Object, eventType, reason, message string) {
	k := key{uid: obj.GetUID(), reason: reason}
	r.mu.Lock()
	if r.last[k] == message {
		r.mu.Unlock()
		return
	}
	if len(r.last) >= maxRemembered {
		r.last = map[key]string{}
	}
	r.last[k] = message
	r.mu.Unlock()
	r.events.Eventf(obj, nil, eventType, reason, reason, "%s", message)
}

// Emit records with EventOnce when once is set, else with Event.
func (r *Recorder) Emit(obj client.Object, eventType, reason, message string, once bool) {
	if once {
		r.EventOnce(obj, eventType, reason, message)
		return
	}
	r.Event(obj, eventType, reason, message)
}
