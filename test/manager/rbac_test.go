package manager

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/quota"
	"github.com/cozystack/address-controller/test/controlplane"
	"github.com/cozystack/address-controller/test/metallb"
	"github.com/cozystack/address-controller/test/proc"
)

// The controllers' identities, as `make run` and the charts' defaults have them.
const (
	coreNamespace   = "address-controller-system"
	coreAccount     = "address-controller"
	driverNamespace = "metallb-iad-system"
	driverAccount   = "metallb-iad"
)

func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// auditPolicy records every request of the two controllers, at the
// metadata level: who did what to which resource, and the answer.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [%q, %q]
- level: None
`

// TestLeastPrivilege runs bin/manager and bin/metallb-iad, each as its
// ServiceAccount bound to nothing but the roles generated from its code's
// markers, through a workload that takes every path that needs a
// permission, with the API server's audit log on. It checks both
// directions: no request of either controller was forbidden (the roles
// grant what the code does), and every verb of every rule was used (the
// code does all the roles grant). Then SubjectAccessReviews pin the
// boundaries the roles must keep.
func TestLeastPrivilege(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	bin := controlplane.RequireBinaries(t, metallb.Binary)
	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	coreUser, driverUser := serviceAccountUser(coreNamespace, coreAccount), serviceAccountUser(driverNamespace, driverAccount)
	policyFile, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	g.Expect(os.WriteFile(policyFile, fmt.Appendf(nil, auditPolicy, coreUser, driverUser), 0o600)).To(Succeed())
	cp, err := controlplane.Start(ctx, controlplane.Options{
		CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd"), metallb.CRDDir(bin)},
		APIServerFlags: map[string][]string{
			"audit-policy-file": {policyFile}, "audit-log-path": {auditLog}, "audit-log-format": {"json"},
			// The check a blockOwnerDeletion owner reference gets in most
			// clusters: it is what needs services/finalizers.
			"enable-admission-plugins": {"OwnerReferencesPermissionEnforcement"},
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	scheme := apiruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	k8s, err := client.New(cp.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	var mlbOut bytes.Buffer
	mlb, err := metallb.Run(ctx, cp, bin, dir, &mlbOut)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = mlb.Stop(5 * time.Second) })
	roleFiles := map[string]string{
		coreUser:   filepath.Join(root, "config", "rbac", "role.yaml"),
		driverUser: filepath.Join(root, "config", "rbac", "metallb-iad", "role.yaml"),
	}
	var procs []*proc.Process
	run := func(binary, namespace, account string, args ...string) string {
		metricsAddr := freeAddr(t)
		procs = append(procs, startAs(ctx, t, cp, dir, binary, namespace, account, roleFiles[serviceAccountUser(namespace, account)],
			append([]string{"--leader-elect=true", "--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=0"}, args...)...))
		return metricsAddr
	}
	// Informers list, then watch, where the API server does not stream a
	// watch's initial list (watch-list): the roles must serve such servers
	// too, so the test makes the controllers take that path and list.
	t.Setenv("KUBE_FEATURE_WatchListClient", "false")
	coreMetrics := run("manager", coreNamespace, coreAccount, "--webhook-port=0")
	driverMetrics := run("metallb-iad", driverNamespace, driverAccount, "--namespace="+driverNamespace)

	t.Cleanup(func() {
		if t.Failed() {
			_, forbidden := readAudit(t, auditLog)
			t.Logf("forbidden requests: %v", forbidden)
			t.Log("writes to claims and addresses:")
			logWrites(t, auditLog)
		}
	})
	w := workload{t: t, g: g, ctx: ctx, k8s: k8s}
	w.core()
	w.driver()
	scraper := token(ctx, t, kubernetes.NewForConfigOrDie(cp.Config), k8s, "prometheus", true)
	for _, addr := range []string{coreMetrics, driverMetrics} {
		g.Eventually(func(g Gomega) { scrape(g, "https://"+addr+"/metrics", scraper) }).Should(Succeed())
	}
	for _, p := range procs {
		_ = p.Stop(10 * time.Second) // releases the leases: their last update
	}

	used, forbidden := readAudit(t, auditLog)
	for user, file := range roleFiles {
		t.Run(user, func(t *testing.T) {
			if f := forbidden[user]; len(f) > 0 {
				t.Errorf("requests the roles do not allow:\n  %s", strings.Join(f, "\n  "))
			}
			granted := grants(t, file, user)
			var unused []string
			for _, gr := range granted {
				if !used[user][gr] && !admissionChecked[user][gr] {
					unused = append(unused, gr.String())
				}
			}
			if len(unused) > 0 {
				t.Errorf("granted but never used by the code (remove them from the RBAC markers):\n  %s\nused:\n  %s",
					strings.Join(unused, "\n  "), strings.Join(keys(used[user]), "\n  "))
			}
		})
	}

	t.Run("boundaries", func(t *testing.T) {
		controlplane.CheckAccess(ctx, t, k8s, controlplane.Boundaries(coreNamespace, coreAccount, driverNamespace, driverAccount))
	})
}

// admissionChecked are permissions used where the audit log cannot show
// them in every run:
//   - services/finalizers: the API server checks it in admission, not as a
//     request of its own; the workload's auto-claim, created with a
//     blockOwnerDeletion reference to its Service under
//     OwnerReferencesPermissionEnforcement, is its use;
//   - events patch, for the core: client-go's event library patches an
//     Event into a series when the same event recurs on an object that has
//     not changed since. Every transition the core announces changes the
//     object, so only a pass repeated off a cache that lags its own write
//     does that — real, but not on cue. (The driver's is on cue: a claim
//     attached, detached and attached again.)
var admissionChecked = map[string]map[grant]bool{
	serviceAccountUser(coreNamespace, coreAccount): {
		{resource: "services/finalizers", verb: "update"}:           true,
		{group: "events.k8s.io", resource: "events", verb: "patch"}: true,
	},
}

// grant is one verb on one resource (resource/subresource), in a
// namespace for a Role's, "" for a ClusterRole's.
type grant struct {
	namespace, group, resource, verb string
}

func (g grant) String() string {
	where := "cluster-wide"
	if g.namespace != "" {
		where = "in " + g.namespace
	}
	group := g.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s.%s %s", g.verb, g.resource, group, where)
}

func keys(m map[grant]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

// grants expands the roles of file into single grants; a Role's are in the
// ServiceAccount's namespace, as the test bound them.
func grants(t *testing.T, file, user string) []grant {
	t.Helper()
	clusterRoles, roles, err := controlplane.ReadRoles(file)
	if err != nil {
		t.Fatal(err)
	}
	namespace := strings.Split(user, ":")[2]
	var out []grant
	expand := func(ns string, rules []rbacv1.PolicyRule) {
		for _, r := range rules {
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					for _, verb := range r.Verbs {
						out = append(out, grant{namespace: ns, group: group, resource: res, verb: verb})
					}
				}
			}
		}
	}
	for _, r := range clusterRoles {
		expand("", r.Rules)
	}
	for _, r := range roles {
		expand(namespace, r.Rules)
	}
	return out
}

// auditEvent is the part of an audit.k8s.io/v1 Event read here.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource, Namespace, APIGroup, Subresource string
	} `json:"objectRef"`
	RequestURI     string `json:"requestURI"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp string `json:"stageTimestamp"`
}

