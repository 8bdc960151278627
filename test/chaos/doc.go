// Package chaos is the proof, under faults, of what users of a controller
// that owns their public addresses need most: no address bound twice, no
// reserved address unheld, no attached Service losing its address, and
// everything converging with nothing leaked (docs/chaos.md).
//
// It owns the Ledger (ledger.go): the invariants, judged on the watch
// events of claims, addresses and Services in the order etcd made them,
// each violation counted. Its tests run the shipped binaries against it:
// TestChaos (make chaos; a bounded run in make test) under seeded churn
// and faults — the system (system_test.go), the workload, the faults, the
// feed of watch events, quiescence — and TestCrashPoints, which kills the
// binary carrying out each write sequence right after each of its writes
// (crashpoints_test.go, through the proxy in proxy_test.go).
package chaos
