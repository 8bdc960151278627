package webhook

import (
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// A driver is trusted with the addresses of its own classes and nothing
// else: the fields §3 gives drivers are any driver's by kind, but which
// addresses they may be written on is the driver's scope — the classes of
// the provisioners it serves (Principals.Serves).

const (
	// msgDriverScope takes the driver, the class and its provisioner.
	msgDriverScope = "%s serves no class of provisioner %s, and this address is of class %q"
	// msgDriverFinalizer takes the finalizer.
	msgDriverFinalizer = "a driver adds and removes only its own finalizers (<provisioner>/<name>), and %s is not one"
	// msgClassStatus takes the provisioner.
	msgClassStatus = "only the driver of provisioner %s writes the status of its classes" + driversAre
)

// corePrefix starts the core's own finalizers and annotations.
const corePrefix = "local.sdn.cozystack.io/"

// ValidateDriverScope keeps a driver to the addresses of its classes: a
// write by a driver to address a, whose class is of provisioner (empty when
// the class is gone and the address carries none of the driver's
// finalizers), is refused unless the driver serves that provisioner. The
// core and anyone who is not a driver are not judged here. fldPath is the
// object's path.
func ValidateDriverScope(a *v1alpha1.IPAddress, provisioner string, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	if !p.IsDriver(u) || p.IsCore(u) || p.Serves(u, provisioner) {
		return nil
	}
	if provisioner == "" {
		provisioner = "(none: the class is gone)"
	}
	return field.ErrorList{field.Forbidden(fldPath.Child("spec", "className"), fmt.Sprintf(msgDriverScope, u.Username, provisioner, a.Spec.ClassName))}
}

// ValidateDriverFinalizers keeps a driver's hands off finalizers that are
// not its own: every finalizer it adds or removes must be named under a
// provisioner it serves (any but the core's, for a driver serving any
// class). The core's protection finalizers are the core's alone to remove,
// or a driver could let an address go while its claim holds it. fldPath is
// the object's path.
func ValidateDriverFinalizers(oldFinalizers, newFinalizers []string, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	if !p.IsDriver(u) || p.IsCore(u) {
		return nil
	}
	var errs field.ErrorList
	for _, f := range changed(oldFinalizers, newFinalizers) {
		provisioner, _, _ := strings.Cut(f, "/")
		if strings.HasPrefix(f, corePrefix) || !p.Serves(u, provisioner) {
			errs = append(errs, field.Forbidden(fldPath.Child("metadata", "finalizers"), fmt.Sprintf(msgDriverFinalizer, f)))
		}
	}
	return errs
}

// changed are the entries in one list and not the other, sorted.
func changed(a, b []string) []string {
	var out []string
	for _, f := range a {
		if !slices.Contains(b, f) {
			out = append(out, f)
		}
	}
	for _, f := range b {
		if !slices.Contains(a, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ValidateClassStatusUpdate keeps a class's status to the driver of its
// provisioner, who reports there whether it serves the class and from
// what. A write that leaves the status as it was is anybody's. fldPath is
// the status's path.
func ValidateClassStatusUpdate(oldClass, newClass *v1alpha1.IPAddressClass, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	if equality.Semantic.DeepEqual(oldClass.Status, newClass.Status) || p.Serves(u, newClass.Spec.Provisioner) {
		return nil
	}
	if p.IsCore(u) && equality.Semantic.DeepEqual(driversPart(&oldClass.Status), driversPart(&newClass.Status)) {
		return nil // the core's part: the address counts and the exhaustion conditions
	}
	return field.ErrorList{field.Forbidden(fldPath, fmt.Sprintf(msgClassStatus, newClass.Spec.Provisioner))}
}

// DriverOf is the provisioner a driver's write to address a is judged
// against: its class's, or — the class gone — the one named by a finalizer
// a driver put on the address (its teardown), so that the driver can still
// let the address go. classProvisioner is empty when the class is gone.
func DriverOf(a *v1alpha1.IPAddress, classProvisioner string) string {
	if classProvisioner != "" {
		return classProvisioner
	}
	for _, f := range a.Finalizers {
		if provisioner, _, ok := strings.Cut(f, "/"); ok && !strings.HasPrefix(f, corePrefix) {
			return provisioner
		}
	}
	return ""
}

// driversPart is a class status without what the core writes in it
// (addresses, Exhausted, NearlyExhausted).
func driversPart(st *v1alpha1.IPAddressClassStatus) *v1alpha1.IPAddressClassStatus {
	out := st.DeepCopy()
	out.Addresses = nil
	out.Conditions = slices.DeleteFunc(out.Conditions, func(c metav1.Condition) bool {
		return c.Type == v1alpha1.ConditionExhausted || c.Type == v1alpha1.ConditionNearlyExhausted
	})
	if len(out.Conditions) == 0 {
		out.Conditions = nil
	}
	return out
}
