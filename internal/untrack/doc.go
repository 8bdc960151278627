// Package untrack owns the project's choice to keep claims and addresses
// free of field tracking (metadata.managedFields) when nobody applies them
// server-side.
//
// The API server records, for each client that writes an object, which
// fields it set: on a bound address that record is larger than the rest of
// the object, and the API server decodes, updates and re-encodes it on
// every write, and keeps it in its watch cache. A claim's bind is three
// writes; at a /16 the cache holds 131,072 of these objects. Without the
// record a bind costs the API server about a fifth less CPU.
//
// An object left without the record stays without it: the API server adds
// an entry on an update only to an object that has one already. So the
// record is dropped once — at admission for the claims and the addresses
// the webhooks see, at the core's first write of an address's claimRef
// for the rest — and never again written. An object that carries a
// server-side apply entry keeps its record whole: an applier's ownership
// is what decides which fields its next apply removes.
package untrack
