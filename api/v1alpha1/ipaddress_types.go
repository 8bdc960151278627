package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ClaimReference names the IPAddressClaim an address is bound to.
type ClaimReference struct {
	// Namespace of the claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UID of the claim. Empty while a driver's or an admin's pre-binding waits
	// for the core to accept it; the core writes it when it does. A UID that no
	// longer matches the named claim marks a stale binding, which is reclaimed.
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// FromClassSource marks an address carved from its class's own range: the
// driver is the IPAM of record.
type FromClassSource struct{}

// ProviderReference records a reservation held by an external provider.
type ProviderReference struct {
	// ID is the provider's stable handle for the reservation (e.g. an
	// allocation ID).
	// +required
	// +kubebuilder:validation:MinLength=1
	ID string `json:"id"`
}

// AddressSource says who holds the reservation an address records. Exactly one
// member is set.
// +kubebuilder:validation:XValidation:rule="has(self.fromClass) != has(self.providerRef)",message="exactly one of fromClass or providerRef must be set"
type AddressSource struct {
	// FromClass: the driver carved the address from the class's range.
	// +optional
	FromClass *FromClassSource `json:"fromClass,omitempty"`
	// ProviderRef: a provider holds the reservation under this handle.
	// +optional
	ProviderRef *ProviderReference `json:"providerRef,omitempty"`
}

// IPAddressSpec is the reservation: one IP, its class, its binding.
type IPAddressSpec struct {
	// Address is the IP this object records, in canonical form (RFC 5952 for
	// IPv6). The object's name must be the one derived from it:
	// 203.0.113.7 is named ip-203-0-113-7, 2001:db8::7 ip-2001-db8--7.
	// Immutable.
	// +required
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip.isCanonical(self)",message="must be an IPv4 or IPv6 address in canonical form (an IPv6 one in lowercase and shortest, e.g. 2001:db8::7, not 2001:DB8:0::7)"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="address is immutable"
	Address string `json:"address"`

	// ClassName is the IPAddressClass this address belongs to. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="className is immutable"
	ClassName string `json:"className"`

	// ClaimRef is the binding: the claim that holds this address. It is the
	// only record of a binding. Set by the core when it matches a claim, by a
	// driver only when it creates the address pre-bound; cleared by an admin
	// (or the class's releaseDelay) to recycle a Released address.
	// +optional
	ClaimRef *ClaimReference `json:"claimRef,omitempty"`

	// ReclaimPolicy is what happens to this address when its claim is
	// deleted: Retain makes it Released, Delete deletes it. Copied from the
	// class when the address is provisioned. A claim with a controller
	// owner (an auto-claim's Service) takes its addresses with it whatever
	// this says, unless its class keeps Released addresses in their
	// namespace.
	// +optional
	// +kubebuilder:default=Retain
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// Source says who holds the reservation. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="source is immutable"
	Source AddressSource `json:"source"`
}

// AddressPhase is where an address is in its life cycle.
// +kubebuilder:validation:Enum=Pending;Available;Bound;Released;Conflict;Lost
type AddressPhase string

const (
	// AddressPending: new, invalid, or pre-bound and waiting for acceptance.
	AddressPending AddressPhase = "Pending"
	// AddressAvailable: no claimRef; matchable by claims of its class.
	AddressAvailable AddressPhase = "Available"
	// AddressBound: bound to a live claim.
	AddressBound AddressPhase = "Bound"
	// AddressReleased: its claim is gone; kept under Retain.
	AddressReleased AddressPhase = "Released"
	// AddressConflict: the backend handed the address to a workload the
	// binding does not authorize. Set and cleared by the driver only.
	AddressConflict AddressPhase = "Conflict"
	// AddressLost: the backing reservation disappeared. Set and cleared by
	// the driver only.
	AddressLost AddressPhase = "Lost"
)

// WorkloadReference names the workload an address is announced for.
type WorkloadReference struct {
	// Kind of the workload, e.g. Service.
	// +required
	Kind string `json:"kind"`
	// Namespace of the workload.
	// +required
	Namespace string `json:"namespace"`
	// Name of the workload.
	// +required
	Name string `json:"name"`
}

// HeldReference names a workload the driver holds an address on, by UID:
// a namesake created later is another workload.
type HeldReference struct {
	// Kind of the workload, e.g. Service.
	// +required
	Kind string `json:"kind"`
	// Namespace of the workload.
	// +required
	Namespace string `json:"namespace"`
	// Name of the workload.
	// +required
	Name string `json:"name"`
	// UID of the workload.
	// +required
	UID types.UID `json:"uid"`
}

// Holding is the driver's own record of where it holds the address in its
// backend's books. It is the driver's input as well as its output: which
// workloads it wrote a pin on is read from here, never inferred from the
// workloads, which others can write.
type Holding struct {
	// Workload is the workload the driver pinned the address to; empty
	// while the driver's own placeholder alone holds it.
	// +optional
	Workload *HeldReference `json:"workload,omitempty"`
	// From are, during a handoff, the workloads the driver pinned the
	// address to before and has not let go of yet.
	// +optional
	// +listType=atomic
	From []HeldReference `json:"from,omitempty"`
	// Since is when the handoff under way began; empty when none is.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// IPAddressStatus is the observed state of an address.
type IPAddressStatus struct {
	// Phase: Available, Bound and Released are written by the core;
	// Conflict and Lost by the class's driver; Pending by the core for a new,
	// invalid or not-yet-accepted address.
	// +optional
	Phase AddressPhase `json:"phase,omitempty"`

	// AssociatedTo is the workload the address is currently announced for;
	// empty means reserved but inert. Written by drivers only.
	// +optional
	AssociatedTo *WorkloadReference `json:"associatedTo,omitempty"`

	// Holding is the driver's record of where it holds the address, written
	// by drivers only. The core reads only whether it is set: a Released
	// address is neither recycled nor taken back while its driver still
	// holds it for a workload (leave it unset while the address is inert).
	// +optional
	Holding *Holding `json:"holding,omitempty"`

	// Conditions: Bound (its lastTransitionTime dates every core-owned phase
	// change, and so the release time), and any a driver adds.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPAddress is one concrete IP: the reservation and its inventory record,
// bound to at most one claim. Cluster-scoped, like a PersistentVolume. Its name
// derives from the IP, so there is one object per IP.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ipaddr
// +kubebuilder:selectablefield:JSONPath=`.spec.className`
// +kubebuilder:selectablefield:JSONPath=`.spec.address`
// +kubebuilder:selectablefield:JSONPath=`.spec.claimRef.namespace`
// +kubebuilder:selectablefield:JSONPath=`.spec.claimRef.name`
// +kubebuilder:validation:XValidation:rule=`!(isIP(self.spec.address) && ip.isCanonical(self.spec.address)) || self.metadata.name == "ip-" + self.spec.address.replace(".", "-").replace(":", "-") + (self.spec.address.endsWith(":") ? "0" : "")`,message="metadata.name must be derived from spec.address: ip- followed by the address with each . and : replaced by - (and 0 appended if it would end in -), e.g. ip-203-0-113-7 or ip-2001-db8--7"
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.className`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Claim-Namespace",type=string,JSONPath=`.spec.claimRef.namespace`
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=`.spec.claimRef.name`
// +kubebuilder:printcolumn:name="Attached-Kind",type=string,JSONPath=`.status.associatedTo.kind`,priority=1
// +kubebuilder:printcolumn:name="Attached-To",type=string,JSONPath=`.status.associatedTo.name`
// +kubebuilder:printcolumn:name="Reclaim",type=string,JSONPath=`.spec.reclaimPolicy`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAddress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the reservation.
	// +required
	Spec IPAddressSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status IPAddressStatus `json:"status,omitempty"`
}

// IPAddressList is a list of IPAddress.
// +kubebuilder:object:root=true
type IPAddressList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddress `json:"items"`
}

func init() {
	register(&IPAddress{}, &IPAddressList{})
}
