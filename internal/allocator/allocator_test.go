package allocator

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"go4.org/netipx"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestParseRanges(t *testing.T) {
	tests := []struct {
		entries []string
		want    string // the set's ranges, or the error's text
	}{
		{[]string{"203.0.113.0/30"}, "[203.0.113.0-203.0.113.3]"},
		{[]string{"203.0.113.10-203.0.113.12", "203.0.113.13 - 203.0.113.14"}, "[203.0.113.10-203.0.113.14]"},
		{[]string{"2001:db8::/126", "2001:db8::10-2001:db8::11"}, "[2001:db8::-2001:db8::3 2001:db8::10-2001:db8::11]"},
		{[]string{"203.0.113.7/24"}, "[203.0.113.0-203.0.113.255]"},
		{[]string{"203.0.113.0/30", "bogus"}, `addresses[1] "bogus": neither a CIDR nor a start-end range`},
		{[]string{"203.0.113.9-203.0.113.1"}, `addresses[0] "203.0.113.9-203.0.113.1"`},
		{[]string{"203.0.113.1-2001:db8::1"}, `addresses[0] "203.0.113.1-2001:db8::1"`},
		// IPv4-mapped IPv6: in CIDR or range spelling, or a wider entry
		// reaching into the block, refused with the entry named.
		{[]string{"2001:db8::/64", "::ffff:192.0.2.0/120"}, `addresses[1] "::ffff:192.0.2.0/120": reaches into ::ffff:0:0/96`},
		{[]string{"::ffff:192.0.2.1-::ffff:192.0.2.9"}, `addresses[0] "::ffff:192.0.2.1-::ffff:192.0.2.9": reaches into`},
		{[]string{"::/64"}, `addresses[0] "::/64": reaches into`},
		{[]string{"::fffe:ffff:ffff-::ffff:0:0"}, `addresses[0] "::fffe:ffff:ffff-::ffff:0:0": reaches into`},
		{[]string{"::fffe:0:0/96", "::1:0:0:0/96"}, "[::fffe:0:0-::fffe:ffff:ffff ::1:0:0:0-::1:0:ffff:ffff]"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.entries, ","), func(t *testing.T) { checkParse(t, ParseRanges, tc.entries, tc.want) })
	}
}

// checkParse: parse's set of entries, or its error, begins with want.
func checkParse(t *testing.T, parse func([]string) (*netipx.IPSet, error), entries []string, want string) {
	t.Helper()
	set, err := parse(entries)
	got := ""
	if err != nil {
		got = err.Error()
	} else {
		got = fmt.Sprint(set.Ranges())
	}
	if !strings.HasPrefix(got, want) {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// MetalLB reads entries with package net: what it holds is wider than
// what the driver allocates from, never narrower.
func TestParseRangesAsMetalLB(t *testing.T) {
	tests := []struct {
		entries []string
		want    string // the set's ranges, or the error's text
	}{
		{[]string{"203.0.113.0/30", "203.0.113.10 - 203.0.113.12"}, "[203.0.113.0-203.0.113.3 203.0.113.10-203.0.113.12]"},
		{[]string{"2001:db8::/126"}, "[2001:db8::-2001:db8::3]"},
		{[]string{"198.51.100.0/030"}, "[198.51.100.0-198.51.100.3]"},
		{[]string{"::ffff:198.51.100.0/126"}, "[198.51.100.0-198.51.100.3]"},
		{[]string{"::ffff:198.51.100.1-::ffff:198.51.100.2"}, "[198.51.100.1-198.51.100.2]"},
		{[]string{"203.0.113.0/30", "bogus"}, `addresses[1] "bogus"`},
		{[]string{"203.0.113.9-203.0.113.1"}, `addresses[0] "203.0.113.9-203.0.113.1": not a valid range`},
		{[]string{"203.0.113.1-2001:db8::1"}, `addresses[0] "203.0.113.1-2001:db8::1": not a valid range`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.entries, ","), func(t *testing.T) { checkParse(t, ParseRangesAsMetalLB, tc.entries, tc.want) })
	}
}

// TestFirstFree is a sequence over one pool, as allocations accumulate.
func TestFirstFree(t *testing.T) {
	pool, err := ParseRanges([]string{"203.0.113.0/30", "203.0.113.8-203.0.113.9", "2001:db8::/127"})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		used   []netip.Addr
		family v1alpha1.IPFamily
		want   string
	}{
		{"empty pool gives its smallest IPv4", nil, v1alpha1.IPv4, "203.0.113.0"},
		{"a used address is skipped", addrs("203.0.113.0"), v1alpha1.IPv4, "203.0.113.1"},
		{"gaps fill before the next range", addrs("203.0.113.0", "203.0.113.2"), v1alpha1.IPv4, "203.0.113.1"},
		{"a full range moves to the next", addrs("203.0.113.0", "203.0.113.1", "203.0.113.2", "203.0.113.3"), v1alpha1.IPv4, "203.0.113.8"},
		{"used addresses outside the pool do not matter", addrs("198.51.100.1"), v1alpha1.IPv4, "203.0.113.0"},
		{"IPv6 from the IPv6 ranges only", addrs("203.0.113.0"), v1alpha1.IPv6, "2001:db8::"},
		{"exhausted family", addrs("2001:db8::", "2001:db8::1"), v1alpha1.IPv6, "none"},
	}
	for _, s := range steps {
		got := "none"
		if a, ok := FirstFree(pool, NewUsed(s.used), s.family); ok {
			got = a.String()
		}
		if got != s.want {
			t.Errorf("%s: got %s, want %s", s.name, got, s.want)
		}
	}
}

