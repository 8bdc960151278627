// Package metallb is the metallb-iad driver's vocabulary: the provisioner
// name, the driver's own annotations, labels and finalizers, MetalLB's
// Service annotations, and the pure reading of a class's MetalLB
// IPAddressPool (accepted or refused, and why); and the reads the driver's
// reconcilers share through a client: the Service indexes, the books of
// taken addresses (Books) and the judged classes (Classes).
package metallb
