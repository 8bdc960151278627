package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// relistBackoff is how long a tracker waits before retrying a failed list.
const relistBackoff = 200 * time.Millisecond

// tracker lists and then watches objects of one kind and records, by name,
// when it first saw each one in the state it waits for. Watching rather than
// polling dates each transition to within a watch delivery and costs the API
// server one stream instead of a List of every object several times a second.
type tracker struct {
	what    string
	want    int
	done    func(client.Object) bool
	newList func() client.ObjectList
	opts    []client.ListOption
	c       client.WithWatch

	mu   sync.Mutex
	at   map[string]time.Time
	full chan struct{} // closed once want names are done

	cancel  context.CancelFunc
	stopped chan struct{}
}

// track starts a tracker of the objects newList lists with opts, waiting for
// want of them to satisfy done. It returns once the initial list is in, so
// that every later change is seen; Close stops it.
func track(ctx context.Context, c client.WithWatch, what string, newList func() client.ObjectList, opts []client.ListOption,
	want int, done func(client.Object) bool) (*tracker, error) {
	t := &tracker{
		what: what, want: want, done: done, newList: newList, opts: opts, c: c,
		at: map[string]time.Time{}, full: make(chan struct{}), stopped: make(chan struct{}),
	}
	if want == 0 {
		close(t.full)
	}
	rv, err := t.list(ctx, c)
	if err != nil {
		return nil, err
	}
	ctx, t.cancel = context.WithCancel(ctx)
	go t.run(ctx, c, rv)
	return t, nil
}

// list observes every listed object and returns the list's resource version.
func (t *tracker) list(ctx context.Context, c client.WithWatch) (string, error) {
	l := t.newList()
	if err := c.List(ctx, l, t.opts...); err != nil {
		return "", fmt.Errorf("listing %s: %w", t.what, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return "", err
	}
	for _, o := range items {
		if obj, ok := o.(client.Object); ok {
			t.observe(obj)
		}
	}
	return l.GetResourceVersion(), nil
}

// run watches from rv until ctx ends, resuming after a closed watch and
// re-listing after a watch error (such as an expired resource version).
func (t *tracker) run(ctx context.Context, c client.WithWatch, rv string) {
	defer close(t.stopped)
	for ctx.Err() == nil {
		opts := slices.Concat(t.opts, []client.ListOption{
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}}})
		w, err := c.Watch(ctx, t.newList(), opts...)
		relist := err != nil
		if err == nil {
			rv, relist = t.drain(w, rv)
			w.Stop()
		}
		for relist && ctx.Err() == nil {
			if rv, err = t.list(ctx, c); err == nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(relistBackoff):
			}
		}
	}
}

// drain consumes a watch until it closes; it returns the last resource
// version seen and whether the tracker must re-list.
func (t *tracker) drain(w watch.Interface, rv string) (string, bool) {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Bookmark:
			obj, ok := ev.Object.(client.Object)
			if !ok {
				return rv, true
			}
			if ev.Type != watch.Bookmark {
				t.observe(obj)
			}
			rv = obj.GetResourceVersion()
		case watch.Deleted:
		default: // watch.Error
			return rv, true
		}
	}
	return rv, false
}

func (t *tracker) observe(obj client.Object) {
	if !t.done(obj) {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.at[obj.GetName()]; seen {
		return
	}
	t.at[obj.GetName()] = now
	if len(t.at) == t.want {
		close(t.full)
	}
}

// count is how many names are done so far.
func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.at)
}

// times returns when each name was first seen done.
func (t *tracker) times() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.at))
	for k, v := range t.at {
		out[k] = v
	}
	return out
}

// wait returns once want names are done, reporting progress every few
// seconds; it gives up after timeout (a stuck run, not a slow one).
func (t *tracker) wait(ctx context.Context, timeout time.Duration) error {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	last, still := -1, 0
	for {
		select {
		case <-t.full:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-deadline.C:
			return fmt.Errorf("only %d of %d %s after %s", t.count(), t.want, t.what, timeout)
		case <-tick.C:
			n := t.count()
			fmt.Fprintf(os.Stderr, "bench |   %d/%d %s\n", n, t.want, t.what)
			// A watch under load has been seen to miss a few changes for
			// good: after 15 s without progress, a list catches up (the
			// late ones are dated by it, a bound on their times).
			if n == last {
				if still++; still == 3 {
					still = 0
					if _, err := t.list(ctx, t.c); err == nil && t.count() > n {
						fmt.Fprintf(os.Stderr, "bench |   a list found %d %s the watch had not shown\n", t.count()-n, t.what)
					}
				}
			} else {
				last, still = n, 0
			}
		}
	}
}

// Close stops the watch and waits for it to end.
func (t *tracker) Close() {
	t.cancel()
	<-t.stopped
}
