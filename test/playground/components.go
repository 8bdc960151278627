package main

import (
	"context"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
)

// component is one process the playground runs against its control plane.
// Adding a component (a MetalLB controller, a driver, admission webhooks)
// is one more entry in components.
type component struct {
	name string
	// path is the binary, relative to the repository root.
	path string
	args []string
	// crds are extra CRD directories or files (relative to the repository
	// root) the component needs, installed with the control plane.
	crds []string
	// setup, if set, runs once the control plane is up and before the
	// component starts: objects it expects to exist, webhook registrations.
	setup func(ctx context.Context, cp *controlplane.ControlPlane) error
}

// components lists what the playground runs, in start order; they are
// stopped in reverse. kubeconfig is the admin kubeconfig's path.
func components(kubeconfig string) []component {
	return []component{
		{
			// MetalLB's own controller, as the driver of MetalLB classes will
			// use it: pools are MetalLB IPAddressPools in metallb-system.
			name:  "metallb-controller",
			path:  filepath.Join("bin", metallb.Binary),
			args:  metallb.Args(kubeconfig),
			crds:  []string{filepath.Join("bin", metallb.CRDs)},
			setup: prepareMetalLB,
		},
		{
			name: "manager",
			path: filepath.Join("bin", "manager"),
			args: []string{
				"--kubeconfig", kubeconfig,
				"--leader-elect=true",
				"--leader-election-namespace=kube-system",
				"--metrics-bind-address=:0",
				"--health-probe-bind-address=127.0.0.1:0",
			},
		},
		{
			// The driver of MetalLB classes: provisions from MetalLB pools,
			// holds addresses with placeholders, pins them to Services.
			name: "metallb-iad",
			path: filepath.Join("bin", "metallb-iad"),
			args: []string{
				"--kubeconfig", kubeconfig,
				"--leader-elect=true",
				"--leader-election-namespace=kube-system",
				"--metallb-namespace=" + metallb.Namespace,
				"--namespace=" + driverNamespace,
				"--metrics-bind-address=:0",
				"--health-probe-bind-address=127.0.0.1:0",
			},
			setup: prepareDriver,
		},
	}
}

// driverNamespace is where the driver keeps its placeholder Services.
const driverNamespace = "metallb-iad-system"

func prepareDriver(ctx context.Context, cp *controlplane.ControlPlane) error {
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: driverNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func prepareMetalLB(ctx context.Context, cp *controlplane.ControlPlane) error {
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return err
	}
	return metallb.Prepare(ctx, c)
}
