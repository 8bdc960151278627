// Package layout holds the test that keeps the house's import direction:
// the class-agnostic core (internal/core/..., cmd/manager) never depends on
// a driver (internal/driver/..., cmd/metallb-iad), no driver depends on the
// core, and the shared floor (the other internal packages and api/) depends
// on neither wing.
package layout
