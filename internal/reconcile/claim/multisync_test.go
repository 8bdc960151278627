package claim

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"testing"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
)

var errConflict = errors.New("conflict")

// world is an in-memory API server for the multisync tests: objects with
// resource versions, writes preconditioned on them, and injectable failures.
type world struct {
	claims    map[string]*v1alpha1.IPAddressClaim
	addresses map[string]*v1alpha1.IPAddress
	classes   []v1alpha1.IPAddressClass
	rv        int
	writes    int
	failAt    int // the failAt-th write fails with a conflict (0: none)
}

func newWorld(classes []v1alpha1.IPAddressClass, claims []*v1alpha1.IPAddressClaim, addrs []v1alpha1.IPAddress) *world {
	w := &world{claims: map[string]*v1alpha1.IPAddressClaim{}, addresses: map[string]*v1alpha1.IPAddress{}, classes: classes}
	for _, c := range claims {
		w.claims[c.Name] = c.DeepCopy()
	}
	for i := range addrs {
		w.addresses[addrs[i].Name] = addrs[i].DeepCopy()
	}
	return w
}

func (w *world) write() error {
	w.writes++
	if w.writes == w.failAt {
		return errConflict
	}
	w.rv++
	return nil
}

func (w *world) snapshot(name string) snapshot {
	s := snapshot{claim: w.claims[name].DeepCopy(), classes: w.classes, now: now}
	for _, a := range w.addresses {
		s.addresses = append(s.addresses, *a.DeepCopy())
	}
	return s
}

// apply carries out a plan as the reconciler does, stopping at the first
// failed write.
func (w *world) apply(name string, p plan) error {
	c := w.claims[name]
	if p.addFinalizer || p.provisioner != nil {
		if err := w.write(); err != nil {
			return err
		}
		if p.addFinalizer {
			c.Finalizers = append(c.Finalizers, v1alpha1.FinalizerClaimProtection)
		}
		if p.provisioner != nil {
			c.Annotations[v1alpha1.AnnotationProvisioner] = *p.provisioner
		}
	}
	for _, a := range p.bind {
		cur, ok := w.addresses[a.Name]
		if !ok || cur.ResourceVersion != a.ResourceVersion {
			return errConflict
		}
		if err := w.write(); err != nil {
			return err
		}
		cur.Spec.ClaimRef = a.Spec.ClaimRef
		cur.ResourceVersion = strconv.Itoa(1000 + w.rv)
	}
	if p.status != nil {
		if err := w.write(); err != nil {
			return err
		}
		c.Status = *p.status
	}
	return nil
}

// syncAddress is §5 steps 5-6 in brief: the address reconciler's part in
// a binding.
func (w *world) syncAddress(a *v1alpha1.IPAddress) {
	phase := v1alpha1.AddressAvailable
	if ref := a.Spec.ClaimRef; ref != nil {
		phase = v1alpha1.AddressPending
		if c, ok := w.claims[ref.Name]; ok && ref.UID == c.UID {
			phase = v1alpha1.AddressBound
		}
	}
	if a.Status.Phase != phase && w.write() == nil {
		a.Status.Phase = phase
		a.ResourceVersion = strconv.Itoa(1000 + w.rv)
	}
}

