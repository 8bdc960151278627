package provision

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/recorder/recordertest"
)

// A failed create leaves the reservation memory as if the failed and the
// remaining addresses had never been planned, except that an IP someone
// else already holds stays out of the next choice. (The memory is what
// makes a pass skip a family; a stale entry would starve it for a minute.)
func TestCreateReleasesWhatItDidNotCreate(t *testing.T) {
	claim := &v1alpha1.IPAddressClaim{}
	claim.Namespace, claim.Name, claim.UID = "ns", "web", "uid"
	claimKey := claim.UID
	v4 := newAddress(claim, "public", v1alpha1.ReclaimRetain, netip.MustParseAddr("203.0.113.1"))
	v6 := newAddress(claim, "public", v1alpha1.ReclaimRetain, netip.MustParseAddr("2001:db8::1"))
	for _, tc := range []struct {
		name         string
		err          error
		wantInflight []string
	}{
		{"1 the IP exists already: it stays taken", apierrors.NewAlreadyExists(schema.GroupResource{}, v4.Name), []string{v4.Name}},
		{"2 any other failure: nothing stays", errors.New("boom"), nil},
		{"3 a refusal (the core's webhook): nothing stays", apierrors.NewForbidden(schema.GroupResource{Resource: "ipaddresses"}, v4.Name, errors.New("not a driver")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := v1alpha1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
					if o.GetName() == v4.Name {
						return tc.err
					}
					return c.Create(ctx, o, opts...)
				},
			}).Build()
			r := &Reconciler{Client: c, inflight: map[string]inflight{}, Recorder: recorder.New(events.NewFakeRecorder(10)),
				claims: map[types.UID]map[v1alpha1.IPFamily]created{}, used: map[string]usedList{}}
			addrs := []*v1alpha1.IPAddress{v4.DeepCopy(), v6.DeepCopy()}
			r.reserve(claimKey, addrs)
			_, _ = r.create(context.Background(), claim, addrs)
			if fams := r.claims[claimKey]; len(fams) != 0 {
				t.Errorf("the claim is still remembered to have %v", fams)
			}
			var inflight []string
			for name := range r.inflight {
				inflight = append(inflight, name)
			}
			if len(inflight) != len(tc.wantInflight) || len(inflight) > 0 && inflight[0] != tc.wantInflight[0] {
				t.Errorf("inflight = %v, want %v", inflight, tc.wantInflight)
			}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(v6), &v1alpha1.IPAddress{}); !apierrors.IsNotFound(err) {
				t.Errorf("the address after the failure was created: %v", err)
			}
		})
	}
}

// An address create the API server refuses — the core's webhook not
// knowing this driver as one, say — is told on the claim, and the pass is
// retried with backoff without being logged as an error at every retry.
func TestRefusedAddressIsTold(t *testing.T) {
	claim := &v1alpha1.IPAddressClaim{}
	claim.Namespace, claim.Name, claim.UID = "ns", "web", "uid"
	a := newAddress(claim, "public", v1alpha1.ReclaimRetain, netip.MustParseAddr("203.0.113.1"))
	refusal := apierrors.NewForbidden(schema.GroupResource{Resource: "ipaddresses"}, a.Name, errors.New("status.holding: only a driver writes holding"))
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return refusal },
	}).Build(), Recorder: recorder.New(rec), inflight: map[string]inflight{},
		claims: map[types.UID]map[v1alpha1.IPFamily]created{}, used: map[string]usedList{}}
	addrs := []*v1alpha1.IPAddress{a}
	r.reserve(claim.UID, addrs)
	res, err := r.create(context.Background(), claim, addrs)
	if err != nil || !res.Requeue { //nolint:staticcheck // retry.Again's Requeue
		t.Fatalf("create: %+v, %v; want a quiet retry", res, err)
	}
	recordertest.ExpectWarning(t, rec, metallb.ReasonWriteRefused, "only a driver writes holding")
}

// An address the cache shows gone (removed by force, or deleted once Lost)
// is no longer its claim's: the claim is owed the family at once. Another
// address of the family created since keeps the memory.
func TestForgetOwesTheFamilyAgain(t *testing.T) {
	claim := &v1alpha1.IPAddressClaim{}
	claim.Namespace, claim.Name, claim.UID = "ns", "web", "uid"
	gone := newAddress(claim, "public", v1alpha1.ReclaimRetain, netip.MustParseAddr("203.0.113.1"))
	since := newAddress(claim, "public", v1alpha1.ReclaimRetain, netip.MustParseAddr("203.0.113.2"))
	for _, tc := range []struct {
		name     string
		reserved *v1alpha1.IPAddress
		want     int
	}{
		{"1 the gone address was the family's", gone, 0},
		{"2 another was created since", since, 1},
	} {
		r := &Reconciler{inflight: map[string]inflight{}, claims: map[types.UID]map[v1alpha1.IPFamily]created{}, used: map[string]usedList{}}
		r.reserve(claim.UID, []*v1alpha1.IPAddress{tc.reserved})
		r.forget(gone)
		if got := len(r.claims[claim.UID]); got != tc.want {
			t.Errorf("%s: %d families remembered, want %d", tc.name, got, tc.want)
		}
	}
}

// TestUsedListFresh: a class's taken addresses are listed anew once the
// list is older than usedTTL, or its pool's ranges changed (a pool grown,
// or the class re-pointed at another pool): listed for the old ranges, the
// list holds nothing of the new ones, where a Service may hold an address.
func TestUsedListFresh(t *testing.T) {
	set := func(prefix string) *netipx.IPSet {
		var b netipx.IPSetBuilder
		b.AddPrefix(netip.MustParsePrefix(prefix))
		s, _ := b.IPSet()
		return s
	}
	at := time.Now()
	l := usedList{ranges: set("203.0.113.0/28"), at: at}
	for i, tc := range []struct {
		now    time.Time
		ranges *netipx.IPSet
		want   bool
	}{
		{at, set("203.0.113.0/28"), true},
		{at.Add(usedTTL + time.Millisecond), set("203.0.113.0/28"), false},
		{at, set("203.0.113.0/27"), false},
		{at, set("198.51.100.0/28"), false},
		{at, nil, false},
	} {
		if got := l.fresh(tc.now, tc.ranges); got != tc.want {
			t.Errorf("%d: fresh = %v, want %v", i, got, tc.want)
		}
	}
}

// A claim whose namespace is being deleted gets no address: it is deleted
// with its namespace any moment, and the address would outlive it.
func TestClaimOfALeavingNamespaceIsNotProvisioned(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	claim := &v1alpha1.IPAddressClaim{Spec: v1alpha1.IPAddressClaimSpec{ClassName: "public"}}
	claim.Namespace, claim.Name, claim.UID = "ns", "web", "uid"
	leaving := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", DeletionTimestamp: &metav1.Time{Time: time.Now()}, Finalizers: []string{"example.com/hold"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim, leaving).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			t.Error("an address was created for a claim of a namespace being deleted")
			return nil
		},
	}).Build()
	r := &Reconciler{Client: c, Recorder: recorder.New(events.NewFakeRecorder(10)), inflight: map[string]inflight{},
		claims: map[types.UID]map[v1alpha1.IPFamily]created{}, used: map[string]usedList{}}
	if res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}); err != nil || res != (reconcile.Result{}) {
		t.Errorf("Reconcile = %+v, %v; want nothing done", res, err)
	}
}
