// Command metallb-iad is the driver of IPAddressClasses whose provisioner is
// metallb.drivers.local.sdn.cozystack.io (contract §7): it allocates
// addresses from the MetalLB IPAddressPool a class names, holds every
// address in MetalLB's books with a placeholder Service, and pins addresses
// to the LoadBalancer Services that name their claims. See internal/driver.
package main
