// Package core wires the class-agnostic core into a controller-runtime
// manager: the field indexes, the metrics and the claim, address and class
// reconcilers. cmd/manager, the tests and the benchmark all start the core
// through Setup, so they run the same thing.
package core
