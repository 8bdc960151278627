package webhook

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// fuzzAddress builds an address from fuzzed parts; bits of shape choose
// the optional parts: 1 a claimRef, 2 associatedTo, 4 a Bound condition,
// 8 an InBackend condition, 16 the source providerRef instead of fromClass.
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
		cond(v1alpha1.ConditionInBackend, "False")(a)
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
			checkPaths(t, ValidateAddressUpdate(oldAddr, newAddr, nil, u, principals, specPath), "spec")
			statusErrs := ValidateAddressStatusUpdate(oldAddr, newAddr, u, principals, statusPath)
			checkPaths(t, statusErrs, "status")
			if u.Username == tenant.Username && statusChanged && len(statusErrs) == 0 {
				t.Errorf("a tenant's status change passed: %+v -> %+v", oldAddr.Status, newAddr.Status)
			}
			if errs := ValidateAddressUpdate(oldAddr, oldAddr.DeepCopy(), nil, u, principals, specPath); len(errs) != 0 {
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

// fuzzRoot is the path a validator is handed: root itself, or root nested
// in a list, so that an error whose path is built from scratch rather than
// from fldPath shows.
func fuzzRoot(nested bool, root ...string) *field.Path {
	var p *field.Path
	if nested {
		p = field.NewPath("items").Index(1)
	}
	for _, r := range root {
		p = p.Child(r)
	}
	return p
}

// checkUnder fails when an error has no field, names one outside root, or
// names the same field twice; a nil root is the object's own, whose
// fields start with metadata or spec.
func checkUnder(t *testing.T, errs field.ErrorList, root *field.Path) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range errs {
		switch r := root.String(); {
		case e.Field == "":
			t.Errorf("error without a field: %v", e)
		case root == nil && !strings.HasPrefix(e.Field, "metadata.") && !strings.HasPrefix(e.Field, "spec."):
			t.Errorf("error outside the object: %v", e)
		case root != nil && e.Field != r && !strings.HasPrefix(e.Field, r+".") && !strings.HasPrefix(e.Field, r+"["):
			t.Errorf("error outside %s: %v", r, e)
		case seen[e.Field]:
			t.Errorf("field reported twice: %v", errs)
		}
		seen[e.Field] = true
	}
}