func TestCount(t *testing.T) {
	pool, err := ParseRanges([]string{"203.0.113.0/24", "2001:db8::/64"})
	if err != nil {
		t.Fatal(err)
	}
	used := addrs("203.0.113.1", "203.0.113.1", "198.51.100.1", "2001:db8::5")
	for _, tc := range []struct {
		family                      v1alpha1.IPFamily
		total, allocated, available string
	}{
		{v1alpha1.IPv4, "256", "1", "255"},
		{v1alpha1.IPv6, "18446744073709551616", "1", "18446744073709551615"},
	} {
		c := Count(pool, used, tc.family)
		if c.Total.String() != tc.total || c.Allocated.String() != tc.allocated || c.Available.String() != tc.available {
			t.Errorf("%s: %v/%v/%v, want %s/%s/%s", tc.family, c.Total, c.Allocated, c.Available, tc.total, tc.allocated, tc.available)
		}
	}
}

// Addresses taken since the sorted ones were listed (Add), alone and
// once merged, are skipped like the rest; runs that end a family's address
// space end the search.
func TestFirstFreeWithAdded(t *testing.T) {
	pool, err := ParseRanges([]string{"203.0.113.0/28", "2001:db8::/126", "255.255.255.254/31"})
	if err != nil {
		t.Fatal(err)
	}
	used := NewUsed(addrs("203.0.113.0", "203.0.113.1", "203.0.113.1", "203.0.113.3"))
	for i, want := range []string{"203.0.113.2", "203.0.113.4", "203.0.113.5"} {
		a, ok := FirstFree(pool, used, v1alpha1.IPv4)
		if !ok || a.String() != want {
			t.Fatalf("allocation %d: got %v %v, want %s", i, a, ok, want)
		}
		used.Add(a)
	}
	for range mergeAt { // past the merge, the sorted ones hold them
		a, _ := FirstFree(pool, used, v1alpha1.IPv6)
		used.Add(a)
		if used.Len() > 10 {
			break
		}
	}
	if a, ok := FirstFree(pool, used, v1alpha1.IPv6); ok {
		t.Errorf("the IPv6 /126 is used up, got %v", a)
	}
	top := NewUsed(addrs("255.255.255.254", "255.255.255.255"))
	if a, ok := top.nextFree(netip.MustParseAddr("255.255.255.254")); ok {
		t.Errorf("past the end of IPv4: got %v", a)
	}
}

// Free counts per family, over every range, the taken addresses inside
// the pool only — sorted and added alike — up to its limit, and copes with
// a /64.
func TestFree(t *testing.T) {
	pool, err := ParseRanges([]string{"203.0.113.0/30", "198.51.100.8/31", "2001:db8::/64"})
	if err != nil {
		t.Fatal(err)
	}
	used := NewUsed(addrs("203.0.113.0", "203.0.113.2", "192.0.2.1", "2001:db8::1"))
	used.Add(netip.MustParseAddr("198.51.100.9"))
	for _, tc := range []struct {
		family      v1alpha1.IPFamily
		limit, want int
	}{
		{v1alpha1.IPv4, 0, 0},
		{v1alpha1.IPv4, 2, 2},
		{v1alpha1.IPv4, 10, 3}, // .1 and .3 of the /30, .8 of the /31
		{v1alpha1.IPv6, 1 << 40, 1 << 40},
	} {
		if got := Free(pool, used, tc.family, tc.limit); got != tc.want {
			t.Errorf("%s, up to %d: got %d, want %d", tc.family, tc.limit, got, tc.want)
		}
	}
}

// BenchmarkFirstFree: one allocation in a pool with 65,536 addresses in
// use — a /16 used up but its last, and the first 65,536 of a /64 —
// against a /24 with 200 in use. The cost follows the runs of taken
// addresses stepped over, not the count in use (target ≤ 100 µs).
func BenchmarkFirstFree(b *testing.B) {
	for _, pc := range []struct {
		cidr   string
		family v1alpha1.IPFamily
		inUse  int
	}{
		{"100.64.0.0/24", v1alpha1.IPv4, 200},
		{"100.64.0.0/16", v1alpha1.IPv4, 65535},
		{"100.64.0.0/16", v1alpha1.IPv4, 65536}, // used up: the search that finds nothing
		{"2001:db8::/64", v1alpha1.IPv6, 65536},
	} {
		pool, err := ParseRanges([]string{pc.cidr})
		if err != nil {
			b.Fatal(err)
		}
		ips := make([]netip.Addr, 0, pc.inUse)
		a := netip.MustParsePrefix(pc.cidr).Addr()
		for range pc.inUse {
			ips = append(ips, a)
			a = a.Next()
		}
		used := NewUsed(ips)
		b.Run(fmt.Sprintf("%s/%d-used", pc.cidr, pc.inUse), func(b *testing.B) {
			full := pc.inUse == 65536 && pc.family == v1alpha1.IPv4
			for b.Loop() {
				if _, ok := FirstFree(pool, used, pc.family); ok == full {
					b.Fatalf("found a free address: %v, want %v", ok, !full)
				}
			}
		})
	}
}

// BenchmarkNewUsed: preparing 65,536 addresses in use, in no order — what
// the driver pays when it lists a class's taken addresses again (at most
// every half second while it provisions), not per allocation.
func BenchmarkNewUsed(b *testing.B) {
	ips := make([]netip.Addr, 0, 65536)
	a := netip.MustParseAddr("100.64.0.0")
	for range 65536 {
		ips = append(ips, a)
		a = a.Next()
	}
	for i := range ips { // a fixed shuffle: reverse pairs of halves
		j := len(ips) - 1 - i
		if i < j && i%2 == 0 {
			ips[i], ips[j] = ips[j], ips[i]
		}
	}
	for b.Loop() {
		NewUsed(ips)
	}
}
