package v1alpha1

import (
	"fmt"
	"net/netip"
	"strings"
)

// IPAddressName derives the name of the IPAddress object that records ip:
// "ip-" + the canonical text of the IP (RFC 5952 for IPv6) with '.' and ':'
// replaced by '-', and "0" appended when that would end in '-'. One object per
// IP is enforced by the API server's name uniqueness on exactly this value, so
// input that is not already canonical, carries a zone or is an IPv4-mapped IPv6
// address is rejected rather than normalised: two spellings of one IP must
// never name two objects.
func IPAddressName(ip string) (string, error) {
	addr, err := ParseCanonicalIP(ip)
	if err != nil {
		return "", err
	}
	name := "ip-" + strings.NewReplacer(".", "-", ":", "-").Replace(addr.String())
	if strings.HasSuffix(name, "-") {
		name += "0"
	}
	return name, nil
}

// IPOfAddressName is the IP an IPAddress named name records, the inverse of
// IPAddressName; ok is false for a name IPAddressName never derives, which
// no IPAddress can have.
func IPOfAddressName(name string) (ip netip.Addr, ok bool) {
	rest, found := strings.CutPrefix(name, "ip-")
	if !found {
		return netip.Addr{}, false
	}
	for _, sep := range []string{".", ":"} {
		addr, err := netip.ParseAddr(strings.ReplaceAll(rest, "-", sep))
		if err != nil {
			continue
		}
		if derived, err := IPAddressName(addr.String()); err == nil && derived == name {
			return addr, true
		}
	}
	return netip.Addr{}, false
}

// ParseCanonicalIP parses ip and accepts it only in canonical form, without a
// zone and not IPv4-mapped.
func ParseCanonicalIP(ip string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(ip)
	switch {
	case err != nil:
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", ip)
	case addr.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q has a zone; an IPAddress records an IP without one", ip)
	case addr.Is4In6():
		return netip.Addr{}, fmt.Errorf("%q is an IPv4-mapped IPv6 address; write it as IPv4", ip)
	case addr.String() != ip:
		return netip.Addr{}, fmt.Errorf("%q is not in canonical form; write it as %q", ip, addr.String())
	}
	return addr, nil
}

// FamilyOf returns the family of a canonical IP, or "" when ip is not one.
func FamilyOf(ip string) IPFamily {
	addr, err := ParseCanonicalIP(ip)
	switch {
	case err != nil:
		return ""
	case addr.Is4():
		return IPv4
	default:
		return IPv6
	}
}

// Families expands a claim's family into the concrete families it binds.
func (f IPFamily) Families() []IPFamily {
	switch f {
	case Dual:
		return []IPFamily{IPv4, IPv6}
	case "":
		return []IPFamily{IPv4}
	default:
		return []IPFamily{f}
	}
}
