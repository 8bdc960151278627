package driver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/cachetrim"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/driver/metallb/hold"
	"github.com/cozystack/address-controller/internal/driver/metallb/pool"
	"github.com/cozystack/address-controller/internal/driver/metallb/provision"
	"github.com/cozystack/address-controller/internal/recorder"
)

// EventSource is the reporting controller name on the driver's events.
const EventSource = "metallb-iad"

// Options tunes the driver.
type Options struct {
	// MetalLBNamespace is where MetalLB's IPAddressPools live.
	MetalLBNamespace string
	// Namespace is the driver's own namespace, where placeholders live.
	Namespace string
	// ProvisionWorkers and HoldWorkers are the concurrent reconciles.
	ProvisionWorkers, HoldWorkers int
	// CapacityInterval is the least time between capacity-only writes of
	// a class's status.
	CapacityInterval time.Duration
	// Owners says which classes are the driver's, for the cache and the
	// event filters; nil keeps every address whole and passes every event.
	Owners *metallb.ClassOwners
	// SkipMetrics leaves the metrics unregistered (several drivers in one
	// test process).
	SkipMetrics bool
}

// DefaultOptions are the defaults of cmd/metallb-iad's flags.
func DefaultOptions() Options {
	return Options{
		MetalLBNamespace: "metallb-system", Namespace: "metallb-iad-system",
		ProvisionWorkers: 4, HoldWorkers: 16, CapacityInterval: 10 * time.Second,
		Owners: &metallb.ClassOwners{},
	}
}

// ClientOptions make the manager's client serve MetalLB's pools, read as
// unstructured objects, from the cache like everything else.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// CacheOptions cache Services trimmed to what the driver reads, and pools
// from the MetalLB namespace only.
func CacheOptions(opts Options) cache.Options {
	claims, addresses := metallb.TransformClaim, cachetrim.Transform
	if opts.Owners != nil {
		claims, addresses = opts.Owners.TransformClaim, opts.Owners.TransformAddress
	}
	return cache.Options{
		// As the core's: managedFields are never read, and claims and
		// addresses share their repeated strings; another provisioner's
		// claims and addresses are kept only in outline.
		DefaultTransform: cache.TransformStripManagedFields(),
		NewInformer:      cachetrim.NewInformer,
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.IPAddressClaim{}: {Transform: claims},
			&v1alpha1.IPAddress{}:      {Transform: addresses},
			&corev1.Service{}:          {Transform: metallb.TransformService},
			metallb.NewPool():          {Namespaces: map[string]cache.Config{opts.MetalLBNamespace: {}}},
		}}
}

// Setup registers the driver with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	// Without MetalLB's CRDs the pool watch would time out syncing minutes
	// later; say what is missing at once.
	if _, err := mgr.GetRESTMapper().RESTMapping(metallb.PoolGVK.GroupKind(), metallb.PoolGVK.Version); err != nil {
		return Explain(err)
	}
	if err := metallb.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if !opts.SkipMetrics {
		if err := pool.RegisterMetrics(); err != nil {
			return err
		}
	}
	if opts.Owners != nil {
		if err := opts.Owners.Watch(ctx, mgr.GetCache()); err != nil {
			return err
		}
	}
	rec := recorder.New(mgr.GetEventRecorder(EventSource))
	books := metallb.Books{Reader: mgr.GetClient(), Cache: mgr.GetCache(), Namespace: opts.MetalLBNamespace, Placeholders: opts.Namespace}
	classes := &metallb.Classes{Books: books}
	if err := (&pool.Reconciler{Client: mgr.GetClient(), Books: books, Classes: classes, Owners: opts.Owners, Recorder: rec, Interval: opts.CapacityInterval}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&provision.Reconciler{Client: mgr.GetClient(), Books: books, Classes: classes, Owners: opts.Owners, Recorder: rec}).SetupWithManager(mgr, opts.ProvisionWorkers); err != nil {
		return err
	}
	return (&hold.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cache: mgr.GetCache(), Classes: classes, Owners: opts.Owners, Recorder: rec, Namespace: opts.Namespace}).SetupWithManager(mgr, opts.HoldWorkers)
}

// Explain turns an error of starting the driver without MetalLB's CRDs
// into one line that says so; other errors pass unchanged.
func Explain(err error) error {
	if err != nil && meta.IsNoMatchError(err) {
		return fmt.Errorf("MetalLB's CRDs are not installed: the API server serves no %s %s; install MetalLB before metallb-iad",
			metallb.PoolGVK.GroupVersion(), metallb.PoolGVK.Kind)
	}
	return err
}

// The secure metrics endpoint authenticates and authorizes scrapes.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// Leader election, in the controller's own namespace only (a Role there;
// the namespace named here is a placeholder the charts and tests replace).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=metallb-iad-system,resources=leases,verbs=get;create;update
// The leader announces itself with an Event on its Lease (core/v1 Events).
// +kubebuilder:rbac:groups="",namespace=metallb-iad-system,resources=events,verbs=create
