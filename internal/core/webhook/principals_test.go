package webhook

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The four kinds of principal of contract §3, as the API server names them.
var (
	core = authenticationv1.UserInfo{Username: "system:serviceaccount:cozy-address-controller:address-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:cozy-address-controller", "system:authenticated"}}
	driver = authenticationv1.UserInfo{Username: "system:serviceaccount:metallb-iad-system:metallb-iad",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:metallb-iad-system", "system:authenticated"}}
	admin  = authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}}
	tenant = authenticationv1.UserInfo{Username: "alice", Groups: []string{"tenant-a-admins", "system:authenticated"}}

	principals = Principals{
		Core:        []string{core.Username},
		Drivers:     []string{driver.Username},
		AdminGroups: []string{"cozystack-cluster-admin"},
		AdminUsers:  []string{"ops-bot"},
	}
)

// checkErrors compares field errors exactly: type, path, value and detail.
func checkErrors(t *testing.T, got, want field.ErrorList) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("field errors (-want +got):\n%s", diff)
	}
}

func TestPrincipals(t *testing.T) {
	for _, tc := range []struct {
		name                string
		p                   Principals
		u                   authenticationv1.UserInfo
		core, driver, admin bool
	}{
		{"the core's ServiceAccount is the core and nothing else", principals, core, true, false, false},
		{"a driver's ServiceAccount is a driver and nothing else", principals, driver, false, true, false},
		{"a member of system:masters is an admin", principals, admin, false, false, true},
		{"a member of system:masters is an admin even when no admin is listed", Principals{}, admin, false, false, true},
		{"a member of a listed admin group is an admin",
			principals, authenticationv1.UserInfo{Username: "oidc:root", Groups: []string{"cozystack-cluster-admin"}}, false, false, true},
		{"a listed admin user is an admin", principals, authenticationv1.UserInfo{Username: "ops-bot"}, false, false, true},
		{"a tenant is none of them", principals, tenant, false, false, false},
		{"a user named system:masters is not an admin",
			principals, authenticationv1.UserInfo{Username: "system:masters", Groups: []string{"system:authenticated"}}, false, false, false},
		{"a user named like an admin group is not an admin",
			principals, authenticationv1.UserInfo{Username: "cozystack-cluster-admin"}, false, false, false},
		{"another ServiceAccount of the core's namespace is not the core",
			principals, authenticationv1.UserInfo{Username: "system:serviceaccount:cozy-address-controller:default", Groups: core.Groups}, false, false, false},
		{"a member of a group named like the core is not the core",
			principals, authenticationv1.UserInfo{Username: "mallory", Groups: []string{core.Username, driver.Username}}, false, false, false},
		{"one user listed as core and driver is both",
			Principals{Core: []string{core.Username}, Drivers: []string{core.Username}}, core, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := [3]bool{tc.p.IsCore(tc.u), tc.p.IsDriver(tc.u), tc.p.IsAdmin(tc.u)}
			if want := [3]bool{tc.core, tc.driver, tc.admin}; got != want {
				t.Errorf("core, driver, admin = %v, want %v", got, want)
			}
		})
	}
}

func TestParseDrivers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []string
		drivers []string
		scopes  map[string][]string
		err     string
	}{
		{"scoped", []string{"metallb.example.com=system:serviceaccount:m:m"}, []string{"system:serviceaccount:m:m"},
			map[string][]string{"system:serviceaccount:m:m": {"metallb.example.com"}}, ""},
		{"one driver, two provisioners", []string{"a.example.com=d", " b.example.com = d "}, []string{"d"},
			map[string][]string{"d": {"a.example.com", "b.example.com"}}, ""},
		{"bare: any class", []string{"d"}, []string{"d"}, map[string][]string{}, ""},
		{"bare and scoped: any class", []string{"a.example.com=d", "d"}, []string{"d"}, map[string][]string{}, ""},
		{"no provisioner", []string{"=d"}, nil, nil, `driver "=d": want <provisioner>=<username> or <username>`},
		{"no username", []string{"a.example.com="}, nil, nil, `driver "a.example.com=": want <provisioner>=<username> or <username>`},
		{"the wrong way round", []string{"system:serviceaccount:m:m=metallb.example.com"}, nil, nil,
			`driver "system:serviceaccount:m:m=metallb.example.com": the provisioner "system:serviceaccount:m:m" has a colon, as user names do; want <provisioner>=<username>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drivers, scopes, err := ParseDrivers(tc.entries)
			if got := fmt.Sprint(err); (err != nil || tc.err != "") && got != tc.err {
				t.Fatalf("error %q, want %q", got, tc.err)
			}
			if diff := cmp.Diff(tc.drivers, drivers); diff != "" {
				t.Errorf("drivers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.scopes, scopes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("scopes (-want +got):\n%s", diff)
			}
		})
	}
}

// A class whose provisioner no driver serves is only warned about (a class
// an administrator fills by hand has none): Served says which.
func TestServed(t *testing.T) {
	scoped := Principals{Drivers: []string{"d"}, Scopes: map[string][]string{"d": {"a.example.com"}}}
	anyClass := Principals{Drivers: []string{"d", "e"}, Scopes: map[string][]string{"d": {"a.example.com"}}}
	for _, tc := range []struct {
		name        string
		p           Principals
		provisioner string
		want        bool
	}{
		{"the provisioner a driver is scoped to", scoped, "a.example.com", true},
		{"a typo of it", scoped, "a.exmaple.com", false},
		{"no drivers at all", Principals{}, "a.example.com", false},
		{"a driver serving any class", anyClass, "b.example.com", true},
	} {
		if got := tc.p.Served(tc.provisioner); got != tc.want {
			t.Errorf("%s: Served(%q) = %v, want %v", tc.name, tc.provisioner, got, tc.want)
		}
	}
}
