package index

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// A Book follows each object as it moves between keys and goes away, and
// answers counts, smallest entries and places in order.
func TestBook(t *testing.T) {
	byClass := func(o client.Object) []string {
		if c := o.(*v1alpha1.IPAddress).Spec.ClassName; c != "" {
			return []string{c}
		}
		return nil
	}
	b := NewBook(byClass)
	addr := func(name, class string) *v1alpha1.IPAddress {
		return &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.IPAddressSpec{ClassName: class}}
	}
	for _, a := range []*v1alpha1.IPAddress{addr("c", "x"), addr("a", "x"), addr("b", "y"), addr("d", "")} {
		b.file(a)
	}
	var walked []string
	b.Walk("x", func(e string) bool { walked = append(walked, e); return false })
	if !slices.Equal(walked, []string{"a"}) {
		t.Errorf("Walk(x) stopping at once = %v, want [a]", walked)
	}
	if got := b.First("x", 5); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("First(x) = %v, want [a c]", got)
	}
	if b.Len("y") != 1 || b.Len("") != 0 || b.Len("none") != 0 {
		t.Errorf("Len: y %d, \"\" %d, none %d; want 1 0 0", b.Len("y"), b.Len(""), b.Len("none"))
	}
	b.file(addr("a", "y")) // moves
	if got := b.First("y", 1); !slices.Equal(got, []string{"a"}) || b.Len("x") != 1 {
		t.Errorf("after a move: First(y,1) = %v, Len(x) = %d", got, b.Len("x"))
	}
	if got := b.Before("y", "b"); got != 1 {
		t.Errorf("Before(y, b) = %d, want 1", got)
	}
	b.put("a", filing{}) // deleted
	b.file(toolscache.DeletedFinalStateUnknown{Obj: addr("c", "x")})
	if b.Len("y") != 1 || b.Len("x") != 1 {
		t.Errorf("after deletes: Len(y) %d, Len(x) %d; want 1 1 (a tombstone is not an object to file)", b.Len("y"), b.Len("x"))
	}
}
