// Package address is the core's IPAddress reconciler: contract §5 — address
// protection, validation, the core-owned phases (Pending, Available, Bound,
// Released), the safety-net reclaim of addresses whose claim vanished, and
// the class's releaseDelay. decide is a pure function from a snapshot (the
// address, the claim its claimRef names, its class, the time) to a plan;
// Reconciler gathers the snapshot and carries the plan out, confirming with a
// live read before it acts on a claim's absence.
package address
