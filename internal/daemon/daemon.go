package daemon

import (
	"flag"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// Flags are the flags every controller process takes.
type Flags struct {
	// Name is the process's user agent: the field manager of its writes
	// and its name in the API server's audit log and metrics.
	Name             string
	LeaderElect      bool
	LeaderNamespace  string
	LeaderID         string
	MetricsAddr      string
	MetricsSecure    bool
	ProbeAddr        string
	PprofAddr        string
	QPS              float64
	Burst            int
	Compression      bool
	GracefulShutdown time.Duration
	zap              zap.Options
}

// Bind registers the flags on fs; leaderID is the default Lease name.
func (f *Flags) Bind(fs *flag.FlagSet, leaderID string) {
	fs.BoolVar(&f.LeaderElect, "leader-elect", true,
		"Elect a leader through a Lease so that only one replica acts at a time. Turn off only for a single replica or for tests.")
	fs.StringVar(&f.LeaderNamespace, "leader-election-namespace", "",
		"Namespace of the leader-election Lease. Empty: the namespace the pod runs in; required when running outside a cluster.")
	fs.StringVar(&f.LeaderID, "leader-election-id", leaderID, "Name of the leader-election Lease.")
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", ":8443",
		"Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&f.MetricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, authenticating and authorizing each scrape against the API server (TokenReview, SubjectAccessReview). False serves plain HTTP.")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&f.PprofAddr, "pprof-bind-address", "",
		"Address a Go pprof endpoint binds to, for profiling; empty disables it. Never expose it beyond localhost.")
	// Off by default: a burst of claims is served at once, and the API
	// server's priority and fairness — which puts ServiceAccounts in its
	// workload-low level, queued behind the control plane's own traffic —
	// is what keeps a shared control plane safe (docs/operating.md).
	fs.Float64Var(&f.QPS, "kube-api-qps", -1,
		"Client-side rate limit of API requests per second; a negative value (the default) disables client-side rate limiting, leaving the API server's priority and fairness in charge.")
	fs.IntVar(&f.Burst, "kube-api-burst", 0, "Client-side burst above --kube-api-qps (with a positive --kube-api-qps; 0: twice it).")
	// Off by default: the API server gzips what it sends a client that
	// asks, watch events included, which costs its CPU and the
	// controller's to save bandwidth a controller beside it never lacks
	// (measured in make bench: a twentieth of metallb-iad's CPU).
	fs.BoolVar(&f.Compression, "kube-api-compression", false,
		"Ask the API server to gzip its responses. Worth it only across a slow link; in the cluster it spends CPU on both ends.")
	fs.DurationVar(&f.GracefulShutdown, "graceful-shutdown-timeout", 30*time.Second,
		"How long in-flight reconciles may take to finish on shutdown.")
	f.zap.BindFlags(fs)
}

// Usage sets fs's usage text: what the process is, then its flags.
func Usage(fs *flag.FlagSet, program, what string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\n%s\n"+
			"It reads the cluster from --kubeconfig, else the in-cluster config, else ~/.kube/config.\n\nFlags:\n", program, what)
		fs.PrintDefaults()
	}
}

// NewManager sets the logger and builds a manager from the flags, with
// the API's scheme, the given cache and client options, and health and
// readiness checks (ready once the caches have synced). mods adjust the
// options further, e.g. with a webhook server.
func (f *Flags) NewManager(cacheOpts cache.Options, clientOpts client.Options, mods ...func(*manager.Options)) (manager.Manager, error) {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap)))
	if limit, ok := limitMemory(); ok {
		ctrl.Log.Info("Go memory limit set from the container's", "bytes", limit)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(f.QPS), f.Burst
	if f.QPS > 0 && f.Burst <= 0 {
		cfg.Burst = int(2 * f.QPS)
	}
	cfg.UserAgent = f.Name
	cfg.DisableCompression = !f.Compression

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	metricsOpts := metricsserver.Options{BindAddress: f.MetricsAddr, SecureServing: f.MetricsSecure}
	if f.MetricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	opts := manager.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Client:                        clientOpts,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        f.ProbeAddr,
		PprofBindAddress:              f.PprofAddr,
		LeaderElection:                f.LeaderElect,
		LeaderElectionID:              f.LeaderID,
		LeaderElectionNamespace:       f.LeaderNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &f.GracefulShutdown,
	}
	for _, mod := range mods {
		mod(&opts)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", func(r *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(r.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}
