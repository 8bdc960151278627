package metallb

// Provisioner is the spec.provisioner of the classes this driver serves.
const Provisioner = "metallb.drivers.local.sdn.cozystack.io"

// The driver's own names.
const (
	// AnnotationPinned marks a Service the driver pinned; its value is the
	// loadBalancerIPs value the driver wrote, so the driver only ever
	// removes a pin it wrote itself.
	AnnotationPinned = Provisioner + "/pinned"
	// FinalizerTeardown on an IPAddress: the driver releases the
	// placeholder and withdraws its pins before the address goes.
	FinalizerTeardown = Provisioner + "/teardown"
	// FinalizerHandoff on a Service the driver pinned: a deleted Service
	// keeps its address in MetalLB's books until the placeholder holds it
	// again, so the address is never free in between.
	FinalizerHandoff = Provisioner + "/handoff"
	// LabelAddress on a placeholder Service names the IPAddress it holds.
	LabelAddress = Provisioner + "/ip-address"
)

// MetalLB's Service annotations, current and legacy prefixes.
const (
	AnnotationLoadBalancerIPs = "metallb.io/loadBalancerIPs"
	AnnotationAddressPool     = "metallb.io/address-pool"
	AnnotationAllowSharedIP   = "metallb.io/allow-shared-ip"

	LegacyLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"
	legacyAddressPool     = "metallb.universe.tf/address-pool"
	legacyAllowSharedIP   = "metallb.universe.tf/allow-shared-ip"
)

// BackendAnnotations are MetalLB's pool, pin and sharing annotations under
// both prefixes: a Service carrying one has chosen its address source.
var BackendAnnotations = []string{
	AnnotationLoadBalancerIPs, AnnotationAddressPool, AnnotationAllowSharedIP,
	LegacyLoadBalancerIPs, legacyAddressPool, legacyAllowSharedIP,
}

// Condition and event reasons of the driver.
const (
	ReasonPoolAccepted       = "PoolAccepted"
	ReasonPoolRefused        = "PoolRefused"
	ReasonProvisioningFailed = "ProvisioningFailed"
	ReasonUnauthorizedHolder = "UnauthorizedHolder"
	ReasonConflictResolved   = "ConflictResolved"
	ReasonAddressReserved    = "AddressReserved"
	ReasonPoolNotFound       = "PoolNotFound"
	ReasonNotInPool          = "NotInPool"
	ReasonInPool             = "InPool"
	ReasonAssociated         = "Associated"
	ReasonDisassociated      = "Disassociated"
	ReasonClaimInUse         = "ClaimInUse"
	ReasonPlaceholderTaken   = "PlaceholderTaken"
	ReasonFamilyNotAttached  = "FamilyNotAttached"
	ReasonPlaceholderRefused = "PlaceholderRefused"
	ReasonNotAttachable      = "NotAttachable"
	ReasonPinRefused         = "PinRefused"
	ReasonSchemaStale        = "SchemaStale"
	ReasonHandoffStalled     = "HandoffStalled"
	// ReasonWriteRefused: the API server refused the driver's own write
	// to the object (an address, a class's status) or the address it
	// creates for a claim: most often the core's webhook, which does not
	// know the driver as one (its --driver-usernames).
	ReasonWriteRefused = "WriteRefused"
)
