package class

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/fakeapi"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/recorder"
)

func classAddress(ip string, phase v1alpha1.AddressPhase) *v1alpha1.IPAddress {
	name, _ := v1alpha1.IPAddressName(ip)
	return &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   v1alpha1.IPAddressSpec{Address: ip, ClassName: "public"},
		Status: v1alpha1.IPAddressStatus{Phase: phase}}
}

// The class status counts its addresses per family and phase; counts are
// written at most once per statusInterval, a change of Exhausted at once.
func TestWriteStatus(t *testing.T) {
	ctx := context.Background()
	class := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	objs := []client.Object{class,
		classAddress("192.0.2.1", v1alpha1.AddressBound),
		classAddress("192.0.2.2", v1alpha1.AddressAvailable),
		classAddress("192.0.2.3", v1alpha1.AddressReleased),
		classAddress("2001:db8::1", v1alpha1.AddressBound)}
	api := fakeapi.New(t, objs)
	r := &Reconciler{Client: api}
	get := func() *v1alpha1.IPAddressClass {
		t.Helper()
		var c v1alpha1.IPAddressClass
		if err := api.Get(ctx, client.ObjectKey{Name: "public"}, &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}

	// 1. The first pass writes the counts, and IPv6 has none left.
	if _, err := r.writeStatus(ctx, get()); err != nil {
		t.Fatal(err)
	}
	got := get()
	want := []v1alpha1.FamilyAddresses{
		{Family: v1alpha1.IPv4, Total: 3, Available: 1, Bound: 1, Released: 1},
		{Family: v1alpha1.IPv6, Total: 1, Bound: 1},
	}
	if diff := cmp.Diff(want, got.Status.Addresses); diff != "" {
		t.Errorf("1. counts (-want +got):\n%s", diff)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionExhausted); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("1. Exhausted = %+v, want True (IPv6 has no address left)", c)
	}
	writes := api.Writes()

	// 2. A count changes within the interval, Exhausted does not: looked at again later.
	if err := api.Create(ctx, classAddress("192.0.2.4", v1alpha1.AddressAvailable)); err != nil {
		t.Fatal(err)
	}
	writes++
	res, err := r.writeStatus(ctx, get())
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > statusInterval || api.Writes() != writes {
		t.Errorf("2. = %+v, %v with %d writes; want a requeue within %s and no write", res, err, api.Writes()-writes, statusInterval)
	}

	// 3. An IPv6 address becomes Available: Exhausted changes, written at once.
	if err := api.Create(ctx, classAddress("2001:db8::2", v1alpha1.AddressAvailable)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.writeStatus(ctx, get()); err != nil {
		t.Fatal(err)
	}
	got = get()
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionExhausted); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("3. Exhausted = %+v, want False", c)
	}
	if n := len(got.Status.Addresses); n != 2 || got.Status.Addresses[0].Total != 4 || got.Status.Addresses[1].Available != 1 {
		t.Errorf("3. counts = %+v, want 4 IPv4 and one IPv6 Available", got.Status.Addresses)
	}

	// 4. Nothing changed: no write.
	writes = api.Writes()
	if _, err := r.writeStatus(ctx, get()); err != nil || api.Writes() != writes {
		t.Errorf("4. %v, %d writes; want none", err, api.Writes()-writes)
	}

}

