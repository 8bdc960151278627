package index_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/fakeapi"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/quota"
)

func names(reqs []reconcile.Request) []string {
	var out []string
	for _, r := range reqs {
		if r.Namespace == "" {
			out = append(out, r.Name)
		} else {
			out = append(out, r.String())
		}
	}
	slices.Sort(out)
	return out
}

// Each index files what its name says, and the request helpers find it.
func TestIndexes(t *testing.T) {
	ctx := context.Background()
	address := func(name, class string, phase v1alpha1.AddressPhase, claim string) *v1alpha1.IPAddress {
		a := &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   v1alpha1.IPAddressSpec{Address: "192.0.2.1", ClassName: class},
			Status: v1alpha1.IPAddressStatus{Phase: phase}}
		if claim != "" {
			a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "t", Name: claim}
		}
		return a
	}
	claim := func(name string, phase v1alpha1.ClaimPhase, mods ...func(*v1alpha1.IPAddressClaim)) *v1alpha1.IPAddressClaim {
		c := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name},
			Spec:   v1alpha1.IPAddressClaimSpec{ClassName: "public", Family: v1alpha1.IPv4},
			Status: v1alpha1.IPAddressClaimStatus{Phase: phase}}
		for _, m := range mods {
			m(c)
		}
		return c
	}
	api := fakeapi.New(t, []client.Object{
		address("a", "public", v1alpha1.AddressBound, "web"),
		address("b", "public", v1alpha1.AddressAvailable, ""),
		address("c", "private", v1alpha1.AddressAvailable, ""),
		func() *v1alpha1.IPAddress {
			d := address("d", "public", v1alpha1.AddressAvailable, "")
			d.DeletionTimestamp, d.Finalizers = &metav1.Time{Time: time.Unix(1, 0)}, []string{"example.com/keep"}
			return d
		}(),
		claim("web", v1alpha1.ClaimBound),
		claim("waits", v1alpha1.ClaimPending),
		claim("named", v1alpha1.ClaimPending, func(c *v1alpha1.IPAddressClaim) { c.Spec.AddressName = "b" }),
		claim("unresolved", v1alpha1.ClaimPending, func(c *v1alpha1.IPAddressClaim) {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionClassResolved, Status: metav1.ConditionFalse, Reason: "ClassNotFound"}}
		}),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "plain"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "named", Annotations: map[string]string{v1alpha1.AnnotationIPAddressClaim: "web"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "cluster"}},
	})
	for _, tc := range []struct {
		name string
		got  []reconcile.Request
		want []string
	}{
		{"AddressesOfClaim", index.AddressesOfClaim(ctx, api, "t", "web"), []string{"a"}},
		{"AddressPool files neither a Bound address nor one being deleted", index.Requests(ctx, api, &v1alpha1.IPAddressList{}, client.MatchingFields{index.AddressPool: index.PoolKey("public", v1alpha1.IPv4, v1alpha1.AddressAvailable)}), []string{"b"}},
		{"AddressPool files no Bound address", index.Requests(ctx, api, &v1alpha1.IPAddressList{}, client.MatchingFields{index.AddressPool: index.PoolKey("public", v1alpha1.IPv4, v1alpha1.AddressBound)}), nil},
		{"AddressNamespace", index.Requests(ctx, api, &v1alpha1.IPAddressList{}, client.MatchingFields{index.AddressNamespace: "t"}), []string{"a"}},
		{"WaitingOnClass: a Pending claim is in line, unless it names its address",
			index.WaitingOnClass(ctx, api, "public"), []string{"t/unresolved", "t/waits"}},
		{"NamingOnClass: a Pending claim naming its address", index.NamingOnClass(ctx, api, "public"), []string{"t/named"}},
		{"ClaimAddressName", index.Requests(ctx, api, &v1alpha1.IPAddressClaimList{}, client.MatchingFields{index.ClaimAddressName: "b"}), []string{"t/named"}},
		{"ClaimUnresolved", index.Requests(ctx, api, &v1alpha1.IPAddressClaimList{}, client.MatchingFields{index.ClaimUnresolved: index.Unresolved}), []string{"t/unresolved"}},
		{"ServiceUnclaimed", index.Requests(ctx, api, &corev1.ServiceList{}, client.MatchingFields{index.ServiceUnclaimed: index.Unclaimed}), []string{"t/plain"}},
	} {
		if got := names(tc.got); !slices.Equal(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Claims whose names share an AddressClaim bucket each get their own
// addresses only; the addresses listed are copies unless asked otherwise.
func TestAddressesNamingSharedBucket(t *testing.T) {
	ctx := context.Background()
	other := ""
	for i := 0; other == ""; i++ {
		if n := fmt.Sprintf("claim-%d", i); n != "web" && index.ClaimBucket("t", n) == index.ClaimBucket("t", "web") {
			other = n
		}
	}
	address := func(name, claimNamespace, claim string) *v1alpha1.IPAddress {
		return &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.IPAddressSpec{Address: "192.0.2.1", ClassName: "public",
				ClaimRef: &v1alpha1.ClaimReference{Namespace: claimNamespace, Name: claim}}}
	}
	api := fakeapi.New(t, []client.Object{address("a", "t", "web"), address("b", "t", other), address("c", "u", "web")})
	var list v1alpha1.IPAddressList
	if err := index.AddressesNaming(ctx, api, &list, "t", "web"); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Fatalf("AddressesNaming(t/web) = %v, want [a]", list.Items)
	}
	list.Items[0].Spec.ClaimRef.Name = "changed"
	if reqs := names(index.AddressesOfClaim(ctx, api, "t", "web")); !slices.Equal(reqs, []string{"a"}) {
		t.Errorf("after changing the listed copy: AddressesOfClaim(t/web) = %v, want [a]", reqs)
	}
	if reqs := names(index.AddressesOfClaim(ctx, api, "t", other)); !slices.Equal(reqs, []string{"b"}) {
		t.Errorf("AddressesOfClaim(t/%s) = %v, want [b]", other, reqs)
	}
}

