package webhook

import (
	"fmt"
	"slices"
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
)

// uniqueAnnotations are the class annotations at most one class may carry,
// each with the role it gives the class. The core refuses to guess among
// several (§4 step 6, §10), so a second one would stop every claim that
// relies on it; refusing it here says so at the door.
var uniqueAnnotations = []struct{ key, role string }{
	{v1alpha1.AnnotationDefaultClass, "default"},
	{v1alpha1.AnnotationAutoClaimClass, "auto-claim"},
}

// ValidateClassCreate refuses a class that would be a second default or a
// second auto-claim class. others is every IPAddressClass; the class itself
// and classes being deleted do not count. fldPath is the object's path.
func ValidateClassCreate(class *v1alpha1.IPAddressClass, others []v1alpha1.IPAddressClass, fldPath *field.Path) field.ErrorList {
	return append(ValidateFlagAnnotations(nil, class.Annotations, ClassFlags, fldPath), validateUniqueAnnotations(nil, class, others, fldPath)...)
}

// ValidateClassProvisioner refuses a class created under the name of one
// whose addresses outlived it (its finalizer removed by hand) for another
// provisioner than the driver holding them: that driver would no longer
// know its addresses, and the Services and finalizers it keeps on their
// behalf would stay for good. A driver holds an address by a finalizer
// under its provisioner's name; only the provisioners of drivers the core
// knows (drivers, from --driver-usernames) count, so a finalizer of some
// other tool refuses nothing. addresses are some of those of class.Name
// (one page suffices: a class's addresses are all its driver's). fldPath
// is the object's path.
func ValidateClassProvisioner(class *v1alpha1.IPAddressClass, addresses []v1alpha1.IPAddress, drivers []string, fldPath *field.Path) field.ErrorList {
	for i := range addresses {
		a := &addresses[i]
		if a.Spec.ClassName != class.Name {
			continue
		}
		for _, f := range a.Finalizers {
			driver, _, ok := strings.Cut(f, "/")
			if !ok || driver == class.Spec.Provisioner || !slices.Contains(drivers, driver) {
				continue
			}
			return field.ErrorList{field.Invalid(fldPath.Child("spec", "provisioner"), class.Spec.Provisioner,
				fmt.Sprintf("IPAddress %s of class %q is held by provisioner %s; re-create the class with that provisioner, or delete the class's addresses first", a.Name, class.Name, driver))}
		}
	}
	return nil
}

// UnservedProvisioner is the warning on creating a class whose provisioner
// no driver the core knows serves, or "". Such a class is not refused: one
// an administrator fills by hand needs no driver. But a mistyped
// provisioner would leave its claims waiting for good, and the field
// cannot be changed afterwards.
func UnservedProvisioner(class *v1alpha1.IPAddressClass, p Principals) string {
	if p.Served(class.Spec.Provisioner) {
		return ""
	}
	known := "none"
	if ps := p.Provisioners(); len(ps) > 0 {
		known = strings.Join(ps, ", ")
	}
	return fmt.Sprintf("spec.provisioner: no driver the core knows serves %q (the drivers' provisioners: %s); "+
		"claims of this class bind only addresses an administrator creates, and spec.provisioner cannot be changed later",
		class.Spec.Provisioner, known)
}

// ValidateClassUpdate keeps spec.provisioner (the driver whose addresses the
// class already has) and refuses an update that makes the class a second
// default or auto-claim class. An annotation the class already carried is
// not judged again, so a class of a pre-existing double default can still be
// edited, and either can drop its annotation to resolve it. fldPath is the
// object's path.
func ValidateClassUpdate(oldClass, newClass *v1alpha1.IPAddressClass, others []v1alpha1.IPAddressClass, fldPath *field.Path) field.ErrorList {
	errs := apimachineryvalidation.ValidateImmutableField(newClass.Spec.Provisioner, oldClass.Spec.Provisioner,
		fldPath.Child("spec", "provisioner"))
	errs = append(errs, ValidateFlagAnnotations(oldClass.Annotations, newClass.Annotations, ClassFlags, fldPath)...)
	return append(errs, validateUniqueAnnotations(oldClass, newClass, others, fldPath)...)
}

// validateUniqueAnnotations judges each unique annotation class sets to
// "true" that oldClass (nil on create) did not. A class being deleted takes
// no new claims, so its annotation counts for nothing.
func validateUniqueAnnotations(oldClass, class *v1alpha1.IPAddressClass, others []v1alpha1.IPAddressClass, fldPath *field.Path) field.ErrorList {
	if class.DeletionTimestamp != nil {
		return nil
	}
	var errs field.ErrorList
	for _, a := range uniqueAnnotations {
		if class.Annotations[a.key] != "true" || (oldClass != nil && oldClass.Annotations[a.key] == "true") {
			continue
		}
		holders := slices.DeleteFunc(binding.AnnotatedClasses(others, a.key), func(n string) bool { return n == class.Name })
		if len(holders) == 0 {
			continue
		}
		errs = append(errs, field.Forbidden(fldPath.Child("metadata", "annotations").Key(a.key), alreadyMsg(holders, a.role)))
	}
	return errs
}

// alreadyMsg names the classes that already hold a role.
func alreadyMsg(holders []string, role string) string {
	if len(holders) == 1 {
		return fmt.Sprintf("IPAddressClass %s is already the %s class; remove its annotation first", holders[0], role)
	}
	return fmt.Sprintf("IPAddressClasses %s are already %s classes; remove their annotations first",
		strings.Join(holders, ", "), role)
}
