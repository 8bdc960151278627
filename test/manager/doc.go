// Package manager tests the shipped binaries against a real control plane.
// cmd/manager: it elects a leader through a Lease, answers its probes,
// binds claims, auto-claims Services, and serves the core's metrics on a
// secure endpoint that authenticates and authorizes every scrape against
// the API server. cmd/metallb-iad, next to the core and MetalLB's
// controller, each as its own ServiceAccount holding exactly its generated
// ClusterRole: it provisions, holds and attaches addresses and exports the
// class gauges.
package manager
