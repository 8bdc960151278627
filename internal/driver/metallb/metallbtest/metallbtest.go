// Package metallbtest holds what the MetalLB driver's unit tests share.
package metallbtest

import (
	"net/netip"

	"go4.org/netipx"

	"github.com/cozystack/address-controller/internal/driver/metallb"
)

// Class is class "public", accepted, its IPAddressPool "public" spanning
// the given prefixes.
func Class(prefixes ...string) metallb.Class {
	var b netipx.IPSetBuilder
	for _, p := range prefixes {
		b.AddPrefix(netip.MustParsePrefix(p))
	}
	set, _ := b.IPSet()
	return metallb.Class{Name: "public", PoolName: "public", PoolFound: true, Ranges: set}
}