// A change of Exhausted that the driver's count makes (its part of the
// status, status.capacity) is written at once too, although the status the
// pass starts from already carries that count.
func TestDriversCountEndsExhaustedAtOnce(t *testing.T) {
	ctx := context.Background()
	class := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	api := fakeapi.New(t, []client.Object{class, classAddress("192.0.2.1", v1alpha1.AddressBound)})
	r := &Reconciler{Client: api}
	get := func() *v1alpha1.IPAddressClass {
		t.Helper()
		var c v1alpha1.IPAddressClass
		if err := api.Get(ctx, client.ObjectKey{Name: "public"}, &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	if _, err := r.writeStatus(ctx, get()); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(get().Status.Conditions, v1alpha1.ConditionExhausted) {
		t.Fatal("one address, Bound, and no driver's count: want Exhausted")
	}
	driven := get()
	driven.Status.Capacity = []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Total: 16, Allocated: 1, Available: 15}}
	if err := api.Status().Update(ctx, driven); err != nil {
		t.Fatal(err)
	}
	res, err := r.writeStatus(ctx, get())
	if err != nil || res.RequeueAfter > 0 || meta.IsStatusConditionTrue(get().Status.Conditions, v1alpha1.ConditionExhausted) {
		t.Errorf("= %+v, %v, Exhausted still true; want it cleared at once, within the interval", res, err)
	}
}

// The tally files an address under its class and family, and its phase;
// an address of no family is not filed.
func TestTallyKeys(t *testing.T) {
	if got, want := tallyKeys(classAddress("192.0.2.1", v1alpha1.AddressBound)), []string{"public/IPv4", "public/IPv4/Bound"}; !cmp.Equal(got, want) {
		t.Errorf("tallyKeys = %v, want %v", got, want)
	}
	if got := tallyKeys(&v1alpha1.IPAddress{Spec: v1alpha1.IPAddressSpec{ClassName: "public"}}); got != nil {
		t.Errorf("tallyKeys of an address with none = %v, want nil", got)
	}
}

// A class whose addresses moved within statusInterval is looked at again
// (the tally may lag the event that woke the pass); one whose addresses are
// still is not, so idle classes cost no pass at all.
func TestSettlesOnlyWhileAddressesMove(t *testing.T) {
	ctx := context.Background()
	class := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	api := fakeapi.New(t, []client.Object{class, classAddress("192.0.2.1", v1alpha1.AddressBound)})
	r := &Reconciler{Client: api, tally: index.NewTally(tallyKeys)}
	r.tally.File(classAddress("192.0.2.1", v1alpha1.AddressBound))
	get := func() *v1alpha1.IPAddressClass {
		t.Helper()
		var c v1alpha1.IPAddressClass
		if err := api.Get(ctx, client.ObjectKey{Name: "public"}, &c); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	if res, err := r.writeStatus(ctx, get()); err != nil || res.RequeueAfter != 0 {
		t.Errorf("1. no address moved: %+v, %v; want no requeue", res, err)
	}
	r.classOf(ctx, classAddress("192.0.2.1", v1alpha1.AddressBound))
	if res, err := r.writeStatus(ctx, get()); err != nil || res.RequeueAfter != statusInterval {
		t.Errorf("2. an address just moved: %+v, %v; want a requeue after %s", res, err, statusInterval)
	}
	r.moved.note("public", time.Now().Add(-statusInterval))
	if res, err := r.writeStatus(ctx, get()); err != nil || res.RequeueAfter != 0 {
		t.Errorf("3. the last move is %s old: %+v, %v; want no requeue", statusInterval, res, err)
	}
}

// A class being deleted whose addresses the tally counts (more than ten) is
// looked at again: the tally may still count addresses the cache no longer
// has, and the last one going must not leave the class held.
func TestDeletedClassCountedByTheTallyIsLookedAtAgain(t *testing.T) {
	ctx := context.Background()
	class := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public", Finalizers: []string{v1alpha1.FinalizerClassProtection}}}
	api := fakeapi.New(t, []client.Object{class})
	if err := api.Delete(ctx, class); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: api, APIReader: api, Recorder: recorder.New(events.NewFakeRecorder(10)), tally: index.NewTally(tallyKeys)}
	for i := range 11 {
		r.tally.File(classAddress(fmt.Sprintf("192.0.2.%d", i), v1alpha1.AddressBound)) // gone from the API, not yet from the tally
	}
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "public"}})
	if err != nil || res.RequeueAfter != statusInterval {
		t.Errorf("Reconcile = %+v, %v; want a look again after %s", res, err, statusInterval)
	}
}
