package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cozystack/address-controller/internal/core"
	"github.com/cozystack/address-controller/internal/core/webhook"
	"github.com/cozystack/address-controller/internal/daemon"
	"github.com/cozystack/address-controller/internal/index"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run() error {
	opts := core.DefaultOptions()
	flags := daemon.Flags{Name: core.EventSource}
	var set settings
	fs := flag.CommandLine
	flags.Bind(fs, "address-controller.local.sdn.cozystack.io")
	set.bind(fs, &opts)
	daemon.Usage(fs, os.Args[0], "The address-controller core: binds IPAddressClaims to IPAddress objects (local.sdn.cozystack.io/v1alpha1)\nand serves their admission webhooks.")
	flag.Parse()
	opts.SourceAnnotations = list(set.sourceAnnotations)
	opts.SkipLabels = list(set.skipLabels)
	if err := core.ValidateSkipLabels(opts.SkipLabels); err != nil {
		return fmt.Errorf("--auto-claim-skip-labels: %w", err)
	}
	if p := opts.NearlyExhaustedPercent; p < 1 || p > 99 {
		// 0 would never warn, 100 or more always.
		return fmt.Errorf("--nearly-exhausted-percent: %d is not between 1 and 99", p)
	}

	mgr, err := flags.NewManager(core.CacheOptions(opts), client.Options{}, func(o *manager.Options) {
		o.WebhookServer = ctrlwebhook.NewServer(ctrlwebhook.Options{Host: set.webhookHost, Port: set.webhookPort, CertDir: set.certDir})
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if err := checkAPIServer(ctx, mgr); err != nil {
		return err
	}
	if err := core.Setup(ctx, mgr, opts); err != nil {
		return err
	}
	if set.webhookPort != 0 {
		if set.coreUser == "" {
			if set.coreUser, err = whoAmI(ctx, mgr); err != nil {
				return fmt.Errorf("asking the API server who the core is (set --core-username to skip): %w", err)
			}
		}
		drivers, scopes, err := webhook.ParseDrivers(list(set.driverUsers))
		if err != nil {
			return fmt.Errorf("--driver-usernames: %w", err)
		}
		webhook.Setup(mgr, webhook.Principals{
			Core: []string{set.coreUser}, Drivers: drivers, Scopes: scopes, AdminGroups: list(set.adminGroups), AdminUsers: list(set.adminUsers),
		})
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}
	ctrl.Log.WithName("setup").Info("starting", "leaderElection", flags.LeaderElect, "claimWorkers", opts.ClaimWorkers,
		"addressWorkers", opts.AddressWorkers, "webhookPort", set.webhookPort, "coreUsername", set.coreUser)
	return mgr.Start(ctx)
}

// settings are the manager's flags beyond the core's Options.
type settings struct {
	webhookPort                          int
	webhookHost, certDir, coreUser       string
	driverUsers, adminGroups, adminUsers string
	sourceAnnotations, skipLabels        string
}

// bind registers the flags, the core's worker counts into opts.
func (s *settings) bind(fs *flag.FlagSet, opts *core.Options) {
	defaults := *opts
	fs.IntVar(&opts.ClaimWorkers, "claim-workers", defaults.ClaimWorkers, "Concurrent IPAddressClaim reconciles.")
	fs.IntVar(&opts.AddressWorkers, "address-workers", defaults.AddressWorkers, "Concurrent IPAddress reconciles.")
	fs.IntVar(&opts.ClassWorkers, "class-workers", defaults.ClassWorkers, "Concurrent IPAddressClass reconciles.")
	fs.IntVar(&opts.AutoClaimWorkers, "auto-claim-workers", defaults.AutoClaimWorkers, "Concurrent Service reconciles of auto-claim.")
	fs.IntVar(&opts.NearlyExhaustedPercent, "nearly-exhausted-percent", defaults.NearlyExhaustedPercent,
		"A class is NearlyExhausted while a family has less than this share (in percent) of its addresses left.")
	fs.StringVar(&s.sourceAnnotations, "auto-claim-skip-annotations", metallbSourceAnnotations,
		"Comma-separated Service annotations by which a load-balancer backend lets a Service choose its own address source; "+
			"auto-claim leaves a Service carrying one alone. The default is MetalLB's pool, pin and sharing annotations.")
	fs.StringVar(&s.skipLabels, "auto-claim-skip-labels", metallbPlaceholderLabel,
		"Comma-separated label keys of a load-balancer backend's own Services; the core neither watches nor auto-claims a Service carrying one, "+
			"and does not keep it in memory. The default is the label of the MetalLB driver's placeholders, one Service per address of its classes.")
	fs.IntVar(&s.webhookPort, "webhook-port", 9443, "Port the admission webhooks are served on (HTTPS); 0 serves none.")
	fs.StringVar(&s.webhookHost, "webhook-host", "", "Address the admission webhooks bind to; empty binds every interface.")
	fs.StringVar(&s.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"Directory holding the webhooks' serving certificate, tls.crt and tls.key (cert-manager's Secret, mounted).")
	fs.StringVar(&s.coreUser, "core-username", "",
		"The core's own username, the only one that may write claim status and the core's address phases. Empty: asked from the API server (SelfSubjectReview).")
	fs.StringVar(&s.driverUsers, "driver-usernames", "metallb.drivers.local.sdn.cozystack.io=system:serviceaccount:metallb-iad-system:metallb-iad",
		"Comma-separated drivers, the only ones that may write an address's Conflict, Lost, associatedTo and holding: "+
			"<provisioner>=<username> keeps the driver to the addresses and classes of that provisioner; a bare <username> serves any class.")
	fs.StringVar(&s.adminGroups, "admin-groups", "system:masters,kubeadm:cluster-admins,cozystack-cluster-admin",
		"Comma-separated groups of administrators, who may clear an address's claimRef.")
	fs.StringVar(&s.adminUsers, "admin-usernames", "", "Comma-separated usernames of further administrators.")
}

// metallbSourceAnnotations are MetalLB's pool, pin and sharing annotations
// under both its prefixes: the backend installed next to the core by
// default. The core itself knows no backend; it is told these.
const metallbSourceAnnotations = "metallb.io/loadBalancerIPs,metallb.io/address-pool,metallb.io/allow-shared-ip," +
	"metallb.universe.tf/loadBalancerIPs,metallb.universe.tf/address-pool,metallb.universe.tf/allow-shared-ip"

// metallbPlaceholderLabel labels the MetalLB driver's placeholders, which
// hold each address of its classes in MetalLB's books: as many Services as
// the driver's classes have addresses, none of them the core's concern.
const metallbPlaceholderLabel = "metallb.drivers.local.sdn.cozystack.io/ip-address"

// checkAPIServer refuses to start against an API server that cannot serve
// the core's reads past its cache: it would run and never bind a claim.
// An API server not reachable yet is logged, and the manager goes on (its
// caches wait for it as they always do).
func checkAPIServer(ctx context.Context, mgr manager.Manager) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	refused, transient := index.CheckSelectable(ctx, mgr.GetAPIReader())
	if transient != nil {
		ctrl.Log.WithName("setup").Error(transient, "could not check the API server's field selectors; going on")
	}
	return refused
}

// whoAmI is the username the manager authenticates as.
func whoAmI(ctx context.Context, mgr manager.Manager) (string, error) {
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return "", err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
