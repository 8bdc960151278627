// Package driver assembles the metallb-iad driver: its indexes, cache
// options, metrics and the three reconcilers (pool, provision, hold), as
// package core assembles the core. cmd/metallb-iad is a thin main over it.
package driver