// run syncs every object until a round writes nothing, at most 100 rounds.
func (w *world) run(t *testing.T) {
	t.Helper()
	for round := 0; round < 100; round++ {
		before := w.writes
		for _, name := range sortedKeys(w.addresses) {
			w.syncAddress(w.addresses[name])
		}
		for _, name := range sortedKeys(w.claims) {
			_ = w.apply(name, decide(w.snapshot(name)))
		}
		if w.writes == before {
			return
		}
	}
	t.Fatal("did not converge in 100 rounds")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// check asserts the binding invariants: no claim holds two addresses of a
// family, each claim's status lists exactly the addresses bound to it, and
// the number of Bound claims is as expected.
func (w *world) check(t *testing.T, wantBound int) {
	t.Helper()
	bound := 0
	for _, c := range w.claims {
		var held []string
		fams := map[v1alpha1.IPFamily]int{}
		for _, a := range w.addresses {
			if binding.Holds(a, c) {
				held = append(held, a.Name)
				fams[binding.Family(a)]++
			}
		}
		for f, n := range fams {
			if n > 1 {
				t.Errorf("claim %s holds %d %s addresses", c.Name, n, f)
			}
		}
		sort.Strings(held)
		var listed []string
		for _, a := range c.Status.Addresses {
			listed = append(listed, a.Name)
		}
		if fmt.Sprint(held) != fmt.Sprint(listed) {
			t.Errorf("claim %s: status lists %v, claimRefs say %v", c.Name, listed, held)
		}
		if c.Status.Phase == v1alpha1.ClaimBound {
			bound++
		}
	}
	if bound != wantBound {
		t.Errorf("%d claims Bound, want %d", bound, wantBound)
	}
}

// TestMultisync re-runs the reconcilers until nothing changes, from the
// initial state and with a conflict injected at every single write in turn:
// a failed write at any point — a crash between two writes — converges to
// the same bindings.
func TestMultisync(t *testing.T) {
	public := newClass("public", asDefault)
	scenarios := []struct {
		name      string
		claims    []*v1alpha1.IPAddressClaim
		addresses []v1alpha1.IPAddress
		wantBound int
	}{
		{
			name:      "4-7 three claims, two addresses: two bind, one waits",
			claims:    []*v1alpha1.IPAddressClaim{newClaim("a", noFinalizer), newClaim("b", noFinalizer), newClaim("c", noFinalizer)},
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.1", "public"), newAddress("203.0.113.2", "public")},
			wantBound: 2,
		},
		{
			name:      "4-7 Dual and single claims share a pool",
			claims:    []*v1alpha1.IPAddressClaim{newClaim("a", withFamily(v1alpha1.Dual)), newClaim("b", withFamily(v1alpha1.IPv6))},
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.1", "public"), newAddress("2001:db8::1", "public"), newAddress("2001:db8::2", "public")},
			wantBound: 2,
		},
		{
			name:      "4-4 pre-bindings are accepted after any failure",
			claims:    []*v1alpha1.IPAddressClaim{newClaim("a"), newClaim("b")},
			addresses: []v1alpha1.IPAddress{newAddress("203.0.113.1", "public", preBoundTo(newClaim("b"))), newAddress("203.0.113.2", "public")},
			wantBound: 2,
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			clean := newWorld([]v1alpha1.IPAddressClass{public}, sc.claims, sc.addresses)
			clean.run(t)
			clean.check(t, sc.wantBound)
			for k := 1; k <= clean.writes; k++ {
				w := newWorld([]v1alpha1.IPAddressClass{public}, sc.claims, sc.addresses)
				w.failAt = k
				w.run(t)
				w.check(t, sc.wantBound)
			}
		})
	}
}

// TestRaceOnStaleSnapshots decides every claim on the same snapshot before
// applying any plan, as concurrent binders on stale caches do: the
// resource-version precondition lets exactly one bind the only address.
func TestRaceOnStaleSnapshots(t *testing.T) {
	var claims []*v1alpha1.IPAddressClaim
	for i := range 100 {
		claims = append(claims, newClaim(fmt.Sprintf("c%03d", i)))
	}
	w := newWorld([]v1alpha1.IPAddressClass{newClass("public", asDefault)}, claims, []v1alpha1.IPAddress{newAddress("203.0.113.1", "public")})
	plans := map[string]plan{}
	for name := range w.claims {
		plans[name] = decide(w.snapshot(name))
	}
	won := 0
	for name, p := range plans {
		if w.apply(name, p) == nil && len(p.bind) > 0 {
			won++
		}
	}
	if won != 1 {
		t.Fatalf("%d binders won the only address, want 1", won)
	}
	w.run(t)
	w.check(t, 1)
}
