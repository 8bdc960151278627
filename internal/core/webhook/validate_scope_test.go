package webhook

import (
	"fmt"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

const (
	ownProvisioner   = "metallb.example.com"
	otherProvisioner = "static.example.com"
)

// scoped are the principals with the driver kept to ownProvisioner's
// classes; principals (unscoped) let it serve any.
var scoped = func() Principals {
	p := principals
	p.Scopes = map[string][]string{driver.Username: {ownProvisioner}}
	return p
}()

func TestValidateDriverScope(t *testing.T) {
	denied := func(provisioner string) field.ErrorList {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "className"),
			fmt.Sprintf(msgDriverScope, driver.Username, provisioner, "public"))}
	}
	for _, tc := range []struct {
		name        string
		u           authenticationv1.UserInfo
		p           Principals
		provisioner string
		want        field.ErrorList
	}{
		{"a driver writes the addresses of its own classes", driver, scoped, ownProvisioner, nil},
		{"not another provisioner's", driver, scoped, otherProvisioner, denied(otherProvisioner)},
		{"nor one whose class is gone and carries none of its finalizers", driver, scoped, "", denied("(none: the class is gone)")},
		{"an unscoped driver serves any class", driver, principals, otherProvisioner, nil},
		{"the core is not judged here", core, scoped, otherProvisioner, nil},
		{"nor a tenant or an admin", admin, scoped, otherProvisioner, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateDriverScope(newAddress(), tc.provisioner, tc.u, tc.p, nil), tc.want)
		})
	}
}

func TestDriverOf(t *testing.T) {
	withFinalizers := func(fs ...string) *v1alpha1.IPAddress {
		return newAddress(func(a *v1alpha1.IPAddress) { a.Finalizers = fs })
	}
	for _, tc := range []struct {
		name  string
		a     *v1alpha1.IPAddress
		class string
		want  string
	}{
		{"the class's provisioner", withFinalizers(ownProvisioner + "/teardown"), otherProvisioner, otherProvisioner},
		{"the class gone: the driver's finalizer names it", withFinalizers(v1alpha1.FinalizerAddressProtection, ownProvisioner+"/teardown"), "", ownProvisioner},
		{"the class gone, only the core's finalizer: none", withFinalizers(v1alpha1.FinalizerAddressProtection), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DriverOf(tc.a, tc.class); got != tc.want {
				t.Errorf("DriverOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateDriverFinalizers(t *testing.T) {
	path := field.NewPath("metadata", "finalizers")
	own, theirs := ownProvisioner+"/teardown", otherProvisioner+"/teardown"
	for _, tc := range []struct {
		name     string
		u        authenticationv1.UserInfo
		p        Principals
		old, new []string
		want     field.ErrorList
	}{
		{"a driver adds its own", driver, scoped, nil, []string{own}, nil},
		{"and removes it", driver, scoped, []string{v1alpha1.FinalizerAddressProtection, own}, []string{v1alpha1.FinalizerAddressProtection}, nil},
		{"it never removes the core's", driver, scoped, []string{v1alpha1.FinalizerAddressProtection, own}, []string{own},
			field.ErrorList{field.Forbidden(path, fmt.Sprintf(msgDriverFinalizer, v1alpha1.FinalizerAddressProtection))}},
		{"nor adds it", driver, scoped, nil, []string{v1alpha1.FinalizerAddressProtection},
			field.ErrorList{field.Forbidden(path, fmt.Sprintf(msgDriverFinalizer, v1alpha1.FinalizerAddressProtection))}},
		{"nor touches another driver's", driver, scoped, []string{theirs}, nil,
			field.ErrorList{field.Forbidden(path, fmt.Sprintf(msgDriverFinalizer, theirs))}},
		{"an unscoped driver may touch any driver's, never the core's", driver, principals, []string{theirs, v1alpha1.FinalizerAddressProtection}, nil,
			field.ErrorList{field.Forbidden(path, fmt.Sprintf(msgDriverFinalizer, v1alpha1.FinalizerAddressProtection))}},
		{"the core removes its own", core, scoped, []string{v1alpha1.FinalizerAddressProtection}, nil, nil},
		{"an admin forcing a deletion removes any", admin, scoped, []string{v1alpha1.FinalizerAddressProtection, own}, nil, nil},
		{"an unchanged list is anybody's", driver, scoped, []string{v1alpha1.FinalizerAddressProtection}, []string{v1alpha1.FinalizerAddressProtection}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateDriverFinalizers(tc.old, tc.new, tc.u, tc.p, nil), tc.want)
		})
	}
}

// counted: the core has written its counts and Exhausted into c's status.
func counted(c *v1alpha1.IPAddressClass) *v1alpha1.IPAddressClass {
	c.Status.Addresses = []v1alpha1.FamilyAddresses{{Family: v1alpha1.IPv4, Total: 2, Bound: 2}}
	c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionExhausted, Status: metav1.ConditionTrue, Reason: "NoAddressLeft"})
	return c
}

func TestValidateClassStatusUpdate(t *testing.T) {
	class := func(provisioner string, ready metav1.ConditionStatus) *v1alpha1.IPAddressClass {
		c := &v1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}, Spec: v1alpha1.IPAddressClassSpec{Provisioner: provisioner}}
		if ready != "" {
			c.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: ready, Reason: "PoolAccepted"}}
		}
		return c
	}
	statusPath := field.NewPath("status")
	for _, tc := range []struct {
		name     string
		u        authenticationv1.UserInfo
		old, new *v1alpha1.IPAddressClass
		want     field.ErrorList
	}{
		{"the class's driver writes its status", driver, class(ownProvisioner, ""), class(ownProvisioner, metav1.ConditionTrue), nil},
		{"another provisioner's class is not its to report on", driver, class(otherProvisioner, ""), class(otherProvisioner, metav1.ConditionTrue),
			field.ErrorList{field.Forbidden(statusPath, fmt.Sprintf(msgClassStatus, otherProvisioner))}},
		{"nor the core's, a tenant's or an admin's", admin, class(ownProvisioner, metav1.ConditionTrue), class(ownProvisioner, metav1.ConditionFalse),
			field.ErrorList{field.Forbidden(statusPath, fmt.Sprintf(msgClassStatus, ownProvisioner))}},
		{"a write leaving the status as it was is anybody's", tenant, class(ownProvisioner, metav1.ConditionTrue), class(ownProvisioner, metav1.ConditionTrue), nil},
		{"the core writes its part: the address counts and the exhaustion conditions", core, class(ownProvisioner, metav1.ConditionTrue),
			counted(class(ownProvisioner, metav1.ConditionTrue)), nil},
		{"but not the driver's", core, class(ownProvisioner, metav1.ConditionTrue), counted(class(ownProvisioner, metav1.ConditionFalse)),
			field.ErrorList{field.Forbidden(statusPath, fmt.Sprintf(msgClassStatus, ownProvisioner))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateClassStatusUpdate(tc.old, tc.new, tc.u, scoped, statusPath), tc.want)
		})
	}
}
