package allocator

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"sort"
)

// Used is a set of taken addresses prepared for first-free searches: a
// sorted copy listed once (NewUsed), plus the few taken since (Add). A
// search costs a binary search per run of consecutive taken addresses it
// steps over — the runs an allocator from the bottom leaves are long — not
// a walk over every address in use.
type Used struct {
	sorted []netip.Addr
	added  map[netip.Addr]bool
}

// mergeAt is how many added addresses Add keeps apart before it merges
// them into the sorted ones.
const mergeAt = 64

// NewUsed prepares addrs (in any order, duplicates allowed).
func NewUsed(addrs []netip.Addr) *Used {
	sorted := slices.Clone(addrs)
	slices.SortFunc(sorted, netip.Addr.Compare)
	return &Used{sorted: slices.Compact(sorted), added: map[netip.Addr]bool{}}
}

// Add marks a taken.
func (u *Used) Add(a netip.Addr) {
	if u.Contains(a) {
		return
	}
	u.added[a] = true
	if len(u.added) < mergeAt {
		return
	}
	for a := range u.added {
		u.sorted = append(u.sorted, a)
	}
	slices.SortFunc(u.sorted, netip.Addr.Compare)
	clear(u.added)
}

// Contains reports whether a is taken.
func (u *Used) Contains(a netip.Addr) bool {
	_, found := slices.BinarySearchFunc(u.sorted, a, netip.Addr.Compare)
	return found || u.added[a]
}

// Len is how many addresses are taken.
func (u *Used) Len() int { return len(u.sorted) + len(u.added) }

// nextFree is the smallest address from a on that is not taken; false when
// the address space of a's family ends first.
func (u *Used) nextFree(a netip.Addr) (netip.Addr, bool) {
	for {
		i := sort.Search(len(u.sorted), func(i int) bool { return u.sorted[i].Compare(a) >= 0 })
		if i < len(u.sorted) && u.sorted[i] == a {
			// The run of consecutive taken addresses from a: sorted[i+k] is
			// a+k up to its last element, found by binary search.
			n := sort.Search(len(u.sorted)-i, func(k int) bool {
				want, ok := add(a, uint64(k))
				return !ok || u.sorted[i+k] != want
			})
			last := u.sorted[i+n-1]
			if a = last.Next(); !a.IsValid() || a.BitLen() != last.BitLen() {
				return netip.Addr{}, false
			}
			continue
		}
		if !u.added[a] {
			return a, true
		}
		if a = a.Next(); !a.IsValid() {
			return netip.Addr{}, false
		}
	}
}

// add is a+k within a's family; false past its end.
func add(a netip.Addr, k uint64) (netip.Addr, bool) {
	if a.Is4() {
		b := a.As4()
		v := uint64(binary.BigEndian.Uint32(b[:])) + k
		if v > 1<<32-1 {
			return netip.Addr{}, false
		}
		binary.BigEndian.PutUint32(b[:], uint32(v))
		return netip.AddrFrom4(b), true
	}
	b := a.As16()
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	sum := lo + k
	if sum < lo {
		if hi == 1<<64-1 {
			return netip.Addr{}, false
		}
		hi++
	}
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], sum)
	return netip.AddrFrom16(b), true
}

// within counts the taken addresses from..to (inclusive), both of one family.
func (u *Used) within(from, to netip.Addr) int {
	lo := sort.Search(len(u.sorted), func(i int) bool { return u.sorted[i].Compare(from) >= 0 })
	hi := sort.Search(len(u.sorted), func(i int) bool { return u.sorted[i].Compare(to) > 0 })
	n := hi - lo
	for a := range u.added {
		if a.Compare(from) >= 0 && a.Compare(to) <= 0 {
			n++
		}
	}
	return n
}
