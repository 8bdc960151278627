// Package recorder owns how both wings record events: through the
// events.k8s.io API, once per transition. A pass's plan carries Events (one
// type for every reconciler); Record writes them. Reconcilers decide on
// transitions from status where status can tell; for conditions that
// persist without a status of their own (a refused pre-binding, a class
// held by addresses) an Event marked Once suppresses a repeat of the last
// message recorded for the same object and reason, for half an hour. Each
// event's action carries a digest of its message, so that the events API
// never merges a new message into an earlier event of the same reason.
package recorder
