// Package controlplane runs a real, local Kubernetes control plane for tests,
// `make run` (test/playground) and the benchmark: etcd and kube-apiserver
// (through controller-runtime's envtest) plus a kube-controller-manager
// running the garbage collector, namespace deletion and ClusterRole
// aggregation, which envtest alone lacks.
//
// It owns those three processes and their temporary data: Start brings them
// up with this repository's CRDs installed, Stop ends them all. The binaries
// come from $CONTROLPLANE_BIN, else bin/ at the repository root; `make
// controlplane` builds them from the tools modules, never downloading
// anything else.
package controlplane
