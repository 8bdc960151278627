// Package metallb proves the real MetalLB controller runs on the local
// control plane as the notes on it say, before anything of ours builds on it:
// built from the module proxy at the pinned version, with its CRDs, it
// assigns a Service the address pinned by metallb.io/loadBalancerIPs from an
// autoAssign: false pool, and nothing to a Service that pins none.
package metallb
