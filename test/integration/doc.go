// Package integration tests the core's I/O layer against a real API server:
// the CRDs' validation, and the claim, address and class reconcilers (wired
// by internal/core, running in-process in a controller-runtime manager)
// reading and writing through etcd and kube-apiserver, with
// kube-controller-manager collecting garbage.
//
// TestMain starts one control plane (test/controlplane) for the package;
// each test then starts its own manager, works in its own namespace with its
// own class names and IP ranges, and removes what it created, so the tests
// run one after another in that control plane. The decision logic itself is
// covered by the reconcilers' pure tests; these tests cover what only a real
// API server shows: CEL validation, status subresources, resource-version
// conflicts between concurrent binders, informer lag, finalizers and
// garbage collection.
//
// Without the control plane binaries (`make controlplane`) the tests skip,
// unless $CI is set, where that is a failure.
package integration
