// Package index owns the cache's field indexes. Every lookup the core makes
// at scale goes through one of them, so no pass lists all addresses or all
// claims: addresses by claimRef, by pool (class, family, phase), by class
// and phase; claims by the pool they wait on, by the address they
// pre-bind, and by an unresolved class; LoadBalancer Services that name no claim.
// It also maps watch events to the requests they concern (Requests,
// AddressesOfClaim, WaitingOnClass, ClaimLifecycle), and keeps Books:
// ordered sets per key fed by informer events, for the questions an index
// answers only with a copied list — how many, the smallest, how many
// before — asked on every pass.
package index
