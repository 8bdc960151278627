// Package webhook is admission for the API's three kinds: IPAddressClaim,
// IPAddress and IPAddressClass. It owns two layers.
//
// The pure layer — DefaultClaim, the Validate* functions and Principals —
// decides: it defaults a new claim's family and class, protects and stamps
// it, drops a new claim's or address's field-tracking record (Untrack),
// keeps bound claims
// from being re-targeted, keeps each field of contract §3's ownership table
// to the principals who own it, and keeps the default and auto-claim class
// annotations on at most one class each. It has no client and no context:
// whatever it needs (the classes, the requester, the principals) is passed
// in, and it reports field errors that name the exact field.
//
// The HTTP layer is thin handlers around it: decode the request, read the
// classes from the cache when a rule needs them, call the pure function and
// turn its field errors into an Invalid status.
//
// Some rules are also in the CRDs' CEL (derived names, canonical IPs,
// immutable fields); the webhook adds those that need the requester or the
// other classes, and refuses with a message naming the field.
package webhook
