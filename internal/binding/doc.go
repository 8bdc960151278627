// Package binding holds the pure rules that both sides of a binding share:
// which addresses a claim holds (contract §4 step 3), the family of an
// address, and how the core records one of its own phases on an address
// together with the Bound condition that dates it (§5 step 7). It has no
// client; reconcilers call it on objects they already have.
package binding
