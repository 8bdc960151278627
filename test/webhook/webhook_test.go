package webhook

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/core"
	"github.com/cozystack/address-controller/internal/core/webhook"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/quota"
	"github.com/cozystack/address-controller/test/controlplane"
)

const (
	coreUser   = "system:serviceaccount:address-controller-system:address-controller"
	driverUser = "system:serviceaccount:metallb-iad-system:metallb-iad"
	// driverProvisioner is the provisioner the driver serves; the classes
	// the tests make are static.example.com's unless they say otherwise.
	driverProvisioner = "static.example.com"
	tenantUser        = "tenant"
)

var scheme = apiruntime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

// world is the control plane, the core with its webhooks running as the
// core's identity, and a client for each identity the rules name.
type world struct {
	cp                    *controlplane.ControlPlane
	admin, driver, tenant client.Client
	stopManager           func()
}

func start(t *testing.T) *world {
	t.Helper()
	g := NewWithT(t)
	controlplane.RequireBinaries(t)
	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	wh, err := controlplane.PrepareWebhooks(filepath.Join(root, "config", "webhook"))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = wh.Cleanup() })

	w := &world{cp: cp, admin: as(t, cp, "admin"), driver: as(t, cp, driverUser), tenant: as(t, cp, tenantUser)}

	w.stopManager = runCore(t, controlplane.Impersonating(cp.Config, coreUser, "system:masters"), wh)
	g.Expect(wh.Install(cp.Config)).To(Succeed())
	t.Cleanup(func() { _ = wh.Uninstall(context.Background(), w.admin) })
	return w
}

// as is a client acting as user, RBAC kept out of the way
// (system:masters), so that what is tested is who the webhook lets through.
func as(t *testing.T, cp *controlplane.ControlPlane, user string) client.Client {
	t.Helper()
	c, err := client.New(controlplane.Impersonating(cp.Config, user, "system:masters"), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runCore runs the core with its webhook server, as cmd/manager does.
func runCore(t *testing.T, cfg *rest.Config, wh *controlplane.Webhooks) func() {
	t.Helper()
	opts := core.Options{ClaimWorkers: 2, AddressWorkers: 2, ClassWorkers: 1, AutoClaimWorkers: 1, SourceAnnotations: metallb.BackendAnnotations}
	var server ctrlwebhook.Server
	stop := controlplane.RunManager(t, cfg, controlplane.ManagerOptions{
		Options: manager.Options{Scheme: scheme, Cache: core.CacheOptions(opts),
			WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: wh.Host, Port: wh.Port, CertDir: wh.CertDir})},
		Setup: func(ctx context.Context, mgr manager.Manager) error {
			webhook.Setup(mgr, webhook.Principals{Core: []string{coreUser}, Drivers: []string{driverUser},
				Scopes: map[string][]string{driverUser: {driverProvisioner}}, AdminGroups: []string{"system:masters"}})
			server = mgr.GetWebhookServer()
			return core.Setup(ctx, mgr, opts)
		},
	})
	g := NewWithT(t)
	g.Eventually(func() error { return server.StartedChecker()(nil) }).WithTimeout(30 * time.Second).Should(Succeed())
	return stop
}

// onFresh reads obj afresh and hands it to write until the write is not
// refused for a conflict, and returns the last error: the core writes the
// same objects meanwhile (a class's counts, an address's status), and the
// API server checks the resource version before any webhook is asked.
func onFresh[T client.Object](ctx context.Context, g Gomega, c client.Client, obj T, write func(T) error) error {
	var err error
	g.EventuallyWithOffset(1, func() bool {
		fresh := obj.DeepCopyObject().(T)
		if err = c.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err == nil {
			err = write(fresh)
		}
		return !apierrors.IsConflict(err)
	}).Should(BeTrue())
	return err
}

// refused asserts err is a refusal naming field.
func refused(g Gomega, err error, field string) {
	g.ExpectWithOffset(1, err).To(HaveOccurred(), "the write should be refused, naming %s", field)
	g.ExpectWithOffset(1, err.Error()).To(ContainSubstring(field))
}

