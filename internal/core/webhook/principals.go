package webhook

import (
	"fmt"
	"slices"
	"strings"

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
	// Scopes names, per driver user name, the provisioners whose classes
	// that driver serves; a driver without an entry serves any class.
	Scopes map[string][]string
	// AdminGroups lists the groups of cluster administrators, beside
	// system:masters, which always counts.
	AdminGroups []string
	// AdminUsers lists the user names of cluster administrators.
	AdminUsers []string
}

// Provisioners are the provisioners the drivers are scoped to, sorted.
func (p Principals) Provisioners() []string {
	var out []string
	for _, ps := range p.Scopes {
		out = append(out, ps...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Served reports whether some driver serves the classes of provisioner:
// one scoped to it, or one serving any class.
func (p Principals) Served(provisioner string) bool {
	for _, d := range p.Drivers {
		if scope, scoped := p.Scopes[d]; !scoped || slices.Contains(scope, provisioner) {
			return true
		}
	}
	return false
}

// IsCore reports whether u is the address-controller core.
func (p Principals) IsCore(u authenticationv1.UserInfo) bool {
	return slices.Contains(p.Core, u.Username)
}

// IsDriver reports whether u is one of the drivers, whichever classes it
// serves (Serves says which).
func (p Principals) IsDriver(u authenticationv1.UserInfo) bool {
	return slices.Contains(p.Drivers, u.Username)
}

// Serves reports whether u is a driver serving the classes of provisioner.
func (p Principals) Serves(u authenticationv1.UserInfo, provisioner string) bool {
	if !p.IsDriver(u) {
		return false
	}
	scope, scoped := p.Scopes[u.Username]
	return !scoped || slices.Contains(scope, provisioner)
}

// ParseDrivers reads the drivers as --driver-usernames lists them: an entry
// "<provisioner>=<username>" is a driver serving the classes of that
// provisioner only (one username may be named for several); a bare
// "<username>" serves any class.
func ParseDrivers(entries []string) (drivers []string, scopes map[string][]string, err error) {
	scopes = map[string][]string{}
	anyClass := map[string]bool{}
	for _, e := range entries {
		provisioner, user, scoped := strings.Cut(e, "=")
		if !scoped {
			provisioner, user = "", e
		}
		provisioner, user = strings.TrimSpace(provisioner), strings.TrimSpace(user)
		if user == "" || (scoped && provisioner == "") {
			return nil, nil, fmt.Errorf("driver %q: want <provisioner>=<username> or <username>", e)
		}
		if strings.Contains(provisioner, ":") {
			// A provisioner is a domain-qualified name; a ServiceAccount's
			// user name has colons: the entry is written the wrong way round.
			return nil, nil, fmt.Errorf("driver %q: the provisioner %q has a colon, as user names do; want <provisioner>=<username>", e, provisioner)
		}
		if !slices.Contains(drivers, user) {
			drivers = append(drivers, user)
		}
		if scoped {
			scopes[user] = append(scopes[user], provisioner)
		} else {
			anyClass[user] = true
		}
	}
	for user := range anyClass {
		delete(scopes, user) // named bare too: it serves any class
	}
	return drivers, scopes, nil
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