// A deletion and a namesake's creation that a re-list delivers as one
// update pass the lifecycle filter; other updates of a live claim do not.
func TestClaimLifecycle(t *testing.T) {
	claim := func(uid types.UID, mods ...func(*v1alpha1.IPAddressClaim)) *v1alpha1.IPAddressClaim {
		c := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: uid}}
		for _, m := range mods {
			m(c)
		}
		return c
	}
	deleting := func(c *v1alpha1.IPAddressClaim) { now := metav1.Now(); c.DeletionTimestamp = &now }
	bound := func(c *v1alpha1.IPAddressClaim) { c.Status.Phase = v1alpha1.ClaimBound }
	tests := []struct {
		name     string
		old, new *v1alpha1.IPAddressClaim
		want     bool
	}{
		{"a status write", claim("u1"), claim("u1", bound), false},
		{"its deletion begins", claim("u1"), claim("u1", deleting), true},
		{"replaced by a namesake", claim("u1", bound), claim("u2"), true},
	}
	for _, tc := range tests {
		if got := index.ClaimLifecycle.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSpecChanged: a class's status writes (its counts) wake nothing; its
// spec, its deletion and a namesake do.
func TestSpecChanged(t *testing.T) {
	class := func(uid types.UID, gen int64, mods ...func(*v1alpha1.IPAddressClass)) *v1alpha1.IPAddressClass {
		c := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public", UID: uid, Generation: gen}}
		for _, m := range mods {
			m(c)
		}
		return c
	}
	counted := func(c *v1alpha1.IPAddressClass) {
		c.Status.Addresses = []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 2, Released: 1}}
	}
	deleting := func(c *v1alpha1.IPAddressClass) { now := metav1.Now(); c.DeletionTimestamp = &now }
	for _, tc := range []struct {
		name     string
		old, new *v1alpha1.IPAddressClass
		want     bool
	}{
		{"1 its counts", class("u1", 1), class("u1", 1, counted), false},
		{"2 its spec", class("u1", 1), class("u1", 2), true},
		{"3 its deletion begins", class("u1", 1), class("u1", 1, deleting), true},
		{"4 replaced by a namesake", class("u1", 1), class("u2", 1), true},
	} {
		if got := index.SpecChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestQuotaLimitsAddresses: a quota whose address keys are all taken out
// is seen once more; one that never limited addresses is not, nor an update
// that moves only what addresses do not depend on.
func TestQuotaLimitsAddresses(t *testing.T) {
	withHard := func(q *corev1.ResourceQuota, k corev1.ResourceName, n int64) *corev1.ResourceQuota {
		q.Spec.Hard[k] = *resource.NewQuantity(n, resource.DecimalSI)
		return q
	}
	withUsed := func(q *corev1.ResourceQuota, k corev1.ResourceName, n int64) *corev1.ResourceQuota {
		q.Status.Used = corev1.ResourceList{k: *resource.NewQuantity(n, resource.DecimalSI)}
		return q
	}
	charged := func(q *corev1.ResourceQuota) *corev1.ResourceQuota {
		q.Annotations = map[string]string{quota.ChargesAnnotation: `{"c1":{"claim":"web","class":"public","families":["IPv4"]}}`}
		return q
	}
	deleting := func(q *corev1.ResourceQuota) *corev1.ResourceQuota {
		q.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		return q
	}
	replaced := func(q *corev1.ResourceQuota) *corev1.ResourceQuota {
		q.UID = "another"
		return q
	}
	rq := func(keys ...corev1.ResourceName) *corev1.ResourceQuota {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{}}}
		for _, k := range keys {
			q.Spec.Hard[k] = *resource.NewQuantity(1, resource.DecimalSI)
		}
		return q
	}
	for _, tc := range []struct {
		name     string
		old, new *corev1.ResourceQuota
		want     bool
	}{
		{"1 its address limit changed", rq(quota.AllClasses), withHard(rq(quota.AllClasses), quota.AllClasses, 2), true},
		{"2 its address keys taken out", rq(quota.AllClasses, "pods"), rq("pods"), true},
		{"3 never limited addresses", rq("pods"), rq("pods", "services"), false},
		{"4 only its pod usage moved (an admitted pod)", rq(quota.AllClasses, "pods"), withUsed(rq(quota.AllClasses, "pods"), "pods", 3), false},
		{"5 its address usage moved", rq(quota.AllClasses, "pods"), withUsed(rq(quota.AllClasses, "pods"), quota.AllClasses, 1), true},
		{"6 its charges changed", rq(quota.AllClasses), charged(rq(quota.AllClasses)), true},
		{"7 nothing changed (a resync)", rq(quota.AllClasses), rq(quota.AllClasses), false},
		{"8 its deletion began", rq(quota.AllClasses), deleting(rq(quota.AllClasses)), true},
		{"9 a namesake replaced it", rq(quota.AllClasses), replaced(rq(quota.AllClasses)), true},
		{"10 a class key's limit changed", rq(quota.ClassKey("public")), withHard(rq(quota.ClassKey("public")), quota.ClassKey("public"), 5), true},
	} {
		if got := index.QuotaLimitsAddresses.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
