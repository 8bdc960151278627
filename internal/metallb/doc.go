// Package metallb is the metallb-iad driver's vocabulary: the provisioner
// name, the driver's own annotations, labels and finalizers, MetalLB's
// Service annotations, and the pure reading of a class's MetalLB
// IPAddressPool (accepted or refused, and why). It holds no client.
package metallb
