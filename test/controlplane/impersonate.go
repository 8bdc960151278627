package controlplane

import (
	"k8s.io/client-go/rest"
)

// Impersonating is admin's configuration acting as user in groups, through
// admin's right to impersonate: the API server authenticates the requests
// as that user (and adds system:authenticated), and authorizes and admits
// them as it would the user's own.
func Impersonating(admin *rest.Config, user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}
