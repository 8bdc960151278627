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
	// A Go duration, never negative (a negative one would recycle every
	// Released address at once) and short enough to parse (Go's durations
	// end near 2,562,047h; one past it would stop every controller reading
	// classes): 720h, 90m, 0.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:XValidation:rule="self.matches(r'^(0|(\\d{1,6}(\\.\\d*)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a duration that is not negative, such as 720h, 90m or 0 (units h, m, s, ms, us, ns; at most 6 digits before each)"
	ReleaseDelay *metav1.Duration `json:"releaseDelay,omitempty"`

	// KeepReleasedInNamespace keeps a Released address its namespace's: a
	// new claim of the same namespace, class and family binds it again —
	// a Released address last bound to a claim of the same name first, then
	// the one released longest ago — before any Available address is
	// matched or a new one provisioned, and no other namespace gets it until
	// it is recycled (releaseDelay or an admin). Auto-claims then follow the
	// addresses' reclaimPolicy instead of always deleting them, so a
	// LoadBalancer Service deleted and created again gets its address back.
	// Off (the default): a Released address waits for an admin or the
	// releaseDelay.
	// +optional
	KeepReleasedInNamespace bool `json:"keepReleasedInNamespace,omitempty"`

	// Parameters is an opaque object for the class's driver (for MetalLB:
	// {pool: <IPAddressPool name>}). The core never reads it.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`
}

// IPAddressClassStatus reports on a class. Its driver writes Ready and
// capacity (its backend's view); the core writes addresses and the
// Exhausted and NearlyExhausted conditions (the view of the class's
// IPAddress objects, and of capacity where the driver reports it).
type IPAddressClassStatus struct {
	// conditions: Ready is True when the class's driver accepts the class
	// and can provision from it, False with the reason when it refuses.
	// Exhausted is True when a family has no address left to bind or
	// provision; NearlyExhausted when less than the core's threshold of a
	// family's addresses is left (both written by the core).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// capacity counts the addresses of the class's range per family.
	// +listType=map
	// +listMapKey=family
	// +optional
	Capacity []FamilyCapacity `json:"capacity,omitempty"`

	// addresses counts the class's IPAddress objects per family, by phase
	// (written by the core).
	// +listType=map
	// +listMapKey=family
	// +optional
	Addresses []FamilyAddresses `json:"addresses,omitempty"`
}

// FamilyAddresses counts the IPAddress objects of one family of a class,
// by phase: what the core sees of it.
type FamilyAddresses struct {
	// family is IPv4 or IPv6.
	// +kubebuilder:validation:Enum=IPv4;IPv6
	Family IPFamily `json:"family"`
	// total is the number of IPAddress objects of the class and family.
	Total int64 `json:"total"`
	// bound are Bound (or Pending acceptance, Conflict or Lost) to a claim.
	Bound int64 `json:"bound"`
	// released are Released, still their namespace's until recycled.
	Released int64 `json:"released"`
	// available are Available to any claim.
	Available int64 `json:"available"`
}

// FamilyCapacity counts the addresses of one family in a class's range.
// Counts saturate at 2^63-1, which an IPv6 range larger than a /65 exceeds.
type FamilyCapacity struct {
	// family is IPv4 or IPv6.
	// +kubebuilder:validation:Enum=IPv4;IPv6
	Family IPFamily `json:"family"`
	// total is the number of addresses in the range.
	Total int64 `json:"total"`
	// allocated is the number of addresses of the range in use: held by an
	// IPAddress or assigned to a Service.
	Allocated int64 `json:"allocated"`
	// available is total minus allocated.
	Available int64 `json:"available"`
}

// IPAddressClass is a kind of address: which driver provisions it, from what,
// and what happens to it when released. Cluster-scoped, like a StorageClass.
// Annotate one class ipaddressclass.local.sdn.cozystack.io/is-default-class:
// "true" to serve claims that name no class, and at most one
// ipaddressclass.local.sdn.cozystack.io/is-auto-claim-class: "true" to serve
// auto-claims.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ipclass
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Provisioner",type=string,JSONPath=`.spec.provisioner`
// +kubebuilder:printcolumn:name="Reclaim",type=string,JSONPath=`.spec.reclaimPolicy`
// +kubebuilder:printcolumn:name="ReleaseDelay",type=string,JSONPath=`.spec.releaseDelay`
// +kubebuilder:printcolumn:name="Default",type=string,JSONPath=`.metadata.annotations.ipaddressclass\.local\.sdn\.cozystack\.io/is-default-class`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAddressClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec defines the class.
	// +required
	Spec IPAddressClassSpec `json:"spec"`

	// status says whether the class's driver accepts the class and how much
	// of its range is left (written by the driver), and how many addresses
	// of it are in each phase and whether it is exhausted (written by the
	// core).
	// +optional
	Status IPAddressClassStatus `json:"status,omitempty"`
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