// logWrites logs every write to claims and addresses the audit log holds,
// in order: what a failed wait for the controllers needs to be read.
func logWrites(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Log(err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.ObjectRef == nil || ev.ResponseStatus == nil {
			continue
		}
		switch ev.Verb {
		case "get", "list", "watch":
			continue
		}
		if r := ev.ObjectRef.Resource; r == "ipaddresses" || r == "ipaddressclaims" {
			t.Logf("  %s %s %s %s %d", ev.StageTimestamp, ev.User.Username, ev.Verb, ev.RequestURI, ev.ResponseStatus.Code)
		}
	}
}

// readAudit returns, per user, the grants their requests used — a request
// in a namespace uses both the namespaced grant and the cluster-wide one —
// and the requests refused for lack of permission.
func readAudit(t *testing.T, path string) (used map[string]map[grant]bool, forbidden map[string][]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	used, forbidden = map[string]map[grant]bool{}, map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ev.ObjectRef == nil || ev.ResponseStatus == nil {
			continue
		}
		u := ev.User.Username
		if ev.ResponseStatus.Code == 403 {
			forbidden[u] = append(forbidden[u], ev.Verb+" "+ev.RequestURI)
			continue
		}
		if used[u] == nil {
			used[u] = map[grant]bool{}
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		gr := grant{group: ev.ObjectRef.APIGroup, resource: res, verb: ev.Verb}
		used[u][gr] = true
		if ns := ev.ObjectRef.Namespace; ns != "" {
			gr.namespace = ns
			used[u][gr] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for u := range forbidden {
		slices.Sort(forbidden[u])
		forbidden[u] = slices.Compact(forbidden[u])
	}
	return used, forbidden
}

// workload takes every path of the core and the driver that needs a
// permission, as an admin and a tenant would drive them.
type workload struct {
	t   *testing.T
	g   *WithT
	ctx context.Context
	k8s client.Client
}

func (w workload) claimPhase(name string) func(g Gomega) v1alpha1.ClaimPhase {
	return func(g Gomega) v1alpha1.ClaimPhase {
		var c v1alpha1.IPAddressClaim
		g.Expect(w.k8s.Get(w.ctx, types.NamespacedName{Namespace: "default", Name: name}, &c)).To(Succeed())
		return c.Status.Phase
	}
}

// boundAddress is the IPAddress the claim name reports, once it is Bound.
// Which address a claim gets depends on which the core's cache shows
// Available at that moment, so the test follows the claim's answer.
func (w workload) boundAddress(name string) *v1alpha1.IPAddress {
	w.g.Eventually(w.claimPhase(name)).Should(Equal(v1alpha1.ClaimBound))
	var c v1alpha1.IPAddressClaim
	w.g.Expect(w.k8s.Get(w.ctx, types.NamespacedName{Namespace: "default", Name: name}, &c)).To(Succeed())
	w.g.Expect(c.Status.Addresses).To(HaveLen(1))
	return &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: c.Status.Addresses[0].Name}}
}

