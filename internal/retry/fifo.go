package retry

import (
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// shrinkAt is the room a fifo's sets and slice may keep once empty: past
// it, they are made anew. Go's maps never give back the room of their
// peak, and a start queues every claim and address of a /16 at once.
const shrinkAt = 1024

// fifo is the base of a controller's work queue, with client-go's
// semantics (an item queued once however often it is added, never handed
// to two workers at once, queued again on Done if it was added while
// processed) and one difference: once its queue empties after a burst it
// lets go of the room the burst took. client-go's keeps its dirty set at
// the size of the largest burst for good — some 13 MB at a /16.
type fifo[T comparable] struct {
	cond                   *sync.Cond
	queue                  []T
	dirty, processing      map[T]struct{}
	peak                   int
	shuttingDown, draining bool
}

var _ workqueue.TypedInterface[int] = (*fifo[int])(nil)

func newFIFO[T comparable]() *fifo[T] {
	return &fifo[T]{cond: sync.NewCond(&sync.Mutex{}), dirty: map[T]struct{}{}, processing: map[T]struct{}{}}
}

// Add queues item unless it is queued already; an item being processed is
// queued again when it is Done.
func (q *fifo[T]) Add(item T) {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	if q.shuttingDown {
		return
	}
	if _, ok := q.dirty[item]; ok {
		return
	}
	q.dirty[item] = struct{}{}
	q.peak = max(q.peak, len(q.dirty))
	if _, ok := q.processing[item]; ok {
		return
	}
	q.queue = append(q.queue, item)
	q.cond.Signal()
}

// Len is the number of items waiting.
func (q *fifo[T]) Len() int {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	return len(q.queue)
}

// Get blocks until an item is waiting, and hands it out; shutdown is true
// once the queue is shut down and empty.
func (q *fifo[T]) Get() (item T, shutdown bool) {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	for len(q.queue) == 0 && !q.shuttingDown {
		q.cond.Wait()
	}
	if len(q.queue) == 0 {
		return item, true
	}
	item = q.queue[0]
	var zero T
	q.queue[0] = zero
	q.queue = q.queue[1:]
	q.processing[item] = struct{}{}
	delete(q.dirty, item)
	q.shrink()
	return item, false
}

// shrink makes the queue's slice and dirty set anew once they are empty
// after holding more than shrinkAt items.
func (q *fifo[T]) shrink() {
	if len(q.queue) == 0 {
		q.queue = nil // the backing array of the whole burst otherwise
	}
	if len(q.dirty) == 0 && q.peak > shrinkAt {
		q.dirty, q.peak = map[T]struct{}{}, 0
	}
}

// Done ends the processing of item; if it was added meanwhile, it is
// queued again.
func (q *fifo[T]) Done(item T) {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	delete(q.processing, item)
	if _, ok := q.dirty[item]; ok {
		q.queue = append(q.queue, item)
		q.cond.Signal()
	} else if len(q.processing) == 0 {
		q.cond.Signal() // a drain may be waiting for the last one
	}
}

// ShutDown makes Get return shutdown to every worker once the queue is
// empty, and Add ignore new items.
func (q *fifo[T]) ShutDown() {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	q.draining, q.shuttingDown = false, true
	q.cond.Broadcast()
}

// ShutDownWithDrain shuts the queue down and waits until every item handed
// out is Done (or ShutDown is called).
func (q *fifo[T]) ShutDownWithDrain() {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	q.draining, q.shuttingDown = true, true
	q.cond.Broadcast()
	for len(q.processing) != 0 && q.draining {
		q.cond.Wait()
	}
}

// ShuttingDown reports whether the queue is shut down.
func (q *fifo[T]) ShuttingDown() bool {
	q.cond.L.Lock()
	defer q.cond.L.Unlock()
	return q.shuttingDown
}
