// Package recorder owns how the core records events: through the
// events.k8s.io API, once per transition. Reconcilers decide on transitions
// from status where status can tell; for conditions that persist without a
// status of their own (a refused pre-binding, a class held by addresses) the
// recorder suppresses a repeat of the last message recorded for the same
// object and reason.
package recorder
