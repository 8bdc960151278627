package claim

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
)

// resolution is the outcome of §4 step 6: a class, or the reason there is none.
type resolution struct {
	class   *v1alpha1.IPAddressClass
	reason  string
	message string
}

// resolveClass tries spec.className (an explicit spec always wins), then
// status.className (the sticky record of an earlier resolution), then the
// single default class. It refuses to guess among several defaults, and a
// class being deleted takes no new claims.
func resolveClass(claim *v1alpha1.IPAddressClaim, classes []v1alpha1.IPAddressClass) resolution {
	name := binding.ClassName(claim)
	if name == "" {
		defaults := binding.AnnotatedClasses(classes, v1alpha1.AnnotationDefaultClass)
		switch len(defaults) {
		case 0:
			if leaving := binding.DepartingClasses(classes, v1alpha1.AnnotationDefaultClass); len(leaving) > 0 {
				return resolution{reason: v1alpha1.ReasonNoDefaultClass, message: fmt.Sprintf(
					"the claim names no class and the default class %s is being deleted; name one in spec.className or mark another default",
					strings.Join(leaving, ", "))}
			}
			return resolution{reason: v1alpha1.ReasonNoDefaultClass, message: fmt.Sprintf(
				"the claim names no class and no IPAddressClass is annotated %s: \"true\"", v1alpha1.AnnotationDefaultClass)}
		case 1:
			name = defaults[0]
		default:
			return resolution{reason: v1alpha1.ReasonMultipleDefaultClasses, message: fmt.Sprintf(
				"the claim names no class and %d classes are marked default (%s); name one in spec.className or leave one default",
				len(defaults), strings.Join(defaults, ", "))}
		}
	}
	for i := range classes {
		c := &classes[i]
		if c.Name != name {
			continue
		}
		if c.DeletionTimestamp != nil {
			return resolution{reason: v1alpha1.ReasonClassNotFound, message: fmt.Sprintf("IPAddressClass %q is being deleted", name)}
		}
		return resolution{class: c, reason: v1alpha1.ReasonResolved,
			message: fmt.Sprintf("resolved to class %q (provisioner %s)", name, c.Spec.Provisioner)}
	}
	return resolution{reason: v1alpha1.ReasonClassNotFound, message: fmt.Sprintf("IPAddressClass %q does not exist", name)}
}

func (r resolution) condition() metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionClassResolved, Status: metav1.ConditionFalse, Reason: r.reason, Message: r.message}
	if r.class != nil {
		c.Status = metav1.ConditionTrue
	}
	return c
}
