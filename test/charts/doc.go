// Package charts tests what an operator installs: the Helm charts in
// charts/ and the image they run.
//
//   - Drift: the charts' copies of generated or shipped files (CRDs,
//     ClusterRole rules, webhooks, the service-pins policy) match their
//     sources, and the vendored cert-manager dependency matches the version
//     Chart.yaml pins.
//   - Renders: `helm lint`, least-privilege roles, and every object
//     `helm template` renders — default values, [Warn, Audit], vapOnly, the
//     Cozystack values, ServiceMonitors, cert-manager installed — accepted
//     by a real API server through server-side apply, without a warning.
//   - Releases: both charts through Helm's install, upgrade and uninstall on
//     a real API server; and the core chart's webhook certificate chain,
//     cert-manager's CA injector filling its webhook configurations and the
//     API server calling the webhooks through the chart's Service with it.
//   - The image: both binaries build, static, from the Dockerfile's context.
//
// Without bin/helm or bin/cainjector the tests that need them skip, unless
// CI is set; the CRDs come from bin/cert-manager-crds and bin/monitoring-crds
// (make controlplane builds all four).
package charts
