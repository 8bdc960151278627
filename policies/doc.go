// Package policies owns the admission policies this repository ships and
// their defaults: metallb-iad-service-pins, a ValidatingAdmissionPolicy that
// keeps MetalLB's address-selection fields of tenants' Services to the
// metallb-iad driver and cluster administrators, with its binding and its
// params ConfigMap; and metallb-iad-class-parameters, which refuses a class
// of the driver whose parameters it could not read, naming the field.
//
// The YAML files in this directory are the single source of those objects:
// they are embedded (FS) so that the tests, and whatever installs them, use
// the very same bytes. The package's tests type-check service-pins against
// the Service schema and evaluate it with Kubernetes' own admission plugin,
// and evaluate class-parameters with the plugin's compiler, case by case;
// test/policy enforces both on a real API server.
package policies
