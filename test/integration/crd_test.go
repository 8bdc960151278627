package integration

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// The CRDs' schema and CEL rules, as the API server applies them: no
// manager runs in these tests.

func TestCRD_RejectsInvalidObjects(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")

	// Existing objects for the update cases.
	e.createClass(class)
	existing := e.createAddress(e.v4(1), class)

	for _, tc := range []struct {
		name string
		// write is the rejected create or update.
		write func() error
		// field is how the error text names the offending field: its path,
		// or, for a rule set on a parent without a fieldPath, the path the
		// API server reports followed by the field's name in the message.
		field string
		// path is the field path of the error's cause as the API server
		// reports it; empty for a root-level rule (reported as "<nil>").
		path string
		// why is what the message must say about it.
		why string
		// not is what it must not say: an error that follows from the
		// first, which would only mislead.
		not string
	}{
		{
			name: "claim with an unknown family",
			write: func() error {
				return k8s.Create(e.ctx, e.newClaim("c", class, family("IPv5")))
			},
			field: "spec.family",
			path:  "spec.family",
			why:   `Unsupported value: "IPv5"`,
		},
		{
			name: "address with an invalid IP",
			write: func() error {
				a := newAddress(e.v4(2), class)
				a.Name, a.Spec.Address = "ip-10-0-0-256", "10.0.0.256"
				return k8s.Create(e.ctx, a)
			},
			field: "spec.address",
			path:  "spec.address",
			why:   "must be an IPv4 or IPv6 address in canonical form",
		},
		{
			name: "address with a non-canonical IPv6",
			write: func() error {
				a := newAddress(e.v4(2), class)
				a.Name, a.Spec.Address = "ip-2001-db8-0-0-0-0-0-1", "2001:db8:0:0:0:0:0:1"
				return k8s.Create(e.ctx, a)
			},
			field: "spec.address",
			path:  "spec.address",
			why:   "must be an IPv4 or IPv6 address in canonical form",
		},
		{
			name: "address in uppercase, named as its canonical form is",
			write: func() error {
				a := newAddress(e.v4(2), class)
				a.Name, a.Spec.Address = "ip-2001-db8--1", "2001:DB8::1"
				return k8s.Create(e.ctx, a)
			},
			field: "spec.address",
			path:  "spec.address",
			why:   "e.g. 2001:db8::7, not 2001:DB8:0::7",
			not:   "must be derived from spec.address",
		},
		{
			name: "address with both source.fromClass and source.providerRef",
			write: func() error {
				return k8s.Create(e.ctx, newAddress(e.v4(3), class, func(a *v1alpha1.IPAddress) {
					a.Spec.Source.ProviderRef = &v1alpha1.ProviderReference{ID: "eipalloc-1"}
				}))
			},
			field: "spec.source",
			path:  "spec.source",
			why:   "exactly one of fromClass or providerRef must be set",
		},
		{
			name: "address with neither source.fromClass nor source.providerRef",
			write: func() error {
				return k8s.Create(e.ctx, newAddress(e.v4(4), class, func(a *v1alpha1.IPAddress) {
					a.Spec.Source = v1alpha1.AddressSource{}
				}))
			},
			field: "spec.source",
			path:  "spec.source",
			why:   "exactly one of fromClass or providerRef must be set",
		},
		{
			name: "address whose name is not IPAddressName(spec.address)",
			write: func() error {
				a := newAddress(e.v4(5), class)
				a.Name = nameOf(e.v4(6))
				return k8s.Create(e.ctx, a)
			},
			field: "metadata.name",
			why:   "must be derived from spec.address",
		},
		{
			name: "changing an address's spec.address",
			write: func() error {
				a := existing.DeepCopy()
				a.Spec.Address = e.v4(7)
				return k8s.Update(e.ctx, a)
			},
			field: "spec.address",
			path:  "spec.address",
			why:   "address is immutable",
		},
		{
			name: "changing an address's spec.className",
			write: func() error {
				a := existing.DeepCopy()
				a.Spec.ClassName = e.class("b")
				return k8s.Update(e.ctx, a)
			},
			field: "spec.className",
			path:  "spec.className",
			why:   "className is immutable",
		},
		{
			name: "changing a class's spec.provisioner",
			write: func() error {
				c := e.getClass(e.g, class)
				c.Spec.Provisioner = "other.example.com/x"
				return k8s.Update(e.ctx, c)
			},
			field: "spec.provisioner: Invalid value",
			path:  "spec.provisioner",
			why:   "provisioner is immutable",
		},
		{
			name: "claim with spec.addressName and family Dual",
			write: func() error {
				return k8s.Create(e.ctx, e.newClaim("dual", class, family(v1alpha1.Dual), addressName(existing.Name)))
			},
			field: "spec.addressName: Invalid value",
			path:  "spec.addressName",
			why:   "addressName pre-binds one address and needs a single-family claim",
		},
		{
			name: "a bound claim re-targeted (without the webhook the core would release its address)",
			write: func() error {
				c := e.newClaim("bound", class)
				if err := k8s.Create(e.ctx, c); err != nil {
					return err
				}
				c.Status.Phase = v1alpha1.ClaimBound
				c.Status.Addresses = []v1alpha1.ClaimedAddress{{Name: existing.Name, Address: existing.Spec.Address}}
				if err := k8s.Status().Update(e.ctx, c); err != nil {
					return err
				}
				c.Spec.Family = v1alpha1.IPv6
				return k8s.Update(e.ctx, c)
			},
			field: "spec.family: Forbidden",
			path:  "spec.family",
			why:   "cannot change once the claim is bound; delete and recreate the claim to move it",
		},
		{
			name: "class with a negative spec.releaseDelay (it would recycle every Released address at once)",
			write: func() error {
				return k8s.Create(e.ctx, newClass(e.class("negative"), func(c *v1alpha1.IPAddressClass) {
					c.Spec.ReleaseDelay = &metav1.Duration{Duration: -time.Hour}
				}))
			},
			field: "spec.releaseDelay: Invalid value",
			path:  "spec.releaseDelay",
			why:   "must be a duration that is not negative",
		},
		{
			name: "class with a spec.releaseDelay in days, which Go durations do not know",
			write: func() error {
				return k8s.Create(e.ctx, &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": v1alpha1.GroupVersion.String(), "kind": "IPAddressClass",
					"metadata": map[string]any{"name": e.class("days")},
					"spec":     map[string]any{"provisioner": "driver.example.com/days", "releaseDelay": "30d"},
				}})
			},
			field: "spec.releaseDelay: Invalid value",
			path:  "spec.releaseDelay",
			why:   "must be a duration that is not negative, such as 720h",
		},
		{
			name: "class with a spec.releaseDelay past what a Go duration holds (it would stop every controller reading classes)",
			write: func() error {
				return k8s.Create(e.ctx, &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": v1alpha1.GroupVersion.String(), "kind": "IPAddressClass",
					"metadata": map[string]any{"name": e.class("long")},
					"spec":     map[string]any{"provisioner": "driver.example.com/long", "releaseDelay": "3000000h"},
				}})
			},
			field: "spec.releaseDelay: Invalid value",
			path:  "spec.releaseDelay",
			why:   "at most 6 digits before each",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.write()
			g.Expect(err).To(HaveOccurred())
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.why))
			if tc.not != "" {
				g.Expect(err.Error()).NotTo(ContainSubstring(tc.not))
			}
			t.Logf("rejected: %v", err)
			var status *apierrors.StatusError
			g.Expect(errors.As(err, &status)).To(BeTrue(), "want a status error, got %T", err)
			g.Expect(status.ErrStatus.Details).NotTo(BeNil())
			g.Expect(err.Error()).To(ContainSubstring(tc.field))
			if tc.path != "" {
				causes := []string{}
				for _, c := range status.ErrStatus.Details.Causes {
					causes = append(causes, c.Field)
				}
				g.Expect(causes).To(ContainElement(tc.path), "error: %v", err)
			}
		})
	}
}

