package webhook

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

var (
	annotations     = (*field.Path)(nil).Child("metadata", "annotations")
	defaultKey      = annotations.Key(v1alpha1.AnnotationDefaultClass)
	autoClaimKey    = annotations.Key(v1alpha1.AnnotationAutoClaimClass)
	publicIsDefault = field.Forbidden(defaultKey, "IPAddressClass public is already the default class; remove its annotation first")
	publicIsAuto    = field.Forbidden(autoClaimKey, "IPAddressClass public is already the auto-claim class; remove its annotation first")
)

func TestValidateClassCreate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		class  v1alpha1.IPAddressClass
		others []v1alpha1.IPAddressClass
		want   field.ErrorList
	}{
		{"a class without annotations passes beside a default", class("private"), []v1alpha1.IPAddressClass{class("public", isDefault, isAutoClaim)}, nil},
		{"the first default class passes", class("private", isDefault), []v1alpha1.IPAddressClass{class("public")}, nil},
		{"the first auto-claim class passes", class("private", isAutoClaim), []v1alpha1.IPAddressClass{class("public", isDefault)}, nil},
		{"one class can be both the default and the auto-claim class", class("public", isDefault, isAutoClaim), nil, nil},
		{"a second default class is refused, naming the first",
			class("private", isDefault), []v1alpha1.IPAddressClass{class("public", isDefault)}, field.ErrorList{publicIsDefault}},
		{"a second auto-claim class is refused, naming the first",
			class("private", isAutoClaim), []v1alpha1.IPAddressClass{class("public", isAutoClaim)}, field.ErrorList{publicIsAuto}},
		{"a class taking both roles from another is refused twice",
			class("private", isDefault, isAutoClaim), []v1alpha1.IPAddressClass{class("public", isDefault, isAutoClaim)},
			field.ErrorList{publicIsDefault, publicIsAuto}},
		{"with two defaults already, the refusal names both",
			class("edge", isDefault), []v1alpha1.IPAddressClass{class("public", isDefault), class("private", isDefault)},
			field.ErrorList{field.Forbidden(defaultKey, "IPAddressClasses private, public are already default classes; remove their annotations first")}},
		{"a default class being deleted does not count",
			class("private", isDefault), []v1alpha1.IPAddressClass{class("public", isDefault, beingDeleted)}, nil},
		{"an annotation value other than \"true\" does not count",
			class("private", isDefault), []v1alpha1.IPAddressClass{class("public", annotated(v1alpha1.AnnotationDefaultClass, "yes"))}, nil},
		{"a class annotated \"false\" passes beside a default",
			class("private", annotated(v1alpha1.AnnotationDefaultClass, "false")), []v1alpha1.IPAddressClass{class("public", isDefault)}, nil},
		{"the class itself in the list does not count",
			class("public", isDefault), []v1alpha1.IPAddressClass{class("public", isDefault)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateClassCreate(&tc.class, tc.others, nil), tc.want)
		})
	}
}

// A class created under the name of addresses that outlived a former one
// must be of the provisioner holding them.
func TestValidateClassProvisioner(t *testing.T) {
	const metallb = "metallb.drivers.local.sdn.cozystack.io"
	addr := func(class string, finalizers ...string) v1alpha1.IPAddress {
		return v1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-203-0-113-7", Finalizers: finalizers},
			Spec: v1alpha1.IPAddressSpec{Address: "203.0.113.7", ClassName: class}}
	}
	provisionerPath := (*field.Path)(nil).Child("spec", "provisioner")
	for _, tc := range []struct {
		name  string
		class v1alpha1.IPAddressClass
		addrs []v1alpha1.IPAddress
		want  field.ErrorList
	}{
		{"no address of the name", class("public"), nil, nil},
		{"its addresses are its provisioner's", class("public"),
			[]v1alpha1.IPAddress{addr("public", v1alpha1.FinalizerAddressProtection, metallb+"/teardown")}, nil},
		{"addresses no driver holds (a static class's) say nothing", class("public"),
			[]v1alpha1.IPAddress{addr("public", v1alpha1.FinalizerAddressProtection)}, nil},
		{"another class's address does not count", class("public"),
			[]v1alpha1.IPAddress{addr("private", "aws.drivers.local.sdn.cozystack.io/teardown")}, nil},
		{"a finalizer of a provisioner no driver is scoped to (another tool's) does not count", class("public"),
			[]v1alpha1.IPAddress{addr("public", "backup.example.com/keep")}, nil},
		{"addresses another provisioner holds: refused on spec.provisioner, naming it", class("public"),
			[]v1alpha1.IPAddress{addr("public", v1alpha1.FinalizerAddressProtection, "aws.drivers.local.sdn.cozystack.io/teardown")},
			field.ErrorList{field.Invalid(provisionerPath, metallb,
				`IPAddress ip-203-0-113-7 of class "public" is held by provisioner aws.drivers.local.sdn.cozystack.io; re-create the class with that provisioner, or delete the class's addresses first`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateClassProvisioner(&tc.class, tc.addrs, []string{metallb, "aws.drivers.local.sdn.cozystack.io"}, nil), tc.want)
		})
	}
}