func (w workload) gone(obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(w.k8s.Get(w.ctx, client.ObjectKeyFromObject(obj), obj))
	}
}

// core: a claim bound, released and its address reclaimed (Delete); an
// auto-claim created for a Service and withdrawn when the Service names it
// no more and opts out; a class deleted once nothing uses it.
func (w workload) core() {
	g, ctx, k8s := w.g, w.ctx, w.k8s
	w.t.Log("core: bind, reclaim, auto-claim, class deletion")
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "static"},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: "static.example.com", ReclaimPolicy: v1alpha1.ReclaimDelete}})).To(Succeed())
	for _, ip := range []string{"198.51.100.1", "198.51.100.2"} {
		name, _ := v1alpha1.IPAddressName(ip)
		g.Expect(k8s.Create(ctx, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.IPAddressSpec{Address: ip, ClassName: "static", ReclaimPolicy: v1alpha1.ReclaimDelete,
				Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}})).To(Succeed())
	}
	web := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: "static", Family: v1alpha1.IPv4}}
	g.Expect(k8s.Create(ctx, web)).To(Succeed())
	webAddress := w.boundAddress("web")
	g.Expect(k8s.Delete(ctx, web)).To(Succeed())
	g.Eventually(w.gone(webAddress)).Should(BeTrue(), "Delete reclaims the address")

	shop := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop", Annotations: map[string]string{v1alpha1.AnnotationIPAddressClass: "static"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	g.Expect(k8s.Create(ctx, shop)).To(Succeed())
	shopAddress := w.boundAddress("shop")
	g.Expect(k8s.Delete(ctx, shop)).To(Succeed())
	g.Eventually(w.gone(shopAddress)).Should(BeTrue(),
		"the auto-claim goes with its Service, and its address with it")

	// An auto-claim is withdrawn when its Service names it no more and opts
	// out: the core deletes the claim it created.
	own := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "own", Annotations: map[string]string{v1alpha1.AnnotationIPAddressClass: "static"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	g.Expect(k8s.Create(ctx, own)).To(Succeed())
	owned := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "own"}}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(owned), owned)).To(Succeed())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(own), own)).To(Succeed())
		g.Expect(own.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationIPAddressClaim, "own"))
		delete(own.Annotations, v1alpha1.AnnotationIPAddressClaim)
		own.Annotations[v1alpha1.AnnotationAutoClaim] = "false"
		g.Expect(k8s.Update(ctx, own)).To(Succeed())
	}).Should(Succeed(), "the core auto-claims the Service, which then opts out")
	g.Eventually(w.gone(owned)).Should(BeTrue(), "the auto-claim is withdrawn")

	class := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "static"}}
	g.Expect(k8s.Delete(ctx, class)).To(Succeed())
	g.Eventually(w.gone(class)).Should(BeTrue())

	// A retained address released, recycled by an admin, bound and
	// released again.
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "kept"},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: "static.example.com", ReclaimPolicy: v1alpha1.ReclaimRetain}})).To(Succeed())
	kept := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-198-51-100-3"},
		Spec: v1alpha1.IPAddressSpec{Address: "198.51.100.3", ClassName: "kept", Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}}
	g.Expect(k8s.Create(ctx, kept)).To(Succeed())
	phase := func(g Gomega) v1alpha1.AddressPhase {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(kept), kept)).To(Succeed())
		return kept.Status.Phase
	}
	for round := range 2 {
		again := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "again"},
			Spec: v1alpha1.IPAddressClaimSpec{ClassName: "kept", Family: v1alpha1.IPv4}}
		g.Expect(k8s.Create(ctx, again)).To(Succeed())
		g.Eventually(w.claimPhase("again")).Should(Equal(v1alpha1.ClaimBound), "round %d", round)
		g.Expect(k8s.Delete(ctx, again)).To(Succeed())
		g.Eventually(phase).Should(Equal(v1alpha1.AddressReleased))
		g.Eventually(w.gone(again)).Should(BeTrue())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(kept), kept)).To(Succeed())
		kept.Spec.ClaimRef = nil // the admin recycles it
		g.Expect(k8s.Update(ctx, kept)).To(Succeed())
		g.Eventually(phase).Should(Equal(v1alpha1.AddressAvailable))
	}

	// An address quota: the claim is charged (the quota read past the
	// cache and patched) and the usage written into the quota's status.
	key := quota.ClassKey("kept")
	g.Expect(k8s.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "addresses"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{key: resource.MustParse("1")}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "quoted"},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: "kept", Family: v1alpha1.IPv4}})).To(Succeed())
	g.Eventually(w.claimPhase("quoted")).Should(Equal(v1alpha1.ClaimBound))
	g.Eventually(func(g Gomega) {
		var rq corev1.ResourceQuota
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "addresses"}, &rq)).To(Succeed())
		used := rq.Status.Used[key]
		g.Expect(used.Value()).To(Equal(int64(1)))
	}).Should(Succeed(), "the usage in the quota's status")
}

