package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
)

// driverNamespace is where the driver under test keeps its placeholders.
const driverNamespace = "metallb-iad-system"

// metallbLog is where MetalLB's controller writes; a failing driver test
// points at it.
var metallbLog string

// crdDirs are our CRDs and MetalLB's.
func crdDirs() []string {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil
	}
	bin, err := controlplane.BinDir()
	if err != nil {
		return nil
	}
	return []string{filepath.Join(root, "config", "crd"), metallb.CRDDir(bin)}
}

var (
	controlPlane *controlplane.ControlPlane
	metalLBOnce  sync.Once
	metalLBErr   error
	stopMetalLB  = func() {}
	// metalLBKill kills the running MetalLB controller at once.
	metalLBKill = func() {}
)

// needMetalLB starts MetalLB's controller the first time a test needs it
// and keeps it for the rest of the package. Tests before that one see no
// MetalLB: it would rewrite the Service statuses the core's own tests set.
func needMetalLB(t *testing.T) {
	t.Helper()
	metalLBOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopMetalLB, metalLBErr = startMetalLB(ctx, controlPlane)
	})
	if metalLBErr != nil {
		t.Fatalf("starting MetalLB's controller: %v", metalLBErr)
	}
}

// startMetalLB runs MetalLB's controller and creates the driver's namespace.
func startMetalLB(ctx context.Context, cp *controlplane.ControlPlane) (stop func(), err error) {
	bin, err := controlplane.BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "integration-metallb-")
	if err != nil {
		return nil, err
	}
	metallbLog = filepath.Join(dir, "metallb-controller.log")
	out, err := os.Create(metallbLog)
	if err != nil {
		return nil, err
	}
	p, err := metallb.Run(ctx, cp, bin, dir, out)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cp.Config, client.Options{})
	if err == nil {
		err = client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: driverNamespace}}))
	}
	if err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, fmt.Errorf("creating %s: %w", driverNamespace, err)
	}
	metalLBKill = func() {
		_ = p.Stop(0)
		_ = out.Close()
		_ = os.RemoveAll(dir)
	}
	return func() {
		_ = p.Stop(5 * time.Second)
		_ = out.Close()
		_ = os.RemoveAll(dir)
	}, nil
}

// killMetalLB kills MetalLB's controller (SIGKILL, no grace) and starts it
// again, as a crash and a restart of its pod would.
func killMetalLB(t *testing.T) {
	t.Helper()
	metalLBKill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if stopMetalLB, err = startMetalLB(ctx, controlPlane); err != nil {
		t.Fatalf("restarting MetalLB's controller: %v", err)
	}
}
