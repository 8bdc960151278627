// Package autoclaim is the core's auto-claim reconciler (contract §10): a
// plain LoadBalancer Service that names no claim gets an IPAddressClaim of
// its own — named after it, in its namespace, of the class its
// ip-address-class annotation names or else of the single auto-claim class,
// controlled by the Service — and then the annotation naming that claim,
// from where a driver associates the address as for any claim. decide is a
// pure function from a snapshot (the Service, the classes, a same-named
// claim) to a plan; Reconciler gathers and writes, and never writes a
// Service field other than that one annotation.
package autoclaim