func fieldsOf(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

// fuzzClaimSpec is a claim with a fuzzed spec and, held, the status of a
// claim holding an address in phase.
func fuzzClaimSpec(class, fam, addrName, phase string, held bool) *v1alpha1.IPAddressClaim {
	c := newClaim(className(class), family(v1alpha1.IPFamily(fam)), addressName(addrName))
	if held {
		boundClaim(c)
	}
	c.Status.Phase = v1alpha1.ClaimPhase(phase)
	return c
}

// FuzzValidateClaimUpdate runs fuzzed spec changes through the claim
// validator. Beyond the paths: an unchanged spec or a metadata-only edit
// always passes, a claim holding nothing may change anything, and what is
// refused does not depend on the direction of the change.
func FuzzValidateClaimUpdate(f *testing.F) {
	f.Add("public", "private", "IPv4", "IPv4", "", "", "Bound", true, false)
	f.Add("public", "public", "", "IPv4", "ip-203-0-113-7", "ip-203-0-113-7", "Bound", true, true)
	f.Add("public", "", "IPv4", "Dual", "", "ip-2001-db8--7", "Lost", false, false)
	f.Add("public", "private", "IPv6", "IPv4", "a", "b", "Pending", true, true)
	f.Add("public", "private", "IPv4", "IPv6", "", "x", "Pending", false, false)
	f.Fuzz(func(t *testing.T, oldClass, newClass, oldFam, newFam, oldName, newName, phase string, reports, nested bool) {
		root := fuzzRoot(nested, "spec")
		oldClaim := fuzzClaimSpec(oldClass, oldFam, oldName, phase, reports)
		newClaim := fuzzClaimSpec(newClass, newFam, newName, phase, reports)
		errs := ValidateClaimUpdate(oldClaim, newClaim, false, root)
		checkUnder(t, errs, root)
		for _, e := range errs {
			if e.Type != field.ErrorTypeForbidden {
				t.Errorf("not Forbidden: %v", e)
			}
		}
		held := phase == string(v1alpha1.ClaimBound) || phase == string(v1alpha1.ClaimLost) || reports
		if !held && len(errs) != 0 {
			t.Errorf("a claim holding nothing was refused a change: %v", errs)
		}
		if e := ValidateClaimUpdate(oldClaim, oldClaim.DeepCopy(), false, root); len(e) != 0 {
			t.Errorf("an unchanged spec was refused: %v", e)
		}
		labelled := oldClaim.DeepCopy()
		labelled.Labels = map[string]string{"app": newClass}
		if e := ValidateClaimUpdate(oldClaim, labelled, false, root); len(e) != 0 {
			t.Errorf("a metadata-only edit was refused: %v", e)
		}
		// Undoing a change touches the same fields.
		back := ValidateClaimUpdate(fuzzClaimSpec(newClass, newFam, newName, phase, reports), oldClaim, false, root)
		if !slices.Equal(fieldsOf(errs), fieldsOf(back)) {
			t.Errorf("the change refuses %v, undoing it %v", fieldsOf(errs), fieldsOf(back))
		}
	})
}

// fuzzClaimStatus is a claim status from fuzzed parts; bits of shape add
// an address (1), a Bound condition dated at (2), and make absent lists
// empty (4).
func fuzzClaimStatus(phase, class, addr string, at int64, shape uint8) *v1alpha1.IPAddressClaim {
	c := newClaim(claimPhase(v1alpha1.ClaimPhase(phase)))
	c.Status.ClassName = class
	if shape&1 != 0 {
		c.Status.Addresses = []v1alpha1.ClaimedAddress{{Name: "ip-" + addr, Address: addr}}
	}
	if shape&2 != 0 {
		c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionBound, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonBound, Message: "bound to " + addr, LastTransitionTime: metav1.Unix(at, 0)}}
	}
	if shape&4 != 0 {
		if c.Status.Addresses == nil {
			c.Status.Addresses = []v1alpha1.ClaimedAddress{}
		}
		if c.Status.Conditions == nil {
			c.Status.Conditions = []metav1.Condition{}
		}
	}
	return c
}

// FuzzValidateClaimStatusUpdate runs fuzzed claim statuses through the
// status validator for every kind of principal; the low and the next three
// bits of shape shape the old and the new status, bit 6 nests the path and
// bit 7 moves the new condition's time by a second. The core may write
// anything; anybody may write what changes nothing — an empty list for an
// absent one, or a time in another zone; anybody else's change is refused
// once, on the status itself.
func FuzzValidateClaimStatusUpdate(f *testing.F) {
	f.Add("Pending", "Bound", "public", "public", "203.0.113.7", "203.0.113.7", uint8(3<<3))
	f.Add("Bound", "Bound", "public", "private", "203.0.113.7", "203.0.113.7", uint8(3|3<<3|1<<6))
	f.Add("Bound", "Lost", "", "", "2001:db8::7", "2001:db8::7", uint8(3|7<<3|1<<7))
	f.Add("", "", "", "", "", "", uint8(4<<3|1<<6))
	f.Fuzz(func(t *testing.T, oldPhase, newPhase, oldClass, newClass, oldAddr, newAddr string, shape uint8) {
		root := fuzzRoot(shape&(1<<6) != 0, "status")
		oldClaim := fuzzClaimStatus(oldPhase, oldClass, oldAddr, 1e9, shape&7)
		newClaim := fuzzClaimStatus(newPhase, newClass, newAddr, 1e9+int64(shape>>7), shape>>3&7)
		changed := !equality.Semantic.DeepEqual(oldClaim.Status, newClaim.Status)
		elsewhere := oldClaim.DeepCopy()
		for i := range elsewhere.Status.Conditions {
			c := &elsewhere.Status.Conditions[i]
			c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.In(utcPlus5))
		}
		emptied := fuzzClaimStatus(oldPhase, oldClass, oldAddr, 1e9, shape&7|4)
		for _, u := range []authenticationv1.UserInfo{core, driver, admin, tenant} {
			errs := ValidateClaimStatusUpdate(oldClaim, newClaim, u, principals, root)
			checkUnder(t, errs, root)
			switch {
			case u.Username == core.Username && len(errs) != 0:
				t.Errorf("the core was refused: %v", errs)
			case u.Username != core.Username && changed && (len(errs) != 1 || errs[0].Field != root.String()):
				t.Errorf("%s: a status change gave %v, want one error on %s", u.Username, errs, root)
			case !changed && len(errs) != 0:
				t.Errorf("%s: a write that changes nothing was refused: %v", u.Username, errs)
			}
		}
		for _, same := range []*v1alpha1.IPAddressClaim{oldClaim.DeepCopy(), elsewhere, emptied} {
			if errs := ValidateClaimStatusUpdate(oldClaim, same, tenant, principals, root); len(errs) != 0 {
				t.Errorf("an unchanged status %+v was refused: %v", same.Status, errs)
			}
		}
	})
}

