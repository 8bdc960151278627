package charts

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/test/controlplane"
)

// certManagerCRDs is cert-manager's CRD directory under the control plane's
// bin directory (make bin/cert-manager-crds).
const certManagerCRDs = "cert-manager-crds"

// Every object of every render is accepted by a real API server (with our
// CRDs and cert-manager's) through server-side apply. The ServiceMonitor CRD
// is not available, so serviceMonitor stays disabled here.
func TestRendersApply(t *testing.T) {
	helmBinary(t)
	root := repoRoot(t)
	bin, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd"), filepath.Join(bin, certManagerCRDs)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	renders := []struct {
		name, chart, ns string
		args            []string
	}{
		{"core defaults", coreChart, coreNS, nil},
		{"core without cert-manager", coreChart, coreNS, []string{"--set", "certManager.enabled=false,webhook.certSecretName=webhook-tls,webhook.caBundle=Zm9v"}},
		{"core cozystack", coreChart, "cozy-address-controller", []string{"-f", "charts/address-controller/values-cozystack.yaml"}},
		{"driver defaults", driverChart, driverNS, nil},
		{"driver warn+audit", driverChart, driverNS, []string{"--set", "admissionPolicy.validationActions={Warn,Audit}"}},
		{"driver vapOnly", driverChart, driverNS, []string{"--set", "vapOnly=true"}},
		{"driver cozystack", driverChart, "cozy-metallb-iad", []string{"-f", "charts/metallb-iad/values-cozystack.yaml"}},
	}
	for _, r := range renders {
		t.Run(r.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}
			if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			objs := render(t, r.chart, r.ns, r.args...)
			if len(objs) == 0 {
				t.Fatal("rendered nothing")
			}
			for _, o := range objs {
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("test-charts"), client.ForceOwnership); err != nil {
					t.Errorf("applying %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
			// Read back what the API server kept: one object of each kind.
			seen := map[string]bool{}
			for _, o := range objs {
				if seen[o.GetKind()] {
					continue
				}
				seen[o.GetKind()] = true
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(o.GroupVersionKind())
				if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
					t.Errorf("reading back %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
		})
	}
}
