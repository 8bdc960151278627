// Command cainjector runs cert-manager's CA injector (its
// pkg/controller/cainjector, at the version go.mod pins) for the local
// control plane. cert-manager's own cainjector command is a separate Go
// module the module proxy does not serve, so this wires the same
// reconcilers: webhook configurations and CRDs, from Certificates and
// Secrets, as cert-manager's chart runs them.
package main

import (
	"flag"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/util"
)

func main() {
	flag.Parse() // --kubeconfig is controller-runtime's
	ctrl.SetLogger(zap.New())
	log := ctrl.Log.WithName("cainjector")
	if err := run(); err != nil {
		log.Error(err, "cainjector failed")
		os.Exit(1)
	}
}

func run() error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, admissionregistrationv1.AddToScheme, apiextensionsv1.AddToScheme, cmapi.AddToScheme} {
		utilruntime.Must(add(scheme))
	}
	// Its field manager, "cert-manager-cainjector", comes from the user
	// agent, as in cert-manager's command.
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
