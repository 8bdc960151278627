package charts

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/test/controlplane"
)

var scheme = apiruntime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

// Every object of every render is accepted by a real API server (with our
// CRDs, cert-manager's and the ServiceMonitor CRD) through server-side apply.
func TestRendersApply(t *testing.T) {
	helmBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, c := startControlPlane(ctx, t, "config/crd")
	// The API server accepts an unknown or deprecated field with a warning:
	// every render is applied through a client that collects them.
	warnings := &controlplane.Warnings{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = warnings
	applier, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	renders := []struct {
		name, chart, ns string
		args            []string
	}{
		{"core defaults", coreChart, coreNS, nil},
		{"core without cert-manager", coreChart, coreNS, []string{"--set", "certManager.enabled=false,webhook.certSecretName=webhook-tls,webhook.caBundle=Zm9v"}},
		{"core with monitoring", coreChart, coreNS, []string{"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true"}},
		{"core cozystack", coreChart, "cozy-address-controller", []string{"-f", "charts/address-controller/values-cozystack.yaml"}},
		{"core with cert-manager installed", coreChart, "address-controller-bundled", []string{"--set", "certManager.install=true"}},
		{"driver defaults", driverChart, driverNS, nil},
		{"driver warn+audit", driverChart, driverNS, []string{"--set", "admissionPolicy.validationActions={Warn,Audit}"}},
		{"driver with monitoring", driverChart, driverNS, []string{"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true"}},
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
			// No cert-manager webhook server runs here: registered, its
			// webhooks would refuse the Issuer and Certificate hooks.
			objs = slices.DeleteFunc(installOrder(t, objs), isCertManagerWebhook)
			for _, o := range objs {
				if err := applier.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("test-charts"), client.ForceOwnership); err != nil {
					t.Errorf("applying %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
				if w := warnings.Take(); len(w) > 0 {
					t.Errorf("applying %s %s/%s: warnings %q", o.GetKind(), o.GetNamespace(), o.GetName(), w)
				}
			}
			// The roles just applied keep the controller to its own (the
			// boundaries of its ServiceAccount in this render's namespace).
			if !slices.Contains(r.args, "vapOnly=true") {
				side, boundaries := "core", controlplane.Boundaries(r.ns, coreChart, driverNS, driverChart)
				if r.chart == driverChart {
					side, boundaries = "driver", controlplane.Boundaries(coreNS, coreChart, r.ns, driverChart)
				}
				var mine []controlplane.Access
				for _, a := range boundaries {
					if a.Side == side {
						mine = append(mine, a)
					}
				}
				controlplane.CheckAccess(ctx, t, c, mine)
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
	t.Run("a namespace admin can claim but cannot write status or cluster-scoped objects", func(t *testing.T) {
		tenantRoles(ctx, t, cp, c)
	})
	t.Run("Cozystack's tenant roles claim through the labels values-cozystack.yaml adds", func(t *testing.T) {
		cozystackTenantRoles(ctx, t, cp, c)
	})
}

// cozystackTenantRoles applies the Cozystack render's claim roles beside
// two aggregated roles shaped like Cozystack's tenant admin and view (they
// select ClusterRoles by rbac.cozystack.io labels, not the built-in ones),
// and checks what each grants once kube-controller-manager folded the
// claim roles in: the tenant admin creates claims, the tenant viewer lists
// them and creates none.
func cozystackTenantRoles(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, admin client.Client) {
	const ns = "cozy-tenant-roles"
	for _, o := range render(t, coreChart, "cozy-address-controller", "-f", "charts/address-controller/values-cozystack.yaml") {
		if o.GetKind() == "ClusterRole" && strings.Contains(o.GetName(), "-claims-") {
			if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("test-charts"), client.ForceOwnership); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for user, level := range map[string]string{"cozy-admin": "admin", "cozy-viewer": "view"} {
		role := "cozy:tenant:" + level
		if err := admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
				{MatchLabels: map[string]string{"rbac.cozystack.io/aggregate-to-tenant-" + level: "true"}}}}}); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user}}}); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string) client.Client {
		c, err := client.New(controlplane.Impersonating(cp.Config, user), client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tenant, viewer := as("cozy-admin"), as("cozy-viewer")
	// Aggregation takes kube-controller-manager a moment.
	untilAllowed := func(what string, do func() error) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for err := do(); err != nil; err = do() {
			if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	untilAllowed("a Cozystack tenant admin creates a claim", func() error {
		return tenant.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv4}})
	})
	var claims v1alpha1.IPAddressClaimList
	untilAllowed("a Cozystack tenant viewer lists claims", func() error { return viewer.List(ctx, &claims, client.InNamespace(ns)) })
	if len(claims.Items) != 1 {
		t.Errorf("a Cozystack tenant viewer lists %d claims, want 1", len(claims.Items))
	}
	err := viewer.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: "public"}})
	if !apierrors.IsForbidden(err) {
		t.Errorf("a Cozystack tenant viewer creates a claim: want Forbidden, got %v", err)
	}
}

// isCertManagerWebhook reports whether o is one of the cert-manager
// dependency's webhook configurations.
func isCertManagerWebhook(o *unstructured.Unstructured) bool {
	return strings.HasSuffix(o.GetKind(), "WebhookConfiguration") && o.GetLabels()["app.kubernetes.io/instance"] != "" &&
		o.GetLabels()["app.kubernetes.io/name"] == "webhook"
}

// tenantRoles checks the access the core chart's aggregated roles give,
// through the built-in roles (kube-controller-manager aggregates them):
// admin creates claims, view reads them, neither writes status, addresses
// or classes.
func tenantRoles(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, admin client.Client) {
	const ns = "tenant-roles"
	// The renders registered webhooks no server answers here: what is
	// tested is RBAC.
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		if err := admin.DeleteAllOf(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for user, role := range map[string]string{"tenant": "admin", "viewer": "view"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user}}}
		if err := admin.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string) client.Client {
		c, err := client.New(controlplane.Impersonating(cp.Config, user), client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tenant, viewer := as("tenant"), as("viewer")
	claim := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv4}}
	// The aggregation controller takes a moment to extend admin.
	deadline := time.Now().Add(30 * time.Second)
	for err := tenant.Create(ctx, claim); err != nil; err = tenant.Create(ctx, claim) {
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("a namespace admin creates a claim: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var claims v1alpha1.IPAddressClaimList
	if err := viewer.List(ctx, &claims, client.InNamespace(ns)); err != nil || len(claims.Items) != 1 {
		t.Errorf("a viewer lists claims: %d, %v", len(claims.Items), err)
	}
	forbidden := map[string]error{
		"an admin writes claim status": func() error {
			c := claim.DeepCopy()
			c.Status.Phase = v1alpha1.ClaimBound
			return tenant.Status().Update(ctx, c)
		}(),
		"an admin creates an IPAddress": tenant.Create(ctx, &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-1"},
			Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.1", ClassName: "public", Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}}}),
		"an admin lists classes":   tenant.List(ctx, &v1alpha1.IPAddressClassList{}),
		"an admin lists addresses": tenant.List(ctx, &v1alpha1.IPAddressList{}),
		"a viewer creates a claim": viewer.Create(ctx, &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
			Spec: v1alpha1.IPAddressClaimSpec{ClassName: "public"}}),
	}
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: want Forbidden, got %v", what, err)
		}
	}
}
