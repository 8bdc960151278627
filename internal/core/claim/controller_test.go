package claim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/fakeapi"
	"github.com/cozystack/address-controller/internal/index"
	"github.com/cozystack/address-controller/internal/quota"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/recorder/recordertest"
)

func TestDegrades(t *testing.T) { // and so unsure
	a := v1alpha1.ClaimedAddress{Name: "ip-203-0-113-1", Address: "203.0.113.1"}
	b := v1alpha1.ClaimedAddress{Name: "ip-203-0-113-2", Address: "203.0.113.2"}
	st := func(p v1alpha1.ClaimPhase, addrs ...v1alpha1.ClaimedAddress) v1alpha1.IPAddressClaimStatus {
		return v1alpha1.IPAddressClaimStatus{Phase: p, Addresses: addrs}
	}
	for _, tc := range []struct {
		name          string
		before, after v1alpha1.IPAddressClaimStatus
		want          bool
	}{
		{"4-8 Bound to Lost", st(v1alpha1.ClaimBound, a), st(v1alpha1.ClaimLost), true},
		{"4-8 an address dropped", st(v1alpha1.ClaimBound, a), st(v1alpha1.ClaimPending), true},
		{"4-8 an address replaced", st(v1alpha1.ClaimBound, a), st(v1alpha1.ClaimBound, b), true},
		{"4-8 Lost stays Lost", st(v1alpha1.ClaimLost), st(v1alpha1.ClaimLost), false},
		{"4-7 Pending to Bound", st(v1alpha1.ClaimPending), st(v1alpha1.ClaimBound, a), false},
		{"4-8 Lost restored", st(v1alpha1.ClaimLost), st(v1alpha1.ClaimBound, a), false},
	} {
		if got := degrades(tc.before, tc.after); got != tc.want {
			t.Errorf("%s: degrades = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// fakes is a cache and an API server for a Reconciler, each holding its
// own objects.
func fakes(t *testing.T, cacheObjs, liveObjs []client.Object) (cache, live client.Client) {
	t.Helper()
	return fakeapi.New(t, cacheObjs), fakeapi.New(t, liveObjs)
}

func reconciler(cache, live client.Client) *Reconciler {
	return &Reconciler{Client: cache, APIReader: live, Now: func() time.Time { return now }, Recorder: recorder.New(events.NewFakeRecorder(10))}
}

func objects(objs ...client.Object) []client.Object {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject().(client.Object)
	}
	return out
}

// 4-8: a claim another binder bound (a previous leader) reaches this
// binder's cache before the address does — each kind is watched apart. A
// pass on that cache sees a Bound claim without its address; it must not
// turn the claim Lost, dropping the address a tenant reads (found by make
// chaos: a leader frozen past its lease woke to exactly this).
func TestLaggingCacheDoesNotLoseABinding(t *testing.T) {
	claim := newClaim("web", withClass("public"), withPhase(v1alpha1.ClaimBound))
	addr := newAddress("203.0.113.1", "public", boundTo(claim))
	withReported(addr)(claim)
	class := newClass("public")
	cache, live := fakes(t, objects(claim, &class), objects(claim, &class, &addr)) // the address has yet to reach the cache
	r := reconciler(cache, live)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.IPAddressClaim
	if err := cache.Get(context.Background(), client.ObjectKeyFromObject(claim), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1alpha1.ClaimBound || len(got.Status.Addresses) != 1 {
		t.Errorf("the claim is %s with %v, want Bound with %s", got.Status.Phase, got.Status.Addresses, addr.Spec.Address)
	}
}

// 4-3: two binders bound a family twice (a leader woken from a pause and
// its successor). Which binding to keep is read from the claim's status;
// a binder whose cache has yet to see the status its successor wrote
// would keep the other one, and each would release the one the other
// kept (found by make chaos). A release is decided on the claim the API
// server has: this binder waits for its cache.
func TestExcessReleasedOnlyOnTheCurrentClaim(t *testing.T) {
	stale := newClaim("web", withClass("public"), withPhase(v1alpha1.ClaimPending))
	a1 := newAddress("203.0.113.1", "public", boundTo(stale))
	a2 := newAddress("203.0.113.2", "public", boundTo(stale))
	current := stale.DeepCopy()
	withPhase(v1alpha1.ClaimBound)(current)
	withReported(a2)(current)
	class := newClass("public")
	cache, live := fakes(t, objects(stale, &class, &a1, &a2), objects(current, &class, &a1, &a2))
	if err := live.Status().Update(context.Background(), current); err != nil { // a newer version than the cache's
		t.Fatal(err)
	}
	r := reconciler(cache, live)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(stale)}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []v1alpha1.IPAddress{a1, a2} {
		var got v1alpha1.IPAddress
		if err := cache.Get(context.Background(), client.ObjectKeyFromObject(&a), &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.ClaimRef == nil {
			t.Errorf("%s was released on a stale claim", a.Name)
		}
	}
}

// deletions records the names a Reconciler deletes through it.
type deletions struct {
	client.Client
	names []string
}

func (d *deletions) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	d.names = append(d.names, obj.GetName())
	return d.Client.Delete(ctx, obj, opts...)
}

// 6-2: an auto-claim deleted a moment after its driver created its address,
// which has yet to reach this binder's cache. Letting the claim go on that
// cache would leave the address to its own reclaimPolicy (Retain: Released,
// kept out of the pool for good); the reclaim is decided on what the API
// server shows, and the address goes with the claim.
func TestReclaimDecidedOnTheAPIServersAddresses(t *testing.T) {
	claim := newClaim("web", withClass("public"), withStatusClass("public"), ownedByController, deleting)
	addr := newAddress("203.0.113.1", "public", boundTo(claim)) // Retain
	class := newClass("public")
	cache, live := fakes(t, objects(claim, &class), objects(claim, &class, &addr))
	d := &deletions{Client: cache}
	if _, err := reconciler(d, live).Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}); err != nil {
		t.Fatal(err)
	}
	if len(d.names) != 1 || d.names[0] != addr.Name {
		t.Errorf("deleted %v, want [%s]", d.names, addr.Name)
	}
}

// 4-7: in a class that keeps Released addresses in their namespace, an
// address another claim of the namespace has just taken back still reads
// Released (its phase lags the bind by a pass). It is that claim's: a
// second claim binds an Available address instead of taking it over.
func TestKeptAddressJustTakenBackIsNotTakenAgain(t *testing.T) {
	class := newClass("public", func(c *v1alpha1.IPAddressClass) { c.Spec.KeepReleasedInNamespace = true })
	first := newClaim("first", withClass("public"), withStatusClass("public"), withPhase(v1alpha1.ClaimBound))
	second := newClaim("second", withClass("public"), withStatusClass("public"))
	kept := newAddress("203.0.113.1", "public", boundTo(first), inPhase(v1alpha1.AddressReleased))
	withReported(kept)(first)
	free := newAddress("203.0.113.2", "public", inPhase(v1alpha1.AddressAvailable))
	cache, live := fakes(t, objects(first, second, &class, &kept, &free), objects(first, second, &class, &kept, &free))
	r := reconciler(cache, live)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(second)}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]types.UID{kept.Name: first.UID, free.Name: second.UID} {
		var got v1alpha1.IPAddress
		if err := cache.Get(context.Background(), client.ObjectKey{Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.ClaimRef == nil || got.Spec.ClaimRef.UID != want {
			t.Errorf("%s is bound to %v, want the claim of UID %s", name, got.Spec.ClaimRef, want)
		}
	}
}

// 4-7: the claims waiting in a namespace are woken when one of its
// Released addresses becomes one they may take back — Released and
// detached — and not on every other change of it.
func TestKeptFreed(t *testing.T) {
	bound := newAddress("203.0.113.1", "public", boundTo(newClaim("web")))
	released := newAddress("203.0.113.1", "public", releasedFrom(ns, "web", now))
	attached := newAddress("203.0.113.1", "public", releasedFrom(ns, "web", now), attachedTo("a"))
	deleted := newAddress("203.0.113.1", "public", releasedFrom(ns, "web", now), func(a *v1alpha1.IPAddress) { a.DeletionTimestamp = &metav1.Time{Time: now} })
	for _, tc := range []struct {
		name     string
		old, new v1alpha1.IPAddress
		want     bool
	}{
		{"4-7 released, its driver let go already", bound, released, true},
		{"4-7 its driver lets go of a released address", attached, released, true},
		{"4-7 released, still attached: not yet", bound, attached, false},
		{"4-7 released and detached before: nothing new", released, released, false},
		{"4-7 being deleted: nothing to take back", attached, deleted, false},
	} {
		if got := keptFreed(&tc.old, &tc.new); got != tc.want {
			t.Errorf("%s: keptFreed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// 4-7: a kept address goes back to a claim of the name it was last bound
// to first: while such a claim, re-created, waits for its family, a claim
// of another name whose pass runs first does not take it.
func TestKeptAddressWaitsForItsNamesake(t *testing.T) {
	class := newClass("public", func(c *v1alpha1.IPAddressClass) { c.Spec.KeepReleasedInNamespace = true })
	web := newClaim("web", withClass("public"), withStatusClass("public"), withPhase(v1alpha1.ClaimPending)) // re-created: a new UID
	api := newClaim("api", withClass("public"), withStatusClass("public"))
	kept := newAddress("203.0.113.1", "public", releasedFrom(ns, "web", now.Add(-time.Minute)))
	free := newAddress("203.0.113.2", "public", inPhase(v1alpha1.AddressAvailable))
	cache, live := fakes(t, objects(web, api, &class, &kept, &free), objects(web, api, &class, &kept, &free))
	r := reconciler(cache, live)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(api)}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.IPAddress
	if err := cache.Get(context.Background(), client.ObjectKeyFromObject(&kept), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ClaimRef.Name != "web" {
		t.Errorf("the kept address went to %s, want it left for web", got.Spec.ClaimRef.Name)
	}
}

// 4-7: a claim deleted and created again under its name, in a class that
// keeps Released addresses, waits for its former address while the driver
// still detaches it from the Service naming the claim — it does not match
// an Available address meanwhile.
// The address it waits for counts in its namespace's quotas already: a
// quota at its limit does not refuse the claim for it.
func TestKeptAddressStillAttachedIsWaitedFor(t *testing.T) {
	t.Run("no quota", func(t *testing.T) { keptAddressStillAttachedIsWaitedFor(t, nil, false) })
	full := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addresses"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{quota.ClassKey("public"): resource.MustParse("1")}}}
	t.Run("a quota at its limit", func(t *testing.T) { keptAddressStillAttachedIsWaitedFor(t, full, false) })
	// Another claim's kept address, free to take back, is not taken in its
	// place: the Service naming the claim would change address, and the
	// two claims' Services swap theirs.
	t.Run("another kept address free", func(t *testing.T) { keptAddressStillAttachedIsWaitedFor(t, nil, true) })
}

func keptAddressStillAttachedIsWaitedFor(t *testing.T, rq *corev1.ResourceQuota, another bool) {
	class := newClass("public", func(c *v1alpha1.IPAddressClass) { c.Spec.KeepReleasedInNamespace = true })
	web := newClaim("web", withClass("public"), withStatusClass("public"), withPhase(v1alpha1.ClaimPending)) // re-created: a new UID
	kept := newAddress("203.0.113.1", "public", releasedFrom(ns, "web", now.Add(-time.Minute)), attachedTo("web"))
	free := newAddress("203.0.113.2", "public", inPhase(v1alpha1.AddressAvailable))
	objs := []client.Object{web, &class, &kept, &free}
	others := []client.Object{&free}
	if another {
		api := newAddress("203.0.113.3", "public", releasedFrom(ns, "api", now.Add(-time.Hour)))
		objs, others = append(objs, &api), append(others, &api)
	}
	if rq != nil {
		objs = append(objs, rq)
	}
	cache, live := fakes(t, objects(objs...), objects(objs...))
	r := reconciler(cache, live)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(web)}); err != nil {
		t.Fatal(err)
	}
	for _, o := range others {
		var got v1alpha1.IPAddress
		if err := cache.Get(context.Background(), client.ObjectKeyFromObject(o), &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.ClaimRef != nil && got.Spec.ClaimRef.UID == web.UID {
			t.Errorf("%s was bound to the claim; want the claim to wait for its own", got.Name)
		}
	}
	var c v1alpha1.IPAddressClaim
	if err := cache.Get(context.Background(), client.ObjectKeyFromObject(web), &c); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound); cond == nil ||
		cond.Reason != v1alpha1.ReasonWaitingForAddress || !strings.Contains(cond.Message, kept.Name) {
		t.Errorf("Bound condition %v; want it waiting for %s", cond, kept.Name)
	}
}

// 4-6: the claims whose class did not resolve are retried on a class
// change that can resolve them, not on every write of a class's counts.
func TestResolvesAnew(t *testing.T) {
	base := newClass("public")
	base.Generation = 1
	mod := func(f func(*v1alpha1.IPAddressClass)) *v1alpha1.IPAddressClass {
		c := base.DeepCopy()
		f(c)
		return c
	}
	for _, tc := range []struct {
		name string
		new  *v1alpha1.IPAddressClass
		want bool
	}{
		{"its counts", mod(func(c *v1alpha1.IPAddressClass) {
			c.Status.Capacity = []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Allocated: 3}}
		}), false},
		{"its spec", mod(func(c *v1alpha1.IPAddressClass) { c.Generation = 2 }), true},
		{"the default-class mark", mod(func(c *v1alpha1.IPAddressClass) {
			c.Annotations = map[string]string{v1alpha1.AnnotationDefaultClass: "true"}
		}), true},
		{"its deletion begins", mod(func(c *v1alpha1.IPAddressClass) { c.DeletionTimestamp = &metav1.Time{Time: now} }), true},
		{"a namesake replaced it", mod(func(c *v1alpha1.IPAddressClass) { c.UID = "other" }), true},
	} {
		if got := resolvesAnew(event.UpdateEvent{ObjectOld: &base, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A class write of its counts alone wakes no waiting claim; one that also
// changes a condition or the driver's capacity does.
func TestCountsOnly(t *testing.T) {
	base := newClass("public")
	base.ResourceVersion = "1"
	mod := func(f func(*v1alpha1.IPAddressClass)) *v1alpha1.IPAddressClass {
		c := base.DeepCopy()
		c.ResourceVersion = "2"
		c.Status.Addresses = []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 4, Bound: 3, Available: 1}}
		f(c)
		return c
	}
	for _, tc := range []struct {
		name string
		new  *v1alpha1.IPAddressClass
		want bool
	}{
		{"1 its counts alone", mod(func(*v1alpha1.IPAddressClass) {}), true},
		{"2 its counts and Exhausted", mod(func(c *v1alpha1.IPAddressClass) {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionExhausted, Status: metav1.ConditionTrue}}
		}), false},
		{"3 its counts and the driver's capacity", mod(func(c *v1alpha1.IPAddressClass) {
			c.Status.Capacity = []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Allocated: 3}}
		}), false},
		{"4 not its counts", func() *v1alpha1.IPAddressClass { c := base.DeepCopy(); c.Generation = 2; return c }(), false},
	} {
		if got := countsOnly(event.UpdateEvent{ObjectOld: &base, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A quota charge the API server refuses (the charges annotation grown past
// its limit, an admission policy guarding quotas) leaves the claim waiting
// as on a full quota (its status, its event and the waiting-claims metric
// say so, quoting the refusal), and the pass is retried with backoff.
func TestRefusedChargeIsTold(t *testing.T) {
	class := newClass("public")
	web := newClaim("web", withClass("public"))
	free := newAddress("203.0.113.1", "public", inPhase(v1alpha1.AddressAvailable))
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addresses"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{quota.ClassKey("public"): resource.MustParse("5")}}}
	cache, live := fakes(t, objects(web, &class, &free, rq), objects(web, &class, &free, rq))
	cache.(*fakeapi.API).Refuse = func(o client.Object) error {
		if _, ok := o.(*corev1.ResourceQuota); ok {
			return apierrors.NewInvalid(schema.GroupKind{Kind: "ResourceQuota"}, rq.Name,
				field.ErrorList{field.TooLong(field.NewPath("metadata", "annotations"), "", 262144)})
		}
		return nil
	}
	rec := events.NewFakeRecorder(10)
	r := reconciler(cache, live)
	r.Recorder = recorder.New(rec)
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(web)})
	if err != nil || !res.Requeue { //nolint:staticcheck // retry.Again's Requeue
		t.Fatalf("Reconcile: %+v, %v; want a quiet retry", res, err)
	}
	recordertest.ExpectWarning(t, rec, v1alpha1.ReasonQuotaExceeded, "refused this claim's quota charge", "ResourceQuota "+ns+"/addresses")
	var c v1alpha1.IPAddressClaim
	if err := cache.Get(context.Background(), client.ObjectKeyFromObject(web), &c); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound); c.Status.Phase != v1alpha1.ClaimPending || cond == nil ||
		cond.Reason != v1alpha1.ReasonQuotaExceeded || !strings.Contains(cond.Message, "metadata.annotations: Too long") {
		t.Errorf("the claim is %q with Bound condition %v; want it Pending, waiting on its quota, saying why", c.Status.Phase, cond)
	}
	var got v1alpha1.IPAddress
	if err := cache.Get(context.Background(), client.ObjectKeyFromObject(&free), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ClaimRef != nil {
		t.Errorf("bound without its charge: %v", got.Spec.ClaimRef)
	}
}

// 4-7: a claim far back in the line of a class with no Available address
// (its driver provisions) keeps the book's count of the claims ahead, so
// that a driver's room smaller than the line tells it the class is out of
// addresses for it; near the front the cache confirms each place.
func TestPlaceFarBackKeepsTheBooksCount(t *testing.T) {
	var objs []client.Object
	line := index.NewLine()
	for i := range 15 {
		c := newClaim(fmt.Sprintf("c%02d", i), withClass("public"), withStatusClass("public"), withPhase(v1alpha1.ClaimPending))
		c.CreationTimestamp = metav1.NewTime(now.Add(time.Duration(i-100) * time.Second))
		objs = append(objs, c)
		line.File(c)
	}
	last := objs[len(objs)-1].(*v1alpha1.IPAddressClaim)
	cache, live := fakes(t, objects(objs...), objects(objs...))
	r := reconciler(cache, live)
	r.waitingBook, r.freeBook = line, index.NewBook(func(client.Object) []string { return nil })

	pl, err := r.placeInBook(context.Background(), last, "public", v1alpha1.IPv4)
	if err != nil || pl.ahead != 14 || pl.available != 0 {
		t.Fatalf("place %+v, %v; want 14 ahead, none available", pl, err)
	}
	class := newClass("public", func(c *v1alpha1.IPAddressClass) {
		c.Status.Capacity = []v1alpha1.FamilyCapacity{{Family: v1alpha1.IPv4, Total: 16, Allocated: 4, Available: 12}}
	})
	if !outOfAddresses(&class, v1alpha1.IPv4, pl) {
		t.Errorf("14 ahead and 12 left: the class is out of addresses for the claim")
	}
	pl, err = r.placeInBook(context.Background(), objs[5].(*v1alpha1.IPAddressClaim), "public", v1alpha1.IPv4)
	if err != nil || pl.ahead != 5 {
		t.Errorf("near the front: %+v, %v; want 5 ahead, confirmed", pl, err)
	}
}

// 4: a claim whose namespace is being deleted is deleted with it any
// moment: nothing is bound for it (the address would outlive the
// namespace, Released under Retain), and nothing is written.
func TestClaimOfALeavingNamespaceGetsNothing(t *testing.T) {
	class := newClass("public")
	web := newClaim("web", withClass("public"))
	free := newAddress("203.0.113.1", "public", inPhase(v1alpha1.AddressAvailable))
	leaving := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, DeletionTimestamp: &metav1.Time{Time: now}, Finalizers: []string{"example.com/hold"}}}
	cache, live := fakes(t, objects(web, &class, &free, leaving), objects(web, &class, &free, leaving))
	r := reconciler(cache, live)
	writes := cache.(*fakeapi.API).Writes()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(web)}); err != nil {
		t.Fatal(err)
	}
	if n := cache.(*fakeapi.API).Writes() - writes; n != 0 {
		t.Errorf("%d writes; want none for a claim of a namespace being deleted", n)
	}
}

// 4-7: a claim restored from a backup naming its address, which still names
// the claim's earlier incarnation (Released), waits for an administrator to
// clear that claimRef, and says so — its quota counts the address already,
// so a full quota does not make it wait on room it does not need.
func TestRestoredClaimNamingItsAddressNeedsNoRoom(t *testing.T) {
	class := newClass("public")
	kept := newAddress("203.0.113.1", "public", releasedFrom(ns, "web", now.Add(-time.Hour)))
	web := newClaim("web", withClass("public"), withAddressName(kept.Name))
	full := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addresses"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{quota.ClassKey("public"): resource.MustParse("1")}}}
	cache, live := fakes(t, objects(web, &class, &kept, full), objects(web, &class, &kept, full))
	r := reconciler(cache, live)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(web)}); err != nil {
		t.Fatal(err)
	}
	var c v1alpha1.IPAddressClaim
	if err := cache.Get(context.Background(), client.ObjectKeyFromObject(web), &c); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound); cond == nil || cond.Reason != v1alpha1.ReasonWaitingForAddress {
		t.Errorf("Bound condition %v; want it waiting for its address, not for room", cond)
	}
}
