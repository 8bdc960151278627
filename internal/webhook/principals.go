package webhook

import (
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// systemMasters is the API server's superuser group: its members pass
// every authorization check, so treating them as anything less than an
// admin here would only be an inconsistency.
const systemMasters = "system:masters"

// Principals names who is who in contract §3's ownership table. The core and
// the drivers are matched by user name only (their ServiceAccounts, e.g.
// system:serviceaccount:cozy-address-controller:address-controller): a group
// is shared by every ServiceAccount of a namespace, so it cannot single out
// one controller. Admins are matched by user name or group.
type Principals struct {
	// Core lists the user names of the address-controller core.
	Core []string
	// Drivers lists the user names of the per-class drivers.
	Drivers []string
	// AdminGroups lists the groups of cluster administrators, beside
	// system:masters, which always counts.
	AdminGroups []string
	// AdminUsers lists the user names of cluster administrators.
	AdminUsers []string
}

// IsCore reports whether u is the address-controller core.
func (p Principals) IsCore(u authenticationv1.UserInfo) bool {
	return slices.Contains(p.Core, u.Username)
}

// IsDriver reports whether u is one of the drivers. Any driver counts for
// any address: the principals do not say which driver serves which class.
func (p Principals) IsDriver(u authenticationv1.UserInfo) bool {
	return slices.Contains(p.Drivers, u.Username)
}

// IsAdmin reports whether u is a cluster administrator: a listed user, or a
// member of a listed group or of system:masters.
func (p Principals) IsAdmin(u authenticationv1.UserInfo) bool {
	if slices.Contains(p.AdminUsers, u.Username) {
		return true
	}
	return slices.ContainsFunc(u.Groups, func(g string) bool {
		return g == systemMasters || slices.Contains(p.AdminGroups, g)
	})
}
