package index

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		b.File(a)
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
	b.File(addr("a", "y")) // moves
	if got := b.First("y", 1); !slices.Equal(got, []string{"a"}) || b.Len("x") != 1 {
		t.Errorf("after a move: First(y,1) = %v, Len(x) = %d", got, b.Len("x"))
	}
	if got := b.Before("y", "b"); got != 1 {
		t.Errorf("Before(y, b) = %d, want 1", got)
	}
	b.put("a", filing{}) // deleted
	if b.Len("y") != 1 || b.Len("x") != 1 {
		t.Errorf("after a delete: Len(y) %d, Len(x) %d; want 1 1", b.Len("y"), b.Len("x"))
	}
}

// A Tally counts each object under every key it has, moves it when its
// keys change and forgets it when it has none or is deleted.
func TestTally(t *testing.T) {
	keys := func(o client.Object) []string {
		a := o.(*v1alpha1.IPAddress)
		if a.Spec.ClassName == "" {
			return nil
		}
		return []string{a.Spec.ClassName, a.Spec.ClassName + "/" + string(a.Status.Phase)}
	}
	addr := func(name, class string, phase v1alpha1.AddressPhase) *v1alpha1.IPAddress {
		return &v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.IPAddressSpec{ClassName: class},
			Status: v1alpha1.IPAddressStatus{Phase: phase}}
	}
	tl := NewTally(keys)
	want := func(step string, counts map[string]int) {
		t.Helper()
		for k, n := range counts {
			if got := tl.Len(k); got != n {
				t.Errorf("%s: Len(%q) = %d, want %d", step, k, got, n)
			}
		}
	}
	for _, a := range []*v1alpha1.IPAddress{addr("a", "x", "Available"), addr("b", "x", "Available"), addr("c", "y", "Bound"), addr("d", "", "")} {
		tl.File(a)
	}
	want("1 filed", map[string]int{"x": 2, "x/Available": 2, "y": 1, "y/Bound": 1, "": 0, "/": 0})
	tl.File(addr("a", "x", "Bound"))
	want("2 a phase changes", map[string]int{"x": 2, "x/Available": 1, "x/Bound": 1})
	tl.File(addr("a", "x", "Bound"))
	want("3 the same keys again count once", map[string]int{"x": 2, "x/Bound": 1})
	tl.File(addr("b", "", ""))
	want("4 keys gone", map[string]int{"x": 1, "x/Available": 0})
	tl.put("c", nil)
	want("5 deleted", map[string]int{"y": 0, "y/Bound": 0})
	if len(tl.counts) != 2 || len(tl.of) != 1 {
		t.Errorf("6 nothing left of what went: counts %v, %d filed", tl.counts, len(tl.of))
	}
}

// A map a burst filled is made anew once it holds a quarter of its peak,
// with what it still holds.
func TestShrunk(t *testing.T) {
	m, peak := map[string]int{}, 0
	for i := range 2 * shrinkPast {
		m[string(rune('a'+i%26))+fmt.Sprint(i)] = i
		peak = max(peak, len(m))
	}
	for k := range m {
		if len(m) < shrinkPast/2 {
			break
		}
		delete(m, k)
		if m2 := shrunk(m, &peak); len(m2) != len(m) {
			t.Fatalf("shrunk lost entries: %d of %d", len(m2), len(m))
		} else {
			m = m2
		}
	}
	if peak > shrinkPast/2 {
		t.Errorf("peak %d with %d left of %d, want it made anew at a quarter", peak, len(m), 2*shrinkPast)
	}
	small, p := map[string]int{"a": 1}, 10
	if got := shrunk(small, &p); p != 10 || len(got) != 1 {
		t.Errorf("a small map was made anew")
	}
}