var utcPlus5 = time.FixedZone("UTC+5", 5*3600)

// fuzzClasses builds up to four other classes from a comma-separated name
// list (names unique, as the API server keeps them); bit i of defaults,
// autos and deleting marks the i-th default, auto-claim and being
// deleted, and bit i of odd spells its annotations "True" instead of
// "true", which counts for nothing.
func fuzzClasses(names string, defaults, autos, deleting, odd uint8) []v1alpha1.IPAddressClass {
	var classes []v1alpha1.IPAddressClass
	seen := map[string]bool{}
	for i, n := range strings.Split(names, ",") {
		if seen[n] || len(classes) == 4 {
			continue
		}
		seen[n] = true
		classes = append(classes, fuzzClass(n, defaults>>i&1 != 0, autos>>i&1 != 0, deleting>>i&1 != 0, odd>>i&1 != 0))
	}
	return classes
}

func fuzzClass(name string, isDef, isAuto, deleting, odd bool) v1alpha1.IPAddressClass {
	value := "true"
	if odd {
		value = "True"
	}
	c := class(name)
	if isDef {
		annotated(v1alpha1.AnnotationDefaultClass, value)(&c)
	}
	if isAuto {
		annotated(v1alpha1.AnnotationAutoClaimClass, value)(&c)
	}
	if deleting {
		beingDeleted(&c)
	}
	return c
}

var uniqueKeys = []string{v1alpha1.AnnotationDefaultClass, v1alpha1.AnnotationAutoClaimClass}

// holders are the live classes of world annotated key "true".
func holders(world []v1alpha1.IPAddressClass, key string) []string {
	var out []string
	for _, c := range world {
		if c.Annotations[key] == "true" && c.DeletionTimestamp == nil {
			out = append(out, c.Name)
		}
	}
	return out
}

// replaced is world with the class named like c replaced by c, or c added.
func replaced(world []v1alpha1.IPAddressClass, c v1alpha1.IPAddressClass) []v1alpha1.IPAddressClass {
	out := slices.DeleteFunc(slices.Clone(world), func(o v1alpha1.IPAddressClass) bool { return o.Name == c.Name })
	return append(out, c)
}

// checkClassErrors judges the errors of writing class c into world
// (before the write, and after it): every error is a Forbidden unique
// annotation c sets to "true", whose detail names every other live holder;
// a world with at most one holder of an annotation keeps it so when the
// write is admitted.
func checkClassErrors(t *testing.T, errs field.ErrorList, c v1alpha1.IPAddressClass, before, after []v1alpha1.IPAddressClass, root *field.Path) {
	t.Helper()
	checkUnder(t, errs, root)
	for _, key := range uniqueKeys {
		i := slices.IndexFunc(errs, func(e *field.Error) bool {
			return e.Field == root.Child("metadata", "annotations").Key(key).String()
		})
		if i < 0 {
			if len(holders(before, key)) <= 1 && len(holders(after, key)) > 1 {
				t.Errorf("%s admitted: %v hold it now", key, holders(after, key))
			}
			continue
		}
		others := slices.DeleteFunc(holders(before, key), func(n string) bool { return n == c.Name })
		e := errs[i]
		if e.Type == field.ErrorTypeNotSupported {
			if v := c.Annotations[key]; v == "true" || v == "false" {
				t.Errorf("%s: value %q refused as unsupported: %v", key, v, e)
			}
			continue
		}
		if e.Type != field.ErrorTypeForbidden || c.Annotations[key] != "true" || c.DeletionTimestamp != nil {
			t.Errorf("%s refused on a class that does not take it: %v", key, e)
		}
		for _, n := range others {
			if !strings.Contains(e.Detail, n) {
				t.Errorf("%q does not name the holder %q", e.Detail, n)
			}
		}
	}
}

