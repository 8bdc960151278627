package retry

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// The fifo keeps client-go's queue semantics, step by step.
func TestFIFOSemantics(t *testing.T) {
	q := newFIFO[string]()
	get := func(want string) {
		t.Helper()
		if got, shutdown := q.Get(); got != want || shutdown {
			t.Fatalf("Get = %q, %v; want %q", got, shutdown, want)
		}
	}
	// 1 an item added twice before it is handed out is queued once, in order
	q.Add("a")
	q.Add("b")
	q.Add("a")
	if q.Len() != 2 {
		t.Fatalf("1: Len = %d, want 2", q.Len())
	}
	get("a")
	// 2 added while processed: not handed out again until Done
	q.Add("a")
	if q.Len() != 1 {
		t.Fatalf("2: Len = %d, want 1 (b only)", q.Len())
	}
	get("b")
	q.Done("b")
	if q.Len() != 0 {
		t.Fatalf("2: Len = %d, want 0", q.Len())
	}
	// 3 ...and queued again once Done
	q.Done("a")
	if q.Len() != 1 {
		t.Fatalf("3: Len = %d, want 1", q.Len())
	}
	get("a")
	q.Done("a")
	// 4 shut down: what is queued is still handed out, then shutdown;
	// adds are ignored
	q.Add("c")
	q.ShutDown()
	q.Add("d")
	if !q.ShuttingDown() || q.Len() != 1 {
		t.Fatalf("4: ShuttingDown %v, Len %d", q.ShuttingDown(), q.Len())
	}
	get("c")
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("4: Get after the last item should report shutdown")
	}
}

// A drain waits until every item handed out is Done; a Get blocked on an
// empty queue returns on shutdown.
func TestFIFODrain(t *testing.T) {
	q := newFIFO[int]()
	q.Add(1)
	item, _ := q.Get()
	blocked := make(chan bool)
	go func() {
		_, shutdown := q.Get()
		blocked <- shutdown
	}()
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	if !<-blocked {
		t.Fatal("a Get waiting on an empty queue should return shutdown")
	}
	select {
	case <-drained:
		t.Fatal("the drain returned with an item still processed")
	case <-time.After(50 * time.Millisecond):
	}
	q.Done(item)
	<-drained
}

// Under concurrent adds and workers, no item is processed by two workers
// at once and every item is processed after its last add.
func TestFIFOConcurrent(t *testing.T) {
	q := newFIFO[int]()
	const items, adds, workers = 64, 20000, 8
	var busy [items]atomic.Int32
	var lastAdd, lastDone [items]atomic.Int64
	var clock atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i, shutdown := q.Get()
				if shutdown {
					return
				}
				if busy[i].Add(1) != 1 {
					t.Errorf("item %d handed to two workers", i)
				}
				lastDone[i].Store(clock.Add(1))
				busy[i].Add(-1)
				q.Done(i)
			}
		})
	}
	for n := range adds {
		i := n % items
		lastAdd[i].Store(clock.Add(1))
		q.Add(i)
	}
	q.ShutDownWithDrain()
	wg.Wait()
	for i := range items {
		if lastDone[i].Load() < lastAdd[i].Load() {
			t.Errorf("item %d added at %d, last processed at %d", i, lastAdd[i].Load(), lastDone[i].Load())
		}
	}
}

// After a burst has drained, the fifo keeps none of its room; client-go's
// queue keeps its dirty set at the burst's size. The figures are logged.
func TestFIFOGivesBackABurst(t *testing.T) {
	const burst = 100000
	retained := func(q workqueue.TypedInterface[int]) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range burst {
			q.Add(i)
		}
		for range burst {
			i, _ := q.Get()
			q.Done(i)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(q)
		return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
	}
	ours := newFIFO[int]()
	kept := retained(ours)
	theirs := retained(workqueue.NewTyped[int]())
	t.Logf("heap kept after a burst of %d: fifo %d KiB, client-go's queue %d KiB", burst, kept/1024, theirs/1024)
	if ours.peak != 0 || ours.queue != nil || len(ours.dirty) != 0 {
		t.Errorf("fifo kept its room: peak %d, queue cap %d", ours.peak, cap(ours.queue))
	}
}
