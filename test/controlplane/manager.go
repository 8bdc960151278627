package controlplane

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ManagerOptions say how RunManager runs a manager in the test's process.
type ManagerOptions struct {
	manager.Options
	// Setup registers what the manager runs (core.Setup, driver.Setup).
	Setup func(context.Context, manager.Manager) error
	// SyncWait bounds the wait for the caches to sync; StopWait the wait
	// for the manager to return once stopped.
	SyncWait, StopWait time.Duration
	// Stuck describes, when the manager does not stop in time, what is
	// still running (a test's goroutine dump).
	Stuck func() string
}

// RunManager starts a manager with opts against cfg — no metrics or probe
// listeners, controller names reusable within the process — and waits for
// its caches to sync. The returned stop (also the test's cleanup) stops it
// and waits for it to return.
func RunManager(t testing.TB, cfg *rest.Config, opts ManagerOptions) (stop func()) {
	t.Helper()
	mo := opts.Options
	mo.Metrics = metricsserver.Options{BindAddress: "0"}
	mo.HealthProbeBindAddress = "0"
	mo.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if opts.Setup != nil {
		if err := opts.Setup(ctx, mgr); err != nil {
			cancel()
			t.Fatalf("setup: %v", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager returned: %v%s", err, stuck(opts))
			}
		case <-time.After(orDefault(opts.StopWait, time.Minute)):
			t.Errorf("manager did not stop within %s%s", orDefault(opts.StopWait, time.Minute), stuck(opts))
		}
	})
	t.Cleanup(stop)
	syncCtx, syncCancel := context.WithTimeout(ctx, orDefault(opts.SyncWait, 30*time.Second))
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		select {
		case err := <-done:
			t.Fatalf("manager exited before its cache synced: %v", err)
		default:
			t.Fatalf("manager cache did not sync within %s", orDefault(opts.SyncWait, 30*time.Second))
		}
	}
	return stop
}

func stuck(opts ManagerOptions) string {
	if opts.Stuck == nil {
		return ""
	}
	return fmt.Sprint(opts.Stuck())
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