// FuzzValidateClassCreate creates a fuzzed class beside up to four others.
// Beyond checkClassErrors: a class without a unique annotation, or one
// being deleted, always passes, and the class itself among the others
// counts for nothing.
func FuzzValidateClassCreate(f *testing.F) {
	f.Add("private", "public", uint8(0x11), uint8(0), uint8(0), uint8(0), false)
	f.Add("private", "public,edge", uint8(0x13), uint8(0x10), uint8(0), uint8(0), true)
	f.Add("public", "public,private", uint8(0x13), uint8(0x13), uint8(0x2), uint8(0), false)
	f.Add("edge", "public,private,a,b,c", uint8(0xff), uint8(0xff), uint8(0x10), uint8(0x01), true)
	f.Add("", ",", uint8(0x11), uint8(0x11), uint8(0), uint8(0x02), false)
	f.Fuzz(func(t *testing.T, name, names string, defaults, autos, deleting, odd uint8, nested bool) {
		root := fuzzRoot(nested)
		c := fuzzClass(name, defaults&0x10 != 0, autos&0x10 != 0, deleting&0x10 != 0, odd&0x10 != 0)
		others := fuzzClasses(names, defaults, autos, deleting, odd)
		errs := ValidateClassCreate(&c, others, root)
		checkClassErrors(t, errs, c, others, replaced(others, c), root)
		if (len(c.Annotations) == 0 || c.DeletionTimestamp != nil) && slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Type != field.ErrorTypeNotSupported }) {
			t.Errorf("a class taking no role was refused: %v", errs)
		}
		strangers := slices.DeleteFunc(slices.Clone(others), func(o v1alpha1.IPAddressClass) bool { return o.Name == c.Name })
		if without := ValidateClassCreate(&c, strangers, root); !equality.Semantic.DeepEqual(errs, without) {
			t.Errorf("the class itself among the others changed %v into %v", without, errs)
		}
	})
}

// FuzzValidateClassUpdate updates a fuzzed class beside up to four others;
// the deletion mark stays as it was, as the API server keeps it. Beyond
// checkClassErrors: an unchanged class always passes, even in a double
// default; the provisioner is refused exactly when it changes; an update
// is never refused an annotation a create would be granted, and dropping
// annotations always passes.
func FuzzValidateClassUpdate(f *testing.F) {
	f.Add("private", "public,private", uint8(0x01), uint8(0x11), uint8(0), uint8(0), uint8(0), false, false)
	f.Add("private", "public,private", uint8(0x13), uint8(0x13), uint8(0), uint8(0), uint8(0), false, true)
	f.Add("private", "public", uint8(0x11), uint8(0), uint8(0x10), uint8(0), uint8(0x10), true, false)
	f.Add("edge", "public,private", uint8(0x13), uint8(0x10), uint8(0x01), uint8(0), uint8(0x10), false, false)
	f.Fuzz(func(t *testing.T, name, names string, defaults, autos, oldBits, deleting, odd uint8, provisioner, nested bool) {
		root := fuzzRoot(nested)
		gone := deleting&0x10 != 0
		oldClass := fuzzClass(name, oldBits&0x10 != 0, oldBits&0x20 != 0, gone, oldBits&0x40 != 0)
		newClass := fuzzClass(name, defaults&0x10 != 0, autos&0x10 != 0, gone, odd&0x10 != 0)
		if provisioner {
			newClass.Spec.Provisioner = "aws.drivers.local.sdn.cozystack.io"
		}
		world := replaced(fuzzClasses(names, defaults, autos, deleting, odd), oldClass)
		errs := ValidateClassUpdate(&oldClass, &newClass, world, root)
		checkClassErrors(t, errs, newClass, world, replaced(world, newClass), root)

		provisionerPath := root.Child("spec", "provisioner").String()
		if slices.Contains(fieldsOf(errs), provisionerPath) != provisioner {
			t.Errorf("provisioner changed %v, errors %v", provisioner, errs)
		}
		created := fieldsOf(ValidateClassCreate(&newClass, world, root))
		for _, fld := range fieldsOf(errs) {
			if fld != provisionerPath && !slices.Contains(created, fld) {
				t.Errorf("the update is refused %s, a create is not: %v", fld, errs)
			}
		}
		if errs := ValidateClassUpdate(&oldClass, oldClass.DeepCopy(), world, root); len(errs) != 0 {
			t.Errorf("an unchanged class was refused: %v", errs)
		}
		dropped := oldClass.DeepCopy()
		dropped.Annotations = nil
		if errs := ValidateClassUpdate(&oldClass, dropped, world, root); len(errs) != 0 {
			t.Errorf("dropping annotations was refused: %v", errs)
		}
	})
}

