package policy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/policies"
	"github.com/cozystack/address-controller/policies/policytest"
	"github.com/cozystack/address-controller/test/controlplane"
)

// classDenial is the prefix of kube-apiserver's answer to a class write
// metallb-iad-class-parameters refuses.
func classDenial(name string) string {
	return policytest.Denied(policytest.ClassParameters, "ipaddressclasses.local.sdn.cozystack.io", name)
}

// A class of the driver whose parameters it could not read is refused,
// the message naming the field; classes of other provisioners, and writes
// that leave the parameters as they were, are not judged.
func TestClassParameters_EnforcedByKubeAPIServer(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	controlplane.RequireBinaries(t)
	root, err := controlplane.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd")}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	admin := newIdentity(g, "admin", cp.Config)
	scheme := apiruntime.NewScheme()
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	shipped, err := policies.LoadClassParameters()
	g.Expect(err).NotTo(HaveOccurred())

	policy, err := admin.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, shipped.Policy, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	binding, err := admin.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, shipped.Binding, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(equality.Semantic.DeepEqual(policy.Spec, shipped.Policy.Spec)).To(BeTrue(), "stored policy spec differs from the file:\n%+v", policy.Spec)
	g.Expect(equality.Semantic.DeepEqual(binding.Spec, shipped.Binding.Spec)).To(BeTrue(), "stored binding spec differs from the file:\n%+v", binding.Spec)

	class := func(name, provisioner, parameters string) *v1alpha1.IPAddressClass {
		cl := &v1alpha1.IPAddressClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.IPAddressClassSpec{Provisioner: provisioner, ReclaimPolicy: v1alpha1.ReclaimRetain},
		}
		if parameters != "" {
			cl.Spec.Parameters = &apiruntime.RawExtension{Raw: []byte(parameters)}
		}
		return cl
	}
	g.Eventually(func() error {
		return c.Create(ctx, class("probe", metallb.Provisioner, `{"pool":"p","note":"x"}`), client.DryRunAll)
	}).Should(MatchError(ContainSubstring("metallb-iad-class-parameters")), "the policy takes effect")

	for _, tc := range []struct {
		name, parameters, denied string
	}{
		{"1 no parameters", "", `spec.parameters: Required value`},
		{"2 an unknown key", `{"pool":"p","note":"x"}`, `spec.parameters: Unsupported value: unknown field(s) note; the only parameter is pool`},
		{"3 no pool", `{"pools":"p"}`, `spec.parameters: Unsupported value: unknown field(s) pools`},
		{"4 an empty pool", `{"pool":""}`, `spec.parameters.pool: Required value`},
		{"5 a pool that is no string", `{"pool":7}`, `spec.parameters.pool: Invalid value: must be a string`},
		{"5b a pool name too long", `{"pool":"` + strings.Repeat("p", 254) + `"}`, `spec.parameters.pool: Too long: may not be more than 253 characters`},
		{"5c a null pool", `{"pool":null}`, `spec.parameters.pool: Required value`},
		{"6 the one parameter", `{"pool":"p"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := c.Create(ctx, class("c", metallb.Provisioner, tc.parameters), client.DryRunAll)
			if tc.denied == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(classDenial("c") + tc.denied)))
		})
	}

	t.Run("7 another provisioner's class is not judged", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Create(ctx, class("static", "static.example.com", `{"anything":1}`), client.DryRunAll)).To(Succeed())
	})

	t.Run("8 an update that breaks the parameters is refused; one that leaves them is not judged", func(t *testing.T) {
		g := NewWithT(t)
		g.SetDefaultEventuallyTimeout(60 * time.Second)
		g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
		good := class("kept", metallb.Provisioner, `{"pool":"p"}`)
		g.Expect(c.Create(ctx, good)).To(Succeed())
		broken := good.DeepCopy()
		broken.Spec.Parameters.Raw = []byte(`{"pool":"p","note":"x"}`)
		g.Expect(c.Update(ctx, broken)).To(MatchError(ContainSubstring(classDenial("kept") + "spec.parameters: Unsupported value: unknown field(s) note")))
		// A class stored before the policy (here: with the binding gone)
		// can still be labelled while it waits to be fixed.
		g.Expect(admin.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, shipped.Binding.Name, metav1.DeleteOptions{})).To(Succeed())
		g.Eventually(func() error { return c.Update(ctx, broken.DeepCopy(), client.DryRunAll) }).Should(Succeed())
		g.Expect(c.Update(ctx, broken)).To(Succeed())
		_, err := admin.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, shipped.Binding, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() error {
			return c.Create(ctx, class("probe", metallb.Provisioner, `{"pool":"p","note":"x"}`), client.DryRunAll)
		}).Should(HaveOccurred())
		labelled := broken.DeepCopy()
		labelled.Labels = map[string]string{"team": "net"}
		g.Expect(c.Update(ctx, labelled)).To(Succeed())
	})
}