func TestCRD_AcceptsCanonicalIPv6(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	a := newAddress("2001:db8::", class)
	e.g.Expect(a.Name).To(Equal("ip-2001-db8--0"))
	e.create(a)
	var got v1alpha1.IPAddress
	e.g.Expect(k8s.Get(e.ctx, client.ObjectKeyFromObject(a), &got)).To(Succeed())
	e.g.Expect(got.Spec.Address).To(Equal("2001:db8::"))
	e.g.Expect(got.Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimRetain), "reclaimPolicy defaults to Retain")

	claim := e.newClaim("defaulted", class, family(""))
	e.create(claim)
	e.g.Expect(claim.Spec.Family).To(Equal(v1alpha1.IPv4), "family defaults to IPv4")
}

// The rule freezing a bound claim's request leaves everything else of it,
// and a claim not bound, free to change.
func TestCRD_BoundClaimKeepsItsRequestOnly(t *testing.T) {
	e := newEnv(t)
	class := e.class("a")
	pending := e.newClaim("pending", class)
	e.create(pending)
	pending.Spec.Family = v1alpha1.IPv6
	e.g.Expect(k8s.Update(e.ctx, pending)).To(Succeed(), "a claim holding nothing may be re-targeted")

	bound := e.newClaim("bound", class)
	e.create(bound)
	bound.Status.Phase = v1alpha1.ClaimBound
	bound.Status.Addresses = []v1alpha1.ClaimedAddress{{Name: nameOf(e.v4(1)), Address: e.v4(1)}}
	e.g.Expect(k8s.Status().Update(e.ctx, bound)).To(Succeed())
	bound.Labels = map[string]string{"app": "web"}
	bound.Spec.Family = v1alpha1.IPv4
	e.g.Expect(k8s.Update(e.ctx, bound)).To(Succeed(), "labels change, and spelling out the family is no change")
	bound.Status.Phase = v1alpha1.ClaimLost
	e.g.Expect(k8s.Status().Update(e.ctx, bound)).To(Succeed(), "the status is the core's to write")
}

