// Package retry owns how a reconciler runs a pass again after losing a
// race — a write conflict, a name taken, a cache behind the reconciler's own
// last write: through the workqueue's per-item exponential backoff, which
// the next successful pass of the item forgets, never a fixed short delay
// that would turn a lasting conflict into a hot loop. A refusal the pass has
// already told on the object as an Event (Told) is retried the same way,
// without being logged again at every retry.
package retry
