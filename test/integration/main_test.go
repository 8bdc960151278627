package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/core"
	metallbiad "github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
)

// Timeouts. Every wait in this package is bounded by one of these.
const (
	eventually = 10 * time.Second
	// eventuallyMany is the wait for a hundred claims to settle.
	eventuallyMany = 45 * time.Second
	poll           = 50 * time.Millisecond
	startTimeout   = 3 * time.Minute
	mgrSyncWait    = 30 * time.Second
	// mgrGrace bounds how long a stopping manager waits for its reconciles:
	// a wedged reconciler fails its test instead of hanging the package.
	mgrGrace       = 5 * time.Second
	mgrStopWait    = 30 * time.Second
	logEnv         = "INTEGRATION_LOG" // set to see the managers' logs
	ciEnv          = "CI"
	apiClientQPS   = 1000
	apiClientBurst = 2000
)

var (
	scheme = apiruntime.NewScheme()
	// adminCfg and k8s are the control plane's admin identity; tests act as
	// tenant, admin and driver through it.
	adminCfg *rest.Config
	k8s      client.Client
	// skipReason is set when the control plane cannot run here.
	skipReason string
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Getenv(logEnv) != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	if _, err := controlplane.Binaries(metallb.Binary); err != nil {
		if os.Getenv(ciEnv) != "" {
			fmt.Fprintf(os.Stderr, "integration: %v\n$%s is set: missing binaries are a failure there\n", err, ciEnv)
			return 1
		}
		skipReason = fmt.Sprintf("no control plane: %v", err)
		fmt.Fprintf(os.Stderr, "integration: skipping every test: %s\n", skipReason)
		return m.Run()
	}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	cp, err := controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: crdDirs()})
	if err != nil {
		cancel()
		fmt.Fprintf(os.Stderr, "integration: starting the control plane: %v\n", err)
		return 1
	}
	cancel()
	controlPlane = cp
	fmt.Fprintf(os.Stderr, "integration: control plane ready in %s\n", time.Since(start).Round(time.Millisecond))

	adminCfg = rest.CopyConfig(cp.Config)
	adminCfg.QPS, adminCfg.Burst = apiClientQPS, apiClientBurst
	if k8s, err = client.New(adminCfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintf(os.Stderr, "integration: admin client: %v\n", err)
		_ = cp.Stop()
		return 1
	}

	code := m.Run()
	// MetalLB's watches would hold the API server's shutdown up.
	stopMetalLB()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: stopping the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// metricsTaken: the core's metrics register once per process; every later
// manager skips them.
var metricsTaken atomic.Bool

// startManager runs the core in-process in a fresh manager, as cmd/manager
// does with its flags' defaults but without leader election, and returns a func that stops it and
// waits for it to return (also run at the test's cleanup). mods adjust the
// manager's client configuration.
func startManager(t *testing.T, mods ...func(*rest.Config)) (stop func()) {
	t.Helper()
	cacheOpts := core.CacheOptions(core.Options{SourceAnnotations: metallbiad.BackendAnnotations, SkipLabels: []string{metallbiad.LabelAddress}})
	return runManager(t, cacheOpts, client.Options{}, func(ctx context.Context, mgr manager.Manager) error {
		return core.Setup(ctx, mgr, core.Options{
			ClaimWorkers: 8, AddressWorkers: 8, ClassWorkers: 2, SourceAnnotations: metallbiad.BackendAnnotations,
			SkipMetrics: !metricsTaken.CompareAndSwap(false, true),
		})
	}, mods...)
}

// runManager runs a fresh manager with the given cache and client options
// and what setup registers, until the returned stop (or the test's
// cleanup) stops it and waits for it to return.
func runManager(t *testing.T, cacheOpts cache.Options, clientOpts client.Options, setup func(context.Context, manager.Manager) error, mods ...func(*rest.Config)) (stop func()) {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	for _, mod := range mods {
		mod(cfg)
	}
	return controlplane.RunManager(t, cfg, controlplane.ManagerOptions{
		Options: manager.Options{Scheme: scheme, Cache: cacheOpts, Client: clientOpts, GracefulShutdownTimeout: ptr.To(mgrGrace)},
		Setup:   setup, SyncWait: mgrSyncWait, StopWait: mgrStopWait, Stuck: stuckReconciles,
	})
}

// stuckReconciles describes the goroutines of this process that are inside
// the core's code: when a manager cannot stop, they are the reconciles that
// never returned, and their stacks say where they hang.
func stuckReconciles() string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var stuck []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "address-controller/internal/") {
			stuck = append(stuck, g)
		}
	}
	if len(stuck) == 0 {
		return ""
	}
	const show = 2
	total := len(stuck)
	if total > show {
		stuck = stuck[:show]
	}
	return fmt.Sprintf("\n%d goroutine(s) of this process are in the core's code (a wedged manager's included); the first %d:\n%s",
		total, len(stuck), strings.Join(stuck, "\n\n"))
}
