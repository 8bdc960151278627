// Package policy enforces the admission policies of policies/ on a real
// control plane (test/controlplane): the shipped YAML applied as it is,
// writes made under the identities the policies tell apart, and the
// answers kube-apiserver gives them, denials, warnings and all.
//
// metallb-iad-service-pins: a tenant cannot set, change or remove a
// reserved Service field in a namespace labelled namespace.cozystack.io/host
// (neither through the Service nor through its status), can in any other
// namespace, and can edit the rest of a Service an administrator pinned; the
// driver's ServiceAccount and each allowed group can; a name added to the
// params takes effect without touching the policy; with the binding switched
// to [Warn, Audit] the tenant's write is admitted with a warning. The policy
// also type-checks against the live server's Service schema.
package policy
