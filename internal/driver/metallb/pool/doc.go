// Package pool is the metallb-iad driver's class reconciler: it judges each
// class of the driver against the MetalLB IPAddressPool it names (accepted,
// or refused with a PoolRefused event and a Ready=False condition that the
// core relays to waiting claims) and reports the class's capacity per
// family as class status and as metrics. decide is pure; Reconciler reads
// the cache, throttles capacity-only status writes, and exports gauges.
package pool
