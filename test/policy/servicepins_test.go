package policy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/cozystack/address-controller/policies"
	"github.com/cozystack/address-controller/policies/policytest"
	"github.com/cozystack/address-controller/test/controlplane"
)

const (
	hostNamespace  = "tenant-a"  // labelled namespace.cozystack.io/host
	plainNamespace = "unrelated" // not labelled
	driverUser     = "system:serviceaccount:metallb-iad-system:metallb-iad"
)

func loadBalancer(namespace, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
}

// identity is a client acting as one principal, with its warnings.
type identity struct {
	name     string
	cs       kubernetes.Interface
	warnings *controlplane.Warnings
}

func newIdentity(g Gomega, name string, config *rest.Config) identity {
	w := &controlplane.Warnings{}
	config = rest.CopyConfig(config)
	config.WarningHandler = w
	cs, err := kubernetes.NewForConfig(config)
	g.Expect(err).NotTo(HaveOccurred())
	return identity{name: name, cs: cs, warnings: w}
}

// externalIPsDeprecated is the API server's own warning on every write
// of a Service with spec.externalIPs; it is not the policy's.
const externalIPsDeprecated = "spec.externalIPs is deprecated and may no longer be implemented in some clusters"

// policyWarnings takes the warnings received so far, less the API server's
// deprecation of externalIPs.
func (i identity) policyWarnings() []string {
	return slices.DeleteFunc(i.warnings.Take(), func(w string) bool { return w == externalIPsDeprecated })
}

// impersonating acts as user and groups through the admin's right to
// impersonate; the API server admits the request as that user.
func impersonating(g Gomega, admin *rest.Config, user string, groups ...string) identity {
	return newIdentity(g, user, controlplane.Impersonating(admin, user, groups...))
}

