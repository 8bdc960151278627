package hold

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/driver/metallb"
	"github.com/cozystack/address-controller/internal/fakeapi"
	"github.com/cozystack/address-controller/internal/recorder"
	"github.com/cozystack/address-controller/internal/recorder/recordertest"
	"github.com/cozystack/address-controller/internal/retry"
)

// apiServer is a fake API server holding objs, selecting addresses by
// the CRD's selectable fields.
func apiServer(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	for i, o := range objs {
		objs[i] = o.DeepCopyObject().(client.Object)
		objs[i].SetResourceVersion("") // the fake stamps its own
	}
	return fakeapi.New(t, objs, metallb.SetupIndexes)
}

// current is obj as the API server has it now (its resource version).
func current[T client.Object](t *testing.T, api client.Client, obj T) T {
	t.Helper()
	if err := api.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// The cache may show an address newer than a Service: the driver let go
// of the Service and recorded so, while the Service's own watch has yet to
// report that MetalLB took the address back. A Conflict is declared only
// on what the API server shows (refresh), so no tenant is told its Service
// holds an address without authorization when it does not.
func TestRefreshJudgesConflictOnTheAPIServer(t *testing.T) {
	stale := svc(ns, "a", holding(v4))
	placeholder := ph(v4, key, holding(v4))
	api := apiServer(t, svc(ns, "a"), placeholder, addr(v4, v1alpha1.AddressBound))
	r := &Reconciler{APIReader: api}
	// Let go of, recorded by nobody: the placeholder alone holds it.
	s := snapshotOf(t, world{address: current(t, api, addr(v4, "")), strangers: []*corev1.Service{stale},
		placeholders: []*corev1.Service{placeholder}})

	if got := summarize(s.address, decide(s)); got.phase != v1alpha1.AddressConflict {
		t.Fatalf("on the stale cache the pass should see a Conflict (the case refresh exists for), got %s", got.phase)
	}
	if err := r.refresh(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	if got := summarize(s.address, decide(s)); got.phase != v1alpha1.AddressBound || len(got.events)+len(got.create)+len(got.update) > 0 {
		t.Errorf("after refresh: %+v; want Bound, no write and no event", got)
	}
}

// Two drivers lead for a moment when a leader wakes from a pause past its
// lease. The woken one's cache may show the address's holding record
// newer than the Service it names: its successor recorded Service s, then
// pinned it, while the woken one still sees s unpinned and naming another
// claim. Decided on that cache, the pass would drop s from the record —
// and the driver would take its own pin for a stranger's, a Conflict it
// never leaves (found by make chaos). A plan that drops a Service from the
// record is decided again on the API server's Services.
func TestRefreshKeepsARecordedService(t *testing.T) {
	pinned := svc(ns, "s", naming("web"), pinnedBy(v4), holding(v4))
	stale := svc(ns, "s", naming("other"))
	placeholder := ph(v4, key)
	recordS := func(a *v1alpha1.IPAddress) { a.Status.Holding = &v1alpha1.Holding{Workload: heldRef(pinned)} }
	api := apiServer(t, pinned, placeholder, addr(v4, v1alpha1.AddressBound, associated("s"), recordS), webClaim())
	r := &Reconciler{APIReader: api}
	a := current(t, api, addr(v4, ""))
	s := snapshotOf(t, world{address: a, claim: true, strangers: []*corev1.Service{stale}, placeholders: []*corev1.Service{placeholder}})

	drops := func(p plan) bool { return p.status != nil && gains(p.status.Holding, a.Status.Holding) }
	p := decide(s)
	if !drops(p) || !unsure(a, p) {
		t.Fatalf("on the stale cache the plan should drop s from the record (the case refresh exists for): %+v", p.status)
	}
	if err := r.refresh(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	p = decide(s)
	if got := summarize(a, p); drops(p) || len(got.update) > 0 || got.associatedTo != ns+"/s" {
		t.Errorf("after refresh: record %+v, plan %+v; want s kept attached and untouched", p.status, got)
	}
}

// webClaim is the claim the test addresses are bound to, as snapshotOf
// makes it.
func webClaim() *v1alpha1.IPAddressClaim {
	return &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: claimID}}
}

// A leader woken from a pause past its lease acts for a moment beside its
// successor, and its claims may lag its addresses and Services. Without
// the claim, a pass detaches the claim's Service — while the successor,
// which sees the claim, deletes the placeholder: MetalLB then holds the
// address for nobody (found by make chaos). A let-go decided on a claim,
// or a sibling, the cache shows otherwise than the API server waits.
func TestRefreshWaitsForTheClaim(t *testing.T) {
	attached := svc(ns, "s", naming("web"), pinnedBy(v4), holding(v4))
	placeholder := ph(v4, key, holding(v4))
	bound := addr(v4, v1alpha1.AddressBound, recordedOn("s"))
	newer := webClaim()
	newer.Status.Phase = v1alpha1.ClaimBound
	sibling := addr(v6, v1alpha1.AddressBound)
	for _, tc := range []struct {
		name     string
		cached   bool // the claim is in the cache
		apiClaim *v1alpha1.IPAddressClaim
		apiMore  []client.Object
		stale    bool
	}{
		{name: "the cache lacks the claim", apiClaim: webClaim(), stale: true},
		{name: "the cache has an older version of the claim", cached: true, apiClaim: newer, stale: true},
		{name: "the cache lacks a sibling", cached: true, apiClaim: webClaim(), apiMore: []client.Object{sibling}, stale: true},
		{name: "the claim is gone from both", cached: false},
		{name: "the cache shows the claim as the API server does", cached: true, apiClaim: webClaim()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]client.Object{attached, placeholder, bound}, tc.apiMore...)
			if tc.apiClaim != nil {
				objs = append(objs, tc.apiClaim)
			}
			api := apiServer(t, objs...)
			if tc.apiClaim == newer {
				// A second version of the claim: the core's status write.
				live := current(t, api, webClaim())
				live.Status.Phase = v1alpha1.ClaimBound
				if err := api.Status().Update(context.Background(), live); err != nil {
					t.Fatal(err)
				}
			}
			r := &Reconciler{APIReader: api}
			a := current(t, api, addr(v4, ""))
			s := snapshotOf(t, world{address: a, claim: tc.cached, services: []*corev1.Service{attached}, placeholders: []*corev1.Service{placeholder}})
			if p := decide(s); !tc.cached && !unsure(a, p) {
				t.Fatalf("without the claim the pass should let go of s (the case the check exists for): %+v", summarize(a, p))
			}
			err := r.refresh(context.Background(), &s)
			if got := errors.Is(err, errStale); got != tc.stale || !tc.stale && err != nil {
				t.Errorf("refresh = %v, want stale %v", err, tc.stale)
			}
		})
	}
}

