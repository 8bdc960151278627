package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/internal/core"
	"github.com/cozystack/address-controller/internal/daemon"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run() error {
	defaults := core.DefaultOptions()
	opts := defaults
	flags := daemon.Flags{Name: core.EventSource}
	fs := flag.CommandLine
	flags.Bind(fs, "address-controller.local.sdn.cozystack.io")
	fs.IntVar(&opts.ClaimWorkers, "claim-workers", defaults.ClaimWorkers, "Concurrent IPAddressClaim reconciles.")
	fs.IntVar(&opts.AddressWorkers, "address-workers", defaults.AddressWorkers, "Concurrent IPAddress reconciles.")
	fs.IntVar(&opts.ClassWorkers, "class-workers", defaults.ClassWorkers, "Concurrent IPAddressClass reconciles.")
	fs.IntVar(&opts.AutoClaimWorkers, "auto-claim-workers", defaults.AutoClaimWorkers, "Concurrent Service reconciles of auto-claim.")
	daemon.Usage(fs, os.Args[0], "The address-controller core: binds IPAddressClaims to IPAddress objects (local.sdn.cozystack.io/v1alpha1).")
	flag.Parse()

	mgr, err := flags.NewManager(core.CacheOptions(), client.Options{})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if err := core.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting", "leaderElection", flags.LeaderElect, "claimWorkers", opts.ClaimWorkers, "addressWorkers", opts.AddressWorkers)
	return mgr.Start(ctx)
}
