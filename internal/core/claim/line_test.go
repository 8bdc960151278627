package claim

import (
	"context"
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
