// Package chaos is the proof, under faults, of what users of a controller
// that owns their public addresses need most: no address bound twice, no
// reserved address unheld, no attached Service losing its address, and
// everything converging with nothing leaked.
//
// It owns the Ledger: the invariants, judged on the watch events of claims,
// addresses and Services in the order they happened, each violation
// counted. The harness that runs the shipped binaries through churn and
// faults and feeds the Ledger (make chaos) builds on it.
package chaos
