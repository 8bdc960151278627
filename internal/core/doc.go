// Package core wires the class-agnostic core into a controller-runtime
// manager: the field indexes, the metrics and the claim, address, class and
// auto-claim reconcilers. cmd/manager, the tests and the benchmark all start the core
// through Setup (and build their manager with CacheOptions), so they run
// the same thing, auto-claim included.
package core
