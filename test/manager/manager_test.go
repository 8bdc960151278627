package manager

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/proc"
)

const leaseNamespace = "kube-system"

// TestManagerBinary runs bin/manager as an operator would and checks what a
// platform team relies on: leader election, probes, binding, auto-claim, and
// metrics only for an authorized scraper.
func TestManagerBinary(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	controlplane.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	cp, k8s := start(ctx, t, nil)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	g.Expect(cp.WriteKubeconfig(kubeconfig)).To(Succeed())
	binary := buildManager(t, dir)
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	var out bytes.Buffer
	p, err := proc.Start("manager", binary, []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-election-namespace=" + leaseNamespace,
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + probeAddr,
		"--webhook-port=0", // the webhooks have their own test
	}, &out)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("manager output:\n%s", out.String())
		}
	})

	By := func(s string) { t.Log(s) }

	By("the manager elects itself leader through its Lease")
	g.Eventually(func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: leaseNamespace, Name: "address-controller.local.sdn.cozystack.io"}, &lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	}).Should(Succeed())

	By("the probes answer once the caches are synced")
	g.Eventually(func() int { return get(t, "http://"+probeAddr+"/readyz", "") }).Should(Equal(http.StatusOK))
	g.Expect(get(t, "http://"+probeAddr+"/healthz", "")).To(Equal(http.StatusOK))

	By("it binds a claim")
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "metrics"},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: "static.example.com"}})).To(Succeed())
	name, _ := v1alpha1.IPAddressName("198.51.100.1")
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.IPAddressSpec{Address: "198.51.100.1", ClassName: "metrics", Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: "metrics", Family: v1alpha1.IPv4}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		var c v1alpha1.IPAddressClaim
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, &c)).To(Succeed())
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
	}).Should(Succeed())

	By("it auto-claims a plain LoadBalancer Service that names a class")
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-198-51-100-2"},
		Spec: v1alpha1.IPAddressSpec{Address: "198.51.100.2", ClassName: "metrics", Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop", Annotations: map[string]string{v1alpha1.AnnotationIPAddressClass: "metrics"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		var c v1alpha1.IPAddressClaim
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "default", Name: "shop"}, &c)).To(Succeed())
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
	}).Should(Succeed())

	By("metrics refuse an anonymous scrape and a scraper without RBAC")
	url := "https://" + metricsAddr + "/metrics"
	g.Expect(get(t, url, "")).To(Equal(http.StatusUnauthorized))
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	unauthorized := token(ctx, t, cs, k8s, "nobody", false)
	g.Expect(get(t, url, unauthorized)).To(Equal(http.StatusForbidden))

	By("an authorized scraper reads claims and addresses by phase and class, and the time to Bound")
	scraper := token(ctx, t, cs, k8s, "prometheus", true)
	g.Eventually(func(g Gomega) {
		body := scrape(g, url, scraper)
		g.Expect(body).To(ContainSubstring(`address_controller_claims{class="metrics",phase="Bound"} 2`))
		g.Expect(body).To(ContainSubstring(`address_controller_addresses{class="metrics",phase="Bound"} 2`))
		g.Expect(body).To(ContainSubstring(`address_controller_claim_time_to_bound_seconds_count{class="metrics"} 2`))
		g.Expect(body).To(ContainSubstring(`address_controller_auto_claims{class="metrics",phase="Bound"} 1`))
		g.Expect(body).To(ContainSubstring(`address_controller_auto_claims_created_total{class="metrics"} 1`))
	}).Should(Succeed())

	By("a used-up class, a claim waiting in line and one held by its namespace's quota show in the series the alerts read")
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "late"},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: "metrics", Family: v1alpha1.IPv4}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})).To(Succeed())
	key := corev1.ResourceName("metrics.ipaddressclass." + v1alpha1.GroupVersion.Group + "/addresses")
	g.Expect(k8s.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "addresses"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{key: resource.MustParse("0")}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: "metrics", Family: v1alpha1.IPv4}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		body := scrape(g, url, scraper)
		g.Expect(body).To(ContainSubstring(`address_controller_class_exhausted{class="metrics"} 1`))
		g.Expect(body).To(ContainSubstring(`address_controller_namespace_addresses{class="metrics",namespace="default"} 2`))
		g.Expect(body).To(ContainSubstring(`address_controller_class_nearly_exhausted{class="metrics"} 1`))
		g.Expect(body).To(ContainSubstring(`address_controller_claims_waiting{class="metrics",namespace="default",reason="ClassExhausted"} 1`))
		g.Expect(body).To(ContainSubstring(`address_controller_claims_waiting{class="metrics",namespace="tenant",reason="QuotaExceeded"} 1`))
		g.Expect(body).To(ContainSubstring(`address_controller_quota_used_addresses{namespace="tenant",quota="addresses",resource="` + string(key) + `"} 0`))
		g.Expect(body).To(ContainSubstring(`address_controller_quota_hard_addresses{namespace="tenant",quota="addresses",resource="` + string(key) + `"} 0`))
	}).Should(Succeed())
}

// start starts a control plane with the CRDs in crdDirs (ours when nil) and
// returns it with an admin client that knows the API's types.
func start(ctx context.Context, t *testing.T, crdDirs []string) (*controlplane.ControlPlane, client.Client) {
	t.Helper()
	g := NewWithT(t)
	cp, err := controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: crdDirs})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	k8s, err := client.New(cp.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return cp, k8s
}

// startAs builds cmd/<binary> into dir and runs it as the ServiceAccount
// namespace/account, bound to the roles of roleFile alone (as in a
// cluster), electing its leader in its own namespace; its output is logged
// if the test fails. It stops with the test.
func startAs(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, dir, binary, namespace, account, roleFile string, args ...string) *proc.Process {
	t.Helper()
	kc, err := cp.ServiceAccount(ctx, namespace, account, roleFile, 3600)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, account+".kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p, err := proc.Start(binary, build(t, dir, binary),
		append([]string{"--kubeconfig=" + kubeconfig, "--leader-election-namespace=" + namespace}, args...), &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("%s output:\n%s", binary, out.String())
		}
	})
	return p
}

// buildManager builds cmd/manager into dir: the test runs what ships.
func buildManager(t *testing.T, dir string) string { return build(t, dir, "manager") }

// build builds cmd/<name> into dir.
func build(t *testing.T, dir, name string) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/%s: %v\n%s", name, err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := proc.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// token returns a ServiceAccount token, bound when authorized to a
// ClusterRole that may get /metrics.
func token(ctx context.Context, t *testing.T, cs kubernetes.Interface, k8s client.Client, name string, authorized bool) string {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}})).To(Succeed())
	if authorized {
		g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}})).To(Succeed())
		g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}}})).To(Succeed())
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

var insecure = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
	// The endpoint serves a self-signed certificate; what is tested is
	// who may read it.
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
}}

func get(t *testing.T, url, bearer string) int {
	t.Helper()
	resp, err := do(url, bearer)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func scrape(g Gomega, url, bearer string) string {
	resp, err := do(url, bearer)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return string(body)
}

func do(url, bearer string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if strings.HasPrefix(url, "https:") {
		return insecure.Do(req)
	}
	return (&http.Client{Timeout: 5 * time.Second}).Do(req)
}