// FuzzValidateClaimStamp runs fuzzed provisioner stamps through the stamp
// validator and the creation default for every kind of principal; bits of
// shape give the old (1) and the new (2) claim a stamp and nest the path
// (4). The core may write any stamp; a write leaving it as it was passes
// for anybody; anybody else's change is refused once, on the annotation;
// a claim anybody else creates loses its stamp, with one warning naming it.
func FuzzValidateClaimStamp(f *testing.F) {
	f.Add("metallb.drivers.local.sdn.cozystack.io", "metallb.drivers.local.sdn.cozystack.io", uint8(3))
	f.Add("", "aws.drivers.local.sdn.cozystack.io", uint8(2))
	f.Add("metallb.drivers.local.sdn.cozystack.io", "", uint8(1|4))
	f.Add("", "", uint8(3))
	f.Fuzz(func(t *testing.T, oldStamp, newStamp string, shape uint8) {
		root := fuzzRoot(shape&4 != 0)
		stamped := func(v string, has bool) *v1alpha1.IPAddressClaim {
			c := newClaim()
			if has {
				c.Annotations = map[string]string{v1alpha1.AnnotationProvisioner: v, "other": "kept"}
			}
			return c
		}
		oldClaim, newClaim := stamped(oldStamp, shape&1 != 0), stamped(newStamp, shape&2 != 0)
		changed := shape&1 != shape>>1&1 || shape&3 == 3 && oldStamp != newStamp
		want := root.Child("metadata", "annotations").Key(v1alpha1.AnnotationProvisioner).String()
		for _, u := range []authenticationv1.UserInfo{core, driver, admin, tenant} {
			errs := ValidateClaimStampUpdate(oldClaim, newClaim, u, principals, root)
			checkUnder(t, errs, root)
			switch {
			case u.Username == core.Username || !changed:
				if len(errs) != 0 {
					t.Errorf("%s: refused %v", u.Username, errs)
				}
			case len(errs) != 1 || errs[0].Field != want || errs[0].Type != field.ErrorTypeForbidden:
				t.Errorf("%s: a stamp change gave %v, want one Forbidden on %s", u.Username, errs, want)
			}
			if errs := ValidateClaimStampUpdate(oldClaim, oldClaim.DeepCopy(), u, principals, root); len(errs) != 0 {
				t.Errorf("%s: an unchanged stamp was refused: %v", u.Username, errs)
			}

			created := newClaim.DeepCopy()
			warnings := DropForeignStamp(created, u, principals)
			_, kept := created.Annotations[v1alpha1.AnnotationProvisioner]
			switch {
			case u.Username == core.Username && (len(warnings) != 0 || !equality.Semantic.DeepEqual(created, newClaim)):
				t.Errorf("the core's claim was changed: %v, %q", created.Annotations, warnings)
			case u.Username != core.Username && kept:
				t.Errorf("%s: kept the stamp %q", u.Username, created.Annotations[v1alpha1.AnnotationProvisioner])
			case u.Username != core.Username && len(warnings) != btoi(shape&2 != 0):
				t.Errorf("%s: %d warnings dropping %v", u.Username, len(warnings), shape&2 != 0)
			case len(warnings) == 1 && !strings.Contains(warnings[0], strconv.Quote(newStamp)):
				t.Errorf("warning %q does not name the stamp %q", warnings[0], newStamp)
			case shape&2 != 0 && created.Annotations["other"] != "kept":
				t.Errorf("%s: other annotations went with the stamp: %v", u.Username, created.Annotations)
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
