// Package hold is the metallb-iad driver's per-address reconciler: contract
// §7 obligations 4 to 6. It keeps every address of the driver's classes in
// MetalLB's books — on a placeholder Service while it is attached to
// nothing, on the tenant's Service while a Service names its claim — hands
// it from one to the other without a gap, detects Conflict and Lost, and
// tears the hold down when the address is deleted. decide is pure (address,
// claim, Services → writes); Reconciler gathers from the cache and writes.
package hold
