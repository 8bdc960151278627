// Package webhook tests the core's admission webhooks on a real API server:
// configurations generated into config/webhook, served by the manager's
// webhook server with a self-generated CA, called by kube-apiserver for our
// three kinds only. Writes come from the identities the rules are about —
// the core's, a driver's, an administrator's and a tenant's — and every
// refusal names its field.
package webhook
