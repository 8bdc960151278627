package metallb

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/proc"
)

// Namespace is where the MetalLB controller keeps its configuration.
const Namespace = "metallb-system"

// Binary and CRDs are the controller's binary and MetalLB's CRD directory,
// relative to the control plane's bin directory (the Makefile builds both).
const (
	Binary = "metallb-controller"
	CRDs   = "metallb-crds"
)

// Prepare creates what the controller expects before it starts: its
// namespace and the Deployment it names (it exits without one; no pods are
// needed, it only owns the memberlist Secret).
func Prepare(ctx context.Context, c client.Client) error {
	labels := map[string]string{"app": "metallb", "component": "controller"}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "controller"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "quay.io/metallb/controller"}}}},
			},
		},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// Pool is an IPAddressPool named name in Namespace.
func Pool(name string, autoAssign bool, addresses ...string) *unstructured.Unstructured {
	pool := &unstructured.Unstructured{}
	pool.SetAPIVersion("metallb.io/v1beta1")
	pool.SetKind("IPAddressPool")
	pool.SetNamespace(Namespace)
	pool.SetName(name)
	// Neither can fail: spec is created here, as a map.
	_ = unstructured.SetNestedStringSlice(pool.Object, addresses, "spec", "addresses")
	_ = unstructured.SetNestedField(pool.Object, autoAssign, "spec", "autoAssign")
	return pool
}

// Args are the controller's flags for a cluster without nodes or webhooks,
// with its metrics on a free port (MetalLB's default when none is found).
func Args(kubeconfig string) []string {
	port := "7472"
	if p, err := proc.FreePort("127.0.0.1"); err == nil {
		port = strconv.Itoa(p)
	}
	return []string{
		"--kubeconfig=" + kubeconfig, "--namespace=" + Namespace, "--webhook-mode=disabled", "--disable-cert-rotation",
		"--deployment=controller", "--ml-secret-name=memberlist", "--port=" + port,
	}
}

// CRDDir is MetalLB's CRD directory under the control plane's bin directory.
func CRDDir(bin string) string { return filepath.Join(bin, CRDs) }

// Run prepares the control plane for MetalLB's controller and starts it
// from binDir, with a kubeconfig written in dir and its output to out.
func Run(ctx context.Context, cp *controlplane.ControlPlane, binDir, dir string, out io.Writer) (*proc.Process, error) {
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return nil, err
	}
	if err := Prepare(ctx, c); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "metallb.kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	return proc.Start(Binary, filepath.Join(binDir, Binary), Args(kubeconfig), out)
}
