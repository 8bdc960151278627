package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPFamily is the family a claim asks for.
// +kubebuilder:validation:Enum=IPv4;IPv6;Dual
type IPFamily string

const (
	// IPv4 binds one IPv4 address.
	IPv4 IPFamily = "IPv4"
	// IPv6 binds one IPv6 address.
	IPv6 IPFamily = "IPv6"
	// Dual binds one address of each family.
	Dual IPFamily = "Dual"
)

// IPAddressClaimSpec is a tenant's request for an address.
// +kubebuilder:validation:XValidation:rule="!has(self.addressName) || self.family != 'Dual'",fieldPath=".addressName",message="addressName pre-binds one address and needs a single-family claim (IPv4 or IPv6)"
type IPAddressClaimSpec struct {
	// ClassName is the IPAddressClass to claim from. Empty means the default
	// class (the one annotated is-default-class); the class resolved is
	// recorded in status.className and kept.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClassName string `json:"className,omitempty"`

	// Family is IPv4, IPv6, or Dual (one address of each).
	// +optional
	// +kubebuilder:default=IPv4
	Family IPFamily `json:"family,omitempty"`

	// AddressName pre-binds the claim to one specific Available IPAddress
	// (by object name, e.g. ip-203-0-113-7) instead of the class's choice.
	// Single-family claims only.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AddressName string `json:"addressName,omitempty"`
}

// ClaimPhase is where a claim is in its life cycle.
// +kubebuilder:validation:Enum=Pending;Bound;Lost
type ClaimPhase string

const (
	// ClaimPending: some requested family has no address yet.
	ClaimPending ClaimPhase = "Pending"
	// ClaimBound: every requested family has an address that is not Lost.
	ClaimBound ClaimPhase = "Bound"
	// ClaimLost: a binding degraded; the claim waits for the address to come
	// back, or for an admin to delete it so a new one can be bound.
	ClaimLost ClaimPhase = "Lost"
)

// ClaimedAddress is one address bound to a claim.
type ClaimedAddress struct {
	// Name of the IPAddress object.
	Name string `json:"name"`
	// Address is the IP, what a tenant puts in DNS.
	Address string `json:"address"`
}

// IPAddressClaimStatus is derived from the IPAddress objects bound to the
// claim; it is recomputed on every pass and never authoritative.
type IPAddressClaimStatus struct {
	// Phase is Pending, Bound or Lost.
	// +optional
	Phase ClaimPhase `json:"phase,omitempty"`

	// ClassName records the class this claim resolved to, so that moving the
	// default-class annotation does not re-target it.
	// +optional
	ClassName string `json:"className,omitempty"`

	// Addresses lists every address bound to the claim, one per family,
	// sorted by object name.
	// +optional
	// +listType=atomic
	Addresses []ClaimedAddress `json:"addresses,omitempty"`

	// Conditions: ClassResolved and Bound.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPAddressClaim is a tenant's request for an address of a class: the whole
// tenant-facing API. It keeps its addresses while workloads come and go; a
// LoadBalancer Service in the same namespace uses them by naming the claim in
// the local.sdn.cozystack.io/ip-address-claim annotation. Deleting the claim
// releases them according to their reclaim policy; a claim with a
// controller owner (an auto-claim's Service) takes them with it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ipclaim
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.status.className`
// +kubebuilder:printcolumn:name="Family",type=string,JSONPath=`.spec.family`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.addresses[0].address`
// +kubebuilder:printcolumn:name="Address-2",type=string,JSONPath=`.status.addresses[1].address`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Bound")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule=`!has(oldSelf.status) || !((has(oldSelf.status.phase) && oldSelf.status.phase in ['Bound', 'Lost']) || (has(oldSelf.status.addresses) && size(oldSelf.status.addresses) > 0)) || (has(self.spec) && has(self.spec.className) ? self.spec.className : "") == (has(oldSelf.spec) && has(oldSelf.spec.className) ? oldSelf.spec.className : "")`,fieldPath=".spec.className",reason=FieldValueForbidden,message="cannot change once the claim is bound; delete and recreate the claim to move it"
// +kubebuilder:validation:XValidation:rule=`!has(oldSelf.status) || !((has(oldSelf.status.phase) && oldSelf.status.phase in ['Bound', 'Lost']) || (has(oldSelf.status.addresses) && size(oldSelf.status.addresses) > 0)) || (has(self.spec) && has(self.spec.family) ? self.spec.family : 'IPv4') == (has(oldSelf.spec) && has(oldSelf.spec.family) ? oldSelf.spec.family : 'IPv4')`,fieldPath=".spec.family",reason=FieldValueForbidden,message="cannot change once the claim is bound; delete and recreate the claim to move it"
// +kubebuilder:validation:XValidation:rule=`!has(oldSelf.status) || !((has(oldSelf.status.phase) && oldSelf.status.phase in ['Bound', 'Lost']) || (has(oldSelf.status.addresses) && size(oldSelf.status.addresses) > 0)) || (has(self.spec) && has(self.spec.addressName) ? self.spec.addressName : "") == (has(oldSelf.spec) && has(oldSelf.spec.addressName) ? oldSelf.spec.addressName : "")`,fieldPath=".spec.addressName",reason=FieldValueForbidden,message="cannot change once the claim is bound; delete and recreate the claim to move it"
type IPAddressClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the request.
	// +optional
	Spec IPAddressClaimSpec `json:"spec,omitempty"`
	// Status is derived from the bound addresses.
	// +optional
	Status IPAddressClaimStatus `json:"status,omitempty"`
}

// IPAddressClaimList is a list of IPAddressClaim.
// +kubebuilder:object:root=true
type IPAddressClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressClaim `json:"items"`
}

func init() {
	register(&IPAddressClaim{}, &IPAddressClaimList{})
}
