package allocator

import (
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"

	"go4.org/netipx"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// ParseRanges builds the set of addresses a pool's ranges cover. Each entry
// is a CIDR ("203.0.113.0/24", "2001:db8::/64") or an inclusive range
// ("203.0.113.10-203.0.113.20"), as MetalLB's IPAddressPool.spec.addresses
// takes them; the error names the entry that is not. An entry reaching into
// the IPv4-mapped block ::ffff:0:0/96 is refused: such an address is an
// IPv4 address in IPv6 spelling, whose family and name would disagree with
// the IPv4 address it stands for, so no address object could be made of it.
func ParseRanges(entries []string) (*netipx.IPSet, error) {
	var b netipx.IPSetBuilder
	for i, e := range entries {
		r, err := parseRange(strings.TrimSpace(e))
		if err == nil && overlapsMapped(r) {
			err = fmt.Errorf("reaches into ::ffff:0:0/96, IPv4-mapped IPv6 addresses: write IPv4 addresses as IPv4")
		}
		if err != nil {
			return nil, fmt.Errorf("addresses[%d] %q: %w", i, e, err)
		}
		b.AddRange(r)
	}
	return b.IPSet()
}

// ParseRangesAsMetalLB builds the set of addresses MetalLB itself reads in a
// pool's entries, which is wider than ParseRanges accepts: MetalLB parses
// with package net, so a prefix length may carry leading zeros
// ("198.51.100.0/024") and an IPv4-mapped entry stands for the IPv4
// addresses it maps. ParseRanges refuses such a pool for allocation (its
// addresses could not be named); this answers only what MetalLB can hold,
// so an entry only the driver refuses never reads as the pool letting go.
// An entry MetalLB refuses too is an error: MetalLB then keeps the
// configuration it had.
func ParseRangesAsMetalLB(entries []string) (*netipx.IPSet, error) {
	var b netipx.IPSetBuilder
	for i, e := range entries {
		r, err := parseRangeAsMetalLB(e)
		if err != nil {
			return nil, fmt.Errorf("addresses[%d] %q: %w", i, e, err)
		}
		b.AddRange(r)
	}
	return b.IPSet()
}

func parseRangeAsMetalLB(e string) (netipx.IPRange, error) {
	from, to, isRange := strings.Cut(e, "-")
	if !isRange {
		_, n, err := net.ParseCIDR(e)
		if err != nil {
			return netipx.IPRange{}, err
		}
		addr, _ := netip.AddrFromSlice(n.IP)
		ones, _ := n.Mask.Size()
		if addr.Is4In6() && ones >= 96 {
			addr, ones = addr.Unmap(), ones-96
		}
		return netipx.RangeOfPrefix(netip.PrefixFrom(addr, ones).Masked()), nil
	}
	start, okStart := netipx.FromStdIP(net.ParseIP(strings.TrimSpace(from)))
	end, okEnd := netipx.FromStdIP(net.ParseIP(strings.TrimSpace(to)))
	r := netipx.IPRangeFrom(start, end)
	if !okStart || !okEnd || !r.IsValid() {
		return netipx.IPRange{}, fmt.Errorf("not a valid range")
	}
	return r, nil
}

// mapped is the block of IPv4-mapped IPv6 addresses.
var mapped = netip.MustParsePrefix("::ffff:0:0/96")

func overlapsMapped(r netipx.IPRange) bool {
	m := netipx.RangeOfPrefix(mapped)
	return r.From().Is6() && r.From().Compare(m.To()) <= 0 && m.From().Compare(r.To()) <= 0
}

func parseRange(e string) (netipx.IPRange, error) {
	if from, to, ok := strings.Cut(e, "-"); ok {
		r, err := netipx.ParseIPRange(strings.TrimSpace(from) + "-" + strings.TrimSpace(to))
		if err != nil {
			return netipx.IPRange{}, err
		}
		if !r.IsValid() {
			return netipx.IPRange{}, fmt.Errorf("not a valid range: start after end, or families differ")
		}
		return r, nil
	}
	p, err := netip.ParsePrefix(e)
	if err != nil {
		return netipx.IPRange{}, fmt.Errorf("neither a CIDR nor a start-end range")
	}
	return netipx.RangeOfPrefix(p.Masked()), nil
}

// FirstFree returns the smallest address of family in pool that is not
// used, and false when there is none. used may hold addresses outside the
// pool. Its cost grows with the runs of taken addresses it steps over
// (a binary search each), not with the pool nor with the addresses in use.
func FirstFree(pool *netipx.IPSet, used *Used, family v1alpha1.IPFamily) (netip.Addr, bool) {
	for _, r := range pool.Ranges() {
		if familyOf(r.From()) != family {
			continue
		}
		if a, ok := used.nextFree(r.From()); ok && a.Compare(r.To()) <= 0 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Free counts the addresses of family in pool that are not used, up to
// limit: by binary search per range, never a walk over the free addresses,
// so a line of thousands costs what a line of one does.
func Free(pool *netipx.IPSet, used *Used, family v1alpha1.IPFamily, limit int) int {
	free, want := new(big.Int), big.NewInt(int64(limit))
	for _, r := range pool.Ranges() {
		if familyOf(r.From()) != family {
			continue
		}
		free.Add(free, size(r))
		free.Sub(free, big.NewInt(int64(used.within(r.From(), r.To()))))
		if free.Cmp(want) >= 0 {
			return limit
		}
	}
	return int(free.Int64())
}

// Capacity is a pool's size and use, per family.
type Capacity struct {
	// Total, Allocated and Available count addresses; an IPv6 pool may hold
	// more than any machine integer, hence big.Int.
	Total, Allocated, Available *big.Int
}

// Count counts the addresses of family in pool, and those of used inside it.
func Count(pool *netipx.IPSet, used []netip.Addr, family v1alpha1.IPFamily) Capacity {
	c := Capacity{Total: new(big.Int), Allocated: new(big.Int)}
	for _, r := range pool.Ranges() {
		if familyOf(r.From()) == family {
			c.Total.Add(c.Total, size(r))
		}
	}
	seen := map[netip.Addr]bool{}
	for _, a := range used {
		if familyOf(a) == family && pool.Contains(a) && !seen[a] {
			seen[a] = true
			c.Allocated.Add(c.Allocated, big.NewInt(1))
		}
	}
	c.Available = new(big.Int).Sub(c.Total, c.Allocated)
	return c
}

func size(r netipx.IPRange) *big.Int {
	from, to := new(big.Int).SetBytes(r.From().AsSlice()), new(big.Int).SetBytes(r.To().AsSlice())
	return to.Sub(to, from).Add(to, big.NewInt(1))
}

func familyOf(a netip.Addr) v1alpha1.IPFamily {
	if a.Is4() {
		return v1alpha1.IPv4
	}
	return v1alpha1.IPv6
}