// A cache older than the API server's address — another incarnation of
// the name, deleted and created again while a leader slept — is waited
// for: a pass on it would tear down the new address's placeholder (found
// by make chaos).
func TestRefreshWaitsForTheAddress(t *testing.T) {
	old := addr(v4, v1alpha1.AddressBound, deleting)
	old.UID = "an-earlier-incarnation"
	placeholder := ph(v4, key, holding(v4))
	api := apiServer(t, placeholder, addr(v4, v1alpha1.AddressBound))
	r := &Reconciler{APIReader: api}
	s := snapshotOf(t, world{address: old, placeholders: []*corev1.Service{placeholder}})
	if p := decide(s); len(p.remove) == 0 || !unsure(old, p) {
		t.Fatalf("on the stale cache the plan should delete the placeholder (the case refresh exists for): %+v", summarize(old, p))
	}
	if err := r.refresh(context.Background(), &s); !errors.Is(err, errStale) {
		t.Errorf("refresh = %v, want errStale", err)
	}
}

// indexer registers the driver's indexes on a fake client's builder.
type indexer struct{ b *fake.ClientBuilder }

func (i indexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// An address missing from the cache may be one the cache has yet to
// receive (a leader woken from a pause, its successor having provisioned
// it meanwhile): its Services keep their pin unless the API server has no
// such address either (found by make chaos: a dual-stack Service lost its
// IPv6 pin, and with it both addresses, to a woken leader).
func TestOrphansOnlyWhatTheAPIServerLost(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	s := svc(ns, "a", naming("web"), pinnedBy(v4), holding(v4))
	a := addr(v4, v1alpha1.AddressBound)
	for _, tc := range []struct {
		name     string
		live     []client.Object
		released bool
	}{
		{"7-4 the cache lags: the pin stays", []client.Object{a.DeepCopy()}, false},
		{"7-4 removed by force: the pin goes", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(s.DeepCopy())
			if err := metallb.SetupIndexes(context.Background(), indexer{b}); err != nil {
				t.Fatal(err)
			}
			cache := b.Build()
			r := &Reconciler{Client: cache, APIReader: apiServer(t, tc.live...),
				Recorder: recorder.New(events.NewFakeRecorder(10))}
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(a)}); err != nil {
				t.Fatal(err)
			}
			var got corev1.Service
			if err := cache.Get(context.Background(), client.ObjectKeyFromObject(s), &got); err != nil {
				t.Fatal(err)
			}
			if released := got.Annotations[metallb.AnnotationPinned] == ""; released != tc.released {
				t.Errorf("released = %v, want %v: %v", released, tc.released, got.Annotations)
			}
		})
	}
}