func TestWebhooks(t *testing.T) {
	w := start(t)
	ctx := t.Context()
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(15 * time.Second)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	g.Expect(w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})).To(Succeed())

	class := func(name string, annotations map[string]string) *v1alpha1.IPAddressClass {
		return &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: v1alpha1.IPAddressClassSpec{Provisioner: "static.example.com", ReclaimPolicy: v1alpha1.ReclaimRetain}}
	}
	isDefault := map[string]string{v1alpha1.AnnotationDefaultClass: "true"}

	g.Expect(w.admin.Create(ctx, class("public", isDefault))).To(Succeed())
	// The API server takes webhook configurations up some time after they
	// are created; until then writes pass unjudged. Wait for both: the
	// validating one refuses a second default class, the mutating one
	// defaults a claim's class.
	g.Eventually(func() error {
		return w.admin.Create(ctx, class("probe", isDefault), client.DryRunAll)
	}).WithTimeout(time.Minute).Should(HaveOccurred())
	g.Eventually(func(g Gomega) {
		c := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "probe"}}
		g.Expect(w.tenant.Create(ctx, c, client.DryRunAll)).To(Succeed())
		g.Expect(c.Spec.ClassName).To(Equal("public"))
	}).WithTimeout(time.Minute).Should(Succeed())

	t.Run("a second default class is refused, naming the first", func(t *testing.T) {
		g := NewWithT(t)
		err := w.admin.Create(ctx, class("private", isDefault))
		refused(g, err, "metadata.annotations[ipaddressclass.local.sdn.cozystack.io/is-default-class]")
		g.Expect(err.Error()).To(ContainSubstring("public"))
		g.Expect(w.admin.Create(ctx, class("private", nil))).To(Succeed())
	})

	t.Run("a claim naming no class gets the default class at creation", func(t *testing.T) {
		g := NewWithT(t)
		c := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"}}
		g.Expect(w.tenant.Create(ctx, c)).To(Succeed())
		g.Expect(c.Spec.ClassName).To(Equal("public"))
		g.Expect(c.Spec.Family).To(Equal(v1alpha1.IPv4))
	})

	t.Run("a claim restored with its status takes back the class it resolved to, not the default", func(t *testing.T) {
		g := NewWithT(t)
		c := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "restored"},
			Status: v1alpha1.IPAddressClaimStatus{ClassName: "private"}}
		g.Expect(w.tenant.Create(ctx, c, client.DryRunAll)).To(Succeed())
		g.Expect(c.Spec.ClassName).To(Equal("private"))
		g.Expect(c.Status.ClassName).To(BeEmpty(), "the API server drops the status on create")
	})

	t.Run("a claim naming a missing class is admitted with a warning", func(t *testing.T) {
		g := NewWithT(t)
		warned := &controlplane.Warnings{}
		cfg := rest.CopyConfig(w.cp.Config)
		cfg.WarningHandler = warned
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "later"},
			Spec: v1alpha1.IPAddressClaimSpec{ClassName: "nonexistent"}})).To(Succeed())
		g.Expect(strings.Join(warned.Take(), "\n")).To(ContainSubstring("nonexistent"))
	})

	// An address of the default class binds the claim "web".
	addr := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-10"},
		Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.10", ClassName: "public", Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}}
	g.Expect(w.admin.Create(ctx, addr)).To(Succeed())
	t.Run("an address an administrator creates carries the protection finalizer from its creation", func(t *testing.T) {
		// Added at admission: the core's first pass has no patch to make.
		NewWithT(t).Expect(addr.Finalizers).To(ContainElement(v1alpha1.FinalizerAddressProtection))
	})
	g.Eventually(func(g Gomega) {
		var c v1alpha1.IPAddressClaim
		g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "web"}, &c)).To(Succeed())
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimBound))
	}).Should(Succeed(), "the core, as itself, binds through its own webhooks")

	t.Run("a bound claim and its address carry no field-tracking record; an applied claim keeps its own", func(t *testing.T) {
		g := NewWithT(t)
		var c v1alpha1.IPAddressClaim
		g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "web"}, &c)).To(Succeed())
		g.Expect(c.ManagedFields).To(BeEmpty(), "dropped at admission, and the core's status writes add none")
		var a v1alpha1.IPAddress
		g.Expect(w.admin.Get(ctx, client.ObjectKeyFromObject(addr), &a)).To(Succeed())
		g.Expect(a.ManagedFields).To(BeEmpty(), "dropped at admission, and the core's claimRef and status writes add none")

		apply := func(labels map[string]any) error {
			meta := map[string]any{"namespace": "tenant", "name": "applied"}
			if labels != nil {
				meta["labels"] = labels
			}
			return w.tenant.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.GroupVersion.String(), "kind": "IPAddressClaim", "metadata": meta,
				"spec": map[string]any{"family": "IPv4"}}}), client.FieldOwner("gitops"))
		}
		g.Expect(apply(map[string]any{"team": "a"})).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "applied"}, &c)).To(Succeed())
			g.Expect(c.Status.Phase).NotTo(BeEmpty())
			var owners []string
			for _, e := range c.ManagedFields {
				owners = append(owners, fmt.Sprintf("%s/%s/%s", e.Manager, e.Operation, e.Subresource))
			}
			g.Expect(owners).To(ContainElement("gitops/Apply/"))
			g.Expect(owners).To(ContainElement(HaveSuffix("/Update/status")), "the core's status write is recorded beside an applier's")
		}).WithTimeout(15 * time.Second).Should(Succeed())
		// The applier still owns what it applied: dropping the label from
		// its configuration removes it.
		g.Expect(apply(nil)).To(Succeed())
		g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "applied"}, &c)).To(Succeed())
		g.Expect(c.Labels).NotTo(HaveKey("team"))
	})

	t.Run("a claim the namespace's address quota already has no room for is refused at creation, naming the numbers", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "full"}})).To(Succeed())
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "full", Name: "addresses"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{quota.ClassKey("public"): resource.MustParse("0")}}}
		g.Expect(w.admin.Create(ctx, rq)).To(Succeed())
		g.Eventually(func() error {
			return w.tenant.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "full", Name: "web"}}, client.DryRunAll)
		}).Should(MatchError(`admission webhook "default.ipaddressclaims.local.sdn.cozystack.io" denied the request: exceeded quota: ResourceQuota addresses limits public.ipaddressclass.local.sdn.cozystack.io/addresses in namespace full to 0; 0 are in use and the claim needs 1 more`))
		err := w.tenant.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "full", Name: "web"}})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		// An administrator adopting an address makes the claim naming it
		// first: the address pre-bound to it needs no room, and the
		// binder's charge alone judges the claim.
		g.Expect(w.admin.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "full", Name: "adopt"},
			Spec: v1alpha1.IPAddressClaimSpec{AddressName: "ip-203-0-113-77"}}, client.DryRunAll)).To(Succeed())
	})

	t.Run("a claim whose addressName no address can have is refused on the field, at creation and on a re-target", func(t *testing.T) {
		g := NewWithT(t)
		ip := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "by-ip"},
			Spec: v1alpha1.IPAddressClaimSpec{ClassName: "public", AddressName: "203.0.113.7"}}
		err := w.tenant.Create(ctx, ip)
		refused(g, err, "spec.addressName")
		g.Expect(err.Error()).To(ContainSubstring("is named ip-203-0-113-7"))
		pending := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "by-name"},
			Spec: v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv6, AddressName: "ip-2001-db8--7"}}
		g.Expect(w.tenant.Create(ctx, pending)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(w.tenant.Get(ctx, client.ObjectKeyFromObject(pending), pending)).To(Succeed())
			pending.Spec.Family = v1alpha1.IPv4
			refused(g, w.tenant.Update(ctx, pending), "spec.addressName")
		}).Should(Succeed())
		g.Expect(w.tenant.Delete(ctx, pending)).To(Succeed())
	})

	t.Run("a tenant's provisioner stamp on a new claim is removed with a warning, and the core stamps the claim", func(t *testing.T) {
		g := NewWithT(t)
		warned := &controlplane.Warnings{}
		cfg := controlplane.Impersonating(w.cp.Config, tenantUser, "system:masters")
		cfg.WarningHandler = warned
		tenant, err := client.New(cfg, client.Options{Scheme: scheme})
		g.Expect(err).NotTo(HaveOccurred())
		c := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "forged-stamp",
			Annotations: map[string]string{v1alpha1.AnnotationProvisioner: "metallb.drivers.local.sdn.cozystack.io"}}}
		g.Expect(tenant.Create(ctx, c)).To(Succeed())
		g.Expect(c.Annotations).NotTo(HaveKey(v1alpha1.AnnotationProvisioner))
		g.Expect(strings.Join(warned.Take(), "\n")).To(ContainSubstring("metadata.annotations[local.sdn.cozystack.io/provisioner]"))
		g.Eventually(func(g Gomega) {
			g.Expect(w.admin.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
			g.Expect(c.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationProvisioner, "static.example.com"))
		}).Should(Succeed(), "the core stamps the provisioner of the class it resolved")
	})

	t.Run("only the core sets, changes or removes the provisioner stamp", func(t *testing.T) {
		g := NewWithT(t)
		for _, as := range []client.Client{w.tenant, w.driver, w.admin} {
			var c v1alpha1.IPAddressClaim
			g.Expect(as.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "web"}, &c)).To(Succeed())
			c.Annotations[v1alpha1.AnnotationProvisioner] = "metallb.drivers.local.sdn.cozystack.io"
			refused(g, as.Update(ctx, &c), "metadata.annotations[local.sdn.cozystack.io/provisioner]")
			delete(c.Annotations, v1alpha1.AnnotationProvisioner)
			refused(g, as.Update(ctx, &c), "metadata.annotations[local.sdn.cozystack.io/provisioner]")
		}
	})

	t.Run("a Bound claim cannot be re-targeted", func(t *testing.T) {
		g := NewWithT(t)
		var c v1alpha1.IPAddressClaim
		g.Expect(w.tenant.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "web"}, &c)).To(Succeed())
		c.Spec.ClassName = "private"
		refused(g, w.tenant.Update(ctx, &c), "spec.className")
	})

	t.Run("tenants, admins and drivers never write a claim's status", func(t *testing.T) {
		g := NewWithT(t)
		for _, who := range []client.Client{w.tenant, w.admin, w.driver} {
			var c v1alpha1.IPAddressClaim
			g.Expect(who.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "web"}, &c)).To(Succeed())
			c.Status.Phase = v1alpha1.ClaimLost
			refused(g, who.Status().Update(ctx, &c), "status")
		}
	})

	t.Run("only a driver writes Conflict, and only the core writes Bound", func(t *testing.T) {
		g := NewWithT(t)
		set := func(who client.Client, phase v1alpha1.AddressPhase) error {
			return onFresh(ctx, g, w.admin, addr, func(a *v1alpha1.IPAddress) error {
				a.Status.Phase = phase
				return who.Status().Update(ctx, a)
			})
		}
		refused(g, set(w.admin, v1alpha1.AddressConflict), "status.phase")
		refused(g, set(w.tenant, v1alpha1.AddressConflict), "status.phase")
		g.Expect(set(w.driver, v1alpha1.AddressConflict)).To(Succeed())
		g.Expect(set(w.driver, v1alpha1.AddressBound)).To(Succeed(), "a driver clears its phase back to the core's")
		refused(g, set(w.driver, v1alpha1.AddressReleased), "status.phase")
	})

	t.Run("a driver running under a name the core was not told of is refused, and told where drivers are listed", func(t *testing.T) {
		g := NewWithT(t)
		// The driver's chart installed in another namespace than the
		// core's driverUsernames say: the same code, another username.
		renamed := as(t, w.cp, "system:serviceaccount:other-namespace:metallb-iad")
		where := "--driver-usernames, the chart's driverUsernames"
		for _, tc := range []struct {
			field string
			write func(a *v1alpha1.IPAddress)
		}{
			{"status.phase", func(a *v1alpha1.IPAddress) { a.Status.Phase = v1alpha1.AddressConflict }},
			{"status.holding", func(a *v1alpha1.IPAddress) {
				a.Status.Holding = &v1alpha1.Holding{Workload: &v1alpha1.HeldReference{Kind: "Service", Namespace: "tenant", Name: "web", UID: "uid-web"}}
			}},
		} {
			err := onFresh(ctx, g, w.admin, addr, func(a *v1alpha1.IPAddress) error {
				tc.write(a)
				return renamed.Status().Update(ctx, a)
			})
			refused(g, err, tc.field)
			g.Expect(err.Error()).To(ContainSubstring(where), "the refusal of %s says where drivers are listed", tc.field)
		}
	})

	t.Run("a driver is kept to the addresses and classes of its own provisioner", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(w.admin.Create(ctx, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"},
			Spec: v1alpha1.IPAddressClassSpec{Provisioner: "other.example.com"}})).To(Succeed())
		theirs := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-20"},
			Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.20", ClassName: "elsewhere", Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}}
		refused(g, w.driver.Create(ctx, theirs.DeepCopy()), "spec.className")
		g.Expect(w.admin.Create(ctx, theirs)).To(Succeed())
		// The core writes the address meanwhile (onFresh).
		refused(g, onFresh(ctx, g, w.admin, theirs, func(a *v1alpha1.IPAddress) error {
			a.Status.Phase = v1alpha1.AddressConflict
			return w.driver.Status().Update(ctx, a)
		}), "spec.className")
		refused(g, onFresh(ctx, g, w.admin, theirs, func(a *v1alpha1.IPAddress) error {
			a.Finalizers = append(a.Finalizers, "other.example.com/teardown")
			return w.driver.Update(ctx, a)
		}), "spec.className")

		// The core writes a class's counts meanwhile: a status write that
		// conflicts is made again on the fresh class.
		ready := func(name string) error {
			return onFresh(ctx, g, w.admin, &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: name}},
				func(class *v1alpha1.IPAddressClass) error {
					class.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "PoolAccepted", LastTransitionTime: metav1.Now()}}
					return w.driver.Status().Update(ctx, class)
				})
		}
		refused(g, ready("elsewhere"), "status")
		g.Expect(ready("public")).To(Succeed(), "its own class's status is the driver's")
	})

	t.Run("a class re-created under the name its addresses outlived it with keeps their provisioner", func(t *testing.T) {
		g := NewWithT(t)
		// The class was removed by force; its address kept its driver's
		// finalizer.
		left := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-30", Finalizers: []string{driverProvisioner + "/teardown"}},
			Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.30", ClassName: "outlived", Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}}
		g.Expect(w.admin.Create(ctx, left)).To(Succeed())
		other := class("outlived", nil)
		other.Spec.Provisioner = "other.example.com"
		err := w.admin.Create(ctx, other)
		refused(g, err, "spec.provisioner")
		g.Expect(err.Error()).To(ContainSubstring("IPAddress ip-203-0-113-30 of class \"outlived\" is held by provisioner " + driverProvisioner))
		g.Expect(w.admin.Create(ctx, class("outlived", nil))).To(Succeed(), "the provisioner holding them")
	})

	t.Run("an address a live claim holds is never deleted in the foreground: its placeholder would go first", func(t *testing.T) {
		g := NewWithT(t)
		var web v1alpha1.IPAddressClaim
		g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "web"}, &web)).To(Succeed())
		g.Expect(web.Status.Addresses).NotTo(BeEmpty())
		held := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: web.Status.Addresses[0].Name}}
		err := w.admin.Delete(ctx, held, client.PropagationPolicy(metav1.DeletePropagationForeground), client.DryRunAll)
		refused(g, err, "propagationPolicy")
		g.Expect(err.Error()).To(ContainSubstring("IPAddressClaim tenant/web holds the address"))
		g.Expect(w.admin.Delete(ctx, held, client.DryRunAll)).To(Succeed(), "in the background, as kubectl deletes")
		free := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-31"},
			Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.31", ClassName: "public", Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}}
		g.Expect(w.admin.Create(ctx, free)).To(Succeed())
		g.Expect(w.admin.Delete(ctx, free, client.PropagationPolicy(metav1.DeletePropagationForeground), client.DryRunAll)).To(Succeed(),
			"an address no live claim holds goes as asked")
	})

	t.Run("a driver never adds or removes the core's finalizers", func(t *testing.T) {
		g := NewWithT(t)
		// The core may write the address meanwhile (onFresh).
		edit := func(change func(*v1alpha1.IPAddress)) error {
			return onFresh(ctx, g, w.admin, addr, func(a *v1alpha1.IPAddress) error {
				change(a)
				return w.driver.Update(ctx, a)
			})
		}
		refused(g, edit(func(a *v1alpha1.IPAddress) {
			a.Finalizers = slices.DeleteFunc(a.Finalizers, func(f string) bool { return f == v1alpha1.FinalizerAddressProtection })
		}), "metadata.finalizers")
		own := driverProvisioner + "/teardown"
		g.Expect(edit(func(a *v1alpha1.IPAddress) { a.Finalizers = append(a.Finalizers, own) })).To(Succeed(), "its own it adds")
		g.Expect(edit(func(a *v1alpha1.IPAddress) {
			a.Finalizers = slices.DeleteFunc(a.Finalizers, func(f string) bool { return f == own })
		})).To(Succeed(), "and removes")
	})

	t.Run("a binding is never re-pointed; an admin clears it only once Released", func(t *testing.T) {
		g := NewWithT(t)
		var a v1alpha1.IPAddress
		g.Expect(w.admin.Get(ctx, client.ObjectKeyFromObject(addr), &a)).To(Succeed())
		a.Spec.ClaimRef.Name = "other"
		refused(g, w.admin.Update(ctx, &a), "spec.claimRef")
		g.Expect(w.admin.Get(ctx, client.ObjectKeyFromObject(addr), &a)).To(Succeed())
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "tenant", Name: "web"}
		refused(g, w.tenant.Update(ctx, &a), "spec.claimRef")
		// An admin may not clear the binding of a Bound address, not even in
		// a dry run, and is told how an address is released (issue 11
		// defect 5); who else may not is TestValidateAddressUpdate's.
		g.Expect(w.admin.Get(ctx, client.ObjectKeyFromObject(addr), &a)).To(Succeed())
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.AddressBound))
		a.Spec.ClaimRef = nil
		err := w.admin.Update(ctx, &a, client.DryRunAll)
		refused(g, err, "spec.claimRef")
		g.Expect(err.Error()).To(ContainSubstring("delete IPAddressClaim tenant/web"))
		refused(g, w.admin.Update(ctx, &a), "spec.claimRef")
	})

	t.Run("an address's name must be derived from its IP", func(t *testing.T) {
		g := NewWithT(t)
		bad := addr.DeepCopy()
		bad.ResourceVersion, bad.Name, bad.Spec.ClaimRef = "", "ip-203-0-113-99", nil
		refused(g, w.admin.Create(ctx, bad), "metadata.name")
	})

	t.Run("an address is created pre-bound only to a claim that exists", func(t *testing.T) {
		g := NewWithT(t)
		orphan := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-98"},
			Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.98", ClassName: addr.Spec.ClassName, Source: addr.Spec.Source,
				ClaimRef: &v1alpha1.ClaimReference{Namespace: "tenant", Name: "nobody"}}}
		err := w.admin.Create(ctx, orphan)
		refused(g, err, "spec.claimRef")
		g.Expect(err.Error()).To(ContainSubstring("create the claim first"))
	})

	t.Run("with the webhook server down, only our kinds are refused", func(t *testing.T) {
		g := NewWithT(t)
		w.stopManager()
		g.Expect(w.admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "still-writable"}})).To(Succeed())
		g.Expect(w.admin.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "still-writable"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})).To(Succeed())
		err := w.tenant.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "closed"}})
		g.Expect(err).To(HaveOccurred(), "failurePolicy Fail: our kinds fail closed")
	})
}
