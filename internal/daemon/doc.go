// Package daemon is what cmd/manager and cmd/metallb-iad share: the flags
// every controller process takes (leader election, metrics, probes,
// pprof, API client limits, logging) and building a controller-runtime
// manager from them with health and readiness checks.
package daemon
