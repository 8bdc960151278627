package webhook

import (
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// fuzzAddress builds an address from fuzzed parts; bits of shape choose
// the optional parts: 1 a claimRef, 2 associatedTo, 4 a Bound condition,
// 8 a Held condition, 16 the source providerRef instead of fromClass.
func fuzzAddress(addr, name, phase, ns, claim, uid string, shape uint8) *v1alpha1.IPAddress {
	a := newAddress(ip(addr, name), addrPhase(v1alpha1.AddressPhase(phase)))
	if shape&1 != 0 {
		a.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: ns, Name: claim, UID: types.UID(uid)}
	}
	if shape&2 != 0 {
		associated(claim)(a)
	}
	if shape&4 != 0 {
		coreBound(a)
	}
	if shape&8 != 0 {
		cond(v1alpha1.ConditionHeld, "False")(a)
	}
	if shape&16 != 0 {
		a.Spec.Source = v1alpha1.AddressSource{ProviderRef: &v1alpha1.ProviderReference{ID: uid}}
	}
	return a
}

// FuzzValidateAddressUpdate runs fuzzed addresses through the create,
// update and status validators for every kind of principal. Beyond not
// panicking: a write that changes nothing passes for anybody, a tenant's
// status change never passes, and an address that passes creation has the
// name its IP derives.
func FuzzValidateAddressUpdate(f *testing.F) {
	f.Add("203.0.113.7", "203.0.113.7", "ip-203-0-113-7", "Available", "Bound", "tenant", "web", "", "uid-web", uint8(0), uint8(5))
	f.Add("2001:db8::", "2001:db8::", "ip-2001-db8--0", "Bound", "Conflict", "tenant", "web", "uid-web", "uid-web", uint8(7), uint8(11))
	f.Add("::ffff:203.0.113.7", "2001:DB8::7", "ip-", "Lost", "", "", "", "x", "", uint8(31), uint8(0))
	f.Add("fe80::1%eth0", "203.0.113.8", "ip-fe80--1", "Conflict", "Released", "a", "b", "u", "v", uint8(1), uint8(17))
	f.Fuzz(func(t *testing.T, oldIP, newIP, name, oldPhase, newPhase, ns, claim, oldUID, newUID string, oldShape, newShape uint8) {
		oldAddr := fuzzAddress(oldIP, name, oldPhase, ns, claim, oldUID, oldShape)
		newAddr := fuzzAddress(newIP, name, newPhase, ns, claim, newUID, newShape)

		if errs := ValidateAddressCreate(newAddr, nil); len(errs) == 0 {
			if want, err := v1alpha1.IPAddressName(newIP); err != nil || want != name {
				t.Errorf("create admitted %q named %q (derived %q, %v)", newIP, name, want, err)
			}
		}
		statusChanged := !equality.Semantic.DeepEqual(oldAddr.Status, newAddr.Status)
		for _, u := range []authenticationv1.UserInfo{core, driver, admin, tenant} {
			checkPaths(t, ValidateAddressUpdate(oldAddr, newAddr, u, principals, specPath), "spec")
			statusErrs := ValidateAddressStatusUpdate(oldAddr, newAddr, u, principals, statusPath)
			checkPaths(t, statusErrs, "status")
			if u.Username == tenant.Username && statusChanged && len(statusErrs) == 0 {
				t.Errorf("a tenant's status change passed: %+v -> %+v", oldAddr.Status, newAddr.Status)
			}
			if errs := ValidateAddressUpdate(oldAddr, oldAddr.DeepCopy(), u, principals, specPath); len(errs) != 0 {
				t.Errorf("%s: an unchanged spec was refused: %v", u.Username, errs)
			}
			if errs := ValidateAddressStatusUpdate(oldAddr, oldAddr.DeepCopy(), u, principals, statusPath); len(errs) != 0 {
				t.Errorf("%s: an unchanged status was refused: %v", u.Username, errs)
			}
		}
	})
}

// checkPaths fails when an error names a field outside prefix.
func checkPaths(t *testing.T, errs field.ErrorList, prefix string) {
	t.Helper()
	for _, e := range errs {
		if !strings.HasPrefix(e.Field, prefix+".") && e.Field != prefix {
			t.Errorf("error outside %s: %v", prefix, e)
		}
	}
}

// FuzzDefaultClaim defaults fuzzed claims against up to four fuzzed
// classes; bits of defaults and deleting mark the i-th class annotated
// default and being deleted. The family always ends up set, a named class
// is never replaced, and an empty className becomes the single live
// default or stays empty with exactly one warning.
func FuzzDefaultClaim(f *testing.F) {
	f.Add("", "", "public,private", uint8(1), uint8(0))
	f.Add("Dual", "", "public,private", uint8(3), uint8(0))
	f.Add("", "later", "public", uint8(1), uint8(1))
	f.Add("IPv6", "", "a,a,b,c,d", uint8(3), uint8(1))
	f.Add("", "", ",", uint8(3), uint8(2))
	f.Fuzz(func(t *testing.T, fam, name, names string, defaults, deleting uint8) {
		parts := strings.Split(names, ",")
		parts = parts[:min(4, len(parts))]
		var classes []v1alpha1.IPAddressClass
		var live []string
		for i, n := range parts {
			c := class(n)
			if defaults&(1<<i) != 0 {
				isDefault(&c)
			}
			if deleting&(1<<i) != 0 {
				beingDeleted(&c)
			}
			if defaults&(1<<i) != 0 && deleting&(1<<i) == 0 {
				live = append(live, n)
			}
			classes = append(classes, c)
		}
		claim := newClaim(family(v1alpha1.IPFamily(fam)), className(name))
		warnings := DefaultClaim(claim, classes)
		switch {
		case claim.Spec.Family == "" || (fam != "" && string(claim.Spec.Family) != fam):
			t.Errorf("family %q became %q", fam, claim.Spec.Family)
		case name != "" && claim.Spec.ClassName != name:
			t.Errorf("named class %q became %q", name, claim.Spec.ClassName)
		case len(warnings) > 1:
			t.Errorf("more than one warning: %q", warnings)
		case name == "" && len(live) == 1 && (claim.Spec.ClassName != live[0] || len(warnings) != 0):
			t.Errorf("the single default %q was not chosen: %q, warnings %q", live[0], claim.Spec.ClassName, warnings)
		case name == "" && len(live) != 1 && (claim.Spec.ClassName != "" || len(warnings) != 1):
			t.Errorf("with defaults %q className became %q, warnings %q", live, claim.Spec.ClassName, warnings)
		}
	})
}
