// Package charts tests the Helm charts in charts/: that their copies of
// generated or shipped files (CRDs, ClusterRole rules, webhooks, the
// service-pins policy) have not drifted from the sources, that `helm lint`
// passes, and that every object `helm template` renders — default values,
// [Warn, Audit], vapOnly and the Cozystack values — is accepted by a real
// API server through server-side apply.
//
// helm is bin/helm (make bin/helm); without it the tests that need it skip,
// unless CI is set.
package charts
