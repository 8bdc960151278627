// Package fakeapi is the unit tests' stand-in for the API server:
// controller-runtime's fake client holding the objects a test starts from,
// with the field indexes the reconcilers select on (and the IPAddress CRD's
// selectable fields, which reads past the cache select on) registered, and
// a reactor that counts writes and fails the k-th one, as Kubernetes' PV
// binder tests do. Tests run the real Reconcile over it; nothing here
// re-implements a reconciler.
package fakeapi