// kubectl get shows both addresses of a Dual claim: the API server's
// table takes only the first value of a column's path, so each address
// has a column of its own.
func TestCRD_ClaimTableShowsBothAddresses(t *testing.T) {
	e := newEnv(t)
	claim := e.newClaim("dual", e.class("a"), family(v1alpha1.Dual))
	e.create(claim)
	claim.Status.Phase = v1alpha1.ClaimBound
	claim.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionBound, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBound,
		Message: "bound", LastTransitionTime: metav1.Now()}}
	claim.Status.Addresses = []v1alpha1.ClaimedAddress{{Name: "ip-2001-db8--7", Address: "2001:db8::7"}, {Name: "ip-203-0-113-7", Address: "203.0.113.7"}}
	e.g.Expect(k8s.Status().Update(e.ctx, claim)).To(Succeed())

	cfg := rest.CopyConfig(adminCfg)
	cfg.GroupVersion = &v1alpha1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	e.g.Expect(err).NotTo(HaveOccurred())
	body, err := rc.Get().Namespace(e.ns).Resource("ipaddressclaims").Name("dual").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(e.ctx)
	e.g.Expect(err).NotTo(HaveOccurred())
	var table metav1.Table
	e.g.Expect(json.Unmarshal(body, &table)).To(Succeed())
	e.g.Expect(table.Rows).To(HaveLen(1))
	cells := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		cells[c.Name] = table.Rows[0].Cells[i]
	}
	e.g.Expect(cells).To(HaveKeyWithValue("Address", "2001:db8::7"))
	e.g.Expect(cells).To(HaveKeyWithValue("Address-2", "203.0.113.7"))
	e.g.Expect(cells).To(HaveKeyWithValue("Reason", v1alpha1.ReasonBound), "kubectl get -o wide says why a claim is as it is")
}
