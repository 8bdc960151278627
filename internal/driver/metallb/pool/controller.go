package pool

// Design:
//
// The driver owns IPAddressClass.status of its classes; the core never
// writes it and reads only the Ready condition. A change of Ready is
// written at once, with a PoolRefused (Warning) or PoolAccepted (Normal)
// event on the class. Capacity changes with every provisioned address, so
// a capacity-only change is written at most once per Interval: a burst of
// a thousand claims costs a handful of class writes, not a thousand. The
// pool is counted — and the gauges set — at most once per Interval too: a
// count lists every address and Service, and a burst of address events
// must not turn into a burst of lists.

import (
	"context"
	"net/netip"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/allocator"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/retry"
)

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=list;watch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses/status,verbs=update
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=list;watch
// +kubebuilder:rbac:groups=metallb.io,resources=ipaddresspools,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler keeps the driver's classes' status.
type Reconciler struct {
	Client  client.Client
	Books   metallb.Books
	Classes *metallb.Classes
	// Owners filters out the creations and updates of addresses of other
	// provisioners' classes; nil passes all.
	Owners   *metallb.ClassOwners
	Recorder *recorder.Recorder
	// Interval is the least time between two capacity-only writes of one
	// class's status; it is also how often capacity is recounted at rest.
	Interval time.Duration
	Now      func() time.Time

	mu      sync.Mutex
	written map[string]time.Time
	counted map[string]counted
}

type counted struct {
	counts   map[v1alpha1.IPFamily]allocator.Capacity
	pool     string
	accepted bool
	at       time.Time
}

// count counts the class's pool at most once per Interval, or when it
// names another pool or is accepted or refused; the gauges follow each
// count. A refused class counts nothing: the pool is not its ledger (it
// may be another class's, or one MetalLB hands out by itself), and its
// figures would promise tenants room the class will not provision.
func (r *Reconciler) count(ctx context.Context, c metallb.Class, now time.Time) (map[v1alpha1.IPFamily]allocator.Capacity, error) {
	r.mu.Lock()
	last, ok := r.counted[c.Name]
	r.mu.Unlock()
	if ok && last.pool == c.PoolName && last.accepted == c.Accepted() && now.Sub(last.at) < r.Interval {
		return last.counts, nil
	}
	var used []netip.Addr
	if c.Accepted() {
		var err error
		if used, err = r.Books.Used(ctx, c); err != nil {
			return nil, err
		}
	}
	n := counts(c, used)
	setMetrics(c, n)
	r.mu.Lock()
	r.counted[c.Name] = counted{counts: n, pool: c.PoolName, accepted: c.Accepted(), at: now}
	r.mu.Unlock()
	return n, nil
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.written = map[string]time.Time{}
	r.counted = map[string]counted{}
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("metallb-iad-class").
		// Any class may change which class a pool belongs to.
		Watches(&v1alpha1.IPAddressClass{}, handler.EnqueueRequestsFromMapFunc(r.all)).
		Watches(&v1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*v1alpha1.IPAddress).Spec.ClassName}}}
		}), builder.WithPredicates(r.Owners.Relevant())).
		Watches(metallb.NewPool(), handler.EnqueueRequestsFromMapFunc(r.all), builder.WithPredicates(metallb.SpecChanged)).
		WithOptions(retry.Options(1)).
		Complete(r)
}

func (r *Reconciler) all(ctx context.Context, _ client.Object) []reconcile.Request {
	r.Classes.Changed()
	var classes v1alpha1.IPAddressClassList
	if err := r.Client.List(ctx, &classes); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range classes.Items {
		if classes.Items[i].Spec.Provisioner == metallb.Provisioner {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: classes.Items[i].Name}})
		}
	}
	return reqs
}

// forget drops what the driver keeps of a class that is gone or not its
// own: its series, and when it was last counted and written.
func (r *Reconciler) forget(class string) {
	deleteMetrics(class)
	r.mu.Lock()
	delete(r.counted, class)
	delete(r.written, class)
	r.mu.Unlock()
}

// Reconcile judges one class and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c, shared, err := r.Classes.Class(ctx, req.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if shared == nil || shared.Spec.Provisioner != metallb.Provisioner {
		r.forget(req.Name)
		return reconcile.Result{}, nil
	}
	class := shared.DeepCopy()
	now := r.Now()
	n, err := r.count(ctx, c, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	p := decide(class, c, n, now)
	r.mu.Lock()
	write, requeue := p.schedule(r.written[class.Name], now, r.Interval)
	r.mu.Unlock()
	if !write {
		return reconcile.Result{RequeueAfter: requeue}, nil
	}
	class.Status = p.status
	if err := r.Client.Status().Update(ctx, class); apierrors.IsNotFound(err) {
		// Gone since the cache showed it: its delete event may have come
		// first, and found nothing to forget.
		r.forget(class.Name)
		return reconcile.Result{}, nil
	} else if retry.Refusal(err) {
		r.Recorder.Record(recorder.WarningOnce(shared, metallb.ReasonWriteRefused,
			"the API server refused the driver's status write to this class (its readiness and capacity): %v", err))
		return retry.End(retry.Told(err))
	} else if err != nil {
		return retry.End(err)
	}
	r.mu.Lock()
	r.written[class.Name] = now
	r.mu.Unlock()
	if p.event != nil {
		r.Recorder.Record(*p.event)
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}
