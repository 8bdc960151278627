package controlplane_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/proc"
)

const eventually = 60 * time.Second

func TestControlPlane(t *testing.T) {
	g := NewWithT(t)

	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	// Until `make generate` has produced CRDs, start without any rather than
	// fail on the missing directory; the CRD subtest then skips.
	crds, _ := filepath.Glob(filepath.Join(root, "config", "crd", "*.yaml"))
	var crdDirs []string // nil: the default, config/crd
	if len(crds) == 0 {
		crdDirs = []string{}
	}

	start := time.Now()
	cp, err := controlplane.Start(t.Context(), controlplane.Options{CRDDirectoryPaths: crdDirs})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("control plane ready in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		before := proc.Children("")
		start := time.Now()
		g.Expect(cp.Stop()).To(Succeed())
		t.Logf("control plane stopped in %s", time.Since(start).Round(time.Millisecond))
		if before != nil {
			g.Expect(len(before)).To(BeNumerically(">=", 3), "etcd, kube-apiserver and kube-controller-manager should have been our children")
			g.Expect(proc.Children("")).To(BeEmpty(), "Stop left processes behind")
		}
	})

	c, err := client.New(cp.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	// Not parallel: it runs before the parallel subtests resume.
	t.Run("kube-apiserver restarts with its data and identities", func(t *testing.T) {
		g := NewWithT(t)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survives", Namespace: metav1.NamespaceDefault}}
		g.Expect(c.Create(t.Context(), cm)).To(Succeed())
		for range 2 { // the second restart is of the process the first started
			g.Expect(cp.RestartAPIServer(t.Context(), 100*time.Millisecond)).To(Succeed())
			g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})).To(Succeed())
		}
	})

	t.Run("serves the CRDs", func(t *testing.T) {
		t.Parallel()
		if len(crds) == 0 {
			t.Skip("config/crd has no CRDs yet: run make generate")
		}
		g := NewWithT(t)
		for _, kind := range []string{"IPAddressClaimList", "IPAddressList", "IPAddressClassList"} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: "local.sdn.cozystack.io", Version: "v1alpha1", Kind: kind})
			g.Expect(c.List(t.Context(), list)).To(Succeed(), kind)
		}
	})

	t.Run("garbage collection deletes dependents", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gc-owner", Namespace: metav1.NamespaceDefault}}
		g.Expect(c.Create(t.Context(), owner)).To(Succeed())
		dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "gc-dependent", Namespace: metav1.NamespaceDefault,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
		}}
		g.Expect(c.Create(t.Context(), dependent)).To(Succeed())
		g.Expect(c.Delete(t.Context(), owner)).To(Succeed())
		g.Eventually(func() error {
			return c.Get(t.Context(), client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{})
		}).WithTimeout(eventually).Should(Satisfy(apierrors.IsNotFound))
	})

	t.Run("a namespace finishes deleting", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
		g.Expect(c.Create(t.Context(), ns)).To(Succeed())
		// Content makes the namespace controller do real work before the
		// namespace's finalizer is removed.
		g.Expect(c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content", Namespace: ns.Name}})).To(Succeed())
		g.Expect(c.Delete(t.Context(), ns)).To(Succeed())
		g.Eventually(func() error {
			return c.Get(t.Context(), client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		}).WithTimeout(eventually).Should(Satisfy(apierrors.IsNotFound))
	})

	t.Run("the aggregated admin ClusterRole has rules", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		var role unstructured.Unstructured
		role.SetGroupVersionKind(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"})
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "admin"}, &role)).To(Succeed())
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		g.Expect(rules).NotTo(BeEmpty())
	})

	t.Run("a dual-stack LoadBalancer Service gets two ClusterIPs", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "dual", Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{
				Type:           corev1.ServiceTypeLoadBalancer,
				IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyRequireDualStack),
				Ports:          []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		g.Expect(c.Create(t.Context(), svc)).To(Succeed())
		g.Expect(svc.Spec.ClusterIPs).To(HaveLen(2))
		v4, v6 := netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")
		g.Expect(v4.Contains(netip.MustParseAddr(svc.Spec.ClusterIPs[0]))).To(BeTrue(), svc.Spec.ClusterIPs[0])
		g.Expect(v6.Contains(netip.MustParseAddr(svc.Spec.ClusterIPs[1]))).To(BeTrue(), svc.Spec.ClusterIPs[1])
		g.Expect(svc.Spec.Ports[0].NodePort).To(BeNumerically(">=", 30000))
	})

	t.Run("kube-apiserver metrics", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		metrics, err := cp.APIServerMetrics(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(metrics).To(ContainSubstring("apiserver_request_total{"))
	})

	t.Run("kubeconfig files and users", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		path := filepath.Join(t.TempDir(), "sub", "kubeconfig")
		g.Expect(cp.WriteKubeconfig(path)).To(Succeed())
		st, err := os.Stat(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		adminCfg, err := clientcmd.BuildConfigFromFlags("", path)
		g.Expect(err).NotTo(HaveOccurred())
		admin, err := client.New(adminCfg, client.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(admin.List(t.Context(), &corev1.NamespaceList{})).To(Succeed())

		tenantCfg, kubeconfig, err := cp.AddUser("tenant", []string{"tenants"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kubeconfig).NotTo(BeEmpty())
		tenant, err := client.New(tenantCfg, client.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		err = tenant.List(t.Context(), &corev1.ConfigMapList{}, client.InNamespace(metav1.NamespaceDefault))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a user without bindings must be forbidden, got %v", err)
	})
}
