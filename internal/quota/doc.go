// Package quota owns address quotas: limits a platform sets per namespace
// in a ResourceQuota's spec.hard, counted in addresses.
//
// Keys: <class>.ipaddressclass.local.sdn.cozystack.io/addresses limits the
// addresses of one class, local.sdn.cozystack.io/addresses those of every
// class. (The API server refuses an unqualified key such as
// addresses.local.sdn.cozystack.io in a ResourceQuota, so the all-classes
// key carries the group as its prefix.)
//
// What counts: every IPAddress whose claimRef names the namespace —
// Bound, Released and retained (still the namespace's until recycled),
// pre-bound while being provisioned — one per address, so a Dual claim
// counts two; and every charge not yet settled.
//
// Charges make the count exact under concurrency. Before a binder takes an
// address for a claim's family, or a driver provisions one, that family is
// charged to every ResourceQuota of the namespace that limits its class: a
// record in the quota's ChargesAnnotation, written with the quota's
// resource version as precondition, after counting the namespace's
// addresses on the API server. Charge writes are thereby serialized per
// quota, each sees every earlier one, and no two binders — two managers
// without leader election, a leader frozen past its lease — can together
// exceed a limit. A charge is settled once an address of its family names
// the claim (the address then counts instead) and is dropped when the
// claim is gone. The core also writes each key's usage into the quota's
// status.used, which kube-controller-manager leaves alone for keys it does
// not know: `kubectl describe quota` shows a tenant where it stands.
//
// Everything here is pure; the core and the drivers do the I/O.
package quota
