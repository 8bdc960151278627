package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/address-controller/internal/daemon"
	"github.com/cozystack/address-controller/internal/driver"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "metallb-iad:", err)
		os.Exit(1)
	}
}

func run() error {
	defaults := driver.DefaultOptions()
	opts := defaults
	flags := daemon.Flags{Name: driver.EventSource}
	fs := flag.CommandLine
	flags.Bind(fs, "metallb-iad.local.sdn.cozystack.io")
	fs.StringVar(&opts.MetalLBNamespace, "metallb-namespace", defaults.MetalLBNamespace,
		"Namespace of MetalLB's IPAddressPools; a class's parameters.pool names a pool there.")
	fs.StringVar(&opts.Namespace, "namespace", defaults.Namespace,
		"The driver's own namespace, where the placeholder Services that hold unattached addresses live.")
	fs.IntVar(&opts.ProvisionWorkers, "provision-workers", defaults.ProvisionWorkers, "Concurrent IPAddressClaim reconciles that provision addresses.")
	fs.IntVar(&opts.HoldWorkers, "hold-workers", defaults.HoldWorkers, "Concurrent IPAddress reconciles that hold, attach and detach addresses.")
	fs.DurationVar(&opts.CapacityInterval, "capacity-interval", defaults.CapacityInterval,
		"Least time between two counts of a class's pool (status.capacity and the gauges); readiness changes are written at once.")
	daemon.Usage(fs, os.Args[0], "metallb-iad: the driver of IPAddressClasses whose provisioner is metallb.drivers.local.sdn.cozystack.io.\n"+
		"It allocates addresses from MetalLB IPAddressPools, holds them in MetalLB's books, and pins them to the Services that name their claims.")
	flag.Parse()
	if opts.CapacityInterval <= 0 {
		// No periodic count would catch a pool address another Service takes.
		return fmt.Errorf("--capacity-interval: %v is not a positive duration", opts.CapacityInterval)
	}

	mgr, err := flags.NewManager(driver.CacheOptions(opts), driver.ClientOptions())
	if err != nil {
		return driver.Explain(err)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := driver.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting", "leaderElection", flags.LeaderElect, "metallbNamespace", opts.MetalLBNamespace, "namespace", opts.Namespace)
	return mgr.Start(ctx)
}
