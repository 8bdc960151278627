package webhook

import (
	"fmt"
	"net/netip"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cozystack/address-controller/api/v1alpha1"
)

// The validators take the path of the part of the object they judge: the
// spec validators field.NewPath("spec"), the status validators
// field.NewPath("status"), and those that read metadata as well as the spec
// (ValidateAddressCreate, ValidateClassCreate, ValidateClassUpdate) the
// object's own path, nil for a top-level object.

const (
	msgClaimBound  = "cannot change once the claim is bound; delete and recreate the claim to move it"
	msgClaimStatus = "only the address-controller core writes an IPAddressClaim's status; " +
		"it is recomputed from the addresses bound to the claim"
	msgStamp = "only the address-controller core writes the provisioner stamp: " +
		"it names the provisioner of the class the core resolved the claim to"
	// msgStampDropped takes the stamp's value.
	msgStampDropped = "metadata.annotations[" + v1alpha1.AnnotationProvisioner + "]: %q removed; " +
		"only the address-controller core stamps a claim, once it has resolved its class"
	msgAutoClaimed = "only the address-controller core marks the claims it creates for a Service (auto-claim): " +
		"the mark lets it name the claim on the Service, or delete it"
	// msgAutoClaimedDropped takes the mark's value.
	msgAutoClaimedDropped = "metadata.annotations[" + v1alpha1.AnnotationAutoClaimedFor + "]: %q removed; " +
		"only the address-controller core marks the claims it creates for a Service"
)

// coreMarks are the claim annotations only the core writes, with why, and
// the warning when one is dropped from a claim someone else creates.
var coreMarks = []struct{ key, msg, dropped string }{
	{v1alpha1.AnnotationProvisioner, msgStamp, msgStampDropped},
	{v1alpha1.AnnotationAutoClaimedFor, msgAutoClaimed, msgAutoClaimedDropped},
}

// ValidateClaimUpdate keeps a claim that holds addresses on them: once bound
// its class, family and addressName are fixed, since changing them would
// leave the claim's addresses answering a request it no longer makes.
// Before that the claim may be re-targeted; the core's provisioner stamp
// follows (§4 step 6). holding says an address carries the claim's UID in
// its claimRef already — the binding record, which the claim's status
// reports only a pass later (a driver creates its addresses with the UID).
// fldPath is the spec's path.
func ValidateClaimUpdate(oldClaim, newClaim *v1alpha1.IPAddressClaim, holding bool, fldPath *field.Path) field.ErrorList {
	if !claimHeld(oldClaim) && !holding {
		return nil
	}
	var errs field.ErrorList
	o, n := oldClaim.Spec, newClaim.Spec
	if o.ClassName != n.ClassName {
		errs = append(errs, field.Forbidden(fldPath.Child("className"), msgClaimBound))
	}
	// An empty family means IPv4 (IPFamily.Families), so spelling it out is
	// no change.
	if orIPv4(o.Family) != orIPv4(n.Family) {
		errs = append(errs, field.Forbidden(fldPath.Child("family"), msgClaimBound))
	}
	if o.AddressName != n.AddressName {
		errs = append(errs, field.Forbidden(fldPath.Child("addressName"), msgClaimBound))
	}
	return errs
}

// ValidateClaimAddressName refuses a spec.addressName that no IPAddress can
// have, or that names an address of another family than the claim asks
// for: the claim would wait for it for good. An IP given for the name is
// answered with the name of its IPAddress. fldPath is the spec's path.
func ValidateClaimAddressName(spec *v1alpha1.IPAddressClaimSpec, fldPath *field.Path) field.ErrorList {
	name := spec.AddressName
	if name == "" {
		return nil
	}
	ip, ok := v1alpha1.IPOfAddressName(name)
	if !ok {
		detail := "no IPAddress has this name: an IPAddress is named ip- followed by its IP with '.' and ':' replaced by '-', and 0 appended to a trailing '-' (ip-203-0-113-7, ip-2001-db8--7, ip-2001-db8--0 for 2001:db8::)"
		if addr, err := netip.ParseAddr(name); err == nil {
			if derived, err := v1alpha1.IPAddressName(addr.Unmap().WithZone("").String()); err == nil {
				detail = fmt.Sprintf("is an IP, not the name of an IPAddress; the IPAddress of %s is named %s", addr.Unmap().WithZone(""), derived)
			}
		}
		return field.ErrorList{field.Invalid(fldPath.Child("addressName"), name, detail)}
	}
	family := v1alpha1.IPv4
	if ip.Is6() {
		family = v1alpha1.IPv6
	}
	// A family the schema does not know (ipv6, say) is the schema's to
	// refuse, on spec.family: compared here, the error would fall on the
	// address's name.
	if want := orIPv4(spec.Family); (want == v1alpha1.IPv4 || want == v1alpha1.IPv6) && want != family {
		return field.ErrorList{field.Invalid(fldPath.Child("addressName"), name,
			fmt.Sprintf("names an %s address (%s) and spec.family is %s", family, ip, want))}
	}
	return nil
}

