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
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/test/proc"
)

// The core chart's webhooks get their CA from cert-manager's cainjector
// (bin/cainjector, cert-manager's own reconcilers), through the chart's
// cert-manager.io/inject-ca-from, and what it injects verifies the serving
// certificate under the name the API server dials: the webhook Service's.
// cert-manager's issuing controller cannot be built here, so the test writes
// the Certificate's Secret as its selfSigned issuer would.
func TestCAInjection(t *testing.T) {
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

	// The stand-in for cert-manager's controller and selfSigned issuer.
	cert := find(t, objs, "Certificate", coreChart+"-serving-cert")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	certPEM, keyPEM := selfSigned(t, dnsNames)
	g.Expect(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: coreNS, Name: secretName,
			Annotations: map[string]string{"cert-manager.io/certificate-name": cert.GetName()}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": certPEM},
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
}

// selfSigned returns a self-signed serving certificate for dnsNames and its
// key, PEM-encoded, as cert-manager's selfSigned issuer makes one.
func selfSigned(t *testing.T, dnsNames []string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
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
