package webhook

import (
	"fmt"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cozystack/address-controller/api/v1alpha1"
	"github.com/cozystack/address-controller/internal/binding"
	"github.com/cozystack/address-controller/internal/untrack"
)

// DefaultClaim defaults a claim being created and returns warnings for what
// it could not default. An empty spec.family becomes IPv4. An empty
// spec.className becomes the single default class, so the claim's spec says
// what it was resolved against; with no default class or several it stays
// empty and the core's own resolution (§4 step 6, which records the result
// in status.className) takes over once there is exactly one. A claim
// created with a status (restored from a backup: the API server drops the
// status only after admission) takes the class it resolved to before from
// its status.className, the sticky record, not today's default (unless
// that class is being deleted). A named
// class that does not exist is kept — it may be created later — with a
// warning. classes is every IPAddressClass.
func DefaultClaim(claim *v1alpha1.IPAddressClaim, classes []v1alpha1.IPAddressClass) (warnings []string) {
	if claim == nil {
		return nil
	}
	if claim.Spec.Family == "" {
		claim.Spec.Family = v1alpha1.IPv4
	}
	if claim.Spec.ClassName == "" && claim.Status.ClassName != "" && !departing(claim.Status.ClassName, classes) {
		claim.Spec.ClassName = claim.Status.ClassName
	}
	if claim.Spec.ClassName == "" {
		return defaultClassName(claim, classes)
	}
	return checkClassName(claim.Spec.ClassName, classes)
}

// departing reports whether class name exists and is being deleted: a
// restored claim's former class that takes no new claims is not taken back
// (one not created yet is: a restore brings the classes last).
func departing(name string, classes []v1alpha1.IPAddressClass) bool {
	i := slices.IndexFunc(classes, func(c v1alpha1.IPAddressClass) bool { return c.Name == name })
	return i >= 0 && classes[i].DeletionTimestamp != nil
}

// defaultClassName sets the single default class that is not being deleted,
// the same choice the core makes (a class being deleted takes no new claims).
func defaultClassName(claim *v1alpha1.IPAddressClaim, classes []v1alpha1.IPAddressClass) []string {
	defaults := binding.AnnotatedClasses(classes, v1alpha1.AnnotationDefaultClass)
	switch len(defaults) {
	case 1:
		claim.Spec.ClassName = defaults[0]
		return nil
	case 0:
		if leaving := binding.DepartingClasses(classes, v1alpha1.AnnotationDefaultClass); len(leaving) > 0 {
			return []string{fmt.Sprintf(
				"spec.className is left empty: the default IPAddressClass %s is being deleted; "+
					"the claim stays Pending until another class is annotated %s: \"true\", or until it names a class",
				strings.Join(leaving, ", "), v1alpha1.AnnotationDefaultClass)}
		}
		return []string{fmt.Sprintf(
			"spec.className is left empty: no IPAddressClass is annotated %s: \"true\"; "+
				"the claim stays Pending until one is, or until it names a class", v1alpha1.AnnotationDefaultClass)}
	default:
		return []string{fmt.Sprintf(
			"spec.className is left empty: %d IPAddressClasses are annotated %s: \"true\" (%s); "+
				"the claim stays Pending until exactly one is, or until it names a class",
			len(defaults), v1alpha1.AnnotationDefaultClass, strings.Join(defaults, ", "))}
	}
}

// checkClassName warns about a named class the core would not resolve.
func checkClassName(name string, classes []v1alpha1.IPAddressClass) []string {
	for i := range classes {
		if classes[i].Name != name {
			continue
		}
		if classes[i].DeletionTimestamp != nil {
			return []string{fmt.Sprintf("IPAddressClass %s is being deleted: the claim stays Pending unless it is recreated", name)}
		}
		return nil
	}
	return []string{fmt.Sprintf("IPAddressClass %s does not exist (yet): the claim stays Pending until it does", name)}
}

// ProtectClaim does at admission what the claim reconciler's first pass
// would otherwise write in a patch of its own (§4 steps 2 and 6): it adds
// the protection finalizer and, when spec.className names a class that
// exists and is not being deleted, stamps the class's provisioner, so a
// driver sees the claim at once. The reconciler still writes whatever is
// missing (a class created later, a claim admitted while no webhook ran).
// It reports whether the claim carries a stamp now.
func ProtectClaim(claim *v1alpha1.IPAddressClaim, classes []v1alpha1.IPAddressClass) (stamped bool) {
	if claim == nil || claim.DeletionTimestamp != nil {
		return false
	}
	controllerutil.AddFinalizer(claim, v1alpha1.FinalizerClaimProtection)
	for i := range classes {
		c := &classes[i]
		if c.Name != claim.Spec.ClassName || c.DeletionTimestamp != nil || c.Spec.Provisioner == "" {
			continue
		}
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, v1alpha1.AnnotationProvisioner, c.Spec.Provisioner)
		return true
	}
	return false
}

// ProtectAddress is the patch that adds at admission the protection
// finalizer the address reconciler's first pass would otherwise write
// (contract 5-2), so an administrator's address costs the API server one
// write fewer; none when the address carries it already or is being
// deleted. The MetalLB driver creates its addresses with it, and the chart
// does not call the webhook for those. The reconciler still adds it to an
// address admitted while no webhook ran. The patch touches the finalizers
// only: a marshalled copy of the whole object would also drop an explicit
// zero value the schema is there to refuse.
func ProtectAddress(a *v1alpha1.IPAddress) []jsonpatch.JsonPatchOperation {
	if a == nil || a.DeletionTimestamp != nil || controllerutil.ContainsFinalizer(a, v1alpha1.FinalizerAddressProtection) {
		return nil
	}
	if len(a.Finalizers) == 0 {
		return []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/finalizers", Value: []string{v1alpha1.FinalizerAddressProtection}}}
	}
	return []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/finalizers/-", Value: v1alpha1.FinalizerAddressProtection}}
}

// Untrack drops a new claim's field-tracking record, which its creator's
// request gave it, unless a server-side apply made it (package untrack):
// the record would cost the API server on each of the claim's writes.
func Untrack(m *metav1.ObjectMeta) {
	if untrack.Droppable(m.ManagedFields) {
		m.ManagedFields = nil
	}
}

// UntrackPatch is Untrack as a patch, for the address defaulter's
// patch of its own ops: none when the record stays.
func UntrackPatch(m *metav1.ObjectMeta) []jsonpatch.JsonPatchOperation {
	if !untrack.Droppable(m.ManagedFields) {
		return nil
	}
	return []jsonpatch.JsonPatchOperation{{Operation: "remove", Path: "/metadata/managedFields"}}
}
