// Package claim is the core's IPAddressClaim reconciler: contract §4 (bind)
// and §6 (reclaim). decide is a pure function from a snapshot — the claim,
// the addresses naming it, its candidates and the classes — to a plan of
// writes; Reconciler gathers the snapshot from the cache and carries out the
// plan. It also runs the matcher that wakes pending claims when addresses of
// their class become Available, without fanning out to every pending claim.
package claim