// A leader woken from a pause sees its workload still holding the address
// — in its cache; meanwhile the tenant detached it and the placeholder
// took the address back. Decided on that cache, the pass would delete the
// placeholder, the only holder left (found by make chaos). A plan that lets
// go of a holder is decided again on the API server's Services.
func TestRefreshKeepsTheOnlyHolder(t *testing.T) {
	stale := svc(ns, "a", naming("web"), pinnedBy(v4), holding(v4))
	placeholder := ph(v4, key, holding(v4))
	recordA := func(a *v1alpha1.IPAddress) { a.Status.Holding = &v1alpha1.Holding{Workload: heldRef(stale)} }
	api := apiServer(t, svc(ns, "a"), placeholder, addr(v4, v1alpha1.AddressBound, associated("a"), recordA), webClaim())
	r := &Reconciler{APIReader: api}
	a := current(t, api, addr(v4, ""))
	s := snapshotOf(t, world{address: a, claim: true, services: []*corev1.Service{stale}, placeholders: []*corev1.Service{placeholder}})
	if p := decide(s); len(p.remove) == 0 || !unsure(a, p) {
		t.Fatalf("on the stale cache the plan should delete the placeholder (the case refresh exists for): %+v", summarize(a, p))
	}
	if err := r.refresh(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	if got := summarize(a, decide(s)); len(got.remove) > 0 {
		t.Errorf("after refresh the placeholder is deleted: %+v", got)
	}
}

// A lagging cache may show an address the API server has deleted and its
// placeholder already gone: a pass on it would create the placeholder
// again, for an owner that no longer exists, and garbage collection would
// delete it from under the name's next incarnation once MetalLB gave it the
// address (found by make chaos). A placeholder is created only for the
// incarnation the API server has; its version may be newer.
func TestCreatesOnlyForTheLiveAddress(t *testing.T) {
	cached := addr(v4, v1alpha1.AddressBound)
	if p := decide(snapshotOf(t, world{address: cached, claim: true})); len(p.create) == 0 || unsure(cached, p) {
		t.Fatalf("with no placeholder the plan should create one, without a refresh: %+v", summarize(cached, p))
	}
	newer := addr(v4, v1alpha1.AddressBound, associated("a"))
	other := addr(v4, v1alpha1.AddressBound)
	other.UID = "the-next-incarnation"
	for _, tc := range []struct {
		name string
		live []client.Object
		want error
	}{
		{"7-5 the same incarnation, a newer version", []client.Object{newer}, nil},
		{"7-5 gone from the API server", nil, errStale},
		{"7-5 another incarnation of the name", []client.Object{other}, errStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{APIReader: apiServer(t, tc.live...)}
			if err := r.alive(context.Background(), cached, false); !errors.Is(err, tc.want) {
				t.Errorf("alive = %v, want %v", err, tc.want)
			}
		})
	}
}

