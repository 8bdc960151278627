// Package manager tests the shipped cmd/manager binary against a real
// control plane: it elects a leader through a Lease, answers its probes,
// binds claims, auto-claims Services, and serves the core's metrics on a
// secure endpoint that authenticates and authorizes every scrape against
// the API server.
package manager
