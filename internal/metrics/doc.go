// Package metrics owns the core's Prometheus metrics, registered with
// controller-runtime's registry and served on the manager's secure metrics
// endpoint: claims and addresses by phase and class (gauges read from the
// cache at scrape time, so they are right after a restart) and the time from
// a claim's creation to Bound.
package metrics
