package manager

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
	"github.com/cozystack/address-controller/test/proc"
)

// TestDriverBinary runs bin/manager and bin/metallb-iad as an operator
// would, each as its own ServiceAccount bound to nothing but the ClusterRole
// generated from its code's markers, with MetalLB's controller: what the
// markers miss, this test misses too.
func TestDriverBinary(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	bin := controlplane.RequireBinaries(t, metallb.Binary)
	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, k8s := start(ctx, t, []string{filepath.Join(root, "config", "crd"), metallb.CRDDir(bin)})
	dir := t.TempDir()

	var mlbOut bytes.Buffer
	mlb, err := metallb.Run(ctx, cp, bin, dir, &mlbOut)
	g.Expect(err).NotTo(HaveOccurred())

	run := func(name, role string, args ...string) {
		t.Helper()
		namespace := map[string]string{"manager": coreNamespace, "metallb-iad": driverNamespace}[name]
		startAs(ctx, t, cp, dir, name, namespace, name, filepath.Join(root, "config", "rbac", role), args...)
	}
	t.Cleanup(func() {
		_ = mlb.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("metallb-controller output:\n%s", mlbOut.String())
		}
	})
	run("manager", "role.yaml", "--metrics-bind-address=0", "--health-probe-bind-address="+freeAddr(t), "--webhook-port=0")
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	run("metallb-iad", filepath.Join("metallb-iad", "role.yaml"), "--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+probeAddr)
	By := func(s string) { t.Log(s) }

	By("the driver elects itself leader and answers its probes")
	g.Eventually(func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: driverNamespace, Name: "metallb-iad.local.sdn.cozystack.io"}, &lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	}).Should(Succeed())
	g.Eventually(func() int { return get(t, "http://"+probeAddr+"/readyz", "") }).Should(Equal(http.StatusOK))

	By("it provisions a claim of its class from the pool and holds the address")
	g.Expect(k8s.Create(ctx, metallb.Pool("reserved", false, "198.51.100.0/30"))).To(Succeed())
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "reserved"},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: "metallb.drivers.local.sdn.cozystack.io",
			Parameters: &apiruntime.RawExtension{Raw: []byte(`{"pool":"reserved"}`)}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: "reserved", Family: v1alpha1.IPv4}})).To(Succeed())
	ingress := func(ns, name string) func(g Gomega) []corev1.LoadBalancerIngress {
		return func(g Gomega) []corev1.LoadBalancerIngress {
			var svc corev1.Service
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &svc)).To(Succeed())
			return svc.Status.LoadBalancer.Ingress
		}
	}
	g.Eventually(ingress("metallb-iad-system", "ip-198-51-100-0")).Should(ConsistOf(HaveField("IP", "198.51.100.0")))

	By("a Service naming the claim gets its address")
	g.Expect(k8s.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{v1alpha1.AnnotationIPAddressClaim: "web"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	})).To(Succeed())
	g.Eventually(ingress("default", "web")).Should(ConsistOf(HaveField("IP", "198.51.100.0")))

	By("an authorized scraper reads the class's capacity")
	scraper := token(ctx, t, kubernetes.NewForConfigOrDie(cp.Config), k8s, "prometheus", true)
	g.Eventually(func(g Gomega) {
		body := scrape(g, "https://"+metricsAddr+"/metrics", scraper)
		g.Expect(body).To(ContainSubstring(`metallb_iad_class_addresses{class="reserved",family="IPv4",pool="reserved",state="allocated"} 1`))
		g.Expect(body).To(ContainSubstring(`metallb_iad_class_addresses{class="reserved",family="IPv4",pool="reserved",state="total"} 4`))
		g.Expect(body).To(ContainSubstring(`metallb_iad_class_ready{class="reserved"} 1`))
	}).Should(Succeed())
}

// Without MetalLB's CRDs the driver says so in one line and exits non-zero
// at once, instead of timing out its cache sync minutes later.
func TestDriverBinary_NoMetalLBCRDs(t *testing.T) {
	g := NewWithT(t)
	controlplane.RequireBinaries(t)
	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, _ := start(ctx, t, []string{filepath.Join(root, "config", "crd")})
	dir := t.TempDir()
	kc, err := cp.ServiceAccount(ctx, "metallb-iad-system", "metallb-iad", filepath.Join(root, "config", "rbac", "metallb-iad", "role.yaml"), 3600)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(dir, "metallb-iad.kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())
	var out bytes.Buffer
	p, err := proc.Start("metallb-iad", build(t, dir, "metallb-iad"), []string{"--kubeconfig=" + kubeconfig, "--leader-election-namespace=" + leaseNamespace}, &out)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("metallb-iad still runs 30 s after start without MetalLB's CRDs:\n%s", out.String())
	}
	g.Expect(p.Err()).To(HaveOccurred(), "a non-zero exit")
	g.Expect(out.String()).To(ContainSubstring("MetalLB's CRDs are not installed"))
}
