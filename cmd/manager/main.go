package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/core"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run() error {
	defaults := core.DefaultOptions()
	var (
		opts             = defaults
		leaderElect      bool
		leaderNamespace  string
		leaderID         string
		metricsAddr      string
		metricsSecure    bool
		probeAddr        string
		pprofAddr        string
		qps              float64
		burst            int
		gracefulShutdown time.Duration
	)
	fs := flag.CommandLine
	fs.BoolVar(&leaderElect, "leader-elect", true,
		"Elect a leader through a Lease so that only one replica binds at a time. Turn off only for a single replica or for tests.")
	fs.StringVar(&leaderNamespace, "leader-election-namespace", "",
		"Namespace of the leader-election Lease. Empty: the namespace the pod runs in; required when running outside a cluster.")
	fs.StringVar(&leaderID, "leader-election-id", "address-controller.local.sdn.cozystack.io",
		"Name of the leader-election Lease.")
	fs.StringVar(&metricsAddr, "metrics-bind-address", ":8443",
		"Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, authenticating and authorizing each scrape against the API server (TokenReview, SubjectAccessReview). False serves plain HTTP.")
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&pprofAddr, "pprof-bind-address", "",
		"Address a Go pprof endpoint binds to, for profiling; empty disables it. Never expose it beyond localhost.")
	fs.IntVar(&opts.ClaimWorkers, "claim-workers", defaults.ClaimWorkers, "Concurrent IPAddressClaim reconciles.")
	fs.IntVar(&opts.AddressWorkers, "address-workers", defaults.AddressWorkers, "Concurrent IPAddress reconciles.")
	fs.IntVar(&opts.ClassWorkers, "class-workers", defaults.ClassWorkers, "Concurrent IPAddressClass reconciles.")
	fs.IntVar(&opts.AutoClaimWorkers, "auto-claim-workers", defaults.AutoClaimWorkers, "Concurrent Service reconciles of auto-claim.")
	fs.Float64Var(&qps, "kube-api-qps", 100,
		"Client-side rate limit of API requests per second; a negative value disables client-side rate limiting.")
	fs.IntVar(&burst, "kube-api-burst", 200, "Client-side burst above --kube-api-qps.")
	fs.DurationVar(&gracefulShutdown, "graceful-shutdown-timeout", 30*time.Second,
		"How long in-flight reconciles may take to finish on shutdown.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\n"+
			"The address-controller core: binds IPAddressClaims to IPAddress objects (local.sdn.cozystack.io/v1alpha1).\n"+
			"It reads the cluster from --kubeconfig, else the in-cluster config, else ~/.kube/config.\n\nFlags:\n", os.Args[0])
		fs.PrintDefaults()
	}
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	// The user agent names the field manager of every write in managedFields
	// and the client in the API server's audit log and metrics.
	cfg.UserAgent = core.EventSource

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: metricsSecure}
	if metricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                        scheme,
		Cache:                         core.CacheOptions(),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        probeAddr,
		PprofBindAddress:              pprofAddr,
		LeaderElection:                leaderElect,
		LeaderElectionID:              leaderID,
		LeaderElectionNamespace:       leaderNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &gracefulShutdown,
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if err := core.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", func(r *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(r.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting", "leaderElection", leaderElect, "claimWorkers", opts.ClaimWorkers, "addressWorkers", opts.AddressWorkers)
	return mgr.Start(ctx)
}
