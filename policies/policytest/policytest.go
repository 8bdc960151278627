// Package policytest is what the policies' tests share, written once: the
// fields metallb-iad-service-pins reserves, with two values to set and
// change each to, and the exact answers kube-apiserver gives when a policy
// denies a write. policies evaluates the CEL in Go tables with them;
// test/policy has a real kube-apiserver enforce the same.
package policytest

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Field is one field the service-pins policy keeps to the driver and
// administrators.
type Field struct {
	// Path is the field as the policy's message names it.
	Path          string
	First, Second string
	// Annotation is the key of an annotation (which a status write can
	// change too); empty for a spec field.
	Annotation string
}

// ReservedFields are every field the policy reserves.
var ReservedFields = []Field{
	annotation("metallb.io/loadBalancerIPs", "198.51.100.5", "198.51.100.5,2001:db8::5"),
	annotation("metallb.io/address-pool", "reserved", "public"),
	annotation("metallb.io/allow-shared-ip", "shared-a", "shared-b"),
	annotation("metallb.universe.tf/loadBalancerIPs", "198.51.100.6", "198.51.100.7"),
	annotation("metallb.universe.tf/address-pool", "reserved", "public"),
	annotation("metallb.universe.tf/allow-shared-ip", "shared-a", "shared-b"),
	annotation("metallb.drivers.local.sdn.cozystack.io/pinned", "198.51.100.5", "198.51.100.8"),
	{Path: "spec.loadBalancerIP", First: "198.51.100.9", Second: "198.51.100.10"},
	// CVE-2020-8554: kube-proxy sends a Service's externalIPs to it.
	{Path: "spec.externalIPs", First: "198.51.100.11", Second: "198.51.100.11,198.51.100.12"},
}

func annotation(key, first, second string) Field {
	return Field{Path: "metadata.annotations[" + key + "]", First: first, Second: second, Annotation: key}
}

// Get reads the field of svc, and whether it is set.
func (f Field) Get(svc *corev1.Service) (string, bool) {
	switch {
	case f.Annotation != "":
		v, ok := svc.Annotations[f.Annotation]
		return v, ok
	case f.Path == "spec.externalIPs":
		return strings.Join(svc.Spec.ExternalIPs, ","), len(svc.Spec.ExternalIPs) > 0
	}
	return svc.Spec.LoadBalancerIP, svc.Spec.LoadBalancerIP != ""
}

// Set sets the field of svc to value (a comma-separated list for a list).
func (f Field) Set(svc *corev1.Service, value string) {
	switch {
	case f.Annotation != "":
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[f.Annotation] = value
	case f.Path == "spec.externalIPs":
		svc.Spec.ExternalIPs = strings.Split(value, ",")
	default:
		svc.Spec.LoadBalancerIP = value
	}
}

// Unset removes the field from svc.
func (f Field) Unset(svc *corev1.Service) {
	switch {
	case f.Annotation != "":
		delete(svc.Annotations, f.Annotation)
	case f.Path == "spec.externalIPs":
		svc.Spec.ExternalIPs = nil
	default:
		svc.Spec.LoadBalancerIP = ""
	}
}

// Policy names of the driver chart's policies; each binding is named as
// its policy.
const (
	ServicePins     = "metallb-iad-service-pins"
	ClassParameters = "metallb-iad-class-parameters"
)

// Denied is how kube-apiserver opens its answer to a write of the object
// named name, of resource (plural, with its group), that policy denies.
func Denied(policy, resource, name string) string {
	return resource + ` "` + name + `" is forbidden: ValidatingAdmissionPolicy '` + policy + `' with binding '` + policy + `' denied request: `
}

// PinsMessage is the service-pins policy's message for a write touching
// the fields at paths.
func PinsMessage(paths ...string) string {
	return strings.Join(paths, ", ") + " may only be set, changed or removed by the metallb-iad driver or a cluster administrator"
}

// PinsDenial is kube-apiserver's whole answer to a write of Service name
// touching the fields at paths.
func PinsDenial(name string, paths ...string) string {
	return Denied(ServicePins, "services", name) + PinsMessage(paths...)
}

// Warned is how kube-apiserver opens the warning it returns when policy,
// bound with the Warn action, would have denied a write.
func Warned(policy string) string {
	return "Validation failed for ValidatingAdmissionPolicy '" + policy + "' with binding '" + policy + "': "
}
