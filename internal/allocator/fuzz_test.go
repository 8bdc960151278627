package allocator

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"go4.org/netipx"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// A pool's spec.addresses comes from whoever edits MetalLB's pools; these
// targets feed ParseRanges such entries, and FirstFree and Count the sets
// it returns. Entries are one comma-separated string, capped so each
// execution stays small.

const maxEntries = 8

// fuzzEntries splits s into at most maxEntries entries.
func fuzzEntries(s string) []string {
	entries := strings.Split(s, ",")
	return entries[:min(maxEntries, len(entries))]
}

// mappedBlock is ::ffff:0:0/96, the IPv4-mapped IPv6 addresses no pool may
// reach into.
var mappedBlock = netipx.RangeOfPrefix(netip.MustParsePrefix("::ffff:0:0/96"))

func overlaps(a, b netipx.IPRange) bool {
	return a.From().BitLen() == b.From().BitLen() && a.From().Compare(b.To()) <= 0 && b.From().Compare(a.To()) <= 0
}

// spelledMapped reports whether entry, read on its own without
// ParseRanges, is a CIDR or a start-end range that reaches into the
// IPv4-mapped block.
func spelledMapped(entry string) bool {
	e := strings.TrimSpace(entry)
	if from, to, ok := strings.Cut(e, "-"); ok {
		f, ferr := netip.ParseAddr(strings.TrimSpace(from))
		t, terr := netip.ParseAddr(strings.TrimSpace(to))
		if ferr != nil || terr != nil || !f.Is6() || !t.Is6() || t.Less(f) {
			return false
		}
		return overlaps(netipx.IPRangeFrom(f.WithZone(""), t.WithZone("")), mappedBlock)
	}
	p, err := netip.ParsePrefix(e)
	return err == nil && p.Addr().Is6() && overlaps(netipx.RangeOfPrefix(p.Masked()), mappedBlock)
}

func addSeeds(f *testing.F) {
	for _, s := range []string{
		"192.0.2.0/24",
		"198.51.100.10-198.51.100.20,203.0.113.0/30",
		"2001:db8::/32",
		"100.64.0.0/10,2001:db8::/126",
		" 203.0.113.13 - 203.0.113.14 ,203.0.113.7/24",
		"::ffff:192.0.2.0/120",
		"::ffff:192.0.2.1-::ffff:192.0.2.9",
		"::/64",
		"192.0.2.10-192.0.2.1",
		"",
		"2001:db8::1-192.0.2.1",
		"203.0.113.0/30,bogus",
		"fe80::1%eth0-fe80::2%eth0",
		"0.0.0.0/0,::/0",
	} {
		f.Add(s, []byte{0, 1, 1, 2, 0x81, 0}, uint8(0))
		f.Add(s, []byte{0, 0, 0, 1, 0, 2, 0, 3}, uint8(1))
	}
}

// FuzzParseRanges: an entry list parses exactly when each entry parses on
// its own, the error names the first entry that does not, and the set is
// the union of the entries' sets: valid, single-family ranges, none in
// the IPv4-mapped block.
func FuzzParseRanges(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string, _ []byte, _ uint8) {
		entries := fuzzEntries(s)
		set, err := ParseRanges(entries)
		var union netipx.IPSetBuilder
		for i, e := range entries {
			one, oneErr := ParseRanges([]string{e})
			if spelledMapped(e) && oneErr == nil {
				t.Fatalf("entry %q reaches into ::ffff:0:0/96 and was accepted: %v", e, one.Ranges())
			}
			if oneErr != nil {
				prefix := fmt.Sprintf("addresses[%d] %q: ", i, e)
				if err == nil || !strings.HasPrefix(err.Error(), prefix) {
					t.Fatalf("%q fails alone (%v), the list gives %v; want an error starting %s", e, oneErr, err, prefix)
				}
				return
			}
			union.AddSet(one)
		}
		if err != nil {
			t.Fatalf("every entry of %q parses alone, the list fails: %v", entries, err)
		}
		want, _ := union.IPSet()
		if !slices.Equal(set.Ranges(), want.Ranges()) {
			t.Fatalf("set %v is not the union of its entries %v", set.Ranges(), want.Ranges())
		}
		for _, r := range set.Ranges() {
			switch {
			case !r.IsValid() || r.From().Is4() != r.To().Is4():
				t.Fatalf("invalid or mixed-family range %v", r)
			case r.From().Zone() != "" || r.To().Zone() != "":
				t.Fatalf("range with a zone %v", r)
			case overlaps(r, mappedBlock):
				t.Fatalf("range %v reaches into ::ffff:0:0/96", r)
			}
		}
	})
}