// The driver's cache keeps addresses of classes not known to be its own in
// outline, without their conditions or status records (TransformAddress).
// One whose class arrived after it is still an outline when the class's
// event wakes it: the pass decides on the whole address the API server
// has, or the status it writes would drop what the core recorded there.
func TestGatherReadsAnOutlineWhole(t *testing.T) {
	whole := addr(v4, v1alpha1.AddressBound, noFinalizer,
		phase(v1alpha1.AddressBound, metav1.Condition{Type: v1alpha1.ConditionBound, Status: metav1.ConditionTrue, Reason: "Bound"}))
	outline, err := (&metallb.ClassOwners{}).TransformAddress(whole.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !metallb.Outlined(outline.(*v1alpha1.IPAddress)) {
		t.Fatal("an address of a class the driver does not know should be cached in outline")
	}
	api := apiServer(t, whole)
	cache := fakeapi.New(t, []client.Object{outline.(client.Object)}, metallb.SetupIndexes)
	r := &Reconciler{Client: cache, APIReader: api, Classes: judged{class: inPool}, Namespace: "metallb-iad-system", Now: func() time.Time { return now }}
	s, held, err := r.gather(context.Background(), current(t, cache, outline.(*v1alpha1.IPAddress)))
	if err != nil || !held {
		t.Fatalf("gather: held %v, %v", held, err)
	}
	if s.address.UID != whole.UID || !equality.Semantic.DeepEqual(s.address.Status.Conditions, whole.Status.Conditions) {
		t.Errorf("the pass decides on the outline: %+v", s.address)
	}
}

// 7-5: so is a sibling still cached in outline (its class arrived after
// it, and it carries no driver finalizer yet): its holding record is what
// a dual-stack pin waits on, and an outline has none, so each family's
// pass would wait on the other's until the sibling's next event.
func TestGatherReadsAnOutlinedSiblingWhole(t *testing.T) {
	mine := addr(v4, v1alpha1.AddressBound, recordedOn("a"))
	sibling := addr(v6, v1alpha1.AddressBound, recordedOn("a"), noFinalizer) // an admin's, not yet given the driver's finalizer
	outline, err := (&metallb.ClassOwners{}).TransformAddress(sibling.DeepCopy())
	if err != nil || !metallb.Outlined(outline.(*v1alpha1.IPAddress)) {
		t.Fatalf("the sibling should be cached in outline (%v)", err)
	}
	claim := &v1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: claimID}, Spec: v1alpha1.IPAddressClaimSpec{Family: v1alpha1.Dual}}
	api := apiServer(t, mine, sibling, claim)
	cache := fakeapi.New(t, []client.Object{mine.DeepCopy(), outline.(client.Object), claim}, metallb.SetupIndexes)
	r := &Reconciler{Client: cache, APIReader: api, Classes: judged{class: inPool}, Namespace: "metallb-iad-system", Now: func() time.Time { return now }}
	s, held, err := r.gather(context.Background(), current(t, cache, mine))
	if err != nil || !held {
		t.Fatalf("gather: held %v, %v", held, err)
	}
	if len(s.siblings) != 2 {
		t.Fatalf("siblings %d, want both addresses", len(s.siblings))
	}
	for _, a := range s.siblings {
		if a.Status.Holding == nil {
			t.Errorf("sibling %s decided on in outline, without its holding record", a.Name)
		}
	}
}

// 7-6: an address attached before the holding record existed finds its
// pinned Service by the driver's marker, but only the one associatedTo
// names: a stranger's copy of the marker makes it neither the driver's to
// edit nor authorized (it would be handed the claim's sharing key).
func TestPinnedOfTrustsNoCopiedMarker(t *testing.T) {
	a := addr(v4, v1alpha1.AddressBound, associated("a"))
	ip := netip.MustParseAddr(v4)
	mine, stranger := svc(ns, "a", pinnedBy(v4), holding(v4)), svc("evil", "x", pinnedBy(v4))
	got, err := pinnedOf(a, ip, func(types.NamespacedName) (*corev1.Service, error) { return nil, nil },
		func() ([]*corev1.Service, error) { return []*corev1.Service{mine, stranger}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != mine {
		t.Errorf("pinnedOf = %v, want only %s/%s", got, mine.Namespace, mine.Name)
	}
}

// A placeholder the API server refuses (an IPv6 address in a cluster whose
// Services are IPv4 only, the driver's namespace being deleted) is reported
// on the address: its claim reads Bound while MetalLB holds nothing.
func TestRefusedPlaceholderIsReported(t *testing.T) {
	a := addr(v6, v1alpha1.AddressBound)
	ph := svc("metallb-iad-system", a.Name)
	refusal := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, ph.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "ipFamilies"), "IPv6", "not configured on this cluster")})
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return refusal },
	}).Build(), Recorder: recorder.New(rec)}
	if err := r.execute(context.Background(), a, plan{create: []*corev1.Service{ph}}); !apierrors.IsInvalid(err) || !retry.IsTold(err) {
		t.Fatalf("execute: %v, want the refusal, told", err)
	}
	recordertest.ExpectWarning(t, rec, metallb.ReasonPlaceholderRefused, "not configured on this cluster")
}

