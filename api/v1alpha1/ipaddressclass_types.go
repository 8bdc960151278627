package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ReclaimPolicy says what happens to an IPAddress when its claim goes.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the address, Released, until an admin (or the
	// class's releaseDelay) recycles or deletes it.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete deletes the IPAddress object; its driver releases any
	// backend state through its own finalizer.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// IPAddressClassSpec names the driver that fulfils claims of the class and
// the policies it applies.
type IPAddressClassSpec struct {
	// Provisioner is the name of the driver that fulfils claims of this class,
	// e.g. metallb.drivers.local.sdn.cozystack.io. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="provisioner is immutable"
	Provisioner string `json:"provisioner"`

	// ReclaimPolicy is copied onto every IPAddress provisioned for this class,
	// where it takes effect when the address's claim is deleted: Retain keeps
	// the address Released, Delete deletes it. Editing it later does not change
	// addresses that already exist.
	// +optional
	// +kubebuilder:default=Retain
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// ReleaseDelay, when set, returns a Released address of this class to
	// Available once this long has passed since it was released (the
	// lastTransitionTime of its Bound condition). Addresses annotated
	// ipaddress.local.sdn.cozystack.io/held: "true" are exempt. Unset: a
	// Released address stays until an admin clears its claimRef or deletes it.
	// +optional
	ReleaseDelay *metav1.Duration `json:"releaseDelay,omitempty"`

	// Parameters is an opaque object for the class's driver (for MetalLB:
	// {pool: <IPAddressPool name>}). The core never reads it.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`
}

// IPAddressClass is a kind of address: which driver provisions it, from what,
// and what happens to it when released. Cluster-scoped, like a StorageClass.
// Annotate one class ipaddressclass.local.sdn.cozystack.io/is-default-class:
// "true" to serve claims that name no class, and at most one
// ipaddressclass.local.sdn.cozystack.io/is-auto-claim-class: "true" to serve
// auto-claims.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ipclass
// +kubebuilder:printcolumn:name="Provisioner",type=string,JSONPath=`.spec.provisioner`
// +kubebuilder:printcolumn:name="Reclaim",type=string,JSONPath=`.spec.reclaimPolicy`
// +kubebuilder:printcolumn:name="ReleaseDelay",type=string,JSONPath=`.spec.releaseDelay`
// +kubebuilder:printcolumn:name="Default",type=string,JSONPath=`.metadata.annotations.ipaddressclass\.local\.sdn\.cozystack\.io/is-default-class`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAddressClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec defines the class.
	// +required
	Spec IPAddressClassSpec `json:"spec"`
}

// IPAddressClassList is a list of IPAddressClass.
// +kubebuilder:object:root=true
type IPAddressClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressClass `json:"items"`
}

func init() {
	register(&IPAddressClass{}, &IPAddressClassList{})
}
