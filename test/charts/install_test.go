package charts

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Both charts go through Helm's whole release cycle on a real API server, as
// an operator runs it: install (the core chart's CRDs from its crds/), upgrade
// to the policy's dry run and back, uninstall. cert-manager's CRDs stand in
// for a cluster that runs cert-manager; nothing runs the pods (no kubelet),
// so Helm does not --wait.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	helmBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, c := startControlPlane(ctx, t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	release := func(verb, chart, ns string, args ...string) {
		t.Helper()
		args = append([]string{verb, chart, "--kubeconfig", kubeconfig, "--namespace", ns}, args...)
		if verb != "uninstall" {
			args = append(args, filepath.Join("charts", chart))
		}
		helm(t, args...)
	}
	exists := func(gvk schema.GroupVersionKind, ns, name string) bool {
		t.Helper()
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(gvk)
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	var (
		deployment  = appsv1.SchemeGroupVersion.WithKind("Deployment")
		crd         = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
		certificate = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
		policy      = admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicy")
		binding     = admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingAdmissionPolicyBinding")
	)

	release("install", coreChart, coreNS, "--create-namespace")
	release("install", driverChart, driverNS, "--create-namespace")
	for what, ok := range map[string]bool{
		"the claims CRD":     exists(crd, "", "ipaddressclaims.local.sdn.cozystack.io"),
		"the core":           exists(deployment, coreNS, coreChart),
		"the webhook cert":   exists(certificate, coreNS, coreChart+"-serving-cert"),
		"the driver":         exists(deployment, driverNS, driverChart),
		"the policy":         exists(policy, "", "metallb-iad-service-pins"),
		"the policy binding": exists(binding, "", "metallb-iad-service-pins"),
	} {
		if !ok {
			t.Errorf("installed, but %s is missing", what)
		}
	}

	actions := func() []any {
		b := &unstructured.Unstructured{}
		b.SetGroupVersionKind(binding)
		if err := c.Get(ctx, client.ObjectKey{Name: "metallb-iad-service-pins"}, b); err != nil {
			t.Fatal(err)
		}
		a, _, _ := unstructured.NestedSlice(b.Object, "spec", "validationActions")
		return a
	}
	// docs/operating.md's rollout, in reverse and back.
	release("upgrade", driverChart, driverNS, "--reuse-values", "--set", "admissionPolicy.validationActions={Warn,Audit}")
	if a := actions(); len(a) != 2 || a[0] != "Warn" || a[1] != "Audit" {
		t.Errorf("upgraded to dry run, validationActions = %v", a)
	}
	release("upgrade", driverChart, driverNS, "--reuse-values", "--set", "admissionPolicy.validationActions={Deny}")
	if a := actions(); len(a) != 1 || a[0] != "Deny" {
		t.Errorf("upgraded back, validationActions = %v", a)
	}
	release("upgrade", coreChart, coreNS)

	release("uninstall", driverChart, driverNS)
	release("uninstall", coreChart, coreNS)
	for what, gone := range map[string]bool{
		"the core":   !exists(deployment, coreNS, coreChart),
		"the driver": !exists(deployment, driverNS, driverChart),
		"the policy": !exists(policy, "", "metallb-iad-service-pins"),
		// Helm never deletes a chart's crds/: the claims outlive a release.
		"not the claims CRD": exists(crd, "", "ipaddressclaims.local.sdn.cozystack.io"),
	} {
		if !gone {
			t.Errorf("uninstalled, but %s is still there", what)
		}
	}
}
