package metallb

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Pools are read as MetalLB reads them: an entry only the driver refuses,
// or one MetalLB refuses too (it keeps what it had), never reads as MetalLB
// letting an address go; avoidBuggyIPs does.
func TestReadPools(t *testing.T) {
	named := func(name string, spec map[string]any) unstructured.Unstructured {
		p := pool(spec)
		p.SetName(name)
		return *p
	}
	ip, edge := netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("203.0.113.0")
	steps := []struct {
		name      string
		pool      map[string]any
		holds     bool
		holdsEdge bool
	}{
		{"read", map[string]any{"addresses": []any{"203.0.113.0/28"}}, true, true},
		{"an entry only the driver refuses", map[string]any{"addresses": []any{"203.0.113.0/28", "198.51.100.0/024"}}, true, true},
		{"an entry MetalLB refuses: as last read", map[string]any{"addresses": []any{"bogus"}}, true, true},
		{"avoidBuggyIPs", map[string]any{"addresses": []any{"203.0.113.0/28"}, "avoidBuggyIPs": true}, true, false},
		{"shrunk past it", map[string]any{"addresses": []any{"203.0.113.8/29"}}, false, false},
	}
	var c Classes
	if pools, _ := c.readPools([]unstructured.Unstructured{named("public", map[string]any{"addresses": []any{"bogus"}})}); len(pools) != 1 || pools[0].ranges != nil {
		t.Fatalf("a pool MetalLB refuses, never read before, is unknown: %v", pools)
	}
	for _, st := range steps {
		other := named("other", map[string]any{"addresses": []any{"198.51.100.0/28"}})
		pools, read := c.readPools([]unstructured.Unstructured{named("public", st.pool), other})
		c.lastRead = read
		if len(pools) != 2 || pools[0].name != "other" || pools[1].name != "public" {
			t.Fatalf("%s: pools %v, want other and public by name", st.name, pools)
		}
		if got := pools[1].holds(ip); got != st.holds {
			t.Errorf("%s: holds %s = %v, want %v", st.name, ip, got, st.holds)
		}
		if got := pools[1].holds(edge); got != st.holdsEdge {
			t.Errorf("%s: holds %s = %v, want %v", st.name, edge, got, st.holdsEdge)
		}
	}
	if pools, read := c.readPools(nil); len(pools) != 0 || len(read) != 0 {
		t.Fatalf("a deleted pool is forgotten: %v, %v", pools, read)
	}
}