// fuzzUsed derives up to 16 used addresses from b, two bytes each, near the
// pool's ranges so they hit it: the first byte picks a range (and, high
// bit set, counts back from its end; 0x40 set, the other family's
// spelling of that address), the second the offset.
func fuzzUsed(pool *netipx.IPSet, b []byte) []netip.Addr {
	ranges := pool.Ranges()
	var used []netip.Addr
	for i := 0; i+1 < len(b) && len(used) < 16; i += 2 {
		if len(ranges) == 0 {
			used = append(used, netip.AddrFrom4([4]byte{192, 0, 2, b[i+1]}))
			continue
		}
		r := ranges[int(b[i]&0x3f)%len(ranges)]
		a, step := r.From(), netip.Addr.Next
		if b[i]&0x80 != 0 {
			a, step = r.To(), netip.Addr.Prev
		}
		for range b[i+1] {
			a = step(a)
		}
		if !a.IsValid() {
			continue
		}
		if b[i]&0x40 != 0 && a.Is4() {
			a = netip.AddrFrom16(a.As16()) // ::ffff:a.b.c.d: not the pool's IPv4 address
		}
		used = append(used, a)
	}
	return used
}

func fuzzFamily(b uint8) v1alpha1.IPFamily {
	if b%2 == 0 {
		return v1alpha1.IPv4
	}
	return v1alpha1.IPv6
}

func ofFamily(a netip.Addr, family v1alpha1.IPFamily) bool {
	return a.Is4() == (family == v1alpha1.IPv4)
}

// FuzzFirstFree: the address returned is in the pool, of the family, not
// used, and the smallest such; none is returned only when Count finds
// nothing available.
func FuzzFirstFree(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string, usedBytes []byte, fam uint8) {
		pool, err := ParseRanges(fuzzEntries(s))
		if err != nil {
			return
		}
		used, family := fuzzUsed(pool, usedBytes), fuzzFamily(fam)
		a, ok := FirstFree(pool, NewUsed(used), family)
		available := Count(pool, used, family).Available
		if !ok {
			if available.Sign() != 0 {
				t.Fatalf("no free %s address in %v with %v used, Count says %v available", family, pool.Ranges(), used, available)
			}
			return
		}
		switch {
		case !pool.Contains(a):
			t.Fatalf("%v is not in the pool %v", a, pool.Ranges())
		case !ofFamily(a, family):
			t.Fatalf("%v is not %s", a, family)
		case slices.Contains(used, a):
			t.Fatalf("%v is used: %v", a, used)
		case available.Sign() == 0:
			t.Fatalf("%v returned while Count says nothing is available", a)
		}
		// Every smaller address of the family in the pool is used: at most
		// len(used) of them, so walking them is cheap.
		steps := 0
		for _, r := range pool.Ranges() {
			if !ofFamily(r.From(), family) {
				continue
			}
			for b := r.From(); b.Less(a) && b.Compare(r.To()) <= 0; b = b.Next() {
				if steps++; steps > len(used) || !slices.Contains(used, b) {
					t.Fatalf("%v returned, but the smaller %v is free (pool %v, used %v)", a, b, pool.Ranges(), used)
				}
			}
		}
		// Taking it uses up exactly one more address.
		after := Count(pool, append(slices.Clone(used), a), family).Available
		if new(big.Int).Sub(available, after).Cmp(big.NewInt(1)) != 0 {
			t.Fatalf("taking %v moved Available from %v to %v", a, available, after)
		}
	})
}

// FuzzCount: per family, Total is the size of the family's ranges,
// Allocated the distinct used addresses inside them, Available the rest —
// never negative; and the two families together count the whole pool.
func FuzzCount(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string, usedBytes []byte, _ uint8) {
		pool, err := ParseRanges(fuzzEntries(s))
		if err != nil {
			return
		}
		used := fuzzUsed(pool, usedBytes)
		whole := new(big.Int)
		for _, r := range pool.Ranges() {
			whole.Add(whole, size(r))
		}
		total := new(big.Int)
		for _, family := range []v1alpha1.IPFamily{v1alpha1.IPv4, v1alpha1.IPv6} {
			c := Count(pool, used, family)
			inPool := map[netip.Addr]bool{}
			for _, a := range used {
				if pool.Contains(a) && ofFamily(a, family) {
					inPool[a] = true
				}
			}
			switch {
			case c.Allocated.Cmp(big.NewInt(int64(len(inPool)))) != 0:
				t.Fatalf("%s: Allocated %v, but %d distinct used addresses are in the pool", family, c.Allocated, len(inPool))
			case c.Available.Sign() < 0 || c.Allocated.Cmp(c.Total) > 0:
				t.Fatalf("%s: Allocated %v exceeds Total %v", family, c.Allocated, c.Total)
			case new(big.Int).Add(c.Allocated, c.Available).Cmp(c.Total) != 0:
				t.Fatalf("%s: %v allocated + %v available != %v total", family, c.Allocated, c.Available, c.Total)
			}
			total.Add(total, c.Total)
		}
		if total.Cmp(whole) != 0 {
			t.Fatalf("the families count %v addresses, the pool %v holds %v", total, pool.Ranges(), whole)
		}
	})
}
