package metallb

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/test/controlplane"
)

func TestMetalLBAssignsPinnedAddresses(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	bin := controlplane.RequireBinaries(t, Binary)
	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd"), CRDDir(bin)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	k8s, err := client.New(cp.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())

	var out bytes.Buffer
	p, err := Run(ctx, cp, bin, t.TempDir(), &out)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = p.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("metallb-controller output:\n%s", out.String())
		}
	})

	g.Expect(k8s.Create(ctx, Pool("reserved", false, "198.51.100.0/28", "2001:db8:100::1-2001:db8:100::f"))).To(Succeed())

	lb := func(name string, annotations map[string]string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
		}
	}
	g.Expect(k8s.Create(ctx, lb("pinned", map[string]string{"metallb.io/loadBalancerIPs": "198.51.100.5"}))).To(Succeed())
	g.Expect(k8s.Create(ctx, lb("plain", nil))).To(Succeed())

	ingress := func(name string) func(Gomega) []string {
		return func(g Gomega) []string {
			var svc corev1.Service
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, &svc)).To(Succeed())
			var ips []string
			for _, in := range svc.Status.LoadBalancer.Ingress {
				ips = append(ips, in.IP)
			}
			return ips
		}
	}
	g.Eventually(ingress("pinned")).Should(Equal([]string{"198.51.100.5"}))
	g.Consistently(ingress("plain"), 3*time.Second).Should(BeEmpty(), "an autoAssign: false pool hands out nothing unasked")
}
