package core

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/cachetrim"
	"github.com/cozystack/address-controller/internal/core/address"
	"github.com/cozystack/address-controller/internal/core/autoclaim"
	"github.com/cozystack/address-controller/internal/core/claim"
	"github.com/cozystack/address-controller/internal/core/class"
	"github.com/cozystack/address-controller/internal/core/usage"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/metrics"
	"github.com/cozystack/address-controller/internal/recorder"
)

// Options tunes the core.
type Options struct {
	// ClaimWorkers, AddressWorkers, ClassWorkers and AutoClaimWorkers are
	// the concurrent reconciles of each controller.
	ClaimWorkers, AddressWorkers, ClassWorkers, AutoClaimWorkers int
	// SourceAnnotations are the load-balancer backends' Service annotations
	// by which a Service chooses its own address source; auto-claim leaves
	// such Services alone. The core knows no backend: cmd/manager's flag
	// names MetalLB's by default.
	SourceAnnotations []string
	// SkipLabels are label keys of Services the core neither watches nor
	// auto-claims: a backend's own Services, which pin their address
	// themselves (the MetalLB driver's placeholders, one per address of
	// its classes, by cmd/manager's flag's default). They are left out of
	// the cache by the watch's label selector, so they cost no memory.
	SkipLabels []string
	// NearlyExhaustedPercent is the share of a family's addresses below
	// which a class is NearlyExhausted.
	NearlyExhaustedPercent int
	// SkipMetrics leaves the metrics unregistered (a second manager in one
	// process, in tests).
	SkipMetrics bool
}

// DefaultOptions are the defaults of cmd/manager's flags.
func DefaultOptions() Options {
	return Options{ClaimWorkers: 8, AddressWorkers: 8, ClassWorkers: 2, AutoClaimWorkers: 4, NearlyExhaustedPercent: class.DefaultNearlyExhaustedPercent}
}

// CacheOptions are the cache options the core's manager must be built with:
// Services are cached trimmed to what auto-claim reads, claims and
// addresses with their repeated strings shared (package cachetrim).
func CacheOptions(opts Options) cache.Options {
	return cache.Options{
		// managedFields are never read, and often the largest part of an
		// object; an update without them leaves them as they are.
		DefaultTransform: cache.TransformStripManagedFields(),
		NewInformer:      cachetrim.NewInformer,
		ByObject: map[client.Object]cache.ByObject{
			// Tens of thousands of each at a /16: their repeated strings
			// are shared.
			&v1alpha1.IPAddressClaim{}: {Transform: cachetrim.Transform},
			&v1alpha1.IPAddress{}:      {Transform: cachetrim.Transform},
			&corev1.Service{}:          {Label: withoutLabels(opts.SkipLabels), Transform: autoclaim.TransformService(opts.SourceAnnotations)},
		}}
}

// withoutLabels selects the objects that carry none of keys; nil, every
// object, when there are none.
func withoutLabels(keys []string) labels.Selector {
	if len(keys) == 0 {
		return nil
	}
	s := labels.NewSelector()
	for _, k := range keys {
		r, err := labels.NewRequirement(k, selection.DoesNotExist, nil)
		if err != nil {
			continue // ValidateSkipLabels refused it at startup
		}
		s = s.Add(*r)
	}
	return s
}

// ValidateSkipLabels checks that each of keys is a label key.
func ValidateSkipLabels(keys []string) error {
	for _, k := range keys {
		if _, err := labels.NewRequirement(k, selection.DoesNotExist, nil); err != nil {
			return err
		}
	}
	return nil
}

// EventSource is the reporting controller name on the core's events.
const EventSource = "address-controller"

// Setup registers the core with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	// No index by class: the class controller walks the cache for the one
	// question it would answer (see class.Reconciler).
	if err := index.Setup(ctx, mgr.GetFieldIndexer(), index.AddressClaim, index.AddressPool, index.AddressNamespace,
		index.ClaimWaiting, index.ClaimAddressName, index.ClaimUnresolved, index.ClaimNamedWait, index.ServiceUnclaimed); err != nil {
		return err
	}
	if !opts.SkipMetrics {
		if err := metrics.Register(mgr.GetCache()); err != nil {
			return err
		}
	}
	rec := recorder.New(mgr.GetEventRecorder(EventSource))
	if err := (&claim.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec}).SetupWithManager(mgr, opts.ClaimWorkers); err != nil {
		return err
	}
	if err := (&address.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec}).SetupWithManager(mgr, opts.AddressWorkers); err != nil {
		return err
	}
	if err := (&class.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, NearlyExhaustedPercent: opts.NearlyExhaustedPercent}).SetupWithManager(mgr, opts.ClassWorkers); err != nil {
		return err
	}
	if err := (&usage.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(mgr, 2); err != nil {
		return err
	}
	return (&autoclaim.Reconciler{Client: mgr.GetClient(), Recorder: rec, SourceAnnotations: opts.SourceAnnotations}).SetupWithManager(mgr, max(opts.AutoClaimWorkers, 1))
}

// The secure metrics endpoint authenticates and authorizes scrapes.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// Leader election, in the controller's own namespace only (a Role there;
// the namespace named here is a placeholder the charts and tests replace).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=address-controller-system,resources=leases,verbs=get;create;update
// The leader announces itself with an Event on its Lease (core/v1 Events).
// +kubebuilder:rbac:groups="",namespace=address-controller-system,resources=events,verbs=create