// driver: a class of a MetalLB pool (its status), a claim provisioned and
// held by a placeholder, attached to a Service, detached and attached again
// (the same event twice: a series), and its address torn down.
func (w workload) driver() {
	g, ctx, k8s := w.g, w.ctx, w.k8s
	w.t.Log("driver: provision, hold, attach, detach, teardown")
	g.Expect(k8s.Create(ctx, metallb.Pool("reserved", false, "198.51.100.64/30"))).To(Succeed())
	g.Expect(k8s.Create(ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "reserved"},
		Spec: v1alpha1.IPAddressClassSpec{Provisioner: "metallb.drivers.local.sdn.cozystack.io",
			Parameters: &apiruntime.RawExtension{Raw: []byte(`{"pool":"reserved"}`)}}})).To(Succeed())
	// A stranger under the name the placeholder needs: the driver asks the
	// API server (not its cache) who it is before it says so.
	squatter := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: driverNamespace, Name: "ip-198-51-100-64"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	g.Expect(k8s.Create(ctx, squatter)).To(Succeed())
	lb := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lb"},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: "reserved", Family: v1alpha1.IPv4}}
	g.Expect(k8s.Create(ctx, lb)).To(Succeed())
	g.Eventually(w.claimPhase("lb")).Should(Equal(v1alpha1.ClaimBound))
	g.Eventually(func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(k8s.List(ctx, &evs)).To(Succeed())
		g.Expect(evs.Items).To(ContainElement(HaveField("Reason", "PlaceholderTaken")))
	}).Should(Succeed())
	g.Expect(k8s.Delete(ctx, squatter)).To(Succeed())
	ingress := func(ns, name string) func(g Gomega) []string {
		return func(g Gomega) []string {
			var svc corev1.Service
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &svc)).To(Succeed())
			var ips []string
			for _, in := range svc.Status.LoadBalancer.Ingress {
				ips = append(ips, in.IP)
			}
			return ips
		}
	}
	g.Eventually(ingress(driverNamespace, "ip-198-51-100-64")).Should(Equal([]string{"198.51.100.64"}))

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lb", Annotations: map[string]string{v1alpha1.AnnotationIPAddressClaim: "lb"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	g.Expect(k8s.Create(ctx, svc)).To(Succeed())
	// MetalLB and the driver write the Service too: the annotation is
	// changed on the latest version.
	name := func(claim string) {
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
			if claim == "" {
				delete(svc.Annotations, v1alpha1.AnnotationIPAddressClaim)
			} else {
				metav1.SetMetaDataAnnotation(&svc.ObjectMeta, v1alpha1.AnnotationIPAddressClaim, claim)
			}
			g.Expect(k8s.Update(ctx, svc)).To(Succeed())
		}).Should(Succeed())
	}
	// Each step waits for the driver to record it on the address, not only
	// for MetalLB to move the IP: the driver's events (Associated, then
	// Disassociated, then Associated again: a series) follow its records.
	addr := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-198-51-100-64"}}
	associatedTo := func(g Gomega) string {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(addr), addr)).To(Succeed())
		if addr.Status.AssociatedTo == nil {
			return ""
		}
		return addr.Status.AssociatedTo.Namespace + "/" + addr.Status.AssociatedTo.Name
	}
	g.Eventually(ingress("default", "lb")).Should(Equal([]string{"198.51.100.64"}), "attached")
	g.Eventually(associatedTo).Should(Equal("default/lb"))
	name("")
	g.Eventually(ingress("default", "lb")).Should(BeEmpty(), "detached")
	g.Eventually(associatedTo).Should(BeEmpty())
	name("lb")
	g.Eventually(ingress("default", "lb")).Should(Equal([]string{"198.51.100.64"}), "attached again")
	g.Eventually(associatedTo).Should(Equal("default/lb"))
	g.Expect(k8s.Delete(ctx, svc)).To(Succeed())
	g.Eventually(w.gone(svc)).Should(BeTrue(), "the handoff finalizer goes once the placeholder holds the address")
	g.Expect(k8s.Delete(ctx, lb)).To(Succeed())
	g.Eventually(func(g Gomega) v1alpha1.AddressPhase {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(addr), addr)).To(Succeed())
		return addr.Status.Phase
	}).Should(Equal(v1alpha1.AddressReleased))
	g.Expect(k8s.Delete(ctx, addr)).To(Succeed())
	g.Eventually(w.gone(addr)).Should(BeTrue(), "teardown releases the placeholder and the address")
	g.Eventually(w.gone(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: driverNamespace, Name: "ip-198-51-100-64"}})).Should(BeTrue())
}
