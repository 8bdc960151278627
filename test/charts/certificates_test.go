package charts

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/core/webhook"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/proc"
)

// The core chart's webhook certificate chain, end to end: cert-manager's
// cainjector (bin/cainjector, cert-manager's own reconcilers) fills the
// chart's webhook configurations through its cert-manager.io/inject-ca-from
// (the chart's CA Certificate);
// what it injects verifies the serving certificate under the name the API
// server dials, the webhook Service's; and the API server, calling the
// chart's webhook Service with it, reaches the core's webhooks serving the
// Certificate's Secret. cert-manager's issuing controller cannot be built
// here, so the test writes the Certificate's Secret as the chart's CA issuer
// would: a serving certificate, and the CA that signed it as ca.crt.
func TestWebhookCertificateChain(t *testing.T) {
	g := NewWithT(t)
	helmBinary(t)
	injector := binary(t, "cainjector")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, c := startControlPlane(ctx, t)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: coreNS}})).To(Succeed())
	objs := installOrder(t, render(t, coreChart, coreNS))
	for _, o := range objs {
		g.Expect(c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("test-charts"))).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}

	// The stand-in for cert-manager's controller and the chart's CA issuer.
	cert := find(t, objs, "Certificate", coreChart+"-serving-cert")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	caPEM, certPEM, keyPEM := issuedByCA(t, dnsNames)
	ca := find(t, objs, "Certificate", coreChart+"-ca")
	caSecret, _, _ := unstructured.NestedString(ca.Object, "spec", "secretName")
	g.Expect(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: coreNS, Name: caSecret,
			Annotations: map[string]string{"cert-manager.io/certificate-name": ca.GetName()}},
		Type: corev1.SecretTypeTLS,
		// The CA's own key is not needed here: nothing issues from it.
		Data: map[string][]byte{corev1.TLSCertKey: caPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": caPEM},
	})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: coreNS, Name: secretName,
			Annotations: map[string]string{"cert-manager.io/certificate-name": cert.GetName()}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": caPEM},
	})).To(Succeed())

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(cp.WriteKubeconfig(kubeconfig)).To(Succeed())
	var out bytes.Buffer
	p, err := proc.Start("cainjector", injector, []string{"--kubeconfig=" + kubeconfig}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("cainjector output:\n%s", out.String())
		}
	})

	leaf, err := x509.ParseCertificate(decodePEM(t, certPEM))
	if err != nil {
		t.Fatal(err)
	}
	configs := 0
	for _, o := range objs {
		if !strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			continue
		}
		configs++
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		webhooks := func() []any {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(o), got)).To(Succeed())
			w, _, _ := unstructured.NestedSlice(got.Object, "webhooks")
			return w
		}
		g.Eventually(func(g Gomega) {
			g.Expect(p.Done()).NotTo(BeClosed(), "cainjector exited: %v", p.Err())
			for _, w := range webhooks() {
				ca, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "caBundle")
				g.Expect(ca).NotTo(BeEmpty(), "%s %s", o.GetKind(), o.GetName())
			}
		}).WithTimeout(time.Minute).Should(Succeed())
		for _, w := range webhooks() {
			cc := w.(map[string]any)["clientConfig"].(map[string]any)
			svc := cc["service"].(map[string]any)
			roots := x509.NewCertPool()
			bundle, err := base64.StdEncoding.DecodeString(cc["caBundle"].(string))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(roots.AppendCertsFromPEM(bundle)).To(BeTrue())
			_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: svc["name"].(string) + "." + svc["namespace"].(string) + ".svc"})
			g.Expect(err).NotTo(HaveOccurred(), "%s: the injected CA does not verify the serving certificate", w.(map[string]any)["name"])
		}
	}
	g.Expect(configs).To(Equal(2), "a mutating and a validating webhook configuration")

	serveWebhooks(ctx, t, cp.Config, c, find(t, objs, "Service", coreChart+"-webhook"), certPEM, keyPEM)
	// failurePolicy Fail: until the API server reaches the webhooks through
	// the Service with the injected CA, it refuses every class and claim.
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})).To(Succeed())
	g.Eventually(func() error {
		return c.Create(ctx, &v1alpha1.IPAddressClass{
			ObjectMeta: metav1.ObjectMeta{Name: "public", Annotations: map[string]string{v1alpha1.AnnotationDefaultClass: "true"}},
			Spec:       v1alpha1.IPAddressClassSpec{Provisioner: "static.example.com", ReclaimPolicy: v1alpha1.ReclaimRetain}})
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Eventually(func(g Gomega) {
		claim := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"}}
		g.Expect(c.Create(ctx, claim, client.DryRunAll)).To(Succeed())
		g.Expect(claim.Spec.ClassName).To(Equal("public"), "the mutating webhook defaults the class")
	}).WithTimeout(time.Minute).Should(Succeed())
}

// serveWebhooks runs the core's webhooks (internal/core/webhook, as cmd/manager
// serves them) with certPEM and keyPEM on this machine's first non-loopback
// IPv4 address, and points the chart's webhook Service there with an
// EndpointSlice: there is no kube-proxy, and kube-apiserver (with
// --enable-aggregator-routing) calls a webhook Service's endpoints directly.
// An endpoint may not be a loopback address, hence the interface's.
func serveWebhooks(ctx context.Context, t *testing.T, cfg *rest.Config, c client.Client, svc *unstructured.Unstructured, certPEM, keyPEM []byte) {
	t.Helper()
	host := hostIPv4(t)
	certDir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port, err := proc.FreePort(host)
	if err != nil {
		t.Fatal(err)
	}

	controlplane.RunManager(t, cfg, controlplane.ManagerOptions{
		Options: manager.Options{Scheme: scheme, WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: host, Port: port, CertDir: certDir})},
		Setup: func(_ context.Context, mgr manager.Manager) error {
			webhook.Setup(mgr, webhook.Principals{})
			return nil
		},
	})

	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	portName := ports[0].(map[string]any)["name"].(string)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.GetNamespace(), Name: svc.GetName() + "-test",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.GetName(), discoveryv1.LabelManagedBy: "test-charts"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := c.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
}

// hostIPv4 returns this machine's first non-loopback, non-link-local IPv4
// address; without one the test skips, unless CI is set.
func hostIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip.Unmap().String()
			}
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no non-loopback IPv4 address for the webhook server")
	}
	t.Skip("no non-loopback IPv4 address: the API server cannot reach a webhook server here")
	return ""
}

// issuedByCA is a CA and a serving certificate for dnsNames it signed, with
// the serving certificate's key, all PEM.
func issuedByCA(t *testing.T, dnsNames []string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "address-controller webhook CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IsCA: true, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// decodePEM returns the DER of the one PEM block in data.
func decodePEM(t *testing.T, data []byte) []byte {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("no PEM block in %q", data)
	}
	return b.Bytes
}
