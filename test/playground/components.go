package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/address-controller/policies"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
)

// component is one process the playground runs against its control plane.
// Adding a component (a MetalLB controller, a driver, admission webhooks)
// is one more entry in components.
type component struct {
	name string
	// path is the binary.
	path string
	args []string
	// crds are extra CRD directories or files the component needs,
	// installed with the control plane.
	crds []string
	// setup, if set, runs once the control plane is up and before the
	// component starts: objects it expects to exist, its identity.
	setup func(ctx context.Context, cp *controlplane.ControlPlane) error
	// started, if set, runs once the component's process has started: what
	// must wait for it, such as webhook registrations.
	started func(ctx context.Context, cp *controlplane.ControlPlane) error
}

// The controllers' identities: each runs as its own ServiceAccount, bound
// to nothing but the ClusterRole generated from its code's markers, as in a
// cluster. Tokens last a day.
const (
	coreNamespace   = "address-controller-system"
	coreAccount     = "address-controller"
	driverNamespace = "metallb-iad-system"
	driverAccount   = "metallb-iad"
	tokenValidity   = 24 * 60 * 60
)

// components lists what the playground runs, in start order; they are
// stopped in reverse. binDir holds the manager and metallb-iad, cpBin the
// control plane's binaries and MetalLB's; dir is the playground's directory
// (.playground), kubeconfig the admin kubeconfig's path, and wh the prepared
// webhooks.
func components(root, binDir, cpBin, dir, kubeconfig string, wh *controlplane.Webhooks) []component {
	coreKubeconfig := filepath.Join(dir, coreAccount+".kubeconfig")
	driverKubeconfig := filepath.Join(dir, driverAccount+".kubeconfig")
	return []component{
		{
			// MetalLB's own controller: pools are MetalLB IPAddressPools in
			// metallb-system.
			name:  "metallb-controller",
			path:  filepath.Join(cpBin, metallb.Binary),
			args:  metallb.Args(kubeconfig),
			crds:  []string{metallb.CRDDir(cpBin)},
			setup: prepareMetalLB,
		},
		{
			name: "manager",
			path: filepath.Join(binDir, "manager"),
			args: []string{
				"--kubeconfig", coreKubeconfig,
				"--leader-elect=true",
				"--leader-election-namespace=" + coreNamespace,
				"--metrics-bind-address=:0",
				"--health-probe-bind-address=127.0.0.1:0",
				"--webhook-host=" + wh.Host,
				"--webhook-port=" + strconv.Itoa(wh.Port),
				"--webhook-cert-dir=" + wh.CertDir,
				"--driver-usernames=metallb.drivers.local.sdn.cozystack.io=system:serviceaccount:" + driverNamespace + ":" + driverAccount,
			},
			setup: func(ctx context.Context, cp *controlplane.ControlPlane) error {
				if err := installTenantRoles(ctx, cp, root, cpBin); err != nil {
					return err
				}
				return identity(coreNamespace, coreAccount, filepath.Join(root, "config", "rbac", "role.yaml"), coreKubeconfig)(ctx, cp)
			},
			started: func(ctx context.Context, cp *controlplane.ControlPlane) error {
				if err := controlplane.WaitForTLS(ctx, net.JoinHostPort(wh.Host, strconv.Itoa(wh.Port))); err != nil {
					return err
				}
				return wh.Install(cp.Config)
			},
		},
		{
			// The driver of MetalLB classes, and the service-pins policy
			// that keeps tenants from pinning MetalLB addresses themselves.
			name: "metallb-iad",
			path: filepath.Join(binDir, "metallb-iad"),
			args: []string{
				"--kubeconfig", driverKubeconfig,
				"--leader-elect=true",
				"--leader-election-namespace=" + driverNamespace,
				"--metallb-namespace=" + metallb.Namespace,
				"--namespace=" + driverNamespace,
				"--metrics-bind-address=:0",
				"--health-probe-bind-address=127.0.0.1:0",
			},
			setup: func(ctx context.Context, cp *controlplane.ControlPlane) error {
				err := identity(driverNamespace, driverAccount, filepath.Join(root, "config", "rbac", "metallb-iad", "role.yaml"), driverKubeconfig)(ctx, cp)
				if err != nil {
					return err
				}
				return installServicePins(ctx, cp)
			},
		},
	}
}

// identity writes a kubeconfig of a ServiceAccount bound to roleFile.
func identity(namespace, name, roleFile, path string) func(context.Context, *controlplane.ControlPlane) error {
	return func(ctx context.Context, cp *controlplane.ControlPlane) error {
		kc, err := cp.ServiceAccount(ctx, namespace, name, roleFile, tokenValidity)
		if err != nil {
			return err
		}
		return os.WriteFile(path, kc, 0o600)
	}
}

func prepareMetalLB(ctx context.Context, cp *controlplane.ControlPlane) error {
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return err
	}
	return metallb.Prepare(ctx, c)
}

// installServicePins applies the driver's policies from policies/, the
// bytes the chart ships: service-pins with its binding and params, and
// class-parameters with its binding.
func installServicePins(ctx context.Context, cp *controlplane.ControlPlane) error {
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return err
	}
	return policies.Install(ctx, c)
}

// installTenantRoles applies the core chart's ClusterRoles that aggregate
// claim access into the built-in admin, edit and view roles, rendered by
// cpBin's helm from charts/address-controller: tenants get what they get in
// a cluster.
func installTenantRoles(ctx context.Context, cp *controlplane.ControlPlane, root, cpBin string) error {
	helm := filepath.Join(cpBin, "helm")
	out, err := exec.CommandContext(ctx, helm, "template", "address-controller",
		filepath.Join(root, "charts", "address-controller"), "--show-only", "templates/aggregated-roles.yaml").Output()
	if err != nil {
		return fmt.Errorf("rendering the tenant roles with %s: %w", helm, err)
	}
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(out), "\n---") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			return err
		}
		if role.Name == "" {
			continue
		}
		if err := c.Create(ctx, &role); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
		}
	}
	return nil
}
