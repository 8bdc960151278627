package claim

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const ns = "tenant"

func newClass(name string, mods ...func(*v1alpha1.IPAddressClass)) v1alpha1.IPAddressClass {
	c := v1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.IPAddressClassSpec{Provisioner: "p.example.com/" + name, ReclaimPolicy: v1alpha1.ReclaimRetain},
	}
	for _, m := range mods {
		m(&c)
	}
	return c
}

func asDefault(c *v1alpha1.IPAddressClass) {
	c.Annotations = map[string]string{v1alpha1.AnnotationDefaultClass: "true"}
}

func classDeleting(c *v1alpha1.IPAddressClass) {
	c.DeletionTimestamp = &metav1.Time{Time: now}
}

func newClaim(name string, mods ...func(*v1alpha1.IPAddressClaim)) *v1alpha1.IPAddressClaim {
	c := &v1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Finalizers:  []string{v1alpha1.FinalizerClaimProtection},
			Annotations: map[string]string{}},
		Spec: v1alpha1.IPAddressClaimSpec{Family: v1alpha1.IPv4},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func withClass(name string) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Spec.ClassName = name }
}

func withStatusClass(name string) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Status.ClassName = name }
}

func withFamily(f v1alpha1.IPFamily) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Spec.Family = f }
}

func withAddressName(n string) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Spec.AddressName = n }
}

func withPhase(p v1alpha1.ClaimPhase) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) { c.Status.Phase = p }
}

func withReported(addrs ...v1alpha1.IPAddress) func(*v1alpha1.IPAddressClaim) {
	return func(c *v1alpha1.IPAddressClaim) {
		for _, a := range addrs {
			c.Status.Addresses = append(c.Status.Addresses, v1alpha1.ClaimedAddress{Name: a.Name, Address: a.Spec.Address})
		}
	}
}

func noFinalizer(c *v1alpha1.IPAddressClaim) { c.Finalizers = nil }

func deleting(c *v1alpha1.IPAddressClaim) { c.DeletionTimestamp = &metav1.Time{Time: now} }

func ownedByController(c *v1alpha1.IPAddressClaim) {
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: c.Name, UID: "svc", Controller: ptrTrue()}}
}

func ptrTrue() *bool { t := true; return &t }

func newAddress(ip, class string, mods ...func(*v1alpha1.IPAddress)) v1alpha1.IPAddress {
	name, err := v1alpha1.IPAddressName(ip)
	if err != nil {
		panic(err)
	}
	a := v1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Finalizers: []string{v1alpha1.FinalizerAddressProtection}},
		Spec: v1alpha1.IPAddressSpec{Address: ip, ClassName: class, ReclaimPolicy: v1alpha1.ReclaimRetain,
			Source: v1alpha1.AddressSource{FromClass: &v1alpha1.FromClassSource{}}},
		Status: v1alpha1.IPAddressStatus{Phase: v1alpha1.AddressAvailable},
	}
	for _, m := range mods {
		m(&a)
	}
	return a
}

// boundTo binds the address to claim with its UID, phase Bound.
func boundTo(c *v1alpha1.IPAddressClaim) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: c.Namespace, Name: c.Name, UID: c.UID}
		a.Status.Phase = v1alpha1.AddressBound
	}
}

// preBoundTo names the claim without a UID, as a driver creates it.
func preBoundTo(c *v1alpha1.IPAddressClaim) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: c.Namespace, Name: c.Name}
		a.Status.Phase = v1alpha1.AddressPending
	}
}

func staleFor(c *v1alpha1.IPAddressClaim) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: c.Namespace, Name: c.Name, UID: "uid-of-an-earlier-claim"}
		a.Status.Phase = v1alpha1.AddressBound
	}
}

func inPhase(p v1alpha1.AddressPhase) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) { a.Status.Phase = p }
}

func reclaimDelete(a *v1alpha1.IPAddress) { a.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete }

// releasedFrom: Released at since from claim namespace/name, an earlier
// claim's binding.
func releasedFrom(namespace, name string, since time.Time) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: namespace, Name: name, UID: types.UID("uid-earlier-" + name)}
		binding.SetPhase(&a.Status, v1alpha1.AddressReleased, "released", since)
	}
}

// attachedTo: the driver reports the address attached to Service name.
func attachedTo(name string) func(*v1alpha1.IPAddress) {
	return func(a *v1alpha1.IPAddress) {
		a.Status.AssociatedTo = &v1alpha1.WorkloadReference{Kind: "Service", Namespace: ns, Name: name}
	}
}
