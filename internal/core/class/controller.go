package class

import (
	"context"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/cachetrim"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/lock"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/retry"
)

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddressclasses,verbs=list;watch;patch
// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler protects classes from deletion while addresses of them exist.
type Reconciler struct {
	Client client.Client
	// APIReader confirms past the cache that no address of a deleted class is left.
	APIReader client.Reader
	Recorder  *recorder.Recorder
	// NearlyExhaustedPercent is the share of a family's addresses below
	// which a class is NearlyExhausted (DefaultNearlyExhaustedPercent when
	// zero).
	NearlyExhaustedPercent int

	last written
	// moved: when each class's addresses last changed, so that a class's
	// counts are looked at again only while they may still move.
	moved moves
	// tally counts every address by class and family, and by class, family
	// and phase: the counts without listing the class (nil in tests run
	// without a manager: the list answers).
	tally *index.Tally
	// cache is the manager's, walked for the addresses of a class being
	// deleted (nil in tests run without a manager: the client lists).
	cache cache.Cache
}

// addressesOf are the names of the class's addresses in the cache, sorted.
// The cache's own objects are walked: the core keeps no index by class for
// a question asked only while a class is being deleted.
func (r *Reconciler) addressesOf(ctx context.Context, class string) ([]string, error) {
	var names []string
	err := cachetrim.Each(ctx, r.reader(), &v1alpha1.IPAddress{}, &v1alpha1.IPAddressList{}, func(a *v1alpha1.IPAddress) {
		if a.Spec.ClassName == class {
			names = append(names, a.Name)
		}
	})
	sort.Strings(names)
	return names, err
}

// inUse counts the addresses of a class being deleted, and names them when
// they are few. The tally's count spares the walk of every address on each
// address event while a large class drains; it leaves out an address of no
// family, so a count it puts at maxNamed or fewer is walked for exactly.
func (r *Reconciler) inUse(ctx context.Context, class string) (names []string, count int, err error) {
	if r.tally != nil {
		if n := r.tally.Len(class+"/"+string(v1alpha1.IPv4)) + r.tally.Len(class+"/"+string(v1alpha1.IPv6)); n > maxNamed {
			return nil, n, nil
		}
	}
	names, err = r.addressesOf(ctx, class)
	return names, len(names), err
}

// reader is the manager's cache, or the client in tests run without one.
func (r *Reconciler) reader() client.Reader {
	if r.cache != nil {
		return r.cache
	}
	return r.Client
}

// SetupWithManager registers the class controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.cache = mgr.GetCache()
	r.tally = index.NewTally(tallyKeys)
	if err := r.tally.Feed(context.Background(), mgr.GetCache(), &v1alpha1.IPAddress{}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("ipaddressclass").
		For(&v1alpha1.IPAddressClass{}).
		Watches(&v1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.classOf)).
		WithOptions(retry.Options(workers)).
		Complete(r)
}

// classOf: an address changed; its class's counts (and, while the class
// is being deleted, what holds it) may have. The change is noted (moved).
func (r *Reconciler) classOf(_ context.Context, o client.Object) []reconcile.Request {
	class := o.(*v1alpha1.IPAddress).Spec.ClassName
	r.moved.note(class, time.Now())
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: class}}}
}

// Reconcile gathers the class's addresses, decides, and writes.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var class v1alpha1.IPAddressClass
	if err := r.Client.Get(ctx, req.NamespacedName, &class); err != nil {
		if apierrors.IsNotFound(err) {
			r.moved.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var names []string
	count := 0
	if class.DeletionTimestamp != nil {
		var err error
		if names, count, err = r.inUse(ctx, class.Name); err != nil {
			return reconcile.Result{}, err
		}
	}
	if class.DeletionTimestamp != nil && count == 0 {
		// The cache may not show an address created a moment ago; the
		// class is released only when the API server agrees.
		var live v1alpha1.IPAddressList
		if err := r.APIReader.List(ctx, &live, client.MatchingFields{index.SelectableClassName: class.Name}, client.Limit(maxNamed)); err != nil {
			return reconcile.Result{}, err
		}
		for i := range live.Items {
			names = append(names, live.Items[i].Name)
		}
	}
	p := decide(&class, names, count)
	if p.addFinalizer || p.removeFinalizer {
		if err := lock.SetFinalizer(ctx, r.Client, &class, v1alpha1.FinalizerClassProtection, p.addFinalizer); err != nil {
			return retry.OnConflict(fmt.Errorf("updating the class-protection finalizer: %w", err))
		}
	}
	if p.inUse != "" {
		r.Recorder.Record(recorder.WarningOnce(&class, v1alpha1.ReasonClassInUse, "%s", p.inUse))
	}
	if class.DeletionTimestamp != nil && names == nil && count > 0 {
		// Counted by the tally, which its own handler feeds and which may
		// lag the event that woke this pass: the last address going must
		// not leave the class held until something else wakes it.
		return reconcile.Result{RequeueAfter: statusInterval}, nil
	}
	if class.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	return r.writeStatus(ctx, &class)
}
