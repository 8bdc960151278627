package claim

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/fakeapi"
	"github.com/cozystack/address-controller/internal/index"
)

// The books lag the cache by a handler: a claim they still file ahead,
// which the cache shows bound, holds up nobody (4-7) — the claim behind it
// was told "2nd waiting" and nothing woke it again.
func TestPlaceInLine_BooksBehindTheCache(t *testing.T) {
	class := newClass("public")
	at := func(sec int64) func(*v1alpha1.IPAddressClaim) {
		return func(c *v1alpha1.IPAddressClaim) { c.CreationTimestamp = metav1.Unix(sec, 0) }
	}
	waitingFirst := newClaim("a-first", withClass("public"), withPhase(v1alpha1.ClaimPending), at(100))
	second := newClaim("b-second", withClass("public"), withPhase(v1alpha1.ClaimPending), at(100))
	free := newAddress("192.0.2.2", "public")
	for _, tc := range []struct {
		name  string
		first *v1alpha1.IPAddressClaim // as the cache shows it
		want  place
	}{
		{"4-7 the older claim still waits: the second is behind it", waitingFirst, place{ahead: 1, available: 1}},
		{"4-7 the cache shows the older claim bound: the second is first", newClaim("a-first", withClass("public"), withPhase(v1alpha1.ClaimBound), at(100)),
			place{ahead: 0, available: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := fakeapi.New(t, []client.Object{&class, tc.first, second, &free})
			r := &Reconciler{Client: api, waitingBook: index.NewLine(), freeBook: index.NewBook(func(client.Object) []string { return nil })}
			r.waitingBook.File(waitingFirst) // the book has yet to see the bind
			r.waitingBook.File(second)
			line, err := r.queue(context.Background(), second, &class)
			if err != nil {
				t.Fatal(err)
			}
			if got := line[v1alpha1.IPv4]; got != tc.want {
				t.Errorf("place = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The matcher wakes the oldest claims of a pool's line that the cache
// shows still waiting, walking the line instead of listing it; when the
// line names fewer than it needs (it lags the cache), it says so and the
// cache is asked.
func TestMatcherFromLine(t *testing.T) {
	at := func(sec int64) func(*v1alpha1.IPAddressClaim) {
		return func(c *v1alpha1.IPAddressClaim) { c.CreationTimestamp = metav1.Unix(sec, 0) }
	}
	filed := []*v1alpha1.IPAddressClaim{
		newClaim("a", withClass("public"), withPhase(v1alpha1.ClaimPending), at(100)),
		newClaim("b", withClass("public"), withPhase(v1alpha1.ClaimPending), at(101)),
		newClaim("c", withClass("public"), withPhase(v1alpha1.ClaimPending), at(102)),
		newClaim("d", withClass("public"), withPhase(v1alpha1.ClaimPending), at(103)),
	}
	// As the cache shows them: b was bound since the line filed it, d is gone.
	cached := []client.Object{filed[0], newClaim("b", withClass("public"), withPhase(v1alpha1.ClaimBound), at(101)), filed[2]}
	m := &matcher{client: fakeapi.New(t, cached), line: index.NewLine()}
	for _, c := range filed {
		m.line.File(c)
	}
	key := index.WaitingKey("public", v1alpha1.IPv4)
	names := func(cs []*v1alpha1.IPAddressClaim) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		n      int
		want   []string
		wantOK bool
	}{
		{"1 the oldest waiting one", 1, []string{"a"}, true},
		{"2 a bound one is passed over", 2, []string{"a", "c"}, true},
		{"3 a gone one too, and the line has too few", 3, []string{"a", "c"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := m.fromLine(context.Background(), key, tc.n)
			if err != nil || ok != tc.wantOK || !slices.Equal(names(got), tc.want) {
				t.Errorf("fromLine(%d) = %v, %v, %v; want %v, %v", tc.n, names(got), ok, err, tc.want, tc.wantOK)
			}
		})
	}
}