func TestValidateClassUpdate(t *testing.T) {
	provisioner := func(p string) func(*v1alpha1.IPAddressClass) {
		return func(c *v1alpha1.IPAddressClass) { c.Spec.Provisioner = p }
	}
	immutable := field.Invalid((*field.Path)(nil).Child("spec", "provisioner"), "aws.drivers.local.sdn.cozystack.io", "field is immutable")
	doubleDefault := []v1alpha1.IPAddressClass{class("public", isDefault), class("private", isDefault)}
	for _, tc := range []struct {
		name     string
		old, new v1alpha1.IPAddressClass
		others   []v1alpha1.IPAddressClass
		want     field.ErrorList
	}{
		{"the provisioner cannot change", class("private"), class("private", provisioner("aws.drivers.local.sdn.cozystack.io")), nil,
			field.ErrorList{immutable}},
		{"the rest of the spec can change", class("private"),
			class("private", func(c *v1alpha1.IPAddressClass) { c.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete }), nil, nil},
		{"adding the default annotation while another class is default is refused",
			class("private"), class("private", isDefault), []v1alpha1.IPAddressClass{class("public", isDefault)}, field.ErrorList{publicIsDefault}},
		{"adding the auto-claim annotation while another class has it is refused",
			class("private"), class("private", isAutoClaim), []v1alpha1.IPAddressClass{class("public", isAutoClaim)}, field.ErrorList{publicIsAuto}},
		{"turning \"false\" into \"true\" is judged like adding it",
			class("private", annotated(v1alpha1.AnnotationDefaultClass, "false")), class("private", isDefault),
			[]v1alpha1.IPAddressClass{class("public", isDefault)}, field.ErrorList{publicIsDefault}},
		{"adding the default annotation when the other default is being deleted passes",
			class("private"), class("private", isDefault), []v1alpha1.IPAddressClass{class("public", isDefault, beingDeleted)}, nil},
		{"keeping the default annotation in a pre-existing double default passes",
			class("private", isDefault), class("private", isDefault), doubleDefault, nil},
		{"an unrelated edit of a class in a pre-existing double default passes",
			class("private", isDefault), class("private", isDefault, func(c *v1alpha1.IPAddressClass) {
				c.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
				c.Labels = map[string]string{"tier": "b"}
			}),
			doubleDefault, nil},
		{"removing the default annotation passes", class("private", isDefault), class("private"), doubleDefault, nil},
		{"a class being deleted is not judged for its annotations",
			class("private", beingDeleted), class("private", beingDeleted, isDefault), []v1alpha1.IPAddressClass{class("public", isDefault)}, nil},
		{"a new provisioner and a second default are both reported",
			class("private"), class("private", isDefault, provisioner("aws.drivers.local.sdn.cozystack.io")),
			[]v1alpha1.IPAddressClass{class("public", isDefault)}, field.ErrorList{immutable, publicIsDefault}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateClassUpdate(&tc.old, &tc.new, tc.others, nil), tc.want)
		})
	}
}

// A class of a provisioner no driver serves is admitted with a warning that
// names the field and the provisioners the drivers serve.
func TestUnservedProvisioner(t *testing.T) {
	p := Principals{Drivers: []string{"d"}, Scopes: map[string][]string{"d": {"metallb.example.com"}}}
	class := &v1alpha1.IPAddressClass{Spec: v1alpha1.IPAddressClassSpec{Provisioner: "metallb.exmaple.com"}}
	const want = `spec.provisioner: no driver the core knows serves "metallb.exmaple.com" (the drivers' provisioners: metallb.example.com); ` +
		"claims of this class bind only addresses an administrator creates, and spec.provisioner cannot be changed later"
	if got := UnservedProvisioner(class, p); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	class.Spec.Provisioner = "metallb.example.com"
	if got := UnservedProvisioner(class, p); got != "" {
		t.Errorf("a served provisioner: %q", got)
	}
}