// Retargets says whether an update changes what the claim asks for: its
// class, family or addressName.
func Retargets(oldClaim, newClaim *v1alpha1.IPAddressClaim) bool {
	o, n := oldClaim.Spec, newClaim.Spec
	return o.ClassName != n.ClassName || orIPv4(o.Family) != orIPv4(n.Family) || o.AddressName != n.AddressName
}

func orIPv4(f v1alpha1.IPFamily) v1alpha1.IPFamily {
	if f == "" {
		return v1alpha1.IPv4
	}
	return f
}

// claimHeld reports whether a claim holds or held addresses: Bound, or Lost
// (it was bound and waits for its address to come back), or reporting any.
func claimHeld(c *v1alpha1.IPAddressClaim) bool {
	return c.Status.Phase == v1alpha1.ClaimBound || c.Status.Phase == v1alpha1.ClaimLost || len(c.Status.Addresses) > 0
}

// ValidateClaimStatusUpdate keeps a claim's status to the core (§3): it is a
// projection of the addresses' claimRefs, and anybody else's write would be
// overwritten on the next pass or, worse, believed in between. A write that
// leaves the status as it was is anybody's. fldPath is the status's path.
func ValidateClaimStatusUpdate(oldClaim, newClaim *v1alpha1.IPAddressClaim, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	if p.IsCore(u) || equality.Semantic.DeepEqual(oldClaim.Status, newClaim.Status) {
		return nil
	}
	return field.ErrorList{field.Forbidden(fldPath, msgClaimStatus)}
}

// ValidateClaimStampUpdate keeps the core's marks on a claim to the core
// (§3). The provisioner stamp: a driver serves the claims stamped with its
// name, so a stamp written by anyone else would hand the claim to a driver
// the class does not name. The auto-claim mark: the core names a claim it
// created on its Service, or deletes it, so a mark written by anyone else
// would have the core annotate a Service its writer may not edit. Setting,
// changing and removing either are the core's. fldPath is the object's
// path.
func ValidateClaimStampUpdate(oldClaim, newClaim *v1alpha1.IPAddressClaim, u authenticationv1.UserInfo, p Principals, fldPath *field.Path) field.ErrorList {
	if p.IsCore(u) {
		return nil
	}
	var errs field.ErrorList
	for _, m := range coreMarks {
		o, had := oldClaim.Annotations[m.key]
		n, has := newClaim.Annotations[m.key]
		if o != n || had != has {
			errs = append(errs, field.Forbidden(fldPath.Child("metadata", "annotations").Key(m.key), m.msg))
		}
	}
	return errs
}

// DropForeignStamp removes the core's marks from a claim that anyone but
// the core creates, and says so in a warning. Removed rather than refused:
// a claim restored from a backup or copied from another cluster carries its
// old marks, and the core stamps it again once it resolves the claim's
// class.
func DropForeignStamp(claim *v1alpha1.IPAddressClaim, u authenticationv1.UserInfo, p Principals) (warnings []string) {
	if p.IsCore(u) {
		return nil
	}
	for _, m := range coreMarks {
		if v, ok := claim.Annotations[m.key]; ok {
			delete(claim.Annotations, m.key)
			warnings = append(warnings, fmt.Sprintf(m.dropped, v))
		}
	}
	return warnings
}

// ClassFlags and AddressFlags are the annotations that switch a role on
// with "true": a class's default and auto-claim marks, and an address's
// exemption from releaseDelay.
var (
	ClassFlags   = []string{v1alpha1.AnnotationDefaultClass, v1alpha1.AnnotationAutoClaimClass}
	AddressFlags = []string{v1alpha1.AnnotationHeld}
)

// ValidateFlagAnnotations refuses a value other than "true" or "false" for
// the flag annotations keys: the controllers read "true" alone, so "yes" or
// "True" would be accepted and mean nothing — an address an admin meant to
// hold recycled to another namespace, a default class that is none. A value
// an object already carries is left as it is. fldPath is the object's.
func ValidateFlagAnnotations(oldAnnotations, annotations map[string]string, keys []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range keys {
		v, ok := annotations[k]
		if !ok || v == "true" || v == "false" {
			continue
		}
		if was, had := oldAnnotations[k]; had && was == v {
			continue
		}
		errs = append(errs, field.NotSupported(fldPath.Child("metadata", "annotations").Key(k), v, []string{"true", "false"}))
	}
	return errs
}
