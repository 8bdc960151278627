// Package index owns the cache's field indexes. Every lookup the core makes
// at scale goes through one of them, so no pass lists all addresses or all
// claims: addresses by claimRef, by pool (class, family, phase), by class
// and phase, by IP; claims by the pool they wait on, by the address they
// pre-bind, and by an unresolved class; LoadBalancer Services that name no claim.
package index
