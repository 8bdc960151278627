package v1alpha1

// Annotations, finalizers, condition types and reasons. These strings are the
// public interface of the API: drivers, admins and tooling key on them.
const (
	// AnnotationDefaultClass marks the IPAddressClass used by claims that name none.
	AnnotationDefaultClass = "ipaddressclass.local.sdn.cozystack.io/is-default-class"
	// AnnotationAutoClaimClass marks the IPAddressClass auto-claims draw from.
	AnnotationAutoClaimClass = "ipaddressclass.local.sdn.cozystack.io/is-auto-claim-class"
	// AnnotationHeld exempts a Released IPAddress from its class's releaseDelay.
	AnnotationHeld = "ipaddress.local.sdn.cozystack.io/held"
	// AnnotationProvisioner is stamped on a claim by the core with the
	// provisioner of its resolved class; it is the drivers' watch key.
	AnnotationProvisioner = "local.sdn.cozystack.io/provisioner"
	// AnnotationIPAddressClaim on a Service names the claim whose addresses it uses.
	AnnotationIPAddressClaim = "local.sdn.cozystack.io/ip-address-claim"
	// AnnotationIPAddressClass on a Service names the class an auto-claim draws from.
	AnnotationIPAddressClass = "local.sdn.cozystack.io/ip-address-class"
	// AnnotationAutoClaim set to "false" on a Service opts it out of auto-claim.
	AnnotationAutoClaim = "local.sdn.cozystack.io/auto-claim"
	// AnnotationAutoClaimedFor marks a claim the core created for a Service
	// (auto-claim) with the Service's UID; only the core writes it.
	AnnotationAutoClaimedFor = "local.sdn.cozystack.io/auto-claimed-for"

	// FinalizerClaimProtection routes a claim's deletion through reclaim.
	FinalizerClaimProtection = "local.sdn.cozystack.io/claim-protection"
	// FinalizerAddressProtection keeps a Bound address while a live claim holds it.
	FinalizerAddressProtection = "local.sdn.cozystack.io/address-protection"
	// FinalizerClassProtection keeps a class while any IPAddress of it exists.
	FinalizerClassProtection = "local.sdn.cozystack.io/class-protection"
)

// Condition types.
const (
	// ConditionClassResolved reports whether a claim resolved to a class.
	ConditionClassResolved = "ClassResolved"
	// ConditionBound reports, on a claim, whether every requested family is
	// bound and, on an address, whether it is bound; on an address its
	// lastTransitionTime dates each core-owned phase change.
	ConditionBound = "Bound"
	// ConditionReady reports, on a class, whether its driver accepts it.
	// Written by drivers only.
	ConditionReady = "Ready"
	// ConditionExhausted reports, on a class, whether a family has no
	// address left to bind or provision; ConditionNearlyExhausted whether
	// less than the core's threshold is left. Written by the core.
	ConditionExhausted       = "Exhausted"
	ConditionNearlyExhausted = "NearlyExhausted"
	// ConditionConflict reports, on an address in phase Conflict, the
	// workload that holds it without authorization. Written by drivers only.
	ConditionConflict = "Conflict"
	// ConditionInBackend reports, on an address, whether its driver can hold
	// it in the backend; False goes with phase Lost. Written by drivers only.
	// (Not to be confused with AnnotationHeld, an admin's exemption of a
	// Released address from releaseDelay.)
	ConditionInBackend = "InBackend"
)

// Condition and event reasons.
const (
	ReasonResolved               = "Resolved"
	ReasonNoDefaultClass         = "NoDefaultClass"
	ReasonMultipleDefaultClasses = "MultipleDefaultClasses"
	ReasonClassNotFound          = "ClassNotFound"

	ReasonBound                  = "Bound"
	ReasonWaitingForProvisioning = "WaitingForProvisioning"
	ReasonWaitingForAddress      = "WaitingForAddress"
	ReasonWaitingForClass        = "WaitingForClass"
	// ReasonQuotaExceeded: a ResourceQuota of the claim's namespace has no
	// room for the addresses the claim still needs.
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonClassExhausted: the claim's class has no address left of a
	// family it waits for; the message says its place in line.
	ReasonClassExhausted = "ClassExhausted"
	// ReasonPoolRefused: the class's driver refuses the class (its Ready
	// condition), so nothing is provisioned.
	ReasonPoolRefused           = "PoolRefused"
	ReasonLost                  = "Lost"
	ReasonPreBindingRefused     = "PreBindingRefused"
	ReasonExcessBindingReleased = "ExcessBindingReleased"

	ReasonAvailable      = "Available"
	ReasonReleased       = "Released"
	ReasonInvalidAddress = "InvalidAddress"
	ReasonRecycled       = "Recycled"
	ReasonReclaimed      = "Reclaimed"
	ReasonClassInUse     = "ClassInUse"

	// Auto-claim events, recorded on the Service.
	ReasonAutoClaimed              = "AutoClaimed"
	ReasonMultipleAutoClaimClasses = "MultipleAutoClaimClasses"
	ReasonClaimNotAdopted          = "ClaimNotAdopted"
	ReasonAutoClaimWithdrawn       = "AutoClaimWithdrawn"
	ReasonAutoClaimRefused         = "AutoClaimRefused"
	ReasonAutoClaimSkipped         = "AutoClaimSkipped"
	// ReasonAutoClaimNotNamed, on a Service: the claim the core created
	// for it holds addresses while the Service names another claim.
	ReasonAutoClaimNotNamed = "AutoClaimNotNamed"
	// ReasonClaimNotFound, on a LoadBalancer Service: the claim its
	// ip-address-claim annotation names does not exist in its namespace.
	ReasonClaimNotFound = "ClaimNotFound"
)
