package chaos

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// feed gives the ledger every change of claims, addresses and Services as
// the API server's watches report it, in resource-version order: one etcd
// orders the changes of every kind, so a change is judged only once every
// watch has reported as far, or has had a second to. A watch the API
// server's restart broke resumes where it stopped, or — its history gone —
// lists again and reports what changed meanwhile (counted in relists).
type feed struct {
	c client.WithWatch
	l *Ledger

	mu      sync.Mutex
	streams []*stream
	relists int
	// marked, once set, collects what changed since (idle writes).
	marked []string
	mark   bool
}

// since starts collecting what changes; stop returns it.
func (f *feed) since() (stop func() []string) {
	f.mu.Lock()
	f.mark, f.marked = true, nil
	f.mu.Unlock()
	return func() []string {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.mark = false
		return f.marked
	}
}

// stream is one kind's watch.
type stream struct {
	newList func() client.ObjectList
	// rv is as far as the watch reported; connected, whether it is
	// watching now.
	rv        uint64
	connected bool
	// last is each object's last reported state, by namespace/name.
	last map[string]client.Object
}

type change struct {
	rv   uint64
	gone bool
	obj  client.Object
	at   time.Time
	// gap marks where a watch's blind spot starts and ends (no obj).
	gap int
}

const (
	gapStart = 1 + iota
	gapEnd
)

// watch starts the feed; stop flushes what is left and waits for it.
func (f *feed) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	changes := make(chan change, 10000)
	var wg sync.WaitGroup
	for _, newList := range []func() client.ObjectList{
		func() client.ObjectList { return &v1alpha1.IPAddressClaimList{} },
		func() client.ObjectList { return &v1alpha1.IPAddressList{} },
		func() client.ObjectList { return &corev1.ServiceList{} },
	} {
		st := &stream{newList: newList, last: map[string]client.Object{}}
		f.streams = append(f.streams, st)
		wg.Go(func() { f.follow(ctx, st, changes) })
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.judge(ctx, changes)
	}()
	return func() {
		cancel()
		wg.Wait()
		close(changes)
		<-done
	}
}

// follow lists once, then watches from where it is, for as long as ctx
// lasts.
func (f *feed) follow(ctx context.Context, st *stream, out chan<- change) {
	relist := true
	for ctx.Err() == nil {
		if relist {
			if err := f.list(ctx, st, out); err != nil {
				sleep(ctx, 200*time.Millisecond)
				continue
			}
			relist = false
		}
		f.mu.Lock()
		rv := st.rv
		f.mu.Unlock()
		w, err := f.c.Watch(ctx, st.newList(), &client.ListOptions{Raw: &metav1.ListOptions{
			ResourceVersion: strconv.FormatUint(rv, 10), AllowWatchBookmarks: true}})
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		f.setConnected(st, true)
		relist = f.drain(st, w, out)
		w.Stop()
		f.setConnected(st, false)
	}
}

// drain reports the watch's events until it ends; it reports whether the
// history it was to resume from is gone.
func (f *feed) drain(st *stream, w watch.Interface, out chan<- change) (expired bool) {
	for e := range w.ResultChan() {
		if e.Type == watch.Error {
			err := apierrors.FromObject(e.Object)
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		}
		obj, ok := e.Object.(client.Object)
		if !ok {
			continue
		}
		rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
		f.mu.Lock()
		st.rv = max(st.rv, rv)
		f.mu.Unlock()
		if e.Type == watch.Bookmark {
			continue
		}
		f.report(st, change{rv: rv, gone: e.Type == watch.Deleted, obj: obj, at: time.Now()}, out)
	}
	return false
}

// list reads the kind whole and reports every object that changed since
// it was last reported, and every one gone.
func (f *feed) list(ctx context.Context, st *stream, out chan<- change) error {
	list := st.newList()
	if err := f.c.List(ctx, list); err != nil {
		return err
	}
	rv, _ := strconv.ParseUint(list.(metav1.ListInterface).GetResourceVersion(), 10, 64)
	f.mu.Lock()
	since := st.rv // 0 on the first list: no gap
	f.mu.Unlock()
	seen := map[string]bool{}
	now := time.Now()
	var changes []change
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		obj := o.(client.Object)
		key := obj.GetNamespace() + "/" + obj.GetName()
		seen[key] = true
		prev, ok := st.last[key]
		if ok && prev.GetUID() != obj.GetUID() {
			// Deleted and created again under the name within the gap.
			changes = append(changes, change{rv: since, gone: true, obj: prev, at: now})
		}
		if !ok || prev.GetResourceVersion() != obj.GetResourceVersion() {
			orv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			changes = append(changes, change{rv: orv, obj: obj, at: now})
		}
		return nil
	})
	for key, prev := range st.last {
		if !seen[key] {
			changes = append(changes, change{rv: since, gone: true, obj: prev, at: now})
		}
	}
	if since != 0 {
		// What changed between since and rv is known only as its end
		// state: the ledger judges no instant in between.
		changes = append([]change{{rv: since, gap: gapStart, at: now}}, append(changes, change{rv: rv, gap: gapEnd, at: now})...)
	}
	f.mu.Lock()
	if since != 0 {
		f.relists++
	}
	st.rv = rv
	f.mu.Unlock()
	for _, c := range changes {
		f.report(st, c, out)
	}
	return nil
}

func (f *feed) report(st *stream, c change, out chan<- change) {
	if c.gap != 0 {
		out <- c
		return
	}
	key := c.obj.GetNamespace() + "/" + c.obj.GetName()
	f.mu.Lock()
	if f.mark {
		f.marked = append(f.marked, fmt.Sprintf("%T %s rv=%d gone=%v", c.obj, key, c.rv, c.gone))
	}
	f.mu.Unlock()
	if c.gone {
		delete(st.last, key)
	} else {
		st.last[key] = c.obj
	}
	out <- c
}

func (f *feed) setConnected(st *stream, up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st.connected = up
}

// judge gives the ledger the changes in resource-version order: a change
// once it is a second old and no broken watch may still report an earlier
// one.
func (f *feed) judge(ctx context.Context, in <-chan change) {
	var buf []change
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	flush := func(all bool) {
		slices.SortStableFunc(buf, func(a, b change) int { return cmp.Compare(a.rv, b.rv) })
		// Changes above floor wait for a broken watch to report as far.
		f.mu.Lock()
		floor, limited := uint64(0), false
		for _, st := range f.streams {
			if !st.connected && (!limited || st.rv < floor) {
				floor, limited = st.rv, true
			}
		}
		f.mu.Unlock()
		i := 0
		for ; i < len(buf); i++ {
			c := buf[i]
			if !all && (time.Since(c.at) < time.Second || limited && c.rv > floor) {
				break
			}
			switch o := c.obj.(type) {
			case nil:
				f.l.Gap(c.gap == gapStart)
			case *v1alpha1.IPAddressClaim:
				f.l.Claim(o, c.gone)
			case *v1alpha1.IPAddress:
				f.l.Address(o, c.gone)
			case *corev1.Service:
				f.l.Service(o, c.gone)
			}
		}
		buf = buf[i:]
	}
	for {
		select {
		case c, ok := <-in:
			if !ok {
				flush(true)
				return
			}
			buf = append(buf, c)
		case <-tick.C:
			if ctx.Err() == nil {
				flush(false)
			}
		}
	}
}