// The driver's status write refused (the core's webhook does not know it
// as a driver): the address says so, and the pass is retried without being
// logged as an error at every retry.
func TestRefusedStatusWriteIsTold(t *testing.T) {
	a := addr(v4, v1alpha1.AddressBound)
	refusal := apierrors.NewForbidden(schema.GroupResource{Resource: "ipaddresses"}, a.Name,
		errors.New("status.holding: Forbidden: only a driver writes holding"))
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
			return refusal
		},
	}).Build(), Recorder: recorder.New(rec)}
	st := a.Status.DeepCopy()
	if err := r.writeStatus(context.Background(), a, st); !apierrors.IsForbidden(err) || !retry.IsTold(err) {
		t.Fatalf("writeStatus: %v, want the refusal, told", err)
	}
	recordertest.ExpectWarning(t, rec, metallb.ReasonWriteRefused, "only a driver writes holding")
}

// An API server whose IPAddress CRD predates the holding record prunes it
// from a status write: the pin it records is not made, and the address
// says why (a pin nobody recorded would read as a stranger's).
func TestStaleSchemaStopsThePin(t *testing.T) {
	a := addr(v4, v1alpha1.AddressBound)
	w := svc(ns, "a")
	st := a.Status.DeepCopy()
	st.Holding = &v1alpha1.Holding{Workload: &v1alpha1.HeldReference{Kind: "Service", Namespace: ns, Name: "a", UID: w.UID}}
	rec := events.NewFakeRecorder(10)
	patched := false
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(fakeapi.Scheme()).WithObjects(a, w).WithStatusSubresource(a).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
			o.(*v1alpha1.IPAddress).Status.Holding = nil // pruned
			return c.SubResource(sub).Update(ctx, o, opts...)
		},
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			patched = true
			return nil
		},
	}).Build(), Recorder: recorder.New(rec)}
	err := r.execute(context.Background(), a, plan{status: st, recordFirst: true, update: []edit{{from: w, to: pin(w, v4, key)}}})
	if !errors.Is(err, errStaleSchema) || patched {
		t.Fatalf("execute: %v, pinned: %v; want errStaleSchema and no pin", err, patched)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "Warning "+metallb.ReasonSchemaStale) {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event")
	}
}

// unreadPool is a ClassBook that cannot tell the pool covering any address:
// a pool that does not parse and was never read.
type unreadPool struct{ judged }

func (unreadPool) Covering(_ context.Context, ip netip.Addr) (string, error) {
	return "", &metallb.PoolUnreadError{Namespace: "metallb-system", Pool: "legacy", IP: ip}
}

// An address a pool that does not parse may cover waits, without an error
// logged every 30 s for each of a /16's addresses: the pool's fix wakes it.
func TestUnreadPoolWaitsQuietly(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	a := addr(v4, v1alpha1.AddressBound)
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(a.DeepCopy()).Build(),
		Classes: unreadPool{judged{class: metallb.Class{Name: a.Spec.ClassName}}}, Recorder: recorder.New(events.NewFakeRecorder(10)),
		Now: time.Now}
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(a)})
	if err != nil || res.RequeueAfter != unreadPoolRecheck {
		t.Fatalf("Reconcile: %+v, %v; want a look again after %v and no error", res, err, unreadPoolRecheck)
	}
}