func TestServicePins_EnforcedByKubeAPIServer(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	controlplane.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: []string{}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	t.Logf("control plane up in %s", time.Since(start).Round(time.Millisecond))
	admin := newIdentity(g, "admin", cp.Config)

	pins, err := policies.LoadServicePins()
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("the policy type-checks against the live server's Service schema", func(t *testing.T) {
		g := NewWithT(t)
		tc := &validating.TypeChecker{
			SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: admin.cs.Discovery()},
			RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(admin.cs.Discovery())),
		}
		g.Expect(tc.Check(pins.Policy)).To(BeEmpty())
		tctx := tc.CreateContext(pins.Policy)
		for _, v := range pins.Policy.Spec.Variables {
			g.Expect(tc.CheckExpression(tctx, v.Expression)).To(BeEmpty(), "variable %s", v.Name)
		}
		// A misspelt field is caught, so the schema was there to check against.
		g.Expect(tc.CheckExpression(tctx, "object.spec.loadBalancerIPs == ''")).NotTo(BeEmpty())
	})

	// Namespaces, and RBAC giving each identity the Service writes it
	// would have in a cluster, so that only the policy stands in the way.
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: policies.ServicePinsParamsNamespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: hostNamespace, Labels: map[string]string{policies.HostNamespaceLabel: "tenant-a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: plainNamespace}},
	} {
		_, err := admin.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	serviceWriter := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "service-writer"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"services", "services/status"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	_, err = admin.cs.RbacV1().ClusterRoles().Create(ctx, serviceWriter, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	bind := func(name, role string, subjects ...rbacv1.Subject) {
		_, err := admin.cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   subjects,
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	// The tenant may write Services (status included) in both of its
	// namespaces; the policy is what tells them apart.
	bind("tenant-services", "service-writer", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"})
	bind("driver-services", "service-writer", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "metallb-iad-system", Name: "metallb-iad"})
	bind("ops-bot-services", "service-writer", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ops-bot"})
	bind("administrators", "cluster-admin",
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "kubeadm:cluster-admins"},
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "cozystack-cluster-admin"})

	// The tenant authenticates with a client certificate of its own; the
	// others are impersonated.
	tenantConfig, _, err := cp.AddUser("alice", []string{"tenant-a-admins"})
	g.Expect(err).NotTo(HaveOccurred())
	tenant := newIdentity(g, "alice", tenantConfig)
	allowed := []identity{
		impersonating(g, cp.Config, driverUser, "system:serviceaccounts", "system:serviceaccounts:metallb-iad-system"),
		impersonating(g, cp.Config, "root", "system:masters"),
		impersonating(g, cp.Config, "kubernetes-admin", "kubeadm:cluster-admins"),
		impersonating(g, cp.Config, "oidc:ops", "cozystack-cluster-admin"),
	}
	opsBot := impersonating(g, cp.Config, "ops-bot")

	// The shipped objects, as they are.
	policy, err := admin.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, pins.Policy, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = admin.cs.CoreV1().ConfigMaps(pins.Params.Namespace).Create(ctx, pins.Params, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	binding, err := admin.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, pins.Binding, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	// The YAML spells out what the server would default, so what is stored
	// is the file, and the in-process tests of policies/ saw the same.
	g.Expect(equality.Semantic.DeepEqual(policy.Spec, pins.Policy.Spec)).To(BeTrue(), "stored policy spec differs from the file:\n%+v", policy.Spec)
	g.Expect(equality.Semantic.DeepEqual(binding.Spec, pins.Binding.Spec)).To(BeTrue(), "stored binding spec differs from the file:\n%+v", binding.Spec)

	// probe is a dry-run write by who that sets a reserved field in the
	// host namespace: nothing is stored, but admission runs.
	probe := func(who identity) error {
		svc := loadBalancer(hostNamespace, "probe")
		policytest.ReservedFields[1].Set(svc, "probe")
		_, err := who.cs.CoreV1().Services(hostNamespace).Create(ctx, svc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// Policies reach the admission plugin through informers: wait until
	// the tenant's probe is refused by this policy.
	waitStart := time.Now()
	g.Eventually(func() error { return probe(tenant) }).Should(MatchError(policytest.PinsDenial("probe", policytest.ReservedFields[1].Path)))
	t.Logf("policy effective %s after it was created", time.Since(waitStart).Round(time.Millisecond))
	tenant.warnings.Take()

	t.Run("a tenant cannot set, change or remove a reserved field in a host namespace", func(t *testing.T) {
		for i, f := range policytest.ReservedFields {
			t.Run(f.Path, func(t *testing.T) {
				g := NewWithT(t)
				services := func(who identity) typedServices { return typedServices{who.cs.CoreV1().Services(hostNamespace)} }
				name := fmt.Sprintf("tenant-%d", i)

				svc := loadBalancer(hostNamespace, name)
				f.Set(svc, f.First)
				_, err := services(tenant).Create(ctx, svc, metav1.CreateOptions{})
				g.Expect(err).To(MatchError(policytest.PinsDenial(name, f.Path)), "set on create")
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue())

				// Without the field the tenant creates it, then may not add it.
				_, err = services(tenant).Create(ctx, loadBalancer(hostNamespace, name), metav1.CreateOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(services(tenant).edit(ctx, name, func(s *corev1.Service) { f.Set(s, f.First) })).
					To(MatchError(policytest.PinsDenial(name, f.Path)), "set on update")

				// The admin pins it; the tenant may neither change nor remove
				// the pin, but may edit everything else.
				g.Expect(services(admin).edit(ctx, name, func(s *corev1.Service) { f.Set(s, f.First) })).To(Succeed())
				g.Expect(services(tenant).edit(ctx, name, func(s *corev1.Service) { f.Set(s, f.Second) })).
					To(MatchError(policytest.PinsDenial(name, f.Path)), "change")
				g.Expect(services(tenant).edit(ctx, name, func(s *corev1.Service) { f.Unset(s) })).
					To(MatchError(policytest.PinsDenial(name, f.Path)), "remove")
				if f.Annotation != "" {
					g.Expect(services(tenant).editStatus(ctx, name, func(s *corev1.Service) { f.Set(s, f.Second) })).
						To(MatchError(policytest.PinsDenial(name, f.Path)), "change through services/status")
				}
				g.Expect(services(tenant).edit(ctx, name, func(s *corev1.Service) {
					s.Labels["tier"] = "frontend"
					if s.Annotations == nil {
						s.Annotations = map[string]string{}
					}
					s.Annotations["example.com/owner"] = "team-a"
					s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443})
				})).To(Succeed(), "edit the rest of a pinned Service")

				stored, err := services(admin).Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				v, ok := f.Get(stored)
				g.Expect(ok && v == f.First).To(BeTrue(), "%s is %q (present %v), want the admin's %q", f.Path, v, ok, f.First)
				g.Expect(stored.Spec.Ports).To(HaveLen(2))
				g.Expect(tenant.policyWarnings()).To(BeEmpty())
			})
		}
	})

	t.Run("the driver and each allowed group can set, change and remove a reserved field", func(t *testing.T) {
		for i, f := range policytest.ReservedFields {
			t.Run(f.Path, func(t *testing.T) {
				g := NewWithT(t)
				for j, who := range allowed {
					services := typedServices{who.cs.CoreV1().Services(hostNamespace)}
					name := fmt.Sprintf("allowed-%d-%d", i, j)
					svc := loadBalancer(hostNamespace, name)
					f.Set(svc, f.First)
					_, err := services.Create(ctx, svc, metav1.CreateOptions{})
					g.Expect(err).NotTo(HaveOccurred(), "%s sets on create", who.name)
					g.Expect(services.edit(ctx, name, func(s *corev1.Service) { f.Set(s, f.Second) })).To(Succeed(), "%s changes", who.name)
					if f.Annotation != "" {
						g.Expect(services.editStatus(ctx, name, func(s *corev1.Service) { f.Set(s, f.First) })).To(Succeed(), "%s changes through status", who.name)
					}
					g.Expect(services.edit(ctx, name, func(s *corev1.Service) { f.Unset(s) })).To(Succeed(), "%s removes", who.name)
					g.Expect(services.edit(ctx, name, func(s *corev1.Service) { f.Set(s, f.First) })).To(Succeed(), "%s sets on update", who.name)
					g.Expect(who.policyWarnings()).To(BeEmpty())
				}
			})
		}
	})

	t.Run("a tenant can set, change and remove every reserved field in an unlabelled namespace", func(t *testing.T) {
		g := NewWithT(t)
		services := typedServices{tenant.cs.CoreV1().Services(plainNamespace)}
		svc := loadBalancer(plainNamespace, "free")
		for _, f := range policytest.ReservedFields {
			f.Set(svc, f.First)
		}
		_, err := services.Create(ctx, svc, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(services.edit(ctx, "free", func(s *corev1.Service) {
			for _, f := range policytest.ReservedFields {
				f.Set(s, f.Second)
			}
		})).To(Succeed())
		// A status write changes annotations: why the policy matches
		// services/status too.
		g.Expect(services.editStatus(ctx, "free", func(s *corev1.Service) {
			for _, f := range policytest.ReservedFields[:7] {
				f.Set(s, f.First)
			}
		})).To(Succeed())
		stored, err := services.Get(ctx, "free", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(stored.Annotations).To(HaveKeyWithValue(policytest.ReservedFields[1].Annotation, policytest.ReservedFields[1].First))
		g.Expect(services.edit(ctx, "free", func(s *corev1.Service) {
			for _, f := range policytest.ReservedFields {
				f.Unset(s)
			}
		})).To(Succeed())
	})

	t.Run("a user added to the params may pin without the policy changing", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(probe(opsBot)).To(MatchError(policytest.PinsDenial("probe", policytest.ReservedFields[1].Path)))
		params, err := admin.cs.CoreV1().ConfigMaps(pins.Params.Namespace).Get(ctx, pins.Params.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		params.Data["allowedUsernames"] += "ops-bot\n"
		_, err = admin.cs.CoreV1().ConfigMaps(pins.Params.Namespace).Update(ctx, params, metav1.UpdateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() error { return probe(opsBot) }).Should(Succeed())
		g.Expect(probe(tenant)).To(MatchError(policytest.PinsDenial("probe", policytest.ReservedFields[1].Path)))
	})

	t.Run("with validationActions [Warn, Audit] a tenant's write is admitted with a warning", func(t *testing.T) {
		g := NewWithT(t)
		b, err := admin.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, pins.Binding.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		b.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
		_, err = admin.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() error { return probe(tenant) }).Should(Succeed())
		tenant.warnings.Take()

		f := policytest.ReservedFields[0]
		services := typedServices{tenant.cs.CoreV1().Services(hostNamespace)}
		g.Expect(services.edit(ctx, "tenant-0", func(s *corev1.Service) { f.Set(s, "198.51.100.99") })).To(Succeed())
		message := policytest.PinsMessage(f.Path)
		g.Expect(tenant.warnings.Take()).To(ConsistOf(
			policytest.Warned(policytest.ServicePins) + message))
		stored, err := services.Get(ctx, "tenant-0", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(stored.Annotations).To(HaveKeyWithValue(f.Annotation, "198.51.100.99"))

		// A write touching no reserved field draws no warning.
		g.Expect(services.edit(ctx, "tenant-0", func(s *corev1.Service) { s.Labels["tier"] = "backend" })).To(Succeed())
		g.Expect(tenant.warnings.Take()).To(BeEmpty())
	})
}

// typedServices adds read-modify-write helpers to a Services client.
type typedServices struct {
	corev1client.ServiceInterface
}

// edit reads Service name, changes it and writes it back.
func (s typedServices) edit(ctx context.Context, name string, change func(*corev1.Service)) error {
	svc, err := s.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(svc)
	_, err = s.Update(ctx, svc, metav1.UpdateOptions{})
	return err
}

// editStatus is edit through the status subresource.
func (s typedServices) editStatus(ctx context.Context, name string, change func(*corev1.Service)) error {
	svc, err := s.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	change(svc)
	_, err = s.UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	return err
}
