package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/test/proc"
)

// Webhooks are admission webhook configurations prepared for a server on
// this machine: a serving certificate signed by a fresh CA in CertDir, a
// free port, and the configurations rewritten to call https://Host:Port
// with that CA. Certificates in a cluster come from cert-manager; here they
// are self-generated.
type Webhooks struct {
	Host    string
	Port    int
	CertDir string
	opts    *envtest.WebhookInstallOptions
}

// PrepareWebhooks reads the webhook configurations in paths (directories
// or files, e.g. config/webhook) and prepares them without installing.
func PrepareWebhooks(paths ...string) (*Webhooks, error) {
	// envtest would pick the port by binding port 0, from the range every
	// outgoing connection takes its local port from.
	port, err := proc.FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	opts := &envtest.WebhookInstallOptions{Paths: paths, LocalServingHost: "127.0.0.1", LocalServingPort: port}
	if err := opts.PrepWithoutInstalling(); err != nil {
		return nil, err
	}
	return &Webhooks{Host: opts.LocalServingHost, Port: opts.LocalServingPort, CertDir: opts.LocalServingCertDir, opts: opts}, nil
}

// Install creates the configurations and waits until they can be read back;
// start the server first, as failurePolicy Fail refuses every write the
// webhooks cover while nothing answers. The API server's admission takes
// them up asynchronously after that: a test that needs them in effect
// waits for a write they judge.
func (w *Webhooks) Install(cfg *rest.Config) error { return w.opts.Install(cfg) }

// Uninstall deletes the configurations.
func (w *Webhooks) Uninstall(ctx context.Context, c client.Client) error {
	for _, m := range w.opts.MutatingWebhooks {
		if err := client.IgnoreNotFound(c.Delete(ctx, m)); err != nil {
			return err
		}
	}
	for _, v := range w.opts.ValidatingWebhooks {
		if err := client.IgnoreNotFound(c.Delete(ctx, v)); err != nil {
			return err
		}
	}
	return nil
}

// Cleanup removes the certificate directory.
func (w *Webhooks) Cleanup() error { return w.opts.Cleanup() }

// WaitForTLS waits, up to a minute, until something answers TLS on addr: a
// webhook server is up, and its configurations may be installed.
func WaitForTLS(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only probing that the server is up
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook server on %s: %w", addr, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// AsTheChart adds the matchConditions the core chart sets: the validating
// webhooks spare coreUser's requests (the core does not ask itself whether
// its own writes are allowed), and the address defaulter is called only
// for an address that lacks the protection finalizer (LacksProtection).
func (w *Webhooks) AsTheChart(coreUser string) {
	for _, v := range w.opts.ValidatingWebhooks {
		for i := range v.Webhooks {
			v.Webhooks[i].MatchConditions = append(v.Webhooks[i].MatchConditions, admissionregistrationv1.MatchCondition{
				Name: "not-the-core", Expression: fmt.Sprintf("request.userInfo.username != %q", coreUser),
			})
		}
	}
	for _, m := range w.opts.MutatingWebhooks {
		for i := range m.Webhooks {
			if m.Webhooks[i].Name == AddressDefaulter {
				m.Webhooks[i].MatchConditions = append(m.Webhooks[i].MatchConditions, LacksProtection)
			}
		}
	}
}

// AddressDefaulter is the mutating webhook that adds an address's
// protection finalizer at admission.
const AddressDefaulter = "default.ipaddresses.local.sdn.cozystack.io"

// LacksProtection is the chart's matchCondition on AddressDefaulter: a
// driver's addresses come with the finalizer and cost no call.
var LacksProtection = admissionregistrationv1.MatchCondition{
	Name: "lacks-protection",
	Expression: `!has(object.metadata.finalizers) || !object.metadata.finalizers.exists(f, f == "` +
		v1alpha1.FinalizerAddressProtection + `")`,
}
